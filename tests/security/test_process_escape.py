"""No process outlives what owns it, unseen (issue 10, item 3): daemons that leave their command's process
group (setsid -f, nohup &, double fork, ( … & ) &, disown, env -i, exec -a, a fork loop) are gone after the
command ends, after bash_kill and at the session's end, on the real Docker engine and on LocalSandbox."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from desktop_app.core import EventBus, MemoryStore, SandboxSurvivors
from desktop_app.runtime import ProjectRuntime
from desktop_app.sandbox import LocalSandbox, SandboxConfig
from tests.conftest import TEST_IMAGE
from tests.kit import VARIANTS, WRITER, stops_changing, wait_until_async

# On the host a process that scrubbed its environment, left the session and was orphaned carries nothing
# that ties it to the desk: LocalSandbox does not catch it (README, "what the sandbox does not protect").
HOST_UNTRACKABLE = {"env_scrubbed", "forged_cookie"}


def _command(variant: str, marker: str, path: str) -> str:
    return VARIANTS[variant].format(w=WRITER.format(f=path), m=marker)


class Box:
    """A sandbox under test and how to see its processes (ps in the container, /proc on the host)."""

    def __init__(self, sb, kind: str, folder: Path, client=None) -> None:
        self.sb, self.kind, self.folder, self.client = sb, kind, folder, client

    def pids(self, marker: str) -> list[int]:
        if self.kind == "docker":
            out = self.client.containers.get(self.sb.container_id).exec_run(["ps", "-eo", "pid=,args="]).output
            lines = out.decode().splitlines()
        else:
            lines = []
            for name in os.listdir("/proc"):
                if name.isdigit():
                    try:
                        with open(f"/proc/{name}/cmdline", "rb") as fh:
                            lines.append(name + " " + fh.read().replace(b"\0", b" ").decode(errors="replace"))
                    except OSError:
                        pass
        return [int(line.split()[0]) for line in lines if marker in line]

    def path(self, name: str) -> str:
        return f"/workspace/{name}" if self.kind == "docker" else str(self.folder / name)


@pytest.fixture(params=["docker", "local"])
async def box(request, workspace: Path, make_docker_sandbox, docker_client):
    folder = workspace
    if request.param == "local":
        sb = LocalSandbox(folder)
        yield Box(sb, "local", folder)
        await sb.close()
        return
    sb = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE, keep_running=True), folder=folder)
    yield Box(sb, "docker", folder, docker_client)


def _skip_untrackable(box: Box, variant: str) -> None:
    if box.kind == "local" and variant in HOST_UNTRACKABLE:
        pytest.skip("a scrubbed, orphaned daemon on the host is not tracked (documented)")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
async def test_a_foreground_command_leaves_nothing_running(box: Box, variant: str) -> None:
    _skip_untrackable(box, variant)
    marker = f"adm{uuid.uuid4().hex[:10]}"
    res = await box.sb.exec(_command(variant, marker, box.path("fg.txt")) + "\nsleep 0.3; echo done", timeout=30)
    assert "done" in res.stdout
    assert await asyncio.to_thread(box.pids, marker) == []
    assert await asyncio.to_thread(stops_changing, box.folder / "fg.txt")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
async def test_bash_kill_kills_the_whole_tree(box: Box, variant: str) -> None:
    _skip_untrackable(box, variant)
    marker = f"adm{uuid.uuid4().hex[:10]}"
    pid = await box.sb.start_background(_command(variant, marker, box.path("bg.txt")) + "\nsleep 600")
    assert await wait_until_async(lambda: bool(box.pids(marker)), within_s=5), "the daemon never started"
    assert await wait_until_async(lambda: (box.folder / "bg.txt").exists(), within_s=5)
    await box.sb.kill(pid)
    assert await asyncio.to_thread(box.pids, marker) == []
    assert await asyncio.to_thread(stops_changing, box.folder / "bg.txt")


async def test_a_timed_out_command_leaves_nothing_running(box: Box) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    res = await box.sb.exec(_command("setsid_f", marker, box.path("to.txt")) + "\nsleep 600", timeout=1)
    assert res.timed_out
    assert await asyncio.to_thread(box.pids, marker) == []


async def test_a_cancelled_command_leaves_nothing_running(box: Box) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    run = asyncio.ensure_future(box.sb.exec(_command("double_fork", marker, box.path("c.txt")) + "\nsleep 600"))
    assert await wait_until_async(lambda: bool(box.pids(marker)), within_s=5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert await wait_until_async(lambda: not box.pids(marker), within_s=5), "the daemon outlived the cancelled call"


async def test_the_session_end_kills_everything_and_lists_it(box: Box) -> None:
    """With keep_running the container stays up: what ran at the session's end is killed and listed,
    with its command line and the call that started it, in a persisted SandboxSurvivors event."""
    marker = f"adm{uuid.uuid4().hex[:10]}"
    variants = ["setsid_f", "nohup_bg", "exec_a"] + ([] if box.kind == "local" else ["env_scrubbed"])
    for i, variant in enumerate(variants):
        await box.sb.start_background(_command(variant, f"{marker}{i}", box.path(f"s{i}.txt")) + "\nsleep 600")
    # every daemon running as itself: its writer has written (before that, a marker may only be seen in a
    # launcher still on its way to exec the daemon)
    assert await wait_until_async(lambda: all((box.folder / f"s{i}.txt").exists() for i in range(len(variants))),
                                  within_s=5)
    assert await wait_until_async(lambda: all(box.pids(f"{marker}{i}") for i in range(len(variants))), within_s=5)
    store = MemoryStore()
    bus = EventBus(store)
    seen: list[SandboxSurvivors] = []
    bus.on(SandboxSurvivors.type, lambda env: seen.append(env.event))
    event = await ProjectRuntime.end_processes(SimpleNamespace(sandbox=box.sb, bus=bus), "session-1")
    assert event is not None and seen and seen[0].session_id == "session-1"
    assert seen[0].alive == []
    commands = " ".join(p["command"] for p in seen[0].killed)
    for i in range(len(variants)):
        # a long command line is shortened in the list, and the marker ($0) comes last: name it by its file
        assert f"{marker}{i}" in commands or box.path(f"s{i}.txt") in commands, commands
    assert any(p["started_by"].startswith("bg-") for p in seen[0].killed)
    assert await asyncio.to_thread(box.pids, marker) == []
    for i in range(len(variants)):
        assert await asyncio.to_thread(stops_changing, box.folder / f"s{i}.txt")
    if box.kind == "docker":
        assert box.client.containers.get(box.sb.container_id).status == "running"  # keep_running kept it
    await box.sb.close()
    assert await asyncio.to_thread(box.pids, marker) == []


async def test_close_without_a_sweep_first_still_kills_everything(box: Box) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    await box.sb.start_background(_command("setsid_f", marker, box.path("z.txt")) + "\nsleep 600")
    await box.sb.exec(_command("subshell_bg", marker + "x", box.path("z2.txt")) + "\ntrue")
    assert await wait_until_async(lambda: bool(box.pids(marker)), within_s=5)
    await box.sb.close()
    assert await asyncio.to_thread(box.pids, marker) == []
    assert box.sb.last_sweep["alive"] == []


async def test_other_runs_are_not_killed_by_one_ending(box: Box) -> None:
    """A background process's own daemon (in its session, with its cookie) survives another command's end."""
    marker = f"adm{uuid.uuid4().hex[:10]}"
    pid = await box.sb.start_background(_command("setsid_f", marker, box.path("k.txt")) + "\nsleep 600")
    assert await wait_until_async(lambda: bool(box.pids(marker)), within_s=5)
    await box.sb.exec("true")
    await box.sb.exec("sleep 0.2 & true")
    assert await asyncio.to_thread(box.pids, marker)
    await box.sb.kill(pid)
    assert await asyncio.to_thread(box.pids, marker) == []


async def test_a_stray_left_between_commands_goes_with_the_next_command_that_starts_nothing(box: Box) -> None:
    """A command that starts no process skips the look for strays only when no process at all started since
    the last look: a daemon a background process left behind (out of its session, its environment scrubbed,
    idle: it starts nothing more) is still found and killed at the end of a plain `true`."""
    if box.kind == "local":
        pytest.skip("a scrubbed, orphaned daemon on the host is not tracked (documented)")
    for _ in range(3):
        assert (await box.sb.exec("true")).exit_code == 0  # the quiet path: nothing new since the last look
    seconds = 6_000_000 + uuid.uuid4().int % 900_000  # the daemon's own name; the background shell's says $((..))
    marker = f"sleep {seconds}"
    bg = await box.sb.start_background(f"setsid -f env -i sleep $((6000000+{seconds - 6_000_000}))\nsleep 600")
    assert await wait_until_async(lambda: bool(box.pids(marker)), within_s=10), "the daemon never started"
    res = await box.sb.exec("true")
    assert res.exit_code == 0
    assert await asyncio.to_thread(box.pids, marker) == []
    await box.sb.kill(bg)
