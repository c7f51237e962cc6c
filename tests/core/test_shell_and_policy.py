"""Permission rules: matching, precedence, sub-commands, and the constructs a prefix rule may never allow."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from desktop_app.core import (
    Action,
    ConfigError,
    PermissionPolicy,
    Rule,
    RuleSet,
    ToolFacts,
    append_project_rule,
    load_rules,
    suggest_rule,
)
from desktop_app.core.policy import analyse_command, command_matches, path_matches

BASH = ToolFacts("bash_run", "group:runtime", False)
WRITE = ToolFacts("fs_write", "group:fs", False)
READ = ToolFacts("fs_read", "group:fs", True)
TODO = ToolFacts("todo_write", "group:todo", False)


def policy(mode="ask", **by_action):
    rules = [Rule.parse(t, a, "test") for a, ts in by_action.items() for t in ts]
    return PermissionPolicy(mode, RuleSet(rules))


def decide(p, tool, **inp):
    return p.evaluate(tool, inp).action


def test_exact_command_rule():
    p = policy(allow=["bash_run(git status)"])
    assert decide(p, BASH, command="git status") is Action.ALLOW
    assert decide(p, BASH, command="git status --short") is Action.ASK


def test_prefix_rule_matches_argv_not_text():
    p = policy(allow=["bash_run(npm test *)"])
    assert decide(p, BASH, command="npm test") is Action.ALLOW
    assert decide(p, BASH, command="npm   test -- --watch=false") is Action.ALLOW
    assert decide(p, BASH, command="npm testx") is Action.ASK
    assert decide(p, BASH, command="npm install") is Action.ASK


def test_every_sub_command_must_be_allowed():
    p = policy(allow=["bash_run(git status)", "bash_run(npm test *)"])
    assert decide(p, BASH, command="git status && npm test") is Action.ALLOW
    assert decide(p, BASH, command="git status; curl example.com") is Action.ASK
    assert decide(p, BASH, command="npm test | sh") is Action.ASK
    assert decide(p, BASH, command="git status\nrm x") is Action.ASK


@pytest.mark.parametrize(
    "command",
    [
        "npm test $(cat /etc/passwd)",
        "npm test `id`",
        "npm test <(ls)",
        "npm test > /etc/cron.d/x",
        "npm test >> ~/.bashrc",
        'npm test "$(id)"',
    ],
)
def test_substitution_and_redirection_out_of_workspace_ask_despite_prefix_rule(command):
    # issue 9: what runs inside a substitution, and the file a redirection writes, are parts of their own
    p = policy(allow=["bash_run(npm test *)"])
    d = p.evaluate(BASH, {"command": command})
    assert d.action is Action.ASK


def test_redirect_inside_workspace_needs_a_write_rule_and_quoted_dollar_is_fine():
    # issue 9: a redirection writes a file, judged like fs_write of that path
    p = policy(allow=["bash_run(npm test *)"])
    assert decide(p, BASH, command="npm test > out.txt 2>&1") is Action.ASK
    p = policy(allow=["bash_run(npm test *)", "fs_write(out.txt)"])
    assert decide(p, BASH, command="npm test > out.txt 2>&1") is Action.ALLOW
    assert decide(p, BASH, command="npm test '$(literal)'") is Action.ALLOW


def test_precedence_deny_over_ask_over_allow_over_mode():
    p = policy("auto", allow=["bash_run(git *)"], ask=["bash_run(git push *)"], deny=["bash_run(git push --force *)"])
    assert decide(p, BASH, command="git log") is Action.ALLOW
    assert decide(p, BASH, command="git push origin") is Action.ASK
    assert decide(p, BASH, command="git push --force origin") is Action.DENY
    assert decide(p, BASH, command="ls") is Action.ALLOW  # the mode


def test_deny_matches_any_sub_command():
    p = policy("auto", deny=["bash_run(rm *)"])
    assert decide(p, BASH, command="ls && rm -rf build") is Action.DENY


def test_path_glob_rules():
    p = policy(allow=["fs_write(src/**)"], deny=["fs_write(src/secrets/*)"])
    assert decide(p, WRITE, path="src/a/b.py") is Action.ALLOW
    assert decide(p, WRITE, path="/workspace/src/x.py") is Action.ALLOW
    assert decide(p, WRITE, path="./src/x.py") is Action.ALLOW
    assert decide(p, WRITE, path="src/secrets/k") is Action.DENY
    assert decide(p, WRITE, path="docs/x") is Action.ASK
    assert decide(p, WRITE, path="src/../../etc/passwd") is Action.ASK


def test_group_rules():
    p = policy("strict", allow=["group:fs"])
    assert decide(p, WRITE, path="a") is Action.ALLOW
    assert decide(p, BASH, command="ls") is Action.DENY


def test_modes():
    cases = {
        "ask": (Action.ALLOW, Action.ASK, Action.ASK),
        "accept-edits": (Action.ALLOW, Action.ALLOW, Action.ASK),
        "read-only": (Action.ALLOW, Action.DENY, Action.DENY),
        "auto": (Action.ALLOW, Action.ALLOW, Action.ALLOW),
        "strict": (Action.DENY, Action.DENY, Action.DENY),
    }
    for mode, (read, write, bash) in cases.items():
        p = PermissionPolicy(mode)
        assert decide(p, READ, path="a") is read, mode
        assert decide(p, WRITE, path="a") is write, mode
        assert decide(p, BASH, command="ls") is bash, mode


def test_accept_edits_asks_for_a_write_outside_the_workspace():
    assert decide(PermissionPolicy("accept-edits"), WRITE, path="/etc/passwd") is Action.ASK


def test_todo_is_harmless_in_ask_mode():
    assert decide(PermissionPolicy("ask"), TODO, todos=[]) is Action.ALLOW


def test_strict_turns_an_ask_into_a_deny():
    p = policy("strict", ask=["bash_run(ls)"])
    d = p.resolve_ask(p.evaluate(BASH, {"command": "ls"}))
    assert d.action is Action.DENY and "strict" in d.reason


def test_decisions_record_their_provenance_and_time():
    p = policy(allow=["bash_run(git status)"])
    d = p.evaluate(BASH, {"command": "git status"})
    assert d.provenance.kind == "rule"
    assert d.provenance.detail == "bash_run(git status)"
    assert d.provenance.source == "test"
    assert d.provenance.elapsed_ms >= 0
    m = PermissionPolicy("ask").evaluate(BASH, {"command": "ls"})
    assert (m.provenance.kind, m.provenance.detail) == ("mode", "ask")


def test_session_rules_apply_to_their_session_only():
    p = PermissionPolicy("ask")
    p.add_rule(Rule.parse("bash_run(make *)", "allow", "session"), session_id="s1")
    assert p.evaluate(BASH, {"command": "make"}, session_id="s1").action is Action.ALLOW
    assert p.evaluate(BASH, {"command": "make"}, session_id="s2").action is Action.ASK


def test_rules_load_from_project_and_user_files(tmp_path):
    user = tmp_path / "user.toml"
    user.write_text('[permissions]\nallow = ["bash_run(ls)"]\n')
    proj = tmp_path / "proj"
    proj.mkdir()
    append_project_rule(proj, Rule.parse("fs_write(src/**)", "allow"))
    append_project_rule(proj, Rule.parse("bash_run(rm *)", "deny"))
    rs = load_rules(proj, user)
    texts = {(r.action.value, r.text, r.source.split(":")[0]) for r in rs.rules}
    assert texts == {
        ("allow", "bash_run(ls)", "user"),
        ("allow", "fs_write(src/**)", "project"),
        ("deny", "bash_run(rm *)", "project"),
    }
    p = PermissionPolicy(None, rs)
    assert p.evaluate(BASH, {"command": "ls"}).provenance.source.startswith("user:")


def test_bad_rules_file_is_a_clear_error(tmp_path):
    f = tmp_path / "rules.toml"
    f.write_text("[permissions]\nallow = 'bash_run'\n")
    with pytest.raises(ConfigError, match="must be a list"):
        RuleSet.from_toml(f, "project")
    f.write_text("[permissions\n")
    with pytest.raises(ConfigError, match="cannot read"):
        RuleSet.from_toml(f, "project")


def test_suggested_rules_are_narrow():
    assert suggest_rule("bash_run", {"command": "npm test -- -k x"}).text == "bash_run(npm test -- -k x)"
    assert suggest_rule("bash_run", {"command": "ls -la"}).text == "bash_run(ls *)"
    assert suggest_rule("bash_run", {"command": "echo $(id)"}).text == "bash_run(echo $(id))"
    assert suggest_rule("fs_edit", {"path": "src/a/b.py"}).text == "fs_edit(src/a/**)"


def test_splitting_respects_quotes():
    parsed = analyse_command("echo 'a && b' \"c; d\" && ls | wc -l")
    assert [c.argv for c in parsed.commands] == [("echo", "a && b", "c; d"), ("ls",), ("wc", "-l")]
    assert parsed.analysable


word = st.text(alphabet=st.characters(whitelist_categories=("Ll", "Nd")), min_size=1, max_size=6)


@given(st.lists(word, min_size=1, max_size=4), st.lists(word, max_size=4))
def test_prefix_rule_matches_exactly_the_commands_that_start_with_it(prefix, rest):
    argv = prefix + rest
    assert command_matches(" ".join(prefix) + " *", argv, " ".join(argv))
    # changing the first word breaks the match
    other = ["x" + argv[0], *argv[1:]]
    assert not command_matches(" ".join(prefix) + " *", other, " ".join(other))


@given(
    st.lists(word, min_size=1, max_size=4),
    st.sampled_from(["&&", "||", ";", "|", "\n"]),
    st.lists(word, min_size=1, max_size=3),
)
def test_a_prefix_rule_never_allows_an_unlisted_sub_command(allowed, sep, extra):
    p = policy(allow=[f"bash_run({' '.join(allowed)} *)"])
    intruder = ["zz" + extra[0], *extra[1:]]
    cmd = f"{' '.join(allowed)} {sep} {' '.join(intruder)}"
    assert decide(p, BASH, command=cmd) is not Action.ALLOW


@given(st.lists(word, min_size=1, max_size=4))
def test_path_globs(parts):
    path = "/".join(parts)
    assert path_matches("**", path)
    assert path_matches(parts[0] + "/**", path) or len(parts) == 1
    assert not path_matches("other_dir/**", path) or parts[0] == "other_dir"
    assert not path_matches("**", "../" + path)


def test_rule_globs_are_the_same_globs_as_fs_glob():
    p = policy(allow=["fs_write(src/**/*.{py,pyi})", "fs_write(docs/[a-c]*.md)"])
    assert decide(p, WRITE, path="src/pkg/mod.py") is Action.ALLOW
    assert decide(p, WRITE, path="src/mod.pyi") is Action.ALLOW
    assert decide(p, WRITE, path="src/mod.js") is Action.ASK
    assert decide(p, WRITE, path="docs/api.md") is Action.ALLOW
    assert decide(p, WRITE, path="docs/zeta.md") is Action.ASK
