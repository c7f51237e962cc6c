"""Issue 22: bash evaluates more than it parses. Every construct that evaluates text at run time (prompt
expansion, names with subscripts given to builtins, arithmetic, indirect expansion, `$_`, variables that
move configuration, eval and friends) is un-analysable: it asks with "cannot tell what this runs", is
refused in plan, read-only and strict, and is never allowed by a rule, read-only or low risk."""

from __future__ import annotations

import pytest

from desktop_app.core import Action, PermissionPolicy, Risk, Rule, RuleSet, ToolFacts, analyse_command
from desktop_app.core.policy import assess_command

BASH = ToolFacts("bash_run", "group:runtime", False)
SUB = "$(touch /tmp/m)"

EVALUATORS = [
    # prompt expansion and the other @ operators that evaluate or expose text
    f"echo '{SUB}'; echo ${{_@P}}", "echo ${BASH_COMMAND@P}", "echo ${x@P}", "echo \"${x@P}\"", "ls ${a[0]@P}",
    "echo ${x@E}", "echo ${x@A}", "echo ${x@K}", "echo ${x@a}", "cat <<< \"${y@P}\"",
    # the text of another command
    "echo $_", "echo ${_}", "echo \"$BASH_COMMAND\"", "ls $_",
    # names with subscripts given to builtins
    f"printf -v 'a[{SUB}]' x", f"printf -v'a[{SUB}]' x", "printf -v \"$x\" y", f"read 'a[{SUB}]' <<< 1",
    f"read -r -a 'a[{SUB}]' <<< 1", "read -p 'x' \"$v\" <<< 1", f"test -v 'a[{SUB}]'", f"[ -v 'a[{SUB}]' ]",
    "[ -v \"$x\" ]", f"[[ -v 'a[{SUB}]' ]]", f"test -R 'a[{SUB}]'", f"declare 'a[{SUB}]=1'", "declare \"$x=1\"",
    f"local 'a[{SUB}]=1'", f"export 'a[{SUB}]'", f"readonly 'a[{SUB}]'", f"typeset 'a[{SUB}]=2'",
    f"getopts ab 'a[{SUB}]'", f"wait -p 'a[{SUB}]'", f"wait -n -p 'a[{SUB}]'", f"unset 'a[{SUB}]'",
    f"mapfile 'a[{SUB}]' < /dev/null", f"readarray -t 'a[{SUB}]' < /dev/null", "declare -n r=x", "declare -r -i y=x",
    "local -n r", "a[x]=1", "a[$i]=1 ls", "b=([x]=1)", "declare -a b=([x]=1)",
    "b+=([$i]=1) ls", "command printf -v \"$x\" 1", "builtin printf -v \"$x\" 1",
    # arithmetic with names
    "let x=y", "(( x ))", "echo $(( x ))", "echo $[ x ]", "echo ${a[x]}", "echo ${#a[x]}", "y=1; echo ${y:x}",
    "echo ${y:1:x}", "set -- 1 2; echo ${@:x}", "[[ $x -eq 1 ]]", "for ((i=x; i<2; i++)); do :; done",
    # indirect expansion and evaluators
    "echo ${!x}", "echo ${!x@P}", "eval ls", "source x", ". x", "trap 'id' EXIT", "enable -f x y", "alias ls=id",
    "builtin foo", "shopt -s expand_aliases",
    # variables that bash or a program evaluates
    f"PS4='{SUB}'; set -x; ls", "PROMPT_COMMAND=id ls", "BASH_ENV=x bash -c ls", "ENV=x sh -c ls",
    "GIT_DIR=x git log", "GIT_CONFIG_GLOBAL=x git status", "LD_PRELOAD=x ls", "PAGER=sh git log",
    "EDITOR=sh git commit", "PYTHONSTARTUP=x python3", "PATH=. ls", "export PATH=.", "declare -x LD_PRELOAD=x",
    "env GIT_SSH_COMMAND=sh git fetch", "LESSOPEN='|sh %s' less x", "HOME=x git log",
]


def judge(mode: str, command: str, allow=("*",)):
    rules = [Rule.parse(f"bash_run({a})", "allow", "test") for a in allow] if allow else []
    policy = PermissionPolicy(mode, RuleSet(rules))
    return policy.resolve_ask(policy.evaluate(BASH, {"command": command}))  # as the judge does


@pytest.mark.parametrize("command", EVALUATORS)
def test_runtime_evaluation_is_unanalysable(command):
    a = analyse_command(command)
    assert not a.analysable
    risk, why = assess_command(a)
    assert risk is not Risk.LOW
    assert why.startswith("cannot tell what this runs: "), why


@pytest.mark.parametrize("command", EVALUATORS)
@pytest.mark.parametrize("mode,allow,want", [
    ("ask", ("ls *", "echo *", "printf *", "read *", "test *", "[ *"), Action.ASK),
    ("auto", (), Action.ASK),
    ("plan", ("*",), Action.DENY),
    ("strict", ("ls *", "echo *"), Action.DENY),
    ("read-only", (), Action.DENY),
])
def test_runtime_evaluation_is_never_allowed(command, mode, allow, want):
    d = judge(mode, command, allow)
    assert d.action is want, d.reason
    assert "cannot tell what this runs" in d.reason or d.action is Action.DENY


@pytest.mark.parametrize("command", [
    "echo ${x@Q} ${x@U} ${x@u} ${x@L}", "echo ${x:-a} ${x:1:2} ${x: -1} ${#x} ${a[0]} ${a[@]}", "printf -v x y",
    "read -r a b <<< '1 2'", "[ -v HOME ]", "test -v HOME", "declare -r x=1", "export FOO=1", "unset x y",
    "getopts ab opt", "builtin cd /tmp", "FOO=1 ls",
])
def test_inert_forms_stay_analysable(command):
    assert analyse_command(command).analysable, analyse_command(command).problems


def test_a_hidden_wipe_passes_neither_deny_rule_nor_auto():
    """The issue's attack: with `deny rm *` in auto, a quoted `rm -rf` run by prompt expansion asks."""
    command = "echo 'a$(rm -rf /workspace)'; echo ${_@P}"
    policy = PermissionPolicy("auto", RuleSet([Rule.parse("bash_run(rm *)", "deny", "test")]))
    d = policy.evaluate(BASH, {"command": command})
    assert d.action is not Action.ALLOW
