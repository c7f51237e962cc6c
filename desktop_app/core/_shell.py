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


def parse_command(command: str) -> ParsedCommand:
    """Scan like a shell would: quotes and escapes respected, operators found outside them."""
    parsed = ParsedCommand(source=command)
    flags: set[str] = set()
    parts: list[str] = []
    buf: list[str] = []
    redirects: list[str] = []
    i, n = 0, len(command)
    quote: str | None = None

    def flush() -> None:
        text = "".join(buf).strip()
        buf.clear()
        if text:
            parts.append(text)

    while i < n:
        c = command[i]
        if quote == "'":
            buf.append(c)
            if c == "'":
                quote = None
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            if command[i + 1] == "\n" and quote is None:  # line continuation
                i += 2
                continue
            buf.append(command[i : i + 2])
            i += 2
            continue
        if quote == '"':
            if c == '"':
                quote = None
            elif c == "`" or command.startswith("$(", i):
                flags.add("command substitution")
            buf.append(c)
            i += 1
            continue
        # outside any quote
        if c in "'\"":
            quote = c
            buf.append(c)
            i += 1
            continue
        if c == "`" or command.startswith("$(", i):
            flags.add("command substitution")
        if command.startswith(("<(", ">("), i):
            flags.add("process substitution")
        if c == "#" and (not buf or buf[-1][-1:].isspace()):
            # a comment runs to the end of the line
            j = command.find("\n", i)
            i = n if j < 0 else j
            continue
        if c == ">" and not command.startswith(">(", i):
            # output redirection: capture the target word
            j = i + 1
            if j < n and command[j] in ">|":
                j += 1
            if j < n and command[j] == "&":
                j += 1
            while j < n and command[j] in " \t":
                j += 1
            k = j
            while k < n and command[k] not in " \t\n;&|<>()":
                k += 1
            target = command[j:k].strip("'\"")
            if command[i + 1 : i + 2] == "&" or (i + 1 < n and command[i + 1] == ">" and command[i + 2 : i + 3] == "&"):
                target = "&" + target
            redirects.append(target)
            buf.append(command[i:k])
            i = k
            continue
        matched = next((op for op in _SEPARATORS if command.startswith(op, i)), None)
        if matched is not None and not (matched == "&" and command.startswith("&>", i)):
            flush()
            i += len(matched)
            continue
        buf.append(c)
        i += 1
    if quote is not None:
        flags.add("unbalanced quote")
    flush()

    for target in redirects:
        if not _redirect_target_ok(target):
            flags.add("redirect outside workspace")
    for text in parts:
        try:
            argv = shlex.split(text, comments=False, posix=True)
        except ValueError:
            flags.add("unparseable")
            argv = text.split()
        # Drop leading VAR=value assignments and redirections so rules match the program.
        while argv and "=" in argv[0] and not argv[0].startswith("=") and argv[0].split("=", 1)[0].isidentifier():
            argv.pop(0)
        argv = _strip_redirections(argv)
        if text.startswith(("(", "{")) or text.endswith((")", "}")):
            flags.add("subshell or group")
        parsed.commands.append(SubCommand(text=text, argv=argv))
    parsed.flags = sorted(flags)
    return parsed
