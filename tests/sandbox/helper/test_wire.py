"""The helper's wire codec: the python3-minimal fallback (no json module) speaks the same JSON."""

from __future__ import annotations

import builtins
import json
from importlib import resources
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from desktop_app.sandbox.helper import wire


def _load_without_json() -> dict[str, Any]:
    """The wire module as python3-minimal sees it: no json package."""
    source = resources.files("desktop_app.sandbox.helper").joinpath("wire.py").read_text(encoding="utf-8")
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "json":
            raise ImportError("No module named 'json'")
        return real_import(name, *args, **kwargs)

    ns: dict[str, Any] = {"__name__": "wire_minimal"}
    builtins.__import__ = fake_import
    try:
        exec(compile(source, "wire.py", "exec"), ns)
    finally:
        builtins.__import__ = real_import
    return ns


MINIMAL = _load_without_json()
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(), inner, max_size=5),
    max_leaves=20,
)


def test_the_fallback_codec_is_really_in_use() -> None:
    assert "_json" not in MINIMAL and MINIMAL["dumps"] is not wire.dumps


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_fallback_codec_speaks_json(value: Any) -> None:
    dumps, loads = MINIMAL["dumps"], MINIMAL["loads"]
    line = dumps(value)
    assert json.loads(line) == value  # what the app reads
    assert loads(json.dumps(value, ensure_ascii=False)) == value  # what the app sends
    assert loads(line.encode()) == value


# A name that is not UTF-8 comes as a lone surrogate (surrogateescape), which hypothesis's text never makes.
ODD_NAMES = [{"path": "a\udc80b.py", "line": 1, "text": 'q"uote\\ \n\t\x00 é \u2028'}]


@settings(max_examples=100, deadline=None)
@given(json_values)
@example(ODD_NAMES)
def test_a_search_childs_answer_is_passed_on_as_the_json_it_is(value: Any) -> None:
    """The helper hands a search child's answer on without decoding it: the desk reads the same answer as if
    it had been decoded and encoded again, with either codec in the child."""
    import io

    from desktop_app.sandbox.helper.search import _answer
    from desktop_app.sandbox.helper.server import Conn

    for dumps in (MINIMAL["dumps"], wire.dumps):
        line = (dumps({"ok": True, "result": value}) + "\n").encode("utf-8", "backslashreplace").rstrip(b"\n")
        passed = _answer("fs_glob", line)
        assert isinstance(passed, wire.Encoded)
        out = io.BytesIO()
        Conn(io.BytesIO(), out).send_result(7, passed)
        assert json.loads(out.getvalue()) == {"id": 7, "ok": True, "result": value}
        assert out.getvalue().endswith(b"}\n") and out.getvalue().count(b"\n") == 1


def test_a_search_childs_error_is_still_read() -> None:
    from desktop_app.sandbox.helper.errors import HelperError
    from desktop_app.sandbox.helper.search import _answer

    line = wire.dumps({"ok": False, "kind": "SandboxError", "message": "no such folder"}).encode()
    with pytest.raises(HelperError, match="no such folder"):
        _answer("fs_glob", line)


def test_a_childs_answer_that_carries_its_own_id_is_routed_by_the_helpers() -> None:
    """A child's result text is not parsed on its way: one that smuggles an "id" or "ok" key (a process in the
    container writing into the child's pipe) still reaches the request it answers, as a success."""
    import io

    from desktop_app.sandbox.helper.search import _answer
    from desktop_app.sandbox.helper.server import Conn

    for smuggled in (b'[],"id":99', b'[],"ok":false,"id":"x"', b'{"id":5}'):
        out = io.BytesIO()
        Conn(io.BytesIO(), out).send_result(7, _answer("fs_glob", b'{"ok":true,"result":' + smuggled + b"}"))
        msg = json.loads(out.getvalue())
        assert msg["id"] == 7 and msg["ok"] is True, smuggled
