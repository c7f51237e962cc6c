"""The helper never wedges: catastrophic regexes and globs, a helper killed or stopped by a command, CPU
hogs, every pid taken while a command runs; each time the NEXT call answers within a second or two, and the
error names the real cause."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
import time
from pathlib import Path

import pytest

from desktop_app.core import SandboxError
from desktop_app.sandbox import LocalSandbox, SandboxConfig
from desktop_app.sandbox.helper.errors import HelperError
from desktop_app.sandbox.helper.search import ChildSearch, Search
from desktop_app.sandbox.helper.workspace import Workspace
from tests.conftest import TEST_IMAGE

pytestmark = pytest.mark.docker
CATASTROPHIC = "(a+)+$"


async def next_call_is_quick(sb, within: float = 2.0) -> None:
    start = time.monotonic()
    assert await sb.stat(".") is not None
    assert (await sb.exec("echo alive", timeout=10)).stdout == "alive\n"
    assert time.monotonic() - start < within


async def test_catastrophic_regex_over_a_big_file_on_docker(make_docker_sandbox, workspace: Path) -> None:
    (workspace / "aaa.txt").write_text("a" * 2_000_000 + "b\n")
    (workspace / "lines.txt").write_text(("a" * 40 + "!\n") * 2000)
    sb = await make_docker_sandbox()
    start = time.monotonic()
    hits = await sb.grep(CATASTROPHIC, ".")  # ripgrep: Rust regex, linear time
    assert time.monotonic() - start < 15
    assert hits == []
    assert await sb.grep("a+!$", "lines.txt", max_results=3) != []
    await next_call_is_quick(sb)


async def test_catastrophic_glob_is_killed_at_its_deadline(make_docker_sandbox, workspace: Path) -> None:
    # the name ends as the pattern does (glob's quick test of the literal tail passes it to the regex), and
    # the "c" the pattern wants is nowhere: the regex backtracks through every split of the a's
    (workspace / ("a" * 200 + "b")).write_text("x")
    sb = await make_docker_sandbox()
    start = time.monotonic()
    with pytest.raises(SandboxError, match="stopped after 2 s and was killed"):
        await sb._op("glob", {"pattern": "*a*a*a*a*a*a*a*a*a*a*c*b", "path": ".", "timeout": 2})
    assert time.monotonic() - start < 10
    await next_call_is_quick(sb)
    ps = await sb.exec("ps -eo args", timeout=10)
    assert "--search" not in ps.stdout  # the child helper is gone with its group


@pytest.mark.parametrize(
    "command", ["kill -9 $PPID", "kill $PPID; sleep 1", "pkill -9 -f 'helper-.*pyz'", "pkill -f python3; sleep 1"]
)
async def test_helper_killed_by_a_command_is_named_and_replaced(make_docker_sandbox, command: str) -> None:
    sb = await make_docker_sandbox()
    with pytest.raises(SandboxError) as err:
        await sb.exec(command, timeout=10)
    message = str(err.value)
    assert "helper was killed" in message and "container kept running" in message, message
    assert "out of memory" not in message
    await next_call_is_quick(sb)


async def test_a_stopped_helper_is_pinged_then_restarted(make_docker_sandbox) -> None:
    sb = await make_docker_sandbox()
    pid = sb._channel.hello["pid"]
    await sb.start_background(f"sleep 0.3; kill -STOP {pid}")
    await asyncio.sleep(1.0)
    start = time.monotonic()
    with pytest.raises(SandboxError, match="wedged and has been restarted"):
        await sb._call("stat", {"path": "."}, timeout=2)
    assert time.monotonic() - start < 10
    await next_call_is_quick(sb)
    ps = await sb.exec(f"ps -o pid= -p {pid} || echo gone", timeout=10)
    assert "gone" in ps.stdout  # the wedged helper was killed, not left behind


async def test_a_slow_call_on_a_live_helper_says_so(make_docker_sandbox) -> None:
    sb = await make_docker_sandbox()
    with pytest.raises(SandboxError, match="still answers"):
        await sb._call("exec", {"command": "sleep 3", "timeout": 10}, timeout=1)
    await next_call_is_quick(sb)


async def test_cpu_hogs_do_not_wedge_the_channel(make_docker_sandbox) -> None:
    sb = await make_docker_sandbox()
    hogs = [await sb.start_background("python3 -c 'while 1: pass'") for _ in range(3)]
    hog_run = asyncio.ensure_future(sb.exec("python3 -c 'while 1: pass'", timeout=8))
    try:
        await asyncio.sleep(0.5)
        for _ in range(10):
            await next_call_is_quick(sb, within=3.0)
            assert await sb.grep("nothing-here", ".") == []
    finally:
        for h in hogs:
            await sb.kill(h)
    assert (await hog_run).timed_out


# ------------------------------------------------------------------------------------------- host side
@pytest.mark.parametrize("command", [
    "bomb() { bomb | bomb; }; bomb",  # the classic, never returning
    "for i in $(seq 200); do sleep 60 & done; wait",  # no recursion: sleepers fill the pids limit, then it waits
    "bomb() { bomb & bomb; }; bomb 2>/dev/null",  # half of it in the background, its errors silenced
])  # fmt: skip
async def test_while_a_command_holds_every_pid_the_channel_is_read_and_a_cancel_stops_it(
    make_docker_sandbox, workspace: Path, command: str
) -> None:
    """The thread that reads a command runs it, and hands the reading on 5 ms after its start to a thread
    reserved before the spawn: by then the command has taken every pid, so no thread could be started. The
    channel must still be read: a file read and another command are answered while it runs (the command
    refused, as no pid is left), and a cancel stops it long before its timeout."""
    sb = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE, pids=64))
    (workspace / "note.txt").write_text("still here\n")
    hog = asyncio.create_task(sb.exec(command, timeout=120))
    await asyncio.sleep(1.0)
    assert not hog.done()
    assert await asyncio.wait_for(sb.read_text("note.txt"), 15) == "still here\n"
    try:
        refused = await asyncio.wait_for(sb.exec("true"), 15)
        answered = refused.exit_code != 0 and "unavailable" in refused.stderr  # the limit holds: fork fails
    except SandboxError as exc:
        answered = "thread" in str(exc) or "unavailable" in str(exc)
    assert answered  # every pid taken, and still an answer
    hog.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await hog

    async def gone() -> bool:
        try:
            count = await sb.exec("ls -d /proc/[0-9]* | wc -l")
        except SandboxError:  # no thread to be had yet: the command's processes are still dying
            return False
        return count.exit_code == 0 and int(count.stdout) < 10

    for _ in range(100):  # SIGTERM, then SIGKILL of the group a second later
        if await gone():
            break
        await asyncio.sleep(0.1)
    assert await gone()
    await next_call_is_quick(sb)


async def test_catastrophic_regex_and_glob_on_local_sandbox(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "aaa.txt").write_text(("a" * 5000 + "b\n") * 20)
    (ws / ("a" * 200)).write_text("x")
    sb = LocalSandbox(ws)
    try:
        start = time.monotonic()
        assert await sb.grep(CATASTROPHIC, ".") == []  # RE2 (or rg): linear
        assert await sb.glob("*a*a*a*a*a*a*a*a*a*a*b") == []
        assert time.monotonic() - start < 5
        with pytest.raises(SandboxError, match="invalid regular expression"):
            await sb.grep("(?<=x)y", ".")  # the dialect has no look-around
    finally:
        await sb.close()


def test_the_python_fallback_runs_in_a_child_that_is_killed(tmp_path: Path) -> None:
    """Python `re` backtracks for ever on this: the child helper dies at the deadline, the caller goes on."""
    (tmp_path / "a.txt").write_text("a" * 40 + "b\n")
    ws = Workspace(str(tmp_path), "/workspace")
    code = "from desktop_app.sandbox.helper.__main__ import main; main(['--search'])"
    env_path = os.pathsep.join(p for p in sys.path if p)
    child = ChildSearch(["/usr/bin/env", f"PYTHONPATH={env_path}", sys.executable, "-c", code], timeout=2)
    start = time.monotonic()
    with pytest.raises(HelperError, match="killed"):
        child.grep(ws, CATASTROPHIC, ".")
    assert time.monotonic() - start < 9
    # The answer comes as the JSON the child wrote (the helper passes it on without decoding it).
    assert json.loads(child.grep(ws, "a+b$", ".")) == [{"path": "a.txt", "line": 1, "text": "a" * 40 + "b"}]


def test_the_in_process_walker_stops_at_its_deadline(tmp_path: Path) -> None:
    for i in range(30):
        (tmp_path / f"f{i}.txt").write_text("x\n")
    search = Search(rg=None, timeout=1e-9)
    with pytest.raises(HelperError, match="stopped after"):
        search.grep(Workspace(str(tmp_path)), "needle", ".")
