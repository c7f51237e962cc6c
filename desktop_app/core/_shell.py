"""Split a shell command into sub-commands and flag the constructs no prefix rule may allow."""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass, field

from ._sandbox import WORKSPACE

_SEPARATORS = ("&&", "||", ";;", ";", "|&", "|", "&", "\n")
_SAFE_REDIRECT_TARGETS = {"/dev/null", "/dev/stdout", "/dev/stderr"}


@dataclass(slots=True)
class SubCommand:
    text: str
    argv: list[str]


@dataclass(slots=True)
class ParsedCommand:
    """A command line split at `&&`, `||`, `;`, `|`, `&` and newlines, with what makes it unsafe to prefix-match."""

    source: str
    commands: list[SubCommand] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)  # e.g. "command substitution", "redirect outside workspace"

    @property
    def prefix_safe(self) -> bool:
        return not self.flags


def _redirect_target_ok(target: str) -> bool:
    if not target or target.startswith("&"):  # 2>&1: a file descriptor, not a file
        return True
    if target in _SAFE_REDIRECT_TARGETS:
        return True
    if target.startswith(("~", "$")):
        return False
    path = target if target.startswith("/") else posixpath.join(WORKSPACE, target)
    norm = posixpath.normpath(path)
    return norm == WORKSPACE or norm.startswith(WORKSPACE + "/")


_REDIRECT = re.compile(r"^(\d*|&)(>>?|>&|>\||<<?<?|<&|<>)(.*)$")


def _strip_redirections(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for tok in argv:
        if skip:
            skip = False
            continue
        m = _REDIRECT.match(tok)
        if m:
            skip = not m.group(3)  # the target is the next word
            continue
        out.append(tok)
    return out


class _Scanner:
    """One pass over a command line as a shell reads it: quotes and escapes respected, the line split
    at separators outside them, with the flags and the output-redirect targets it meets."""

    def __init__(self, command: str) -> None:
        self.s, self.n, self.i = command, len(command), 0
        self.quote: str | None = None
        self.buf: list[str] = []
        self.parts: list[str] = []
        self.redirects: list[str] = []
        self.flags: set[str] = set()

    def run(self) -> _Scanner:
        while self.i < self.n:
            self._step(self.s[self.i])
        if self.quote is not None:
            self.flags.add("unbalanced quote")
        self._flush()
        return self

    def _take(self, text: str) -> None:
        self.buf.append(text)
        self.i += len(text)

    def _flush(self) -> None:
        text = "".join(self.buf).strip()
        self.buf.clear()
        if text:
            self.parts.append(text)

    def _step(self, c: str) -> None:
        if self.quote == "'":
            if c == "'":
                self.quote = None
            self._take(c)
        elif c == "\\" and self.i + 1 < self.n:
            if self.s[self.i + 1] == "\n" and self.quote is None:  # line continuation
                self.i += 2
            else:
                self._take(self.s[self.i : self.i + 2])
        elif self.quote == '"':
            if c == '"':
                self.quote = None
            elif c == "`" or self.s.startswith("$(", self.i):
                self.flags.add("command substitution")
            self._take(c)
        else:
            self._unquoted(c)

    def _unquoted(self, c: str) -> None:
        s, i = self.s, self.i
        if c in "'\"":
            self.quote = c
            self._take(c)
            return
        if c == "`" or s.startswith("$(", i):
            self.flags.add("command substitution")
        if s.startswith(("<(", ">("), i):
            self.flags.add("process substitution")
        if c == "#" and (not self.buf or self.buf[-1][-1:].isspace()):
            # a comment runs to the end of the line
            j = s.find("\n", i)
            self.i = self.n if j < 0 else j
            return
        if c == ">" and not s.startswith(">(", i):
            self._redirect()
            return
        matched = next((op for op in _SEPARATORS if s.startswith(op, i)), None)
        if matched is not None and not (matched == "&" and s.startswith("&>", i)):
            self._flush()
            self.i += len(matched)
            return
        self._take(c)

    def _redirect(self) -> None:
        """An output redirection at `i`: note its target word, keep it in the sub-command's text."""
        s, n, i = self.s, self.n, self.i
        j = i + 1
        if j < n and s[j] in ">|":
            j += 1
        if j < n and s[j] == "&":
            j += 1
        while j < n and s[j] in " \t":
            j += 1
        k = j
        while k < n and s[k] not in " \t\n;&|<>()":
            k += 1
        target = s[j:k].strip("'\"")
        if s[i + 1 : i + 2] == "&" or (i + 1 < n and s[i + 1] == ">" and s[i + 2 : i + 3] == "&"):
            target = "&" + target
        self.redirects.append(target)
        self._take(s[i:k])


def _program_argv(text: str, flags: set[str]) -> list[str]:
    """The words of one sub-command, without leading VAR=value assignments and redirections, so rules
    match the program."""
    try:
        argv = shlex.split(text, comments=False, posix=True)
    except ValueError:
        flags.add("unparseable")
        argv = text.split()
    while argv and "=" in argv[0] and not argv[0].startswith("=") and argv[0].split("=", 1)[0].isidentifier():
        argv.pop(0)
    return _strip_redirections(argv)


def parse_command(command: str) -> ParsedCommand:
    """Scan like a shell would: quotes and escapes respected, operators found outside them."""
    scan = _Scanner(command).run()
    flags = scan.flags
    if not all(_redirect_target_ok(t) for t in scan.redirects):
        flags.add("redirect outside workspace")
    parsed = ParsedCommand(source=command)
    for text in scan.parts:
        argv = _program_argv(text, flags)
        if text.startswith(("(", "{")) or text.endswith((")", "}")):
            flags.add("subshell or group")
        parsed.commands.append(SubCommand(text=text, argv=argv))
    parsed.flags = sorted(flags)
    return parsed
