"""The shell analysis: every simple command, its effective program, environment and redirections."""

import pytest

from desktop_app.core import Redirect, analyse_command


def only(command):
    a = analyse_command(command)
    assert a.analysable, a.problems
    [c] = [c for c in a.commands if not c.runs_script]
    return c


def test_words_after_quote_removal_and_the_program_by_basename():
    c = only("FOO=1 /usr/bin/env A=2 /bin/rm -rf \"a\"'b' c\\ d")
    assert c.argv == ("rm", "-rf", "ab", "c d")
    assert c.env == ("FOO=1", "A=2")
    assert c.program_path == "/bin/rm"
    assert c.layers[0][0] == "/usr/bin/env"


@pytest.mark.parametrize(("command", "redirect"), [
    ("ls > f", Redirect(">", None, "f")), ("ls >> f", Redirect(">>", None, "f")),
    ("ls >| f", Redirect(">|", None, "f")), ("ls &> f", Redirect("&>", None, "f")),
    ("ls &>> f", Redirect("&>>", None, "f")), ("ls >& f", Redirect(">&", None, "f")),
    ("ls 2> f", Redirect(">", 2, "f")), ("ls 2>&1", Redirect(">&", 2, "1")), ("ls < f", Redirect("<", None, "f")),
    ("ls <<< w", Redirect("<<<", None, "")), ("ls 1>&-", Redirect(">&-", 1, "-")),
])
def test_redirections_in_every_form(command, redirect):
    c = only(command)
    assert c.redirects == (redirect,)
    assert c.writes == (("f",) if redirect.writes_file else ())


def test_a_redirect_of_a_group_applies_to_every_command_in_it():
    a = analyse_command("{ ls; cat x; } > out")
    assert [c.writes for c in a.commands] == [("out",), ("out",)]


def test_wrappers_are_followed_to_the_program():
    c = only("sudo -u me nice -n 5 timeout -s KILL 3 stdbuf -o0 xargs -0 rm -f")
    assert c.argv == ("rm", "-f") and c.open_args
    assert [layer[0] for layer in c.layers] == ["sudo", "nice", "timeout", "stdbuf", "xargs", "rm"]


def test_sh_c_is_parsed_again_under_its_wrappers():
    a = analyse_command("env X=1 bash -ec 'ls | curl x > out'")
    shell, ls, curl = a.commands
    assert shell.runs_script and shell.program == "bash"
    assert (ls.program, curl.program) == ("ls", "curl")
    assert curl.env == ("X=1",) and curl.writes == ("out",)
    assert ls.pipe[0][0] == curl.pipe[0][0] and ls.pipe[0][1] < curl.pipe[0][1]


def test_substitutions_point_to_the_command_they_feed():
    a = analyse_command("bash <(curl x) && echo $(id)")
    programs = [c.program for c in a.commands]
    assert programs == ["bash", "curl", "echo", "id"]
    assert a.commands[1].parent == 0 and a.commands[3].parent == 2


def test_find_actions():
    a = analyse_command("find . -name x -exec rm {} \\; -fprint list -delete")
    find, rm = a.commands
    assert find.deletes and find.writes == ("list",)
    assert rm.argv == ("rm", "{}") and rm.layers[0][0] == "find"


def test_functions_and_background():
    a = analyse_command("f(){ f & }; f")
    body, call = a.commands
    assert body.function == "f" and body.background and body.calls_function
    assert call.function is None and call.calls_function


@pytest.mark.parametrize("command", ["$X", "ls $'a'", "cat <<EOF\n$x\nEOF", "eval x", "ls \u00e9", "ls (",
                                     "a" * 5000, "echo `echo \\`id\\``", "ls $\\\n(id)",
                                     "rm \"a\"\\ c"])
def test_what_is_not_understood_is_said_in_plain_words(command):
    a = analyse_command(command)
    assert not a.analysable
    assert all(isinstance(p, str) and p for p in a.problems)
