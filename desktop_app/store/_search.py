"""The audit store's free-text search language, parsed once for every database: an FTS5 MATCH on SQLite, a
tsquery on PostgreSQL, escaped LIKE patterns elsewhere. The index's text comes from the same tokenizer, so a
query finds the same records on each database."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from desktop_app.core import ToolCallRecord

# A word is a run of letters and digits (FTS5's unicode61 splits on the rest, underscore included).
_WORD = re.compile(r"[^\W_]+")
# PostgreSQL ignores a lexeme over 2047 bytes; cut words (4 bytes a character at most) to stay indexed.
WORD_MAX = 500
TS_CONFIG = "simple"  # no stemming and no stop words: words match as FTS5's unicode61 matches them
SEARCH_TEXT_MAX = 200_000


class _Marks(dict[int, int | None]):
    """str.translate's table that drops combining marks (category Mn) and keeps every other character: each
    character's category is looked up once, then the table answers in C. It keeps at most _MARKS_KEPT
    characters (a text of every code point cannot make it grow without end)."""

    def __missing__(self, code: int) -> int | None:
        kept = None if unicodedata.category(chr(code)) == "Mn" else code
        if len(self) < _MARKS_KEPT:
            self[code] = kept
        return kept


_MARKS_KEPT = 65_536
_DROP_MARKS = _Marks()


# An ASCII text's words: its letters and digits kept, every other byte a space (what _WORD finds there).
_ASCII_WORDS = bytes(c if chr(c).isascii() and chr(c).isalnum() else 0x20 for c in range(256))


def words(text: str) -> list[str]:
    """The words of `text` as the index sees them: lower case, diacritics removed (as FTS5's
    remove_diacritics 2), split on everything but letters and digits. Done on the event loop for each
    transition's record, so never a Python step per character: an ASCII text (no diacritics) is split by a
    byte table; any other goes through a translate table that drops combining marks, then the regex."""
    low = text.lower()
    if low.isascii():
        found = low.encode("ascii").translate(_ASCII_WORDS).decode("ascii").split()
    else:
        found = _WORD.findall(unicodedata.normalize("NFC", unicodedata.normalize("NFD", low).translate(_DROP_MARKS)))
    if max(map(len, found), default=0) > WORD_MAX:
        return [w[:WORD_MAX] for w in found]
    return found


def index_text(text: str) -> str:
    """What the full-text index stores for `text`: its words, one space apart. PostgreSQL's parser then
    sees only plain words (no paths, hosts or e-mail tokens of its own), as FTS5 does."""
    return " ".join(words(text))


@dataclass(frozen=True, slots=True)
class Phrase:
    """One whitespace-separated chunk of a query: its words in order; `prefix` when it ended in `*`."""

    words: tuple[str, ...]
    prefix: bool


def parse(text: str) -> list[Phrase]:
    """Free text as phrases, all required. Punctuation splits a chunk into a phrase (`src/main.py`); a
    trailing `*` makes its last word a prefix; FTS5 or tsquery operators are plain text."""
    out = []
    for chunk in text.split():
        found = words(chunk.rstrip("*"))
        if found:
            out.append(Phrase(tuple(found), chunk.endswith("*")))
    return out


def fts_match(text: str) -> str | None:
    """The FTS5 MATCH string: each phrase quoted (its words contain no quote), ANDed."""
    parts = ['"' + " ".join(p.words) + '"' + ("*" if p.prefix else "") for p in parse(text)]
    return " AND ".join(parts) if parts else None


def tsquery(text: str) -> str | None:
    """The same phrases for PostgreSQL's `to_tsquery`: words joined by `<->` (next to each other), the last
    one `:*` when a prefix, phrases joined by `&`."""
    parts = []
    for p in parse(text):
        lexemes = [f"'{w}'" for w in p.words]
        if p.prefix:
            lexemes[-1] += ":*"
        parts.append("(" + " <-> ".join(lexemes) + ")")
    return " & ".join(parts) if parts else None


def like_patterns(text: str) -> list[str]:
    """The same phrases as LIKE patterns over the index's text, for databases with neither: substrings,
    with `%`, `_` and the escape character escaped (to use with ESCAPE '!', the same on every database)."""
    out = []
    for p in parse(text):
        phrase = " ".join(p.words).replace("!", "!!").replace("%", "!%").replace("_", "!_")
        out.append(f"%{phrase}%")
    return out


def _strings(value: Any, out: list[str], skip_keys: frozenset[str] = frozenset()) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        if value.get("type") == "image":
            return  # base64 pixels are not words
        for k, v in value.items():
            if k not in skip_keys:
                _strings(v, out, skip_keys)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _strings(v, out, skip_keys)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(str(value))


def strings_of(value: Any) -> str:
    """The text of a JSON value's strings and numbers, a line each (what the index reads of an input)."""
    out: list[str] = []
    _strings(value, out)
    return "\n".join(out)


def search_text(record: ToolCallRecord) -> str:
    """What the full-text index sees for a record: its name, input (and the model's, when a person edited it),
    result words, error."""
    parts: list[str] = [record.name]
    _strings(record.input, parts)
    if (model_input := record.model_input) is not None:  # a person edited it: the model's version is found too
        _strings(model_input, parts)
    if record.result:
        _strings(record.result, parts)
    if record.error:
        parts.append(record.error)
    return index_text("\n".join(parts)[:SEARCH_TEXT_MAX])[:SEARCH_TEXT_MAX]
