"""What a shell command is made of, as the analysis reads it: words after quote removal, redirections, the
simple commands that can run, and the analysis of a whole command."""

from __future__ import annotations

from dataclasses import dataclass

WRITE_OPS = frozenset({">", ">>", ">|", "&>", "&>>", "<>"})
HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr"})
DELETE_PROGRAMS = frozenset({"rm", "unlink", "rmdir", "shred"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "yash", "posh", "rbash"})
# Builtins and programs that run code the policy cannot see (a string, a file, a config, a table).
OPAQUE_PROGRAMS = frozenset({
    "eval", "source", ".", "trap", "alias", "shopt", "enable", "hash", "bind", "complete", "compgen", "fc",
    "let", "coproc", "mapfile", "readarray", "watch", "flock", "chroot", "unshare", "nsenter", "runuser", "su",
    "sg", "script", "strace", "ltrace", "valgrind", "gdb", "parallel", "fakeroot", "faketime", "proxychains",
    "proxychains4", "torsocks", "firejail", "catchsegv", "systemd-run", "at", "batch", "ionice", "chrt",
    "taskset", "setpriv", "capsh", "prlimit", "numactl", "cgexec", "expect", "sshpass", "pkexec", "run-parts",
    "tmux", "screen", "dtach", "unbuffer", "setsid", "command_not_found_handle",
})


@dataclass(slots=True, frozen=True)
class Word:
    """A shell word after quote removal. `kind`: "lit" (known), "glob" (a pattern or brace expansion),
    "dyn" (an expansion or substitution: known only when it runs; `value` is then the source text)."""

    value: str
    kind: str = "lit"

    @property
    def literal(self) -> bool:
        return self.kind == "lit"


@dataclass(slots=True, frozen=True)
class Redirect:
    op: str  # >, >>, >|, &>, &>>, >&, <, <&, <>, <<, <<-, <<<, >&-, <&-
    fd: int | None
    target: str  # the file or fd after quote removal; "" for here-docs and here-strings
    literal: bool = True

    @property
    def writes_file(self) -> bool:
        """A write of a file: `>`, `>>`, `>|`, `&>`, `&>>`, `<>`, and `>&word` / `N>&word` where word is no fd."""
        if self.op in WRITE_OPS:
            return True
        return self.op == ">&" and not (self.target.isdigit() or self.target == "-")


@dataclass(slots=True, frozen=True)
class SimpleCommand:
    """One simple command that can run. `argv` is what really runs: the program's basename first, after
    the wrappers (env, sudo, nice, xargs, `find -exec`, `sh -c` ...), each of which is one of `layers`."""

    argv: tuple[str, ...]
    kinds: tuple[str, ...]  # Word.kind of each argv word
    program_path: str = ""  # the program as written (a path keeps its folders)
    layers: tuple[tuple[str, ...], ...] = ()  # each wrapper's argv as written, outermost first, then argv
    env: tuple[str, ...] = ()  # NAME=value: its own prefixes, env's, sudo's, those of an enclosing `sh -c`
    redirects: tuple[Redirect, ...] = ()
    text: str = ""
    open_args: bool = False  # xargs and `find -exec ... +` add arguments when it runs
    background: bool = False
    pipe: tuple[tuple[int, int], ...] = ()  # (pipeline, stage) from the outermost pipeline in
    parent: int | None = None  # the command whose word or redirection holds the substitution this sits in
    function: str | None = None  # the function whose body holds it
    calls_function: bool = False  # the program is a function defined in the same command
    runs_script: bool = False  # `sh -c SCRIPT`: the script's own commands follow it and carry the judgement

    @property
    def program(self) -> str:
        return self.argv[0] if self.argv else ""

    @property
    def deletes(self) -> bool:
        """Deletes files: rm, unlink, rmdir, shred, `find ... -delete`."""
        return self.program in DELETE_PROGRAMS or (self.program == "find" and "-delete" in self.argv)

    @property
    def writes(self) -> tuple[str, ...]:
        """The files its redirections write (literal targets, `/dev/null` and friends left out)."""
        return tuple(r.target for r in self.redirects
                     if r.writes_file and r.literal and r.target not in HARMLESS_TARGETS)


@dataclass(slots=True, frozen=True)
class ShellAnalysis:
    source: str
    commands: tuple[SimpleCommand, ...] = ()
    problems: tuple[str, ...] = ()  # why it is un-analysable; empty when every part is understood
    functions: tuple[str, ...] = ()

    @property
    def analysable(self) -> bool:
        return not self.problems

    @property
    def writes(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(t for c in self.commands for t in c.writes))


@dataclass(slots=True, frozen=True)
class WalkContext:
    pipe: tuple[tuple[int, int], ...] = ()
    parent: int | None = None
    function: str | None = None
    background: bool = False
    redirects: tuple[Redirect, ...] = ()
    env: tuple[str, ...] = ()
    layers: tuple[tuple[str, ...], ...] = ()
    depth: int = 0  # sh -c depth
