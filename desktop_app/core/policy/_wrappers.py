"""Wrappers: what really runs inside env, sudo, nice, xargs, `find -exec`, `sh -c` ... (a simple command's
words followed to its program), for the shell analysis of `_shell.py`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

from ._shell_model import OPAQUE_PROGRAMS, SHELLS, Redirect, SimpleCommand, WalkContext, Word


class Walker(Protocol):
    """What the wrappers need of the walk over a command: to say why it is un-analysable, and to analyse a
    `sh -c` script under the wrappers around it."""

    def problem(self, why: str) -> None: ...

    def nested(self, script: str, ctx: WalkContext) -> list[SimpleCommand]: ...


@dataclass(slots=True, frozen=True)
class _Opts:
    """A wrapper's options: short ones with an argument, without, long ones likewise."""

    with_arg: frozenset[str] = frozenset()
    no_arg: frozenset[str] = frozenset()
    numeric: bool = False  # `nice -10`
    refused: frozenset[str] = frozenset()  # options that make it run something the policy cannot see


def _o(with_arg: str = "", no_arg: str = "", refused: str = "", numeric: bool = False) -> _Opts:
    return _Opts(frozenset(with_arg.split()), frozenset(no_arg.split()), numeric, frozenset(refused.split()))


_WRAPPERS: dict[str, _Opts] = {
    "env": _o("-u --unset -C --chdir", "-i --ignore-environment -0 --null -v --debug --block-signal "
              "--default-signal --ignore-signal --list-signal-handling", "-S --split-string"),
    "command": _o("", "-p", "-v -V"),
    "builtin": _o(),
    "exec": _o("-a", "-c -l"),
    "nice": _o("-n --adjustment", "", numeric=True),
    "nohup": _o(),
    "timeout": _o("-s --signal -k --kill-after", "--preserve-status --foreground -v --verbose"),
    "stdbuf": _o("-i -o -e --input --output --error"),
    "time": _o("-f --format -o --output", "-p -a --append -v --verbose -q --quiet --portability"),
    "sudo": _o("-u --user -g --group -C --close-from -D --chdir -h --host -p --prompt -r --role -t --type "
               "-T --command-timeout -U --other-user -R --chroot",
               "-A --askpass -b --background -E --preserve-env -H --set-home -n --non-interactive -P "
               "--preserve-groups -S --stdin -k --reset-timestamp -K --remove-timestamp -B --bell -N --no-update",
               "-i --login -s --shell -e --edit -l --list -v --validate -V --version"),
    "doas": _o("-u", "-n", "-s -C -L"),
    "xargs": _o("-a --arg-file -d --delimiter -E -I -L --max-lines -n --max-args -P --max-procs -s --max-chars "
                "--process-slot-var", "-0 --null -r --no-run-if-empty -t --verbose -p --interactive -x --exit "
                "-o --open-tty -i --replace -e --eof -l"),
}
_ATTACHED = frozenset({"-i", "-e", "-l"})  # xargs's options whose value, if any, is attached
_SHELL_LONG_ARG = frozenset({"--rcfile", "--init-file"})
_SHELL_LONG = frozenset({"--norc", "--noprofile", "--login", "--posix", "--restricted", "--verbose",
                         "--noediting", "--debugger", "--protected"})
_FIND_WRITES = {"-fprint": 1, "-fprint0": 1, "-fls": 1, "-fprintf": 1}
_FIND_RUNS = frozenset({"-exec", "-execdir", "-ok", "-okdir"})


def _basename(path: str) -> str:
    return path.rstrip("/").rsplit("/", 1)[-1] if "/" in path else path


def _is_assignment(w: Word) -> bool:
    name, eq, _ = w.value.partition("=")
    return w.kind != "dyn" and bool(eq) and name.isidentifier()


class Unwrap:
    """Follows one simple command's words through its wrappers to the program that really runs."""

    def __init__(self, walker: Walker, ctx: WalkContext, text: str) -> None:
        self.w, self.ctx, self.text = walker, ctx, text
        self.env = list(ctx.env)
        self.layers = list(ctx.layers)
        self.redirects = list(ctx.redirects)
        self.open_args = False

    def make(self, words: list[Word], **kw: bool) -> SimpleCommand:
        argv = tuple(w.value for w in words)
        prog = argv[0] if argv else ""
        c = self.ctx
        return SimpleCommand(
            (_basename(prog), *argv[1:]) if argv and words[0].literal else argv, tuple(w.kind for w in words),
            prog, tuple(self.layers), tuple(self.env), tuple(self.redirects), self.text, self.open_args,
            c.background, c.pipe, c.parent, c.function, **kw)

    def run(self, words: list[Word]) -> list[SimpleCommand]:
        i = 0
        while i < len(words):
            head = words[i]
            rest = words[i:]
            if not head.literal:
                self.w.problem(f"a variable, substitution or pattern in command position ({head.value!r})")
                return [self.make(rest)]
            name = _basename(head.value)
            self.layers.append(tuple(x.value for x in rest))
            if not name or name.startswith("-"):
                self.w.problem(f"the program name {head.value!r} is not understood")
                return [self.make(rest)]
            if name in OPAQUE_PROGRAMS:
                self.w.problem(f"{name} runs code that the policy cannot see")
                return [self.make(rest)]
            if name in SHELLS:
                return self.shell(words, i)
            if name == "find":
                return self.find(words, i)
            nxt = self.wrapper(name, words, i + 1)
            if nxt is None or nxt >= len(words):
                return [self.make(rest)]
            i = nxt
        return []

    def wrapper(self, name: str, words: list[Word], i: int) -> int | None:
        """The index of the program `name` runs, or None when `name` is the program."""
        if name == "busybox":
            return i if i < len(words) and not words[i].value.startswith("-") else None
        spec = _WRAPPERS.get(name)
        if spec is None:
            return None
        j = self.options(name, spec, words, i)
        if j is None:
            return None
        if name in ("env", "sudo"):
            while j < len(words) and _is_assignment(words[j]):
                self.env.append(words[j].value)
                j += 1
        elif name == "timeout":
            j += 1  # the duration
        elif name == "xargs":
            self.open_args = True
        return j

    def options(self, name: str, spec: _Opts, words: list[Word], i: int) -> int | None:
        while i < len(words):
            w = words[i]
            v = w.value
            if not w.literal:
                self.w.problem(f"an option of {name} is only known when it runs ({v!r})")
                return None
            if v == "--":
                return i + 1
            if v == "-" and name == "env":
                i += 1
                continue
            if not v.startswith("-") or v == "-":
                return i
            key = v.split("=", 1)[0] if v.startswith("--") else v[:2]
            if key in spec.refused:
                if name == "command":
                    return None  # command -v / -V looks a name up, runs nothing
                self.w.problem(f"{name} {key} runs something the policy does not follow")
                return None
            if spec.numeric and v[1:].lstrip("-").isdigit():
                i += 1
            elif v.startswith("--"):
                if key in spec.with_arg:
                    i += 1 if "=" in v else 2
                    if name == "time" and key == "--output":
                        self.time_output(v, words, i)
                elif key in spec.no_arg:
                    i += 1
                else:
                    self.w.problem(f"{name} {key} is an option the policy does not know")
                    return None
            else:
                i = self.short(name, spec, words, i)
                if i < 0:
                    return None
        return i

    def short(self, name: str, spec: _Opts, words: list[Word], i: int) -> int:
        v = words[i].value
        for k in range(1, len(v)):
            c = "-" + v[k]
            if c in spec.refused:
                self.w.problem(f"{name} {c} runs something the policy does not follow")
                return -1
            if c in spec.with_arg:
                nxt = i + 1 if k + 1 < len(v) else i + 2
                if name == "time" and c == "-o":
                    target = v[k + 1 :] if k + 1 < len(v) else (words[i + 1].value if i + 1 < len(words) else "")
                    self.redirects.append(Redirect(">", None, target))
                return nxt
            if name == "xargs" and c in _ATTACHED:
                return i + 1
            if c not in spec.no_arg:
                self.w.problem(f"{name} {c} is an option the policy does not know")
                return -1
        return i + 1

    def time_output(self, v: str, words: list[Word], i: int) -> None:
        target = v.split("=", 1)[1] if "=" in v else (words[i - 1].value if i - 1 < len(words) else "")
        self.redirects.append(Redirect(">", None, target))

    def shell(self, words: list[Word], i: int) -> list[SimpleCommand]:
        """`bash [options] -c SCRIPT`: the script is analysed again, its commands under this one."""
        j, has_c = i + 1, False
        while j < len(words):
            w = words[j]
            v = w.value
            if not w.literal:
                break
            if v in ("--", "-"):
                j += 1
                break
            if v in _SHELL_LONG_ARG:
                j += 2
            elif v in _SHELL_LONG:
                j += 1
            elif v.startswith("--"):
                self.w.problem(f"the shell option {v} is not known")
                return [self.make(words[i:])]
            elif len(v) > 1 and v[0] in "-+":
                has_c = has_c or "c" in v[1:]
                j += 2 if v[-1] in "oO" else 1
            else:
                break
        if not has_c:
            # `sh script.sh` runs a file, like `python3 x.py`; `echo 'rm x' | sh`, `bash <<EOF`, `sh < f` and
            # `sh -s` run what they read from their input, which the policy cannot see
            from_input = j >= len(words) or any(w.value.startswith("-") and "s" in w.value[1:] and
                                                not w.value.startswith("--") for w in words[i + 1 : j])
            if from_input and not any(w.value in ("--version", "--help") for w in words[i + 1 :]):
                self.w.problem(f"{_basename(words[i].value)} reads its script from its input")
            return [self.make(words[i:])]
        if j >= len(words):
            self.w.problem("a shell's -c has no script")
            return [self.make(words[i:])]
        script = words[j]
        if not script.literal:
            self.w.problem(f"a shell runs a script only known when it runs ({script.value!r})")
            return [self.make(words[i:])]
        return [self.make(words[i:], runs_script=True), *self.w.nested(script.value, self.nested_ctx())]

    def nested_ctx(self) -> WalkContext:
        return replace(self.ctx, env=tuple(self.env), layers=tuple(self.layers), redirects=tuple(self.redirects))

    def find(self, words: list[Word], i: int) -> list[SimpleCommand]:
        """find's actions: -exec/-execdir/-ok/-okdir run a program; -fprint and friends write a file."""
        inner: list[SimpleCommand] = []
        j = i + 1
        while j < len(words):
            v = words[j].value
            if words[j].kind == "dyn" and v.startswith("$"):
                pass
            if v in _FIND_WRITES and j + 1 < len(words):
                self.redirects.append(Redirect(">", None, words[j + 1].value, words[j + 1].literal))
            if v in _FIND_RUNS:
                end = next((k for k in range(j + 1, len(words)) if words[k].value in (";", "+")), None)
                if end is None or end == j + 1:
                    self.w.problem(f"find {v} without its command and ';' or '+'")
                    break
                sub = Unwrap(self.w, replace(self.ctx, layers=(*self.layers,)), self.text)
                sub.env, sub.redirects, sub.open_args = list(self.env), [], True
                inner += sub.run(words[j + 1 : end])
                j = end
            j += 1
        return [self.make(words[i:]), *inner]
