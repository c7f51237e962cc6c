"""RFC 8785 (JSON Canonicalization Scheme) through the `rfc8785` package: the text new chain entries, their
`data`, and the signed messages are hashed or signed in (docs/audit-format.md), so that anyone can re-compute
them in any language."""

from __future__ import annotations

import json
import math
import re
from typing import Any

import rfc8785

from ._chain import canonical_json, json_default, one_shot

_INT_LIMIT = 2**53 - 1  # RFC 8785 numbers are IEEE doubles: a larger integer has no exact form
_ENCODER = one_shot(json.JSONEncoder(ensure_ascii=False, default=json_default))  # built once (see _chain.one_shot)
_LONG_DIGITS = re.compile(r"[0-9]{16}")


def jcs(value: Any) -> str:
    """`value` (JSON values only) in RFC 8785's canonical form. Its numbers are doubles: an integer past 2^53
    read back from JSON (RFC 8785 writes the double 1e16 as 10000000000000000) is that double again."""
    try:
        return rfc8785.dumps(value).decode("utf-8")
    except rfc8785.IntegerDomainError:
        return rfc8785.dumps(_doubles(value)).decode("utf-8")


def _doubles(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _doubles(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_doubles(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > _INT_LIMIT:
        return float(value)
    return value


def jcs_data(data: Any) -> str:
    """An entry's data as form 2 stores and hashes it: as JSON (values JSON has no type for become their
    text, as in form 1), then RFC 8785. What RFC 8785 cannot write is kept as text: an integer beyond 2^53, a
    NaN or an infinity becomes its string, a lone surrogate its escaped form."""
    if not data:
        return "{}" if isinstance(data, dict) else jcs(data)
    text = _ENCODER(data)
    try:
        # The common case at C speed: with no float, no integer of 16 digits or more and no character from
        # U+D800 up (surrogates; keys that UTF-16 would sort apart), Python's sorted JSON IS RFC 8785's text.
        text = canonical_json(_NO_FLOATS.decode(text))
        if (text.isascii() or max(text) < "\ud800") and not _LONG_DIGITS.search(text):
            return text
    except _HasFloat:
        pass
    value = json.loads(text)
    try:
        return jcs(value)
    except rfc8785.CanonicalizationError:
        return jcs(_representable(value))


class _HasFloat(Exception):
    pass


def _refuse(_: str) -> Any:
    raise _HasFloat


_NO_FLOATS = json.JSONDecoder(parse_float=_refuse, parse_constant=_refuse)  # built once, like the encoder


def _representable(value: Any) -> Any:
    if isinstance(value, dict):
        return {_representable(k): _representable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_representable(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and abs(value) > _INT_LIMIT:
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8") if _has_surrogate(value) else value
    return value


def _has_surrogate(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
