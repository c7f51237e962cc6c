"""The JSON-lines codec of the helper's wire protocol, with a small fallback for python3-minimal (no json)."""

import re


class Encoded(str):
    """JSON text already encoded (a search child's answer), sent on as it is instead of decoded and encoded again
    (the fallback parser costs ~20 us per path of a glob's answer): see `Conn.send_result`."""

    __slots__ = ()


try:
    import json as _json

    def dumps(obj):
        return _json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    loads = _json.loads
except ImportError:  # python3-minimal: a small JSON codec good enough for this protocol
    import ast as _ast

    _ESC = re.compile('[\\x00-\\x1f"\\\\\ud800-\udfff]')
    _ESC_MAP = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}

    def _esc(m):
        c = m.group()
        return _ESC_MAP.get(c) or f"\\u{ord(c):04x}"

    def _enc_str(s):
        # Fast path (base64, most text lines): nothing to escape; str methods here are C loops.
        if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
            return '"' + s + '"'
        # Slices bound the memory of re.sub's pieces when escapes are dense (e.g. a flood of NULs).
        return '"' + "".join(_ESC.sub(_esc, s[i : i + 65536]) for i in range(0, len(s), 65536)) + '"'

    def _enc(obj, out):
        if isinstance(obj, str):
            out.append(_enc_str(obj))
        elif obj is None:
            out.append("null")
        elif obj is True:
            out.append("true")
        elif obj is False:
            out.append("false")
        elif isinstance(obj, (int, float)):
            out.append(repr(obj))
        elif isinstance(obj, dict):
            out.append("{")
            first = True
            for k, v in obj.items():
                if not first:
                    out.append(",")
                first = False
                _enc(str(k), out)
                out.append(":")
                _enc(v, out)
            out.append("}")
        elif isinstance(obj, (list, tuple)):
            out.append("[")
            for i, v in enumerate(obj):
                if i:
                    out.append(",")
                _enc(v, out)
            out.append("]")
        else:
            raise TypeError(f"cannot encode {type(obj)!r}")

    def dumps(obj):
        out = []
        _enc(obj, out)
        return "".join(out)

    _TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|\btrue\b|\bfalse\b|\bnull\b')
    _WORDS = {"true": "True", "false": "False", "null": "None"}

    def loads(text):
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return _ast.literal_eval(_TOKENS.sub(lambda m: _WORDS.get(m.group(), m.group()), text))
