"""bash_run, bash_logs and bash_kill on a real sandbox."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from desktop_app.tools import BashKill, BashLogs, BashRun
from desktop_app.tools._bash import OUTPUT_CHARS, head_tail

run, logs, kill = BashRun(), BashLogs(), BashKill()


async def wait_for_logs(call, process_id: str, done, within: float = 20.0):
    """Poll bash_logs until `done(result)`; the sandbox offers no push for background output."""
    loop = asyncio.get_running_loop()
    end = loop.time() + within
    while True:
        res = await call(logs, process_id=process_id)
        if done(res) or loop.time() > end:
            return res
        await asyncio.sleep(0.05)


async def test_run_reports_exit_code_stdout_stderr_and_details(call):
    res = await call(run, command="echo out; echo err >&2")
    assert not res.is_error
    assert res.text_content == "exit code: 0\nstdout:\nout\nstderr:\nerr"
    d = res.details
    assert d["exit_code"] == 0 and d["timed_out"] is False and d["truncated"] is False
    assert d["oom_killed"] is False and d["cwd"] == "/workspace"
    assert d["duration_ms"] >= 0 and d["stdout"] == "out\n" and d["stderr"] == "err\n"


async def test_run_runs_in_the_workspace(sandbox, call):
    await sandbox.write_file("marker.txt", b"here")
    res = await call(run, command="cat marker.txt")
    assert "here" in res.text_content


async def test_nonzero_exit_is_reported_not_an_error(call):
    res = await call(run, command="echo nope >&2; exit 3")
    assert res.is_error is False
    assert res.text_content.startswith("exit code: 3")
    assert res.details["exit_code"] == 3


async def test_no_output_says_so(call):
    res = await call(run, command="true")
    assert res.text_content == "exit code: 0\n(no output)"


async def test_output_is_streamed_with_ctx_update(call, updates):
    res = await call(run, command="for i in 1 2 3; do echo line$i; done; echo oops >&2")
    assert updates.text("stdout") == "line1\nline2\nline3\n"
    assert updates.text("stderr") == "oops\n"
    assert res.details["stdout"] == "line1\nline2\nline3\n"


async def test_timeout_kills_and_is_an_error(call):
    res = await call(run, command="echo started; sleep 30; echo never", timeout_ms=500)
    assert res.is_error
    assert res.details["timed_out"] is True
    assert "TIMED OUT" in res.text_content and "started" in res.text_content
    assert "never" not in res.text_content
    assert res.details["duration_ms"] < 10_000


def test_timeout_over_600_s_is_a_validation_error():
    with pytest.raises(ValidationError) as info:
        run.parse({"command": "true", "timeout_ms": 600_001})
    assert "600000" in str(info.value)
    assert run.parse({"command": "true", "timeout_ms": 600_000}).timeout_ms == 600_000
    schema = run.input_schema()
    assert schema["properties"]["timeout_ms"]["anyOf"][0]["maximum"] == 600_000
    with pytest.raises(ValidationError):
        run.parse({"command": "   "})


async def test_long_output_keeps_head_and_tail(call):
    res = await call(run, command="seq 1 20000")
    assert res.details["truncated"] is True
    assert "characters left out" in res.text_content
    assert "\n1\n2\n3\n" in res.text_content and "19999\n20000" in res.text_content
    assert len(res.text_content) < OUTPUT_CHARS + 1000


def test_head_tail():
    assert head_tail("short") == ("short", False)
    text, cut = head_tail("a" * 50 + "b" * 50, limit=20)
    assert cut and text.startswith("a" * 10) and text.endswith("b" * 10) and "80 characters" in text


async def test_abort_stops_a_running_command(ctx, call, updates):
    loop = asyncio.get_running_loop()

    def abort_when_started(text: str, stream: str) -> None:
        updates(text, stream)
        if "started" in updates.text():
            loop.call_soon_threadsafe(ctx.abort.set)

    ctx._update = abort_when_started
    res = await asyncio.wait_for(call(run, command="echo started; sleep 30"), timeout=15)
    assert res.is_error and res.details["cancelled"] is True
    assert "Cancelled" in res.text_content and "started" in res.text_content


async def test_background_logs_and_kill(call, ctx):
    res = await call(run, command="echo hello-bg; sleep 60", background=True)
    assert not res.is_error
    pid = res.details["process_id"]
    assert pid and res.details["background"] is True and f"process_id={pid}" in res.text_content

    seen = await wait_for_logs(call, pid, lambda r: "hello-bg" in r.details["output"])
    assert "hello-bg" in seen.details["output"] and seen.details["running"] is True
    assert "still running" in seen.text_content

    killed = await call(kill, process_id=pid)
    assert not killed.is_error and killed.details["running"] is False
    assert "Stopped" in killed.text_content
    after = await call(logs, process_id=pid)
    assert after.details["running"] is False


async def test_background_exit_code_is_reported(call):
    res = await call(run, command="echo finishing; exit 4", background=True)
    pid = res.details["process_id"]
    done = await wait_for_logs(call, pid, lambda r: not r.details["running"])
    assert done.details["running"] is False and done.details["exit_code"] == 4
    assert "exited with code 4" in done.text_content and "finishing" in done.details["output"]


async def test_background_output_of_a_fast_exit_is_never_lost(call):
    """The race behind the old flaky test, run 200 times: output printed just before exit is always there
    when the exit is reported."""
    for i in range(200):
        res = await call(run, command=f"echo line{i}; exit 3", background=True)
        done = await wait_for_logs(call, res.details["process_id"], lambda r: not r.details["running"])
        assert done.details["exit_code"] == 3 and f"line{i}" in done.details["output"], (i, done.details)


async def test_unknown_process_id_is_a_clear_error(call):
    res = await call(logs, process_id="no-such-process")
    assert res.is_error
    body = json.loads(res.text_content)
    assert "no-such-process" in body["error"] and body["recommendations"]
    assert (await call(kill, process_id="no-such-process")).is_error


def test_executor_deadline_leaves_room_for_the_sandbox_timeout():
    assert run.timeout_for(run.parse({"command": "x"})) == 120 + 15
    assert run.timeout_for(run.parse({"command": "x", "timeout_ms": 600_000})) == 600 + 15
    assert run.timeout_for(run.parse({"command": "x", "timeout_ms": 600_000})) <= run.timeout_s
    assert run.timeout_for(run.parse({"command": "x", "background": True})) == 30


async def test_output_past_the_sandbox_limit_says_truncated(call):
    res = await call(run, command="seq 1 400000")  # about 2.7 MB, over the 1 MB kept per stream
    assert res.details["truncated"] is True and res.details["exit_code"] == 0
    assert "TRUNCATED" in res.text_content and "\n1\n2\n3\n" in res.text_content


def test_oom_and_signal_are_errors_that_say_so():
    from desktop_app.core import ExecResult
    from desktop_app.tools._bash import _exec_result

    res = _exec_result("big", "/workspace", 120, ExecResult(None, "partial\n", "", oom_killed=True,
                                                            killed_signal=9, duration_ms=12.5))
    assert res.is_error and res.details["oom_killed"] is True and res.details["exit_code"] is None
    assert "out of memory" in res.text_content and "signal 9" in res.text_content
    assert "partial" in res.text_content
