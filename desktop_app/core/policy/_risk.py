"""How much harm a call can do, judged by what it does: one function for the policy, the danger hook,
the inbox and the rules tester. Low reads, medium writes or is unknown, high destroys."""

from __future__ import annotations

import posixpath
from collections.abc import Iterable
from typing import Any

from .._record import Risk
from .._sandbox import WORKSPACE
from ._effects import deletes_by_pattern, discards_work, exfiltration, reads_secret
from ._evaluators import unanalysable
from ._paths import container_path
from ._programs import judge_program
from ._shell import analyse_command
from ._shell_model import SHELLS, ShellAnalysis, SimpleCommand

_GIT_GLOBAL_ARG = frozenset({"-C", "--git-dir", "--work-tree", "--namespace"})
_FIND_NARROWING = frozenset({"-name", "-iname", "-path", "-ipath", "-wholename", "-iwholename", "-regex",
                             "-iregex", "-newer", "-mtime", "-mmin", "-ctime", "-cmin", "-atime", "-amin",
                             "-size", "-empty", "-inum", "-samefile", "-user", "-uid", "-links"})
_FIND_WIDENING = frozenset({"-o", "-or", ",", "!", "-not"})
DOWNLOADERS = frozenset({"curl", "wget", "fetch", "aria2c", "http", "https", "xh", "lwp-request", "GET", "nc",
                         "ncat", "netcat", "socat", "telnet", "ftp", "tftp", "lynx", "links", "w3m"})
INTERPRETERS = SHELLS | frozenset({
    "python", "python2", "python3", "perl", "ruby", "node", "nodejs", "deno", "bun", "php", "lua", "Rscript",
    "tclsh", "fish", "csh", "tcsh", "eval", "source", ".", "busybox", "pwsh", "osascript", "awk", "gawk",
})
_SENSITIVE_ENV = ("PATH", "LD_", "BASH_ENV", "ENV", "IFS", "GIT_", "PS4", "PROMPT_COMMAND", "SHELLOPTS",
                  "BASHOPTS", "CDPATH", "GLOBIGNORE", "PYTHON", "NODE_OPTIONS", "PERL5", "RUBYOPT", "HOME")
_HOME = ("~", "$HOME", "${HOME}")


def assess_risk(tool: str, group: str, read_only: bool, input: dict[str, Any]) -> tuple[Risk, str]:
    """The risk of one call and why, in plain words. `bash_run` is judged by what its command runs."""
    command = input.get("command")
    if tool == "bash_run" and isinstance(command, str):
        return assess_command(analyse_command(command))
    if read_only:
        return Risk.LOW, f"{tool} only reads"
    if group == "group:todo":
        return Risk.LOW, f"{tool} changes the session's to-do list only"
    path = input.get("path")
    if group == "group:fs" and isinstance(path, str):
        return Risk.MEDIUM, f"{tool} writes {path}"
    return Risk.MEDIUM, f"{tool} can change things"


def assess_command(a: ShellAnalysis) -> tuple[Risk, str]:
    """High when the command destroys (see README, Permissions), medium when it writes, runs something
    unknown or cannot be analysed, low when every part only reads."""
    high = _fork_bomb(a) or _download_into_interpreter(a)
    if high is None:
        high = next((why for c in a.commands if (why := _destroys(c, a)) is not None), None)
    sent = exfiltration(a)
    if high is None and sent is not None and sent[0]:
        high = sent[1]
    if high is not None:
        return Risk.HIGH, high
    if not a.analysable:
        return Risk.MEDIUM, unanalysable(a)
    if sent is not None:
        return Risk.MEDIUM, sent[1]
    secret = next((s for c in a.commands if (s := reads_secret(c)) is not None), None)
    if secret is not None:
        return Risk.MEDIUM, f"reads a secret file ({secret})"
    for c in a.commands:
        why = _medium(c)
        if why is not None:
            return Risk.MEDIUM, why
    if not a.commands:
        return Risk.LOW, "it runs nothing"
    names = ", ".join(dict.fromkeys(c.program for c in a.commands if c.program))
    return Risk.LOW, f"it only reads ({names})" if names else "it only reads"


# -- high --------------------------------------------------------------------------------------------
def _fork_bomb(a: ShellAnalysis) -> str | None:
    """A function that calls itself, directly or through others: without end, and in the background or
    a pipeline it multiplies processes (`:(){ :|:& };:`, `f(){ f & f & }; f`)."""
    calls: dict[str, set[str]] = {}
    for c in a.commands:
        if c.function is not None and c.calls_function:
            calls.setdefault(c.function, set()).add(c.program)
    for start in calls:
        seen, stack = set(), list(calls[start])
        while stack:
            f = stack.pop()
            if f == start:
                return f"fork bomb: the function {start} calls itself without end"
            if f not in seen:
                seen.add(f)
                stack += calls.get(f, ())
    return None


def _download_into_interpreter(a: ShellAnalysis) -> str | None:
    """A download piped into an interpreter, or substituted into its words (`bash <(curl x)`,
    `sh -c "$(curl x)"`)."""
    cmds = a.commands
    for d in cmds:
        if d.program not in DOWNLOADERS:
            continue
        for i in cmds:
            if i.program not in INTERPRETERS:
                continue
            piped = any(pid == p2 and s1 < s2 for pid, s1 in d.pipe for p2, s2 in i.pipe)
            if piped:
                return f"pipes a download ({d.program}) into {i.program}"
            parent = d.parent
            while parent is not None and 0 <= parent < len(cmds):
                if cmds[parent] is i:
                    return f"runs a download ({d.program}) with {i.program}"
                parent = cmds[parent].parent
    return None


def _destroys(c: SimpleCommand, a: ShellAnalysis) -> str | None:
    p, args = c.program, c.argv[1:]
    for r in c.redirects:
        if r.writes_file and r.target.startswith("/dev/") and r.target not in (
                "/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"):
            return f"writes to the device {r.target}"
    if p == "rm" and (_has_flag(args, "rR", "--recursive") or "--no-preserve-root" in args):
        return _wide_target(_operands(args), a, "deletes", c) or deletes_by_pattern(c)
    if p == "find" and "-delete" in args:
        return _find_delete(args, a, c) or deletes_by_pattern(c)
    if c.deletes:
        return deletes_by_pattern(c)
    if p in ("chmod", "chown", "chgrp") and _has_flag(args, "R", "--recursive"):
        return _wide_target(_operands(args)[1:], a, f"changes the {'owner' if p != 'chmod' else 'permissions'} of", c)
    if p == "dd" and any(x.startswith("of=") for x in args):
        return "writes raw data with dd (of=)"
    if p.startswith(("mkfs", "mke2fs", "mkswap", "wipefs", "fdisk", "sfdisk", "parted")):
        return f"formats or repartitions a disk ({p})"
    if p == "git":
        return _git_destroys(args)
    if p in ("shutdown", "reboot", "halt", "poweroff") or (p in ("kill", "pkill") and "-1" in args[-1:]):
        return f"stops the machine or every process ({p})"
    return None


def _has_flag(args: Iterable[str], letters: str, long: str) -> bool:
    for x in args:
        if x == "--":
            return False
        if x == long or (x.startswith("-") and not x.startswith("--") and any(ch in x[1:] for ch in letters)):
            return True
    return False


def _operands(args: tuple[str, ...]) -> list[str]:
    out, opts = [], True
    for x in args:
        if opts and x == "--":
            opts = False
        elif opts and x.startswith("-") and x != "-":
            continue
        else:
            out.append(x)
    return out


def _wide_target(targets: list[str], a: ShellAnalysis, verb: str, c: SimpleCommand) -> str | None:
    if "--no-preserve-root" in c.argv:
        return f"{verb} / (--no-preserve-root)"
    for t in targets:
        why = _reaches_everything(t, c.kinds[c.argv.index(t)] if t in c.argv else "lit", _changes_dir(a))
        if why is not None:
            return f"{verb} {why}"
    return None


def _changes_dir(a: ShellAnalysis) -> bool:
    return any(c.program in ("cd", "pushd", "popd") for c in a.commands)


def _reaches_everything(target: str, kind: str, moved: bool) -> str | None:
    """Why a recursive target is too wide ("everything in /workspace"), or None."""
    t = target.strip('"')
    if t.startswith(_HOME):
        rest = t.split("/", 1)[1] if "/" in t else ""
        if rest.strip("*./") == "" or kind == "dyn":
            return "the home folder"
        return None
    if kind == "dyn":
        return f"a path only known when it runs ({target})"
    if "{" in t and ("," in t or ".." in t):
        return f"paths made by brace expansion ({target})"
    if moved and not t.startswith("/") and (t.startswith("..") or t.strip("*./") == ""):
        return f"everything in the current folder ({target}), after a cd"
    folder, last = posixpath.split(t)
    wild = kind == "glob" and last.replace("*", "").replace("?", "").replace(".", "") in ("", "[!.]", "[^.]")
    path = container_path(folder if wild else t)
    if wild:
        return _everything_in(path, target)
    if path == "/" or path == WORKSPACE:
        return f"everything in {path}" if path == WORKSPACE else "the whole file system (/)"
    if posixpath.basename(path) == ".git":
        return f"the git history ({target})"
    if not path.startswith(WORKSPACE + "/") and path.count("/") <= 1:
        return f"the system folder {path}"
    return None


def _everything_in(folder: str, target: str) -> str | None:
    if folder == "/" or folder == WORKSPACE or (not folder.startswith(WORKSPACE + "/") and folder.count("/") <= 1):
        return f"everything in {folder} ({target})"
    return None


def _find_delete(args: tuple[str, ...], a: ShellAnalysis, c: SimpleCommand) -> str | None:
    starts = []
    for x in args:
        if x.startswith("-") or x in ("(", "!"):
            break
        starts.append(x)
    starts = starts or ["."]
    narrowed = any(x in _FIND_NARROWING for x in args) and not any(x in _FIND_WIDENING for x in args)
    if narrowed:
        return None
    for s in starts:
        why = _reaches_everything(s, c.kinds[c.argv.index(s)] if s in c.argv else "lit", _changes_dir(a))
        if why is not None:
            return f"deletes {why} (find -delete)"
    return None


def _git_destroys(args: tuple[str, ...]) -> str | None:
    sub, rest = _git_subcommand(args)
    discarded = discards_work(sub, rest)
    if discarded is not None:
        return discarded
    if sub == "clean" and _has_flag(rest, "f", "--force"):
        return "deletes untracked files (git clean -f)"
    if sub == "reset" and "--hard" in rest:
        return "discards uncommitted changes (git reset --hard)"
    if sub == "push" and (_has_flag(rest, "f", "--force") or any(
            x.startswith(("--force", "--mirror", "--delete", "+")) or x == "-d" for x in rest)):
        return "force-pushes, rewriting the remote's history (git push --force)"
    return None


def _git_subcommand(args: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
    i = 0
    while i < len(args) and args[i].startswith("-"):
        i += 2 if args[i] in _GIT_GLOBAL_ARG or args[i] == "-c" else 1
    return (args[i], args[i + 1 :]) if i < len(args) else ("", ())


# -- medium ------------------------------------------------------------------------------------------
def _medium(c: SimpleCommand) -> str | None:
    """Why a command that does not destroy is medium, or None when every part only reads: its program and
    every option of it are in the table of known programs (`_programs.py`) and only read."""
    if c.writes:
        return f"writes {c.writes[0]}"
    sensitive = next((e for e in c.env if e.split("=", 1)[0].startswith(_SENSITIVE_ENV)), None)
    if sensitive is not None:
        return f"sets {sensitive.split('=', 1)[0]}, which changes what runs"
    if c.calls_function or c.runs_script or not c.argv:
        return None
    judged = judge_program(c.argv, c.kinds, c.open_args, c.program_path)
    return None if judged.effect == "read" else judged.why
