"""Secret redaction: the one pattern set (RE2, linear time) and a streaming redactor whose bounded
carry-over catches a secret split across chunks. Everything the desk stores or publishes passes here.

Why not `detect-secrets`: it scans line by line with Python `re` (backtracking) and entropy plugins, reports
findings by line rather than spans to replace, cannot carry a secret across chunks, and costs milliseconds
per kilobyte where one RE2 pass over the union of the patterns below costs microseconds.
"""

from __future__ import annotations

import codecs
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import re2

from ._redaction_views import (
    MIN_ENCODED,
    clean_to_text,
    decodes_whole,
    encoded_runs,
    json_unescaped,
    split_token_lines,
    without_escapes,
)

REDACTED = "[REDACTED]"
_R = REDACTED

# -- the pattern set -------------------------------------------------------------------------------
# A PEM private key (also PGP, and JSON-escaped with `\n`): the body may hold only what a key's lines
# hold, so the block cannot swallow a command around it.
_PEM_BODY = r"[A-Za-z0-9+/=:,.\s\\-]"
_PEM_BEGIN = r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM_END = r"-----END[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
_PEM = f"{_PEM_BEGIN}{_PEM_BODY}*?{_PEM_END}"

# Tokens whose shape alone says what they are.
_TOKENS = [
    r"\bsk-ant-[A-Za-z0-9_\-]{16,}",  # Anthropic
    r"\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_\-]{20,}",  # OpenAI, project and service keys
    r"\bsk-[A-Za-z0-9]{20,}",  # OpenAI, legacy
    r"\bgh[pousr]_[A-Za-z0-9]{30,}",  # GitHub
    r"\bgithub_pat_[A-Za-z0-9_]{40,}",
    r"\bglpat-[A-Za-z0-9_\-]{20,}",  # GitLab
    r"\bxox[abprse]-[A-Za-z0-9\-]{10,}",  # Slack tokens
    r"\bhooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/\-]+",  # Slack webhooks
    r"\bAIza[0-9A-Za-z_\-]{35}",  # Google API keys
    r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",  # JWT
    r"\bnpm_[A-Za-z0-9]{36}\b",  # npm
    r"\bpypi-AgE[A-Za-z0-9_\-]{40,}",  # PyPI
    r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{20,}",  # Stripe
    r"\bhf_[A-Za-z0-9]{30,}",  # Hugging Face
]
# An AWS access key id, and the secret key that follows it (a credentials CSV, `aws configure list`).
_AWS_ID = r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b(?:[\s,;:|=\"']{1,8}[A-Za-z0-9/+]{40}(?:[^A-Za-z0-9/+=]|$))?"
# A bare 40-character AWS secret on a line that says aws or secret, before or after it.
_B64_40 = r"[A-Za-z0-9/+]{40}"
_AWS_AFTER = r"(?i)((?:aws|secret)[^\n]{0,100}?(?:^|[^A-Za-z0-9/+=]))(" + _B64_40 + r")((?:[^A-Za-z0-9/+=]|$))"
_AWS_BEFORE = r"(?i)((?:^|[^A-Za-z0-9/+=]))(" + _B64_40 + r")([^A-Za-z0-9/+=][^\n]{0,100}?(?:aws|secret))"
_AUTH = (r"(?i)(\b(?:authorization|proxy-authorization)[\"']?\s*[:=]\s*[\"']?(?:basic|bearer|token|digest)?\s*)"
         r"([^\s\"'\\]{6,})")
_BEARER = r"(?i)(\bbearer\s+)([A-Za-z0-9._\-~+/]{16,}=*)"
_URL_CREDS = r"(\b[a-zA-Z][a-zA-Z0-9+.\-]{1,20}://[^\s:/@\"'<>]+:)([^\s@/\"'<>]+)(@)"
_CLI_USER = r"((?:^|\s)(?:-u|--user)(?:\s+|=)[^\s:'\"]+:)([^\s'\"]+)"  # curl -u user:pass
_CLI_FLAG = r"((?:^|\s)--(?:password|passwd|token|api-key|secret)(?:\s+|=))([^\s'\"-][^\s'\"]*)"
# `NAME=value`, `export NAME=value`, `name: value`, `"name": "value"`, `name = 'value'` where the name ends
# in a secret's word; the value is judged in `_assignment` (references, types and booleans are kept).
_NAME = r"[A-Za-z0-9_.\-]*(?:pass(?:word|wd|phrase)?|pwd|secret|token|key|credentials?)"
_VALUE = (r"\"(?:[^\"\\\n]|\\.)*\"|'[^'\n]*'|\\\"(?:[^\"\\\n]|\\[^\"\n])*\\\""
          r"|(?:[^\s'\"`,;&|<>(){}\[\]\\$]|\$\$|\$[^\s'\"`,;&|<>(){}\[\]\\$])+")
_ASSIGN = r"(?i)(\\?[\"']?)(" + _NAME + r")(\\?[\"']?\s*[=:]\s*)(" + _VALUE + r")([(\[]?)"

_KEY_WORDS = ("apikey", "accesskey", "secretkey", "privatekey", "masterkey", "signingkey", "encryptionkey",
              "authkey", "clientkey", "licensekey", "accountkey", "sessionkey")
_NOT_SECRET_NAMES = frozenset({
    "primary_key", "foreign_key", "sort_key", "partition_key", "cache_key", "unique_key", "lookup_key",
    "hash_key", "range_key", "row_key", "public_key", "publickey", "pub_key", "key", "hotkey", "monkey",
    "keys", "key_id",
})
_NOT_SECRET_VALUES = frozenset({
    "", "true", "false", "yes", "no", "on", "off", "null", "none", "nil", "undefined", "str", "string",
    "bytes", "int", "bool", "any", "optional", "secretstr", "required", "redacted", REDACTED.lower(),
})
_IDENT_PATH = re2.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_REFERENCE = re2.compile(r"^\$\{?[A-Za-z_][A-Za-z0-9_]*\}?$|\$\(|`|\$\{\{|\{\{")


def _no_surrogates(text: str) -> str:
    """`text` with each lone surrogate as `?` (same length), for the str API of RE2, which refuses them."""
    return text if text.isascii() else text.encode("utf-8", "replace").decode("utf-8")


def secret_name(name: str) -> bool:
    """Whether a variable or key called `name` holds a secret: it ends in the secret's word (`DB_PASS`,
    `client_secret`, `GITHUB_TOKEN`, `aws_secret_access_key`, `apiKey`), not `PWD`, `OLDPWD`,
    `PASSWORD_MIN_LENGTH`, `max_tokens` or `primary_key`."""
    low = name.lower().lstrip("-").rsplit(".", 1)[-1]
    if low in _NOT_SECRET_NAMES:
        return False
    if low.endswith(("password", "passwd", "passphrase", "secret", "token", "credential", "credentials")):
        return True
    for word in ("pass", "pwd", "key"):
        if low.endswith(word):
            stem = low[: -len(word)]
            return (stem == "" and word == "pass") or stem.endswith(("_", "-", ".")) or low.endswith(_KEY_WORDS)
    return False


def _assignment(m: Any) -> str:
    """`m` is a `name <sep> value` match: the value goes when the name is a secret's and the value is a
    literal, not a reference (`$DB_PASS`, `self.password`, `os.getenv(...)`), a type or a boolean."""
    whole = m.group(0)
    name, value, call = m.group(2), m.group(4), m.group(5)
    if not secret_name(name):
        return whole
    quote = value[:2] if value.startswith('\\"') else value[:1] if value[:1] in "\"'" else ""
    inner = value[len(quote): len(value) - len(quote)] if quote else value
    probe = _no_surrogates(inner)
    if inner.strip().lower() in _NOT_SECRET_VALUES or _REFERENCE.search(probe):
        return whole
    if not quote and _IDENT_PATH.match(probe) and (call or secret_name(inner)):
        return whole  # code: a call, an index, or another variable of the same kind
    return f"{m.group(1)}{name}{m.group(3)}{quote}{_R}{quote}{call}"


def _aws_secret(m: Any) -> str:
    """A 40-character run near `aws`/`secret` is a secret when it mixes cases (a git SHA is hex)."""
    key = m.group(2)
    if not (any(c.isupper() for c in key) and any(c.islower() for c in key)):
        return m.group(0)
    return f"{m.group(1)}{_R}{m.group(3)}"


Repl = str | Callable[[Any], str]
PATTERNS: list[tuple[str, Repl]] = [
    (_PEM, _R),
    *[(p, _R) for p in _TOKENS],
    (_AWS_ID, _R),
    (_AWS_AFTER, _aws_secret),
    (_AWS_BEFORE, _aws_secret),
    (_AUTH, r"\1" + _R),
    (_BEARER, r"\1" + _R),
    (_URL_CREDS, r"\1" + _R + r"\3"),
    (_CLI_USER, r"\1" + _R),
    (_CLI_FLAG, r"\1" + _R),
    (_ASSIGN, _assignment),
]
"""Every pattern, in the order it is applied, with what replaces a match."""


def _scoped(pattern: str) -> str:
    """A pattern whose leading inline flags, e.g. `(?i)`, apply only to itself inside an alternation."""
    if pattern.startswith("(?") and pattern[2:3].isalpha() and ")" in pattern:
        flags, _, rest = pattern[2:].partition(")")
        return f"(?{flags}:{rest})"
    return f"(?:{pattern})"


_PIECE = 1 << 20  # a large text is encoded and decoded in pieces: each call holds the GIL (~1 ms per MB)


def _utf8(text: str) -> bytes:
    """`text` as RE2 reads it. A lone surrogate (a file name's undecodable byte, a JSON `\\ud800`) passes
    as its own bytes: the str API raised UnicodeEncodeError on it, and a crash is no redaction."""
    if len(text) <= _PIECE:
        return text.encode("utf-8", "surrogatepass")
    return b"".join(text[i:i + _PIECE].encode("utf-8", "surrogatepass") for i in range(0, len(text), _PIECE))


def _text(data: bytes) -> str:
    if len(data) <= _PIECE:
        return data.decode("utf-8", "surrogatepass")
    decoder = codecs.getincrementaldecoder("utf-8")("surrogatepass")  # a piece may end inside a character
    view = memoryview(data)
    parts = [decoder.decode(view[i:i + _PIECE]) for i in range(0, len(data), _PIECE)]
    return "".join([*parts, decoder.decode(b"", final=True)])


class _AsText:
    """A match on UTF-8 bytes, seen by a replacement function as a match on text."""

    __slots__ = ("_m",)

    def __init__(self, m: Any) -> None:
        self._m = m

    def group(self, i: int = 0) -> str | None:
        g = self._m.group(i)
        return None if g is None else _text(g)


def _on_bytes(repl: Repl) -> Any:
    if isinstance(repl, str):
        return repl.encode()
    return lambda m: _utf8(repl(_AsText(m)))


# The patterns run on UTF-8 bytes, where RE2 matches them anyway (the str API encodes, then converts
# every offset back to characters: a scan from the start of a 20 MB text, holding the GIL).
_COMPILED = [(re2.compile(p.encode()), _on_bytes(r)) for p, r in PATTERNS]
# Most text holds no secret: one RE2 pass over the union says so, instead of one search per pattern.
_ANY_SECRET = re2.compile("|".join(_scoped(p) for p, _ in PATTERNS))
_ANY_SECRET_B = re2.compile(_ANY_SECRET.pattern.encode())
# And before it, cheaper still (a search costs microseconds even on a short string): every pattern needs
# one of these, in lower case. `test_every_pattern_needs_a_trigger` keeps the list honest.
TRIGGERS = (
    "-----begin", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox",
    "hooks.slack.com", "aiza", "eyj", "npm_", "pypi-", "k_live_", "k_test_", "hf_", "akia", "asia", "aws",
    "secret", "authorization", "bearer", "://", "-u", "pass", "pwd", "token", "key", "credential",
)


_CACHED_CHARS, _CACHE_SIZE = 48, 4096
INLINE_REDACT_CHARS = 16_384  # a value with more text than this is redacted on a worker thread, and once
MEMO_VALUES = 8  # large values whose redaction is remembered, by identity
MEMO_CHARS = 128 * 1024 * 1024  # and at most this much text pinned by them (the newest always stays)
DECODE_DEPTH = 2  # a decoded text is decoded again once: base64 of hex, base64 of base64
_SHORT = 256  # below this, Python's substring checks beat RE2's fixed cost per search (~4 us)
_TRIGGER_RE = re2.compile(("(?i)" + "|".join(re2.escape(t) for t in TRIGGERS)).encode())


def may_hold_secret(text: str) -> bool:
    """False when no pattern can match `text`: none of the TRIGGERS is in it."""
    if len(text) >= _SHORT:
        return _TRIGGER_RE.search(_utf8(text)) is not None
    low = text.lower()
    for t in TRIGGERS:
        if t in low:
            return True
    return False


class _LargeMemo:
    """The redaction of the last few large strings, keyed by the string object itself (not its text: a
    lookup costs nothing, where hashing 50 MB does not). A call's input is redacted once, off the loop,
    and the record, the stored message and each event payload find it here. The redacted text maps to
    itself too, since redaction is idempotent: a payload that carries it is not scanned again. An entry
    holds its strings, so an id is never reused while it is here."""

    def __init__(self, values: int = MEMO_VALUES, chars: int = MEMO_CHARS) -> None:
        self.values, self.chars = values, chars
        self._groups: OrderedDict[int, tuple[str, str]] = OrderedDict()  # id(raw) -> (raw, redacted)
        self._by_id: dict[int, tuple[str, str]] = {}  # id(raw) and id(redacted) -> (that string, redacted)
        self._size = 0
        self._lock = threading.Lock()

    def get(self, text: str) -> str | None:
        with self._lock:
            hit = self._by_id.get(id(text))
        return hit[1] if hit is not None and hit[0] is text else None

    def put(self, text: str, redacted: str) -> None:
        with self._lock:
            if id(text) in self._by_id:
                return
            self._groups[id(text)] = (text, redacted)
            self._by_id[id(text)] = (text, redacted)
            self._by_id.setdefault(id(redacted), (redacted, redacted))
            self._size += len(text) + (len(redacted) if redacted is not text else 0)
            while len(self._groups) > 1 and (len(self._groups) > self.values or self._size > self.chars):
                self._evict()

    def _evict(self) -> None:
        _, (raw, red) = self._groups.popitem(last=False)
        self._size -= len(raw) + (len(red) if red is not raw else 0)
        for s in (raw, red):
            hit = self._by_id.get(id(s))
            if hit is not None and hit[0] is s and not self._still_used(s):
                del self._by_id[id(s)]

    def _still_used(self, s: str) -> bool:
        """Whether a newer group still holds `s` (its redaction, reused as another group's input)."""
        return any(s is raw or s is red for raw, red in self._groups.values())


class Redactor:
    """Replaces secrets in text with `[REDACTED]`: the configured literals (the API key, exactly) and the
    patterns above. Thread-safe; `redact_value` walks dicts and lists. A string of more than
    INLINE_REDACT_CHARS is redacted once: the same object again, or its redaction, comes from a memo."""

    def __init__(self, literals: list[str] | tuple[str, ...] = ()) -> None:
        self.literals = tuple(sorted({s for s in literals if s and len(s) >= 8}, key=len, reverse=True))
        # Short strings known to hold no secret (field names, states, ids repeat in every event).
        self._clean: set[str] = set()
        self._large = _LargeMemo()

    def with_literals(self, literals: list[str]) -> Redactor:
        return Redactor([*self.literals, *literals])

    def redact(self, text: str) -> str:
        if len(text) > INLINE_REDACT_CHARS:
            known = self._large.get(text)
            if known is None:
                known = self._redact(text)
                self._large.put(text, known)
            return known
        return self._redact(text)

    def redacted_already(self, text: str) -> bool:
        """Whether `redact(text)` costs nothing now: a short text, or a large one seen before."""
        return len(text) <= INLINE_REDACT_CHARS or self._large.get(text) is not None

    def _redact(self, text: str) -> str:
        return self._redact_at(text, 0)

    def _redact_at(self, text: str, depth: int) -> str:
        """`text` redacted; `depth`: how many decodings deep it is (a decoded run is scanned as a text)."""
        if text in self._clean:
            return text
        # escapes that split a token go before the patterns look (they would take only the half before
        # it), encoded runs after (what is plain is redacted where it stands)
        deeper = depth < DECODE_DEPTH
        found = _applied(text, self._unsplit(text, depth) + self._in_json(text, depth, self._unsplit)) \
            if deeper else text
        found = self._patterns(found)
        if deeper and len(found) >= MIN_ENCODED:
            found = _applied(found, self._decoded(found, depth) + self._in_json(found, depth, self._decoded))
        if found is text and len(text) <= _CACHED_CHARS:
            if len(self._clean) >= _CACHE_SIZE:
                self._clean.clear()
            self._clean.add(text)
        return found

    def _patterns(self, text: str) -> str:
        """`text` with the literals and what the patterns match replaced (the same object when none)."""
        for lit in self.literals:
            if lit in text:
                text = text.replace(lit, _R)
        data = _utf8(text) if len(text) >= 6 and (len(text) >= _SHORT or may_hold_secret(text)) else b""
        if not data or (len(text) >= _SHORT and not _TRIGGER_RE.search(data)) or not _ANY_SECRET_B.search(data):
            return text
        for pat, repl in _COMPILED:
            if pat.search(data):  # a search costs less than a sub that finds nothing
                data = pat.sub(repl, data)
        return _text(data)

    def _unsplit(self, text: str, depth: int) -> list[Span]:
        """Each secret that escape sequences or invisible characters split, with its redaction (the escapes
        inside it go too); only the lines where one sits between two visible characters are looked at."""
        if text.isprintable():
            return []
        out: list[Span] = []
        for start, end in split_token_lines(text, _utf8(text)):
            clean, kept = without_escapes(text[start:end])
            if self._patterns(clean) is clean:
                continue
            to_line = clean_to_text(kept)
            for s, e in _merged(self.spans(clean)):
                shown = clean[s:e]
                red = self._redact_at(shown, depth + 1)
                if red != shown:
                    a, b = to_line(s, e)
                    out.append((start + a, start + b, red))
        return out

    def _decoded(self, text: str, depth: int) -> list[Span]:
        """Each encoded run (base64, hex, escapes, percent) whose decoding holds a secret."""
        if len(text) < MIN_ENCODED:
            return []
        return [(*self._narrowed(text, a, b, depth), _R) for a, b, decoded in encoded_runs(text, _utf8(text))
                if any(self._redact_at(d, depth + 1) != d for d in decoded)]

    def _narrowed(self, text: str, a: int, b: int, depth: int) -> tuple[int, int]:
        """A run over several lines may have taken in the first word of a line of prose after it (`after it`):
        without that word, when the rest still decodes to the secret. Anything else stays in: a whole last
        line (`base64` ends its output with a newline), one that a quote or a digit ends."""
        last = text.rfind("\n", a, b)
        if last < 0 or b >= len(text) or text[b] not in " \t" or not text[last + 1:b].split("\t")[-1].strip().isalpha():
            return a, b
        if decodes_whole(text[a:b]):  # the last line is the encoding's end, not a word after it
            return a, b
        head = text[a:last].rstrip()
        if any(self._redact_at(d, depth + 1) != d for _, _, decoded in encoded_runs(head, _utf8(head))
               for d in decoded):
            return a, a + len(head)
        return a, b

    def _in_json(self, text: str, depth: int, find: Callable[[str, int], list[Span]]) -> list[Span]:
        """What `find` (`_unsplit` or `_decoded`) finds in the JSON strings of `text` (a tool's input streams as
        JSON: a line end is `\\n` there, an escape `\\u001b`), as spans of `text`, redacted whole."""
        view = json_unescaped(text, _utf8(text))
        if view is None:
            return []
        plain, to_text = view
        return [(*to_text(a, b), _R) for a, b, _ in find(plain, depth)]

    def redact_value(self, value: Any) -> Any:
        """`value` with every string in it redacted (dict keys too); the same object when nothing changed."""
        if isinstance(value, str):
            return self.redact(value)
        if isinstance(value, dict):
            # Field names, states and ids repeat in every event: a set lookup, not three calls, for the
            # strings known clean (what redact() would answer for them: the same object).
            clean, changed, items = self._clean, False, []
            for k, v in value.items():
                nk = k if k in clean or not isinstance(k, str) else self.redact(k)
                if type(v) is str:
                    nv = v if v in clean else self.redact(v)
                else:
                    nv = self.redact_value(v) if isinstance(v, str | dict | list | tuple) else v
                changed = changed or nk is not k or nv is not v
                items.append((nk, nv))
            return dict(items) if changed else value
        if isinstance(value, list | tuple):
            new = [self.redact_value(v) for v in value]
            return type(value)(new) if any(a is not b for a, b in zip(new, value, strict=True)) else value
        return value

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where the secrets in `text` are (before redaction), at least roughly: the union's matches and
        the literals. A streaming redactor never cuts inside one."""
        try:
            found = [(m.start(), m.end()) for m in _ANY_SECRET.finditer(text)]
        except UnicodeEncodeError:  # a lone surrogate: U+FFFD in its place keeps every offset
            found = [(m.start(), m.end()) for m in _ANY_SECRET.finditer(_no_surrogates(text))]
        for lit in self.literals:
            i = text.find(lit)
            while i >= 0:
                found.append((i, i + len(lit)))
                i = text.find(lit, i + 1)
        return found


Span = tuple[int, int, str]  # start, end, what replaces it


def _applied(text: str, spans: list[Span]) -> str:
    """`text` with each span replaced (overlapping spans as one, redacted whole); the same object when none."""
    if not spans:
        return text
    merged: list[Span] = []
    for s, e, r in sorted(spans):
        if merged and s < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]), _R)
        else:
            merged.append((s, e, r))
    for s, e, r in reversed(merged):
        text = text[:s] + r + text[e:]
    return text


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Overlapping spans as one, in order."""
    out: list[tuple[int, int]] = []
    for s, e in sorted(spans):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(e, out[-1][1]))
        else:
            out.append((s, e))
    return out


DEFAULT_REDACTOR = Redactor()


# -- streaming -------------------------------------------------------------------------------------
_BEGIN_RE = re2.compile(_PEM_BEGIN)
_END_RE = re2.compile(_PEM_END)
_PEM_LINE = re2.compile(f"^{_PEM_BODY}*$")
_SEPARATORS = frozenset(" \t\"',;<>()[]{}|&")
# The end of emitted text that announces a secret still to come: it moves back into the carry.
_PENDING_KEY = re2.compile(
    r"(?i)(?:" + _NAME + r"\\?[\"']?\s*[=:]\s*\\?[\"']?|bearer\s+|basic\s+|authorization[\"']?\s*[:=]\s*[\"']?"
    r"|(?:-u|--user|--password|--token)\s+|\b(?:aws|secret)[^\n]{0,100})$"
)
_ENCODED_LINE = re2.compile(r"^[A-Za-z0-9+/_\-]{8,}={0,2}$")
_ENCODED_END = re2.compile(r"[A-Za-z0-9+/_\-]{8,}={0,2}$")
_ENCODED_START = re2.compile(r"^[A-Za-z0-9+/_\-]{8,}")


def _encoded(m: Any) -> bool:
    """Whether a run looks encoded, not a word: a digit, `+` or `/`, or a capital after its first character.
    A line that ends in a word ("Compiling", "packages") streams at once; one that may start a block waits."""
    if m is None:
        return False
    run = m.group(0)
    return any(c.isdigit() or c in "+/" for c in run) or any(c.isupper() for c in run[1:])
LINE_HOLD = 16_384  # a partial line longer than this is emitted in part
TAIL_HOLD = 2_048  # what stays behind of such a line
_END_KEEP = 64  # of a PEM body being skipped, what is kept to find an END marker split across chunks


class StreamRedactor:
    """Redacts a stream chunk by chunk. Whole lines are emitted redacted; a partial line waits in a
    carry-over until its newline (or `\\r`), until it passes LINE_HOLD characters (then all but its
    last TAIL_HOLD go, never cutting inside a secret or after a `password=`), or until `flush()`. A PEM
    private key whose BEGIN line has arrived is dropped line by line until its END line."""

    def __init__(self, redactor: Redactor = DEFAULT_REDACTOR, *, line_hold: int = LINE_HOLD,
                 tail_hold: int = TAIL_HOLD) -> None:
        self.redactor = redactor
        self.line_hold = line_hold
        self.tail_hold = min(tail_hold, line_hold)
        self._carry = ""
        self._in_pem = False

    @property
    def pending(self) -> int:
        """Characters held back now."""
        return len(self._carry)

    def feed(self, chunk: str) -> str:
        self._carry += chunk
        return self._drain(final=False)

    def flush(self) -> str:
        """The rest, redacted: the stream has ended."""
        return self._drain(final=True)

    def _drain(self, *, final: bool) -> str:
        buf, self._carry = self._carry, ""
        out: list[str] = []
        while buf:
            if self._in_pem:
                buf = self._skip_pem(buf, final)
                continue
            cut = self._cut(buf, final)
            head, rest = buf[:cut], buf[cut:]
            begin = _open_pem(head)
            if begin < 0:
                out.append(self.redactor.redact(head))
                self._carry = rest
                break
            out.append(self.redactor.redact(head[:begin]) + _R)
            self._in_pem = True
            m = _BEGIN_RE.search(head, begin)
            buf = head[m.end() if m else begin:] + rest
        return "".join(out)

    def _skip_pem(self, buf: str, final: bool) -> str:
        """Drop the body of a key being skipped; what follows its END line (or a line no key holds)."""
        pos = 0
        while pos < len(buf):
            nl = buf.find("\n", pos)
            line_end = len(buf) if nl < 0 else nl + 1
            line = buf[pos:line_end]
            end = _END_RE.search(line)
            if end is not None:
                self._in_pem = False
                return buf[pos + end.end():]
            if not _PEM_LINE.match(line.rstrip("\r\n")):
                self._in_pem = False
                return buf[pos:]
            if nl < 0 and not final:  # a partial line: wait for the rest, within bounds
                self._carry = line if len(line) <= self.line_hold else line[-_END_KEEP:]
                return ""
            pos = line_end
        if final:
            self._in_pem = False
        return ""

    def _encoded_tail(self, buf: str, start: int) -> int:
        """Where the block of encoded-looking lines (base64, hex) that ends `buf[:start]` begins: it waits, so
        a secret encoded across lines (`base64` wraps at 76 columns) is decoded whole; at most LINE_HOLD."""
        cut = start
        while cut > 0:
            prev = max(buf.rfind("\n", 0, cut - 1), buf.rfind("\r", 0, cut - 1)) + 1
            if start - prev > self.line_hold:
                break
            line = buf[prev:cut - 1]
            if not _encoded(_ENCODED_LINE.match(line)):
                # a block may begin at the end of a line of prose ("the key: c2stYW50…"), or end at the start
                # of one: that line waits too, and one that starts so may go on a block above it
                ends, starts = _encoded(_ENCODED_END.search(line)), _encoded(_ENCODED_START.match(line))
                if not starts:
                    return prev if ends else cut
            cut = prev
        return cut

    def _cut(self, buf: str, final: bool) -> int:
        """How much of `buf` may go now: its complete lines, or part of an overlong line."""
        if final:
            return len(buf)
        start = max(buf.rfind("\n"), buf.rfind("\r")) + 1
        if len(buf) - start <= self.line_hold:
            return self._encoded_tail(buf, start)
        cut = len(buf) - self.tail_hold
        for s, e in self.redactor.spans(buf[start:]):
            if start + s < cut < start + e:
                cut = start + s
        back = cut
        while back > start and buf[back - 1] not in _SEPARATORS:
            back -= 1
        cut = back if back > start else cut
        pending = _PENDING_KEY.search(buf[max(start, cut - 256):cut])
        if pending is not None:
            cut = max(start, cut - 256) + pending.start()
        return cut if cut > start else min(len(buf) - self.tail_hold, start + self.line_hold)


def _open_pem(text: str) -> int:
    """Where the last PEM BEGIN line of `text` that no END line follows starts, or -1."""
    last = -1
    for m in _BEGIN_RE.finditer(text):
        last = m.start()
    if last < 0 or _END_RE.search(text, last):
        return -1
    return last


def holds_redaction(value: Any) -> bool:
    """Whether `value` (a stored input) had a secret redacted out of it."""
    if isinstance(value, str):
        return REDACTED in value
    if isinstance(value, dict):
        return any(holds_redaction(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(holds_redaction(v) for v in value)
    return False
