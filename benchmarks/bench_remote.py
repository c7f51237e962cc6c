"""The synced workspace on a second Docker engine (tcp://127.0.0.1, started here as the tests do): the
sync after a command that touched 100 small files (target <= 300 ms), and the first fill of 1,000 files."""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import uuid

from desktop_app.sandbox import DockerSandbox, SandboxConfig

from ._util import p50, repeat, report

IMAGE = os.environ.get("AGENT_DESK_TEST_IMAGE", "agent-desk/minimal:latest")
ROUNDS = 15


def _seed(folder: str) -> None:
    for i in range(1000):
        with open(os.path.join(folder, f"seed{i:04}.txt"), "w") as fh:
            fh.write(f"seed {i}\n" * 20)
    if os.geteuid() == 0:
        os.chown(folder, 1000, 1000)


async def _run(client) -> None:
    with tempfile.TemporaryDirectory() as folder:
        _seed(folder)
        project = f"bench-remote-{uuid.uuid4().hex[:8]}"
        sb = DockerSandbox(project, folder, SandboxConfig(image=IMAGE), client=client)
        try:
            t0 = time.perf_counter()
            await sb.start()
            report("remote_start_and_fill_1000_files_ms", (time.perf_counter() - t0) * 1000, "ms")
            await sb.exec("mkdir -p many && for i in $(seq 100); do echo $i > many/f$i; done")
            await sb.sync_workspace()
            samples = []
            for r in range(ROUNDS):
                res = await sb.exec(f"for i in $(seq 100); do echo round {r} $i > many/f$i; done")
                assert res.exit_code == 0, res.stderr
                t = time.perf_counter()
                got = await sb.sync_workspace()
                samples.append((time.perf_counter() - t) * 1000)
                assert got is not None and len(got.to_host) == 100, got
            report("remote_sync_100_files_ms", p50(samples), "ms")
            t = time.perf_counter()
            await sb.sync_workspace()
            report("remote_sync_nothing_changed_1100_files_ms", (time.perf_counter() - t) * 1000, "ms")
        finally:
            await sb.close()
            for c in client.containers.list(all=True, filters={"label": f"org.agent-desk.project={project}"}):
                c.remove(force=True)
            for c in client.containers.list(all=True, filters={"label": f"org.agent-desk.sync-of={project}"}):
                c.remove(force=True)
            for v in client.volumes.list(filters={"label": f"org.agent-desk.workspace-of={project}"}):
                v.remove(force=True)


def main() -> None:
    from tests.sandbox.remote_engine import second_engine

    with second_engine(IMAGE) as (client, _url):
        repeat(lambda: asyncio.run(_run(client)), runs=3)
