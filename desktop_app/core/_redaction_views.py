"""The views of a text that redaction scans besides the text itself: the lines where a terminal escape
sequence or an invisible character splits a token, with those removed, and the text's base64, hex, `\\xHH`
and percent-encoded runs decoded. A secret found in a view takes its whole span of the text with it
(core/_redaction.py applies them).

An encoded run is redacted only when its decoding is text (valid UTF-8, almost all printable) *and* that text
holds a secret by the same patterns: a git sha, a sha256 or a UUID decodes to random bytes, never to text,
so it stays as it is. The finding runs in RE2 on the UTF-8 bytes (one linear pass; its str API turns each
offset back into characters from the start of the text); offsets become characters only for a hit."""

from __future__ import annotations

import base64
import binascii
import bisect
import re
import urllib.parse
from collections.abc import Callable, Iterator

import re2

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST, or the line end), DCS/SOS/PM/APC strings,
# other ESC sequences, the 8-bit CSI, C0 controls but tab and line ends, DEL, and the characters a terminal
# shows as nothing (soft hyphen, zero-width, bidi marks, word joiner, BOM).
_ESCAPE = (
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b\n]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b\n]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-OQ-WYZ\\`a-~]"  # not CSI, OSC nor a string's opener
    r"|\x{9b}[0-?]*[ -/]*[@-~]"
    r"|[\x00-\x08\x0b\x0c\x0e-\x1a\x1c-\x1f\x7f\x{ad}\x{34f}\x{180e}\x{200b}-\x{200f}\x{202a}-\x{202e}"
    r"\x{2060}-\x{2064}\x{feff}]"
)
_VISIBLE = r"[^\s\x00-\x1f\x7f]"
# An escape (or a run of them) between two visible characters: where a token may be split.
_SPLITS = re2.compile(f"{_VISIBLE}(?:{_ESCAPE})+{_VISIBLE}".encode())
# The same escapes for Python's re, on one line at a time (each alternative linear: disjoint classes,
# bounded repeats).
_ESCAPES = re.compile(re.sub(r"\\x\{([0-9a-f]+)\}", lambda m: f"\\u{int(m.group(1), 16):04x}", _ESCAPE))

MIN_ENCODED = 16  # shorter runs are not decoded: no secret pattern fits in 11 bytes
# Encoded text, not any run of the alphabet (a path, an identifier): base64 whose 4-character groups start
# as ASCII text's do ([A-Za-f]: a first byte below 0x80), continued over whole lines (`base64` wraps at 76
# columns); hex whose pairs are printable ASCII or a line end (`xxd -p`); `\\xHH` / `\\uHHHH` escapes;
# percent-encoding. Each is decoded and judged on what it decodes to.
_B64_CHAR = r"[A-Za-z0-9+/_\-]"
# a line end, and on the next line the number `cat -n` or fs_read puts before it (`     12\t`)
_LINE_ON = r"[ \t]*\r?\n(?:[ \t]*[0-9]{1,9}\t)?[ \t]*"
_NUMBERED = re.compile(r"(?m)^[ \t]*[0-9]{1,9}\t")
_WORD = r"[A-Za-z0-9_.:=/+\-]"
_B64_LINES = r"(?:" + _LINE_ON + _B64_CHAR + r"{4,}={0,2}[ \t]*$)"  # a whole line more (`base64 -w N`)
_B64_LAST = r"(?:" + _LINE_ON + _B64_CHAR + r"{4,}={0,2})?"  # and the start of one
_ENCODED = re2.compile((
    r"(?m)(?:[A-Za-f]" + _B64_CHAR + r"{3}){4,}" + _B64_CHAR + r"{0,3}={0,2}" + _B64_LINES + r"*" + _B64_LAST
    + r"|(?:[A-Za-f]" + _B64_CHAR + r"{3}){2,}" + _B64_CHAR + r"{0,3}" + _B64_LINES + r"+" + _B64_LAST
    + r"|(?:(?:[2-7][0-9A-Fa-f]|0[9ADad])(?:" + _LINE_ON + r")?){8,}"
    r"|(?:" + _WORD + r"*(?:\\x[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}))+" + _WORD + r"*"
    r"|[A-Za-z0-9._~+/=:\-]*%[0-9A-Fa-f]{2}(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9._~+/=:\-])*"
).encode())
_HEX_RUN = re.compile(r"[0-9A-Fa-f\s]+")
_ESC_CODE = re.compile(r"\\x([0-9A-Fa-f]{2})|\\u([0-9A-Fa-f]{4})")
TEXT_SHARE = 0.9  # a decoding is text when at least this share of its characters is printable


def char_offsets(text: str, data: bytes) -> Callable[[int], int]:
    """Byte offset in `data` (`text` as UTF-8) -> character offset in `text`, for offsets asked in order."""
    if text.isascii():
        return lambda i: i
    at = [0, 0]  # bytes, characters so far

    def chars(i: int) -> int:
        if i < at[0]:
            at[0] = at[1] = 0
        at[1] += len(data[at[0]:i].decode("utf-8", "surrogatepass"))
        at[0] = i
        return at[1]

    return chars


def split_token_lines(text: str, data: bytes) -> list[tuple[int, int]]:
    """The lines of `text` (start, end) where an escape sequence or an invisible character sits between two
    visible characters, where it could split a token. Colour around words (`\\x1b[32mPASSED\\x1b[0m ok`)
    splits none: those lines are not scanned again."""
    if text.isprintable():
        return []
    chars = char_offsets(text, data)
    lines: list[tuple[int, int]] = []
    for m in _SPLITS.finditer(data):
        at = chars(m.start())
        if lines and at < lines[-1][1]:
            continue
        end = text.find("\n", at)
        lines.append((text.rfind("\n", 0, at) + 1, len(text) if end < 0 else end))
    return lines


def without_escapes(text: str) -> tuple[str, list[tuple[int, int]]]:
    """`text` without escape sequences and invisible characters, and the spans of `text` it kept (in order)."""
    kept: list[tuple[int, int]] = []
    pos = 0
    for m in _ESCAPES.finditer(text):
        if m.start() > pos:
            kept.append((pos, m.start()))
        pos = m.end()
    if pos < len(text):
        kept.append((pos, len(text)))
    return "".join(text[a:b] for a, b in kept), kept


def clean_to_text(kept: list[tuple[int, int]]) -> Callable[[int, int], tuple[int, int]]:
    """For the spans `without_escapes` kept: a span of the clean text -> the span of the text it came from."""
    starts, at = [], 0
    for a, b in kept:
        starts.append(at)
        at += b - a

    def where(i: int) -> int:  # the text's index of the clean text's character i
        k = bisect.bisect_right(starts, i) - 1
        return kept[k][0] + i - starts[k]

    return lambda s, e: (where(s), where(e - 1) + 1)


_JSON_ESCAPE = re.compile(r'\\(?:u[0-9A-Fa-f]{4}|[nrtbf"\\/])')
_JSON_CHAR = {"n": "\n", "r": "\r", "t": "\t", "b": "\b", "f": "\f", '"': '"', "\\": "\\", "/": "/"}


# What only the JSON view shows: an escaped control or invisible character (`\\u001b`, `\\u200b`), or an
# encoded run that goes on over an escaped line end.
_JSON_HIDES = re2.compile(
    rb"\\u00[01][0-9A-Fa-f]|\\u00(?:9[Bb]|[Aa][Dd]|7[Ff])|\\u034[Ff]|\\u180[Ee]|\\u20(?:0[B-Fb-f]|2[A-Ea-e]|6[0-4])"
    rb"|\\u[Ff][Ee][Ff][Ff]|[A-Za-z0-9+/_\-]{8}(?:\\r)?\\n(?:[ \t]*[0-9]{1,9}\\t)?[A-Za-z0-9+/_\-]{4}")


def json_unescaped(text: str, data: bytes) -> tuple[str, Callable[[int, int], tuple[int, int]]] | None:
    """`text` (`data` as UTF-8) with its JSON string escapes read (`\\n` a line end, `\\u001b` an ESC), and a
    map from a span of that back to a span of `text`; None when no escape in it could hide a secret."""
    if "\\" not in text or _JSON_HIDES.search(data) is None:
        return None
    parts: list[str] = []
    segments: list[tuple[int, int, int]] = []  # (view start, text start, text end of an escape or -1)
    pos = at = 0
    for m in _JSON_ESCAPE.finditer(text):
        if m.start() > pos:
            segments.append((at, pos, -1))
            parts.append(text[pos:m.start()])
            at += m.start() - pos
        code = m.group(0)[1:]
        parts.append(chr(int(code[1:], 16)) if code[0] == "u" else _JSON_CHAR[code])
        segments.append((at, m.start(), m.end()))
        at += 1
        pos = m.end()
    segments.append((at, pos, -1))
    parts.append(text[pos:])
    starts = [v for v, _, _ in segments]

    def span(i: int) -> tuple[int, int]:  # where the view's character i came from
        v, t, end = segments[bisect.bisect_right(starts, i) - 1]
        return (t + i - v, t + i - v + 1) if end < 0 else (t, end)

    return "".join(parts), lambda a, b: (span(a)[0], span(b - 1)[1])


def encoded_runs(text: str, data: bytes) -> Iterator[tuple[int, int, list[str]]]:
    """(start, end, the texts it decodes to) for each encoded run of `text` whose decoding is text."""
    if len(data) < MIN_ENCODED:
        return
    chars = char_offsets(text, data)
    for m in _ENCODED.finditer(data):
        run = m.group(0).decode("ascii")
        if "\\x" in run or "\\u" in run:
            found = _escapes(run)
        elif "%" in run:
            found = _percent(run)
        else:
            found = _hex(run) + _base64(run)
        if found:
            yield chars(m.start()), chars(m.end()), found


def _hex(run: str) -> list[str]:
    run = _NUMBERED.sub("", run)
    if not _HEX_RUN.fullmatch(run):
        return []
    compact = "".join(run.split())
    try:
        return [t] if (t := as_text(bytes.fromhex(compact))) else []
    except ValueError:
        return []


def _base64(run: str) -> list[str]:
    lines = _NUMBERED.sub("", run).split()
    # padding ends an encoding (a word of the next line may follow it); a run that took in such a word
    # decodes without its last line
    tries = ["".join(lines).split("=", 1)[0]]
    if len(lines) > 1:
        tries.append("".join(lines[:-1]).split("=", 1)[0])
    for compact in tries:
        # the run may start inside a group of the encoding (the match is leftmost, not aligned): each offset
        found = [t for k in range(4) if (t := as_text(_b64(compact[k:])))]
        if found:
            return found[:1]
    return []


def decodes_whole(run: str) -> bool:
    """Whether the last line of `run` (several lines of base64) is the encoding's end, not a word after it,
    though it reads like one (a line of letters only happens in about one block in 200): the run decodes,
    every line of it, and what its last line adds is printable text."""
    lines = _NUMBERED.sub("", run).split()
    compact = "".join(lines)
    if len(lines) < 2 or "=" in compact.rstrip("="):  # padding ended the encoding before its last line
        return False
    head = len(compact) - len(lines[-1])
    for k in range(4):
        whole = _b64(compact[k:])
        try:
            text = whole.decode("utf-8")
        except UnicodeDecodeError:
            continue
        added = text[len(whole[:(head - k) * 3 // 4].decode("utf-8", "ignore")):]
        if added and is_text(text) and all(c.isprintable() or c in "\t\r\n" for c in added):
            return True
    return False


def _b64(compact: str) -> bytes:
    body = compact.rstrip("=")
    if len(body) < MIN_ENCODED or len(body) % 4 == 1:
        return b""
    body = body.replace("-", "+").replace("_", "/")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), validate=True)
    except (binascii.Error, ValueError):
        return b""


def _escapes(run: str) -> list[str]:
    if "\\x" not in run and "\\u" not in run:
        return []
    raw = _ESC_CODE.sub(lambda m: chr(int(m.group(1) or m.group(2), 16)), run)
    # `\xHH` escapes are bytes of UTF-8 (printf, echo -e); read them as such when they make UTF-8
    try:
        raw = raw.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        pass
    return [raw] if raw != run and is_text(raw) else []


def _percent(run: str) -> list[str]:
    if len(run) < MIN_ENCODED // 2:
        return []
    decoded = urllib.parse.unquote(run, errors="strict") if "%" in run else run
    return [decoded] if decoded != run and is_text(decoded) else []


def as_text(data: bytes) -> str:
    """`data` as text when it is UTF-8 and almost all printable, else ""."""
    if len(data) < MIN_ENCODED // 2:
        return ""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return ""
    return text if is_text(text) else ""


def is_text(text: str) -> bool:
    if text.isprintable():
        return True
    shown = sum(1 for c in text if c.isprintable() or c in "\t\r\n\x1b")
    return shown >= TEXT_SHARE * len(text)
