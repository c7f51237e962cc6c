"""Built-in tool figures: the median cost of fs_read, fs_edit and bash_run through LocalSandbox, and
through DockerSandbox (warm container, helper transport) when an engine answers."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid

from desktop_app.core import ToolContext
from desktop_app.sandbox import DockerSandbox, LocalSandbox, SandboxConfig
from desktop_app.tools import BashRun, FsEdit, FsRead

from ._util import p50, repeat, report

ROUNDS = 200
SOURCE = "".join(f"line {i} = {i * 7}\n" for i in range(400)).encode()


async def _measure(sandbox, label: str) -> None:
    await sandbox.start()
    ctx = ToolContext(call_id="bench", session_id="bench", sandbox=sandbox)
    await sandbox.write_file("bench.py", SOURCE)
    read, edit, run = FsRead(), FsEdit(), BashRun()
    read_args = read.parse({"path": "bench.py"})

    async def timed(coro_fn, rounds: int) -> list[float]:
        out = []
        for i in range(rounds):
            t0 = time.perf_counter()
            res = await coro_fn(i)
            out.append((time.perf_counter() - t0) * 1000)
            assert not res.is_error, res.text_content
        return out

    reads = await timed(lambda i: read.run(read_args, ctx), ROUNDS)
    flip = ["line 3 = 21\n", "line 3 = 22\n"]  # each edit flips one line back and forth

    def one_edit(i: int):
        raw = {"path": "bench.py", "old_string": flip[i % 2], "new_string": flip[(i + 1) % 2]}
        return edit.run(edit.parse(raw), ctx)

    edits = await timed(one_edit, ROUNDS)
    runs = await timed(lambda i: run.run(run.parse({"command": "echo hi"}), ctx), ROUNDS // 2)
    report(f"tools_fs_read_400_lines_{label}_p50", p50(reads), "ms")
    report(f"tools_fs_edit_{label}_p50", p50(edits), "ms")
    report(f"tools_bash_run_echo_{label}_p50", p50(runs), "ms")


async def _run() -> None:
    with tempfile.TemporaryDirectory() as folder:
        sb = LocalSandbox(folder)
        try:
            await _measure(sb, "local")
        finally:
            await sb.close()
    try:
        import docker

        client = docker.from_env(timeout=5)
        client.ping()
        client.images.get(SandboxConfig().image)
    except Exception as exc:
        print(f"# docker figures skipped: {str(exc).splitlines()[0][:120]}")
        return
    project = f"bench-tools-{uuid.uuid4().hex[:8]}"
    with tempfile.TemporaryDirectory() as folder:
        if os.geteuid() == 0:  # the container's user is uid 1000 when the folder belongs to root
            os.chown(folder, 1000, 1000)
        sb = DockerSandbox(project, folder)
        try:
            await _measure(sb, "docker")
        finally:
            await sb.close()
            for c in client.containers.list(all=True, filters={"label": f"org.agent-desk.project={project}"}):
                c.remove(force=True)


def main() -> None:
    repeat(lambda: asyncio.run(_run()), runs=3)
