"""The helper's door (a unix socket straight between the desk and a local container's helper): the helper serves it
beside its stdin; a local sandbox uses it for everything the stream carried (streamed output, binary frames, cancel,
a helper's death named); and the exec stream carries the helper when the door cannot be used (an engine
elsewhere, a peer the engine does not name, a folder that is not the desk's)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from desktop_app.core import SandboxError
from desktop_app.sandbox import DockerSandbox, SandboxConfig
from desktop_app.sandbox.docker import _helper_door
from desktop_app.sandbox.docker._helper_archive import helper_archive
from desktop_app.sandbox.docker._helper_door import door_dir, door_possible, peer_pid
from tests.conftest import TEST_IMAGE
from tests.kit import wait_until_async


def _lines(f) -> list[dict]:
    """Messages read from `f` until an answer (a message with "ok")."""
    got = []
    while not got or "ok" not in got[-1]:
        got.append(json.loads(f.readline()))
    return got


def test_the_helper_serves_its_door_beside_its_stdin(tmp_path: Path) -> None:
    """Each request is answered where it came from; the door's end ends only the door, stdin's the helper."""
    archive = tmp_path / "helper.pyz"
    archive.write_bytes(helper_archive())
    (tmp_path / "ws").mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(tmp_path / "door.sock"))
    listener.listen(1)
    argv = [sys.executable, "-I", "-S", str(archive), str(tmp_path / "ws"), str(tmp_path / "door.sock")]
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    try:
        assert json.loads(proc.stdout.readline())["door"] is True
        conn, _ = listener.accept()
        assert peer_pid(conn) == proc.pid
        door = conn.makefile("rwb")
        door.write(b'{"id":1,"op":"exec","args":{"command":"echo hi","stream":true}}\n')
        door.flush()
        proc.stdin.write(b'{"id":2,"op":"ping","args":{}}\n')
        proc.stdin.flush()
        on_door, on_stdin = _lines(door), _lines(proc.stdout)
        assert on_door[0] == {"id": 1, "ev": "output", "stream": "stdout", "data": "hi\n"}
        assert on_door[-1]["result"]["stdout"] == "hi\n" and on_stdin[-1]["id"] == 2 and on_stdin[-1]["ok"]
        door.close()
        conn.close()
        proc.stdin.write(b'{"id":3,"op":"ping","args":{}}\n')
        proc.stdin.flush()
        assert _lines(proc.stdout)[-1]["id"] == 3  # the door ended, the helper did not
        proc.stdin.close()
        assert proc.wait(10) == 0
    finally:
        proc.kill()
        proc.wait()
        listener.close()


@pytest.mark.parametrize("door", ["", "/nowhere/door.sock"], ids=["none", "unreachable"])
def test_a_helper_without_a_door_serves_its_stdin(tmp_path: Path, door: str) -> None:
    archive = tmp_path / "helper.pyz"
    archive.write_bytes(helper_archive())
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(archive), str(tmp_path), door],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdin and proc.stdout
    proc.stdin.write(b'{"id":1,"op":"ping","args":{}}\n')
    proc.stdin.flush()
    hello, pong = json.loads(proc.stdout.readline()), json.loads(proc.stdout.readline())
    proc.stdin.close()
    assert hello["door"] is False and pong["ok"] and proc.wait(10) == 0


def test_no_door_for_an_engine_elsewhere(tmp_path: Path) -> None:
    assert door_possible("unix:///var/run/docker.sock")
    for address in ("tcp://10.0.0.2:2376", "ssh://me@build-box", "npipe:////./pipe/docker_engine", ""):
        assert not door_possible(address), address
    sb = DockerSandbox("door-remote", tmp_path, SandboxConfig(image=TEST_IMAGE))
    sb.engine = lambda: "tcp://10.0.0.2:2376"  # type: ignore[method-assign]
    assert sb._door_mount() == {} and sb._door is None and sb._door_mounts() == []


def test_a_door_folder_that_is_not_the_desks_is_refused(tmp_path: Path, monkeypatch) -> None:
    """A link where the folder should be (or a file): no folder is made through it, and no door is used."""
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    leaf = door_dir("agent-desk-x", os.getuid()).path
    leaf.rmdir()
    leaf.symlink_to(elsewhere)
    with pytest.raises(OSError, match="not a folder of this user's"):
        door_dir("agent-desk-x", os.getuid())
    leaf.unlink()
    leaf.write_text("")
    with pytest.raises(OSError, match="not a folder of this user's"):
        door_dir("agent-desk-x", os.getuid())
    assert list(elsewhere.iterdir()) == []


@pytest.mark.docker
async def test_a_local_sandbox_talks_to_its_helper_through_the_door(docker_sandbox) -> None:
    sb = docker_sandbox
    assert sb._channel.direct and sb._channel.hello["door"] is True
    assert list(sb._door.path.iterdir()) == []  # the socket lived only while the helper started
    seen: list[tuple[str, str]] = []
    res = await sb.exec("echo out; echo err >&2; exit 3", on_output=lambda s, t: seen.append((s, t)))
    assert (res.exit_code, res.stdout, res.stderr) == (3, "out\n", "err\n") and ("stdout", "out\n") in seen
    data = os.urandom(3 << 20)
    await sb.write_file("big.bin", data)
    reads = await asyncio.gather(*(sb.read_file("big.bin", limit=4 << 20) for _ in range(8)))
    assert all(r == data for r in reads)
    # many at once through the door, each its own answer
    many = await asyncio.gather(*(sb.exec(f"echo {i}; sleep 0.{i % 3}") for i in range(24)))
    assert [r.stdout for r in many] == [f"{i}\n" for i in range(24)]
    task = asyncio.create_task(sb.exec("sleep 300"))
    assert await wait_until_async(lambda: b"sleep 300" in _ps(sb), within_s=20)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_until_async(lambda: b"sleep 300" not in _ps(sb), within_s=20)  # the cancel went through


@pytest.mark.docker
async def test_a_killed_helper_is_named_and_the_next_one_comes_through_a_new_door(docker_sandbox) -> None:
    sb = docker_sandbox
    first = sb._channel
    with pytest.raises(SandboxError, match="killed") as info:  # its stderr still comes through the exec stream
        await sb.exec(f"echo last-words >/proc/{first.hello['pid']}/fd/2; kill -KILL {first.hello['pid']}")
    assert "last-words" in str(info.value)
    res = await sb.exec("echo back")
    assert res.stdout == "back\n" and sb._channel is not first and sb._channel.direct
    assert list(sb._door.path.iterdir()) == []


@pytest.mark.docker
async def test_the_stream_carries_the_helper_when_the_peer_is_not_named(make_docker_sandbox, monkeypatch) -> None:
    """The engine's pid and the socket's peer differ (another PID namespace, say): the desk closes the door
    unread and talks to the same helper over its exec stream, as before."""
    monkeypatch.setattr(_helper_door, "peer_pid", lambda conn: 0)
    sb = await make_docker_sandbox()
    assert not sb._channel.direct and sb._channel.hello["door"] is True
    assert (await sb.exec("echo stream")).stdout == "stream\n"
    await sb.write_file("f.bin", b"\0\xff" * 1000)
    assert await sb.read_file("f.bin") == b"\0\xff" * 1000
    assert list(sb._door.path.iterdir()) == []


def _ps(sb) -> bytes:
    return sb._client.containers.get(sb.container_id).exec_run(["ps", "-eo", "args="]).output
