"""Differential test of the shell analysis against real bash, inside the sandbox container.

Bash runs each command with an empty PATH, its echo-like builtins disabled, and a
`command_not_found_handle` that reports the expanded name of every program it would start and returns 0
(so `&&` chains go on). Nothing outside the scratch folder is touched: the programs never start. The
policy's view of a command must hold every program bash reports, or the command must be un-analysable.
"""

from __future__ import annotations

import random

import pytest

from desktop_app.core import analyse_command

DRIVER = r"""
set -u
list=$(realpath "$1")
dir=$(mktemp -d) && cd "$dir" || exit 3
i=0
while IFS= read -r -d '' cmd; do
  printf 'CMD %d\n' "$i"
  ID=$i PATH=/nonexistent-agent-desk /usr/bin/timeout 3 /bin/bash --norc --noprofile -c '
    command_not_found_handle() { builtin printf "P %s %s\n" "$ID" "$1" >&9; return 0; }
    enable -n echo test [ kill pwd true false
    eval "$1"' _ "$cmd" 9>&1 >/dev/null 2>&1 </dev/null
  i=$((i + 1))
done < "$list"
rm -rf "$dir"
"""

HAND_WRITTEN = [
    "ls; rm x", "ls && rm x || touch y", "ls | grep a | wc -l", "echo $(id) `whoami`", "echo \"$(id -u)\"",
    "f(){ rm x; }; f", "function g { touch y; }; g", "(cd /tmp; rm y)", "{ ls; cat x; }", "if true; then ls; fi",
    "if false; then ls; else cat; fi", "for i in a b; do echo $i; done", "case a in a) ls;; *) rm x;; esac",
    "cat <(ls) | sh", "diff <(ls) <(cat x)", "x=$(rm z) ls", "r\"\"m x", "r''m x", "\\rm x", "'rm' x",
    "ls > $(touch q)", "bash -c \"rm w\"", "ls \\\n#; touch pwned", "echo a # b \\\nrm c", "ls \\\n  -la && cat x",
    "cat <<EOF\nit's\nEOF\ntouch pwned", "cat <<'EOF'\n$(rm x)\nEOF\nls", "cat <<-EOF\n\tx\n\tEOF\ntouch p",
    "cat <<EOF | sh\nx\nEOF", "cat <<EOF > f && ls\nx\nEOF", "ls <<< \"$(id)\"", "env rm x", "nice -n 3 rm x",
    "command rm x", "time rm x", "timeout 1 rm x", "nohup rm x", "xargs rm < /dev/null", "ls & rm x", "ls\nrm x",
    "! rm x", "ls |& cat", "X=1 rm x", "export A=$(id); ls", "a=1; b=$(touch q)", "[[ $(id) ]] && ls",
    "[ -f x ] || touch x", "test -f x && rm x", "while read l; do rm \"$l\"; done < /dev/null", "echo {a,b}",
    "ls *.py ~/x", "echo ${x:-$(id)}", "echo ${#x} $? $$ $1", "ls 2>/dev/null >&2", "ls >& out; cat out",
    "find . -exec rm {} \\;", "echo 'a;b' \"c|d\" e\\&f", "ls #comment; rm x", "ls#notcomment; rm x",
    "ls; # rm x", "echo $'\\'' ; touch q #'", "ls $\"x\" ; touch q", "ls\v#; touch q", "ls $\\\n(touch q)",
    "ls <\\\n(touch q)", "f() ( rm x ); f", "for f in $(ls); do cat $f; done", "select x in a; do break; done",
    "coproc ls", "a=(x $(id)) ls", "declare -a a=($(id))", "local x=$(id)", "readonly r=$(id)",
    "echo $(( $(id -u) + 1 ))", "(( $(id -u) ))", "echo \"`id`\"", "echo `echo \\`id\\``",
    "trap 'rm x' EXIT; ls", "eval 'rm x'", "source /dev/null; ls", "exec 3>&-; ls", "ls 3<>f", "ls >| f",
    "ls &>> f", "cat < f > g 2>> h", "{ ls; } 2>&1 | cat", "ls | { cat; rm x; }", "(ls) > f",
    "if ls; then :; fi > f", "ls; fi", "done; ls", "ls )", "echo \"unterminated",
]

_PROGRAMS = ["ls", "cat", "rm", "touch", "grep", "wc", "echo", "printf", "sed", "curl", "sh", "git"]
_ARGS = ["x", "-la", "'a b'", "\"c d\"", "e\\ f", "$HOME", "\"$x\"", "*.py", "{a,b}", "--", "'#'", "a#b", "\\#"]
_JOINS = [" ; ", " && ", " || ", " | ", " & ", "\n", " |& "]
_REDIRS = ["", " > f", " 2>&1", " >> g", " < /dev/null", " &> h", " 2>/dev/null", " <<< w", " >& i"]
_WRAPS = ["", "env ", "nice ", "command ", "time ", "nohup ", "X=1 ", "timeout 1 "]


def _simple(r: random.Random) -> str:
    words = [r.choice(_PROGRAMS)] + [r.choice(_ARGS) for _ in range(r.randint(0, 3))]
    return r.choice(_WRAPS) + " ".join(words) + r.choice(_REDIRS)


def _statement(r: random.Random, depth: int = 0) -> str:
    kind = r.randint(0, 9) if depth < 2 else 0
    if kind <= 3:
        return _simple(r)
    inner = _statement(r, depth + 1)
    return [
        f"({inner})", f"{{ {inner}; }}", f"echo $({inner})", f"echo `{_simple(r)}`", f"cat <({inner})",
        f"if {_simple(r)}; then {inner}; fi", f"for v in 1; do {inner}; done", f"fn(){{ {inner}; }}; fn",
        f"bash -c '{_simple(r)}'", f"case x in x) {inner};; esac",
    ][kind - 4 if kind < 14 else 0]


def generated(n: int = 250, seed: int = 9) -> list[str]:
    r = random.Random(seed)
    out = []
    for _ in range(n):
        parts = [_statement(r) for _ in range(r.randint(1, 3))]
        cmd = parts[0]
        for p in parts[1:]:
            cmd += r.choice(_JOINS) + p
        out.append(cmd)
    return out


def policy_view(command: str) -> set[str] | None:
    """The programs the analysis says can run, with every wrapper; None when it is un-analysable."""
    a = analyse_command(command)
    if not a.analysable:
        return None
    view: set[str] = set()
    for c in a.commands:
        if c.program:
            view.add(c.program)
        for layer in c.layers:
            if layer:
                view.add(layer[0].rsplit("/", 1)[-1])
    return view


async def bash_reports(sandbox, commands: list[str]) -> list[list[str]]:
    """The programs bash would start for each command, from one exec in the container."""
    await sandbox.write_file("diff/cmds.bin", "\0".join(commands).encode() + b"\0")
    await sandbox.write_file("diff/driver.sh", DRIVER.encode())
    res = await sandbox.exec(["bash", "diff/driver.sh", "diff/cmds.bin"], timeout=240, output_limit=8_000_000)
    assert res.exit_code == 0, res.stderr
    reports: list[list[str]] = [[] for _ in commands]
    seen = 0
    for line in res.stdout.splitlines():
        if line.startswith("CMD "):
            seen += 1
        elif line.startswith("P "):  # tagged: a background job may report after the next command began
            index, _, program = line[2:].partition(" ")
            reports[int(index)].append(program)
    assert seen == len(commands), res.stdout[-2000:]
    return reports


@pytest.mark.timeout(600)
async def test_the_policy_sees_every_program_bash_would_run(make_docker_sandbox):
    sandbox = await make_docker_sandbox()
    commands = HAND_WRITTEN + generated()
    reports = await bash_reports(sandbox, commands)
    missed = []
    analysable = 0
    for command, reported in zip(commands, reports, strict=True):
        view = policy_view(command)
        if view is None:
            continue
        analysable += 1
        unseen = set(reported) - view
        if unseen:
            missed.append((command, sorted(unseen), sorted(view)))
    assert missed == []
    assert analysable > len(commands) // 2  # the test must exercise the analysis, not only refusals
    assert any("rm" in r for r in reports)  # and bash must really report what it would run


# -- issue 22: constructs that evaluate text at run time ----------------------------------------------
# Each template hides the marker program in text the parser reads as a literal (a quoted string, a variable's
# value); bash evaluates it when it runs. For every class, bash must really run the marker in some command,
# and the judge must never call such a command allowed (even under `bash_run(*)`), read-only or low.
MARKER = "zzmark"
_PAYLOADS = [f"$({MARKER})", f"`{MARKER}`", f"$({MARKER} 1)", f"$(: ; {MARKER})"]
EVALUATING = {  # `%M` is where the marker's payload goes
    "prompt expansion": ["x='%M'; : \"${x@P}\"", ": '%M'; : ${_@P}", "x=('%M'); : ${x[0]@P}",
                         "set -- '%M'; : ${1@P}", "trap ': ${BASH_COMMAND@P}' DEBUG; : '%M'"],
    "names with subscripts": ["x='a[%M]'; printf -v \"$x\" 1", "printf -v 'a[%M]' 1", "read 'a[%M]' <<< 1",
                              "read -r -a 'a[%M]' <<< 1", "test -v 'a[%M]'", "[ -v 'a[%M]' ]", "[[ -v 'a[%M]' ]]",
                              "declare 'a[%M]=1'", "f(){ local 'a[%M]=1'; }; f", ": & wait -n -p 'a[%M]'",
                              "typeset 'a[%M]=1'", "x='a[%M]'; declare -n r=\"$x\"; : \"$r\"",
                              "builtin printf -v 'a[%M]' 1", "command read 'a[%M]' <<< 1"],
    "arithmetic": ["x='a[%M]'; : $((x))", "x='a[%M]'; (( x ))", "x='a[%M]'; let x", "x='a[%M]'; : $[x]",
                   "x='a[%M]'; y=abc; : ${y:x}", "x='a[%M]'; y=abc; : ${y:0:x}", "x='a[%M]'; z=(1 2); : ${z[x]}",
                   "x='a[%M]'; [[ $x -eq 1 ]]", "x='a[%M]'; declare -i y; y=$x",
                   "x='a[%M]'; for ((i=x; i<0; i++)); do :; done", "x='a[%M]'; a[x]=1", "x='a[%M]'; b=([x]=1)",
                   "x='a[%M]'; declare -a b=([x]=1)", "x='a[%M]'; b+=([x]=1)",
                   "x='a[%M]'; OPTIND=$x", "x='a[%M]'; RANDOM=$x", "x='a[%M]'; exec {a[x]}>/dev/null"],
    "indirect expansion": ["y='a[%M]'; : ${!y}", "y='a[%M]'; : \"${!y}\""],
    "evaluators": ["eval ': %M'", "x=': %M'; eval \"$x\"", "trap ': %M' EXIT", "PS4='%M'; set -x; :",
                   "source /dev/stdin <<< ': %M'", ". /dev/stdin <<< ': %M'",
                   "shopt -s expand_aliases\nalias q=': %M'\nq", f"command {MARKER}"],
}
_AROUND = ["{}", "if :; then {}; fi", "( {} )", "{{ {}; }}", ": && {}", "for v in 1; do {}; done"]


def evaluating_commands() -> list[tuple[str, str]]:
    out = []
    for cls, templates in EVALUATING.items():
        for i, t in enumerate(templates):
            for j, p in enumerate(_PAYLOADS):
                around = _AROUND[(i + j) % len(_AROUND)]
                body = t.replace("%M", p)
                out.append((cls, around.format(body) if "\n" not in t else body))
    return out


def judged_safe(command: str) -> list[str]:
    """What the judge says that it must not say of a command that runs a hidden program."""
    from desktop_app.core import Action, PermissionPolicy, Risk, Rule, RuleSet, ToolFacts
    from desktop_app.core.policy import assess_command

    bash = ToolFacts("bash_run", "group:runtime", False)
    wrong = []
    if assess_command(analyse_command(command))[0] is Risk.LOW:
        wrong.append("low")
    for mode, rules in (("ask", ["*"]), ("auto", []), ("plan", ["*"]), ("read-only", []), ("strict", ["*"])):
        policy = PermissionPolicy(mode, RuleSet([Rule.parse(f"bash_run({r})", "allow", "test") for r in rules]))
        d = policy.resolve_ask(policy.evaluate(bash, {"command": command}))
        if d.action is Action.ALLOW or (mode in ("plan", "read-only", "strict") and d.action is not Action.DENY):
            wrong.append(f"{mode}: {d.action.value} ({d.reason})")
    return wrong


@pytest.mark.timeout(600)
async def test_no_command_that_evaluates_text_at_run_time_is_judged_safe(make_docker_sandbox):
    sandbox = await make_docker_sandbox()
    cases = evaluating_commands()
    reports = await bash_reports(sandbox, [c for _, c in cases])
    ran: dict[str, int] = dict.fromkeys(EVALUATING, 0)
    wrong = []
    for (cls, command), reported in zip(cases, reports, strict=True):
        if MARKER not in reported:
            continue
        ran[cls] += 1
        said = judged_safe(command)
        if said:
            wrong.append((cls, command, said))
    assert wrong == []
    assert all(n > 0 for n in ran.values()), ran  # bash really runs the marker in every class
    assert sum(ran.values()) > len(cases) // 2, ran
