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
from tests.kit import argument_too_long, write_many

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


@pytest.mark.docker
async def test_no_write_lands_outside_the_workspace_on_docker(make_docker_sandbox, workspace: Path) -> None:
    (workspace / "d").mkdir()
    sb = await make_docker_sandbox()
    swapper = await sb.start_background(f"python3 -c \"{SWAPPER}\"")
    try:
        await asyncio.sleep(0.3)
        ok, errors = await write_many(sb, "d", WRITES)
        nested_ok, _ = await write_many(sb, "d/deeper/still", WRITES)  # make_dirs through the swapped folder
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
        ok, _ = await write_many(sb, "d", WRITES)
        nested_ok, _ = await write_many(sb, "d/deeper", WRITES)
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
async def test_an_argument_over_128_kb_is_named_on_local(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    sb = LocalSandbox(tmp_path / "ws")
    try:
        await argument_too_long(sb)
    finally:
        await sb.close()


@pytest.mark.docker
async def test_an_argument_over_128_kb_is_named_on_docker(make_docker_sandbox) -> None:
    await argument_too_long(await make_docker_sandbox())
