"""What a chain entry says about the rows beside it: the sha256 of a tool_calls or messages row as stored,
and of its fields, in one `digests` text that the entry's hash covers and `verify` compares."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from ._chain import RECORD_FIELDS, json_default, one_shot

# RECORD_FIELDS (in _chain.py, which verify's workers run on their own) are a record's columns that its row
# digest covers, in order. FLOAT columns are compared as floats and BOOLEAN ones as ints, the types SQLite
# hands back.
_FLOATS = frozenset({"started_at", "completed_at", "duration_ms", "created_at", "updated_at"})
_INTS = frozenset({"batch_index", "is_error", "read_only"})
# The fields a record's digests name one by one, so verify can say which was edited.
RECORD_NAMED = ("input", "result", "approval", "provenance")
MESSAGE_FIELDS = ("session_id", "role", "content", "created_at")
MESSAGE_NAMED = ("content",)
# Inputs longer than this (as JSON text) are stored once in `blobs`, under their sha256.
BLOB_MIN = 16 * 1024


# A JSON column's text as stored, and so as its digest covers it (built once: see one_shot).
to_json = one_shot(json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=json_default))


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def field_digest(value: Any) -> str:
    """A stored value's digest: the sha256 of its text (JSON columns are text), else of its repr."""
    return sha(value) if isinstance(value, str) else sha(repr(value))


def row_digest(values: tuple[Any, ...]) -> str:
    """The sha256 of a row's values (as SQLite returns them): repr of a tuple is unambiguous and done in C."""
    return sha(repr(values))


# (place in RECORD_FIELDS, type) of the columns that are not stored as given.
_CASTS = tuple((i, float if f in _FLOATS else int) for i, f in enumerate(RECORD_FIELDS) if f in _FLOATS | _INTS)


def record_values(params: dict[str, Any]) -> tuple[Any, ...]:
    """A tool_calls row's parameters (JSON columns already text) as the tuple verify will read back."""
    values = [params.get(f) for f in RECORD_FIELDS]
    for i, cast in _CASTS:
        if values[i] is not None:
            values[i] = cast(values[i])
    return tuple(values)


def message_values(params: dict[str, Any]) -> tuple[Any, ...]:
    return (params["session_id"], params["role"], params["content"], float(params["created_at"]))


def pack(row: str, named: dict[str, str]) -> str:
    """`row:<hex> name:<hex> ...`: the row digest first, at a fixed place, so verify slices it out."""
    return " ".join([f"row:{row}", *(f"{k}:{v}" for k, v in named.items())])


def row_of(digests: str) -> str:
    return digests[4:68]


def unpack(digests: str) -> dict[str, str]:
    return dict(part.split(":", 1) for part in digests.split())


def record_digests(params: dict[str, Any], input_digest: str) -> str:
    named = {"input": input_digest, **{f: field_digest(params.get(f)) for f in RECORD_NAMED[1:]}}
    return pack(row_digest(record_values(params)), named)


def message_digests(params: dict[str, Any]) -> str:
    return pack(row_digest(message_values(params)), {"content": field_digest(params["content"])})
