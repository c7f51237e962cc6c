"""The in-container helper as a program: its python3-minimal JSON codec, and its wire protocol over
stdin/stdout when run exactly as the container runs it (`python3 -I -S -c SOURCE ROOT`)."""

from __future__ import annotations

import builtins
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from desktop_app.sandbox import _agent
from desktop_app.sandbox._docker import HELPER_SOURCE as SOURCE


def _load_without_json() -> dict[str, Any]:
    """The helper module as python3-minimal sees it: no json package."""
    real_import = builtins.__import__

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "json":
            raise ImportError("No module named 'json'")
        return real_import(name, *args, **kwargs)

    ns: dict[str, Any] = {"__name__": "agent_minimal"}
    builtins.__import__ = fake_import
    try:
        exec(compile(SOURCE, "_agent.py", "exec"), ns)
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
    assert "_json" not in MINIMAL and MINIMAL["dumps"] is not _agent.dumps


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_fallback_codec_speaks_json(value: Any) -> None:
    dumps, loads = MINIMAL["dumps"], MINIMAL["loads"]
    wire = dumps(value)
    assert json.loads(wire) == value  # what the app reads
    assert loads(json.dumps(value, ensure_ascii=False)) == value  # what the app sends
    assert loads(wire.encode()) == value


def test_helper_over_pipes(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("hello\n")
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", "-c", SOURCE, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin and proc.stdout
    hello = json.loads(proc.stdout.readline())
    assert hello["ev"] == "hello" and hello["version"] == _agent.PROTOCOL_VERSION
    requests = [
        {"id": 1, "op": "read_text", "args": {"path": "a.txt"}},
        {"id": 2, "op": "read_text", "args": {"path": "../etc/passwd"}},
        {"id": 3, "op": "exec", "args": {"command": "echo hi", "stream": True}},
    ]
    for r in requests:
        proc.stdin.write(json.dumps(r) + "\n")
    proc.stdin.flush()
    got: dict[int, list[dict]] = {}
    while len([m for ms in got.values() for m in ms if "ok" in m]) < 3:
        msg = json.loads(proc.stdout.readline())
        got.setdefault(msg["id"], []).append(msg)
    proc.stdin.close()
    assert proc.wait(5) == 0
    assert got[1][-1] == {"id": 1, "ok": True, "result": "hello\n"}
    assert got[2][-1]["error"]["kind"] == "PathOutsideWorkspace"
    assert {"id": 3, "ev": "output", "stream": "stdout", "data": "hi\n"} in got[3]
    assert got[3][-1]["result"]["stdout"] == "hi\n" and got[3][-1]["result"]["exit_code"] == 0


def test_background_logs_of_an_exited_process_wait_for_its_last_output(tmp_path: Path) -> None:
    """A fast exit must not be reported before the reader has drained the pipe (the race behind
    a lost 'finishing' line): the reader is slowed on purpose, and the output must still be there."""
    import threading
    import time

    class SlowReader(_agent.BackgroundProcess):
        def _read(self) -> None:
            time.sleep(0.1)
            super()._read()

    bp = SlowReader("bg-1", "echo finishing; exit 4", str(tmp_path))
    bp.proc.wait()
    logs = bp.logs()
    assert logs["running"] is False and logs["exit_code"] == 4
    assert "finishing" in logs["output"]
    bp.kill()
    assert not any(t.name == "bg-bg-1" for t in threading.enumerate())
