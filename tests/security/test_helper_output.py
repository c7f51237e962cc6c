"""No output lost: what a command prints just before it exits is there when its exit is reported, in the
foreground and the background, on both sandboxes, 200 times in a row; also when a process it left behind
(outside its group) still holds the pipe open."""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from desktop_app.sandbox import DockerSandbox, LocalSandbox, SandboxConfig
from tests.conftest import TEST_IMAGE, remove_project

RUNS = 200


@pytest.fixture(params=["local", pytest.param("docker", marks=pytest.mark.docker)])
async def sb(request, tmp_path: Path):
    if request.param == "docker":
        client = request.getfixturevalue("docker_client")
        (tmp_path / "dws").mkdir()
        project = f"test-out-{uuid.uuid4().hex[:8]}"
        docker = DockerSandbox(project, tmp_path / "dws", SandboxConfig(image=TEST_IMAGE), client=client)
        await docker.start()
        yield docker
        await docker.close()
        remove_project(client, project)
        return
    (tmp_path / "ws").mkdir()
    local = LocalSandbox(tmp_path / "ws")
    yield local
    await local.close()


async def finished(sb, pid: str, within: float = 20.0):
    deadline = time.monotonic() + within
    while True:
        logs = await sb.logs(pid)
        if not logs.running or time.monotonic() > deadline:
            return logs
        await asyncio.sleep(0.01)


async def test_foreground_fast_exit_output_200_times(sb) -> None:
    for i in range(RUNS):
        res = await sb.exec(f"echo line{i}; echo err{i} >&2; exit 3", timeout=10)
        assert (res.exit_code, res.stdout, res.stderr) == (3, f"line{i}\n", f"err{i}\n"), (i, res)


async def test_background_fast_exit_output_200_times(sb) -> None:
    for i in range(RUNS):
        pid = await sb.start_background(f"echo line{i}; exit 3")
        done = await finished(sb, pid)
        assert done.exit_code == 3 and f"line{i}" in done.output, (i, done)


async def test_output_is_whole_when_a_leftover_holds_the_pipe(sb) -> None:
    """`setsid` takes the sleeper out of the command's group, so the pipe stays open after the exit."""
    big = "head -c 300000 /dev/zero | tr '\\0' x"
    res = await sb.exec(f"setsid sleep 2 & {big}; echo; echo end; exit 5", timeout=20)
    assert res.exit_code == 5 and res.stdout.endswith("end\n") and res.stdout.count("x") == 300000
    for i in range(20):
        pid = await sb.start_background(f"setsid sleep 3 & {big}; echo done{i}; exit 4")
        done = await finished(sb, pid)
        assert done.exit_code == 4 and done.output.endswith(f"done{i}\n"), (i, done.output[-50:])
