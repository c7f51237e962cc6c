"""fs_write with a parent folder swapped for a symlink while it runs: 3,000 writes, and not one file lands
outside the workspace (the container's /tmp for DockerSandbox, the host for LocalSandbox). Plus the
argument-too-long error, on both sandboxes."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import pytest

from desktop_app.core import SandboxError
from desktop_app.sandbox import LocalSandbox

WRITES = 3000
# Inside the container: swap /workspace/d for a symlink to /tmp/out and back, as fast as python can.
SWAPPER = (
    "import os\n"
    "os.makedirs('/tmp/out', exist_ok=True)\n"
    "while True:\n"
    "    try:\n"
    "        os.rename('d', 'd.real'); os.symlink('/tmp/out', 'd')\n"
    "        os.unlink('d'); os.rename('d.real', 'd')\n"
    "    except OSError:\n"
    "        pass\n"
)


async def _write_many(sb, prefix: str, writes: int = WRITES, at_once: int = 100) -> tuple[int, list[str]]:
    """`writes` fs_writes under `prefix`, `at_once` at a time; how many landed, and the refusals."""
    ok, errors = 0, []

    async def one(i: int) -> None:
        nonlocal ok
        try:
            await sb.write_file(f"{prefix}/f{i}.txt", b"payload")
            ok += 1
        except SandboxError as exc:
            errors.append(str(exc))

    for start in range(0, writes, at_once):
        await asyncio.gather(*(one(i) for i in range(start, min(writes, start + at_once))))
    return ok, errors


@pytest.mark.docker
async def test_no_write_lands_outside_the_workspace_on_docker(make_docker_sandbox, workspace: Path) -> None:
    (workspace / "d").mkdir()
    sb = await make_docker_sandbox()
    swapper = await sb.start_background(f"python3 -c \"{SWAPPER}\"")
    try:
        await asyncio.sleep(0.3)
        ok, errors = await _write_many(sb, "d")
        nested_ok, _ = await _write_many(sb, "d/deeper/still")  # make_dirs through the swapped folder
    finally:
        await sb.kill(swapper)
    outside = await sb.exec("find /tmp/out -mindepth 1 | wc -l", timeout=30)
    assert outside.stdout.strip() == "0", outside.stdout
    assert ok + nested_ok > 0  # the race let some through, inside
    assert all("outside" not in e or "resolves outside" in e for e in errors)


async def test_no_write_lands_outside_the_workspace_on_local(tmp_path: Path) -> None:
    ws, out = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    out.mkdir()
    (ws / "d").mkdir()
    stop = threading.Event()

    def swap() -> None:
        while not stop.is_set():
            try:
                os.rename(ws / "d", ws / "d.real")
                os.symlink(out, ws / "d")
                os.unlink(ws / "d")
                os.rename(ws / "d.real", ws / "d")
            except OSError:
                pass

    sb = LocalSandbox(ws)
    swapper = threading.Thread(target=swap, daemon=True)
    swapper.start()
    try:
        ok, _ = await _write_many(sb, "d")
        nested_ok, _ = await _write_many(sb, "d/deeper")
    finally:
        stop.set()
        swapper.join(5)
        await sb.close()
    assert list(out.rglob("*")) == []
    assert ok + nested_ok > 0
    landed = {p.name for p in ws.rglob("f*.txt")}
    assert len(landed) >= 1


async def test_a_symlinked_parent_is_refused_and_a_symlinked_file_is_replaced(tmp_path: Path) -> None:
    ws, out = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    out.mkdir()
    (ws / "escape").symlink_to(out)
    (out / "victim.txt").write_text("keep")
    (ws / "inner").mkdir()
    (ws / "inner" / "real.txt").write_text("old")
    (ws / "link.txt").symlink_to(ws / "inner" / "real.txt")
    sb = LocalSandbox(ws)
    try:
        for path in ("escape/victim.txt", "escape/new.txt", "/workspace/escape/x", "inner/../escape/y"):
            with pytest.raises(SandboxError, match="outside"):
                await sb.write_file(path, b"pwned")
        await sb.write_file("link.txt", b"new")  # a link inside the workspace to a file inside it
        assert (ws / "inner" / "real.txt").read_bytes() == b"new"
    finally:
        await sb.close()
    assert (out / "victim.txt").read_text() == "keep" and sorted(p.name for p in out.iterdir()) == ["victim.txt"]


# -------------------------------------------------------------------------------- errors name the cause
async def _argument_too_long(sb) -> None:
    for command in (["echo", "x" * 200_000], "echo " + "x" * 200_000):
        with pytest.raises(SandboxError) as err:
            await sb.exec(command, timeout=10)
        assert "argument too long" in str(err.value) and "pids" not in str(err.value)
    with pytest.raises(SandboxError, match="argument too long"):
        await sb.start_background("echo " + "y" * 200_000)
    assert (await sb.exec("echo fine", timeout=10)).stdout == "fine\n"


async def test_an_argument_over_128_kb_is_named_on_local(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    sb = LocalSandbox(tmp_path / "ws")
    try:
        await _argument_too_long(sb)
    finally:
        await sb.close()


@pytest.mark.docker
async def test_an_argument_over_128_kb_is_named_on_docker(make_docker_sandbox) -> None:
    await _argument_too_long(await make_docker_sandbox())
