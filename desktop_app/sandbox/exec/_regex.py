"""fs_grep's pattern for GNU `grep -E` where an image has no ripgrep: the tool's dialect (Rust regex, as
ripgrep reads it) translated to POSIX extended syntax, or refused where the two differ in a way that matters.
GNU grep runs an ERE with a DFA (linear time) except for backreferences, which backtrack: those are refused,
as ripgrep refuses them. Greedy and lazy repetition match the same lines, so laziness is dropped."""

from __future__ import annotations

import re

# Escapes that mean the same in both (GNU grep's extensions included), and classes to spell out.
_SAME = set(".^$|?*+()[]{}\\/-wWsSbB<>")
_CLASSES = {"d": "[0-9]", "D": "[^0-9]"}
_IN_BRACKET = {"d": "0-9", "w": "[:alnum:]_", "s": "[:space:]"}
_LITERAL = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "v": "\v"}


class Untranslatable(ValueError):
    """The pattern uses what GNU grep -E lacks or would backtrack on."""


def ere_from_rust(pattern: str) -> tuple[str, bool]:
    """(ERE, ignore_case): a leading (?i) becomes grep's -i."""
    ignore_case = False
    if pattern.startswith("(?i)"):
        pattern, ignore_case = pattern[4:], True
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            piece, i = _escape(pattern, i)
        elif c == "[":
            piece, i = _bracket(pattern, i)
        elif c == "(" and pattern.startswith("(?", i):
            if not pattern.startswith("(?:", i):
                raise Untranslatable("look-around and inline flags other than a leading (?i) are not supported")
            piece, i = "(", i + 3
        elif c in "+*?}" and pattern[i + 1 : i + 2] == "?":
            piece, i = c, i + 2  # lazy: same lines as greedy
        else:
            piece, i = c, i + 1
        out.append(piece)
    return "".join(out), ignore_case


def _escape(pattern: str, i: int) -> tuple[str, int]:
    if i + 1 >= len(pattern):
        raise Untranslatable("a trailing backslash")
    e = pattern[i + 1]
    if e.isdigit():
        raise Untranslatable("backreferences are not supported (they backtrack)")
    if e in _CLASSES:
        return _CLASSES[e], i + 2
    if e in _LITERAL:
        return _LITERAL[e], i + 2
    if e == "x":
        m = re.match(r"\\x(?:\{([0-9a-fA-F]{1,6})\}|([0-9a-fA-F]{2}))", pattern[i:])
        if not m:
            raise Untranslatable("a malformed \\x escape")
        return _quote(chr(int(m.group(1) or m.group(2), 16))), i + m.end()
    if e in _SAME or not e.isalnum():
        return "\\" + e, i + 2
    raise Untranslatable(f"the escape \\{e} has no POSIX equivalent")


def _quote(ch: str) -> str:
    return "\\" + ch if ch in ".^$|?*+()[]{}\\" else ch


def _bracket(pattern: str, i: int) -> tuple[str, int]:
    """A Rust class `[...]` as a POSIX bracket expression, where a backslash is literal: escapes become
    classes or plain characters, and `]`, `^`, `-` go where POSIX reads them literally."""
    j, n = i + 1, len(pattern)
    negate = pattern.startswith("^", j)
    j += negate
    start, lits, parts = j, [], []
    while True:
        if j >= n:
            raise Untranslatable("an unterminated [ class")
        c = pattern[j]
        if c == "]" and j > start:
            break
        if pattern.startswith("[:", j):
            k = pattern.find(":]", j + 2)
            if k < 0:
                raise Untranslatable("an unterminated [: class")
            parts.append(pattern[j : k + 2])
            j = k + 2
            continue
        if c == "[":
            raise Untranslatable("nested classes and class set operations are not supported")
        ch, j = _class_char(pattern, j)
        if ch is None:
            parts.append(_IN_BRACKET[pattern[j - 1]])
        elif pattern[j : j + 1] == "-" and j + 1 < n and pattern[j + 1] != "]":
            end, j = _class_char(pattern, j + 1)
            if end is None or "]" in (ch, end) or "-" in (ch, end) or "^" == ch:
                raise Untranslatable("this class range has no POSIX spelling here")
            parts.append(f"{ch}-{end}")
        else:
            lits.append(ch)
    body = ("]" if "]" in lits else "") + "".join(c for c in lits if c not in "]^-") + "".join(parts)
    body += ("^" if "^" in lits else "") + ("-" if "-" in lits else "")
    if body == "^" and not negate:
        return "\\^", j + 1
    if body.startswith("^"):
        body = body[1:] + "^"  # only "^-": "-^" reads both literally
    return "[" + ("^" if negate else "") + body + "]", j + 1


def _class_char(pattern: str, j: int) -> tuple[str | None, int]:
    """One character of a class (None for an escaped class like \\d, named by pattern[j - 1])."""
    c = pattern[j]
    if c != "\\":
        return c, j + 1
    if j + 1 >= len(pattern):
        raise Untranslatable("a trailing backslash")
    e = pattern[j + 1]
    if e in _IN_BRACKET:
        return None, j + 2
    if e in _LITERAL:
        return _LITERAL[e], j + 2
    if e.isalnum():
        raise Untranslatable(f"the escape \\{e} inside a class has no POSIX equivalent")
    return e, j + 2
