"""Containers a crashed desk left: two real desk processes each hold a sandbox; one is killed (SIGKILL, as in a
crash). The next start's sweep removes the dead one's container, never the live one's (which still runs
commands), and leaves a container another process holds alone however often it sweeps."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from tests.conftest import TEST_IMAGE, make_workspace

pytestmark = pytest.mark.usefixtures("desk_env")
ROOT = Path(__file__).resolve().parents[2]

# A desk process holding one project's sandbox: started, then answering "run" lines until stdin closes.
HOLDER = textwrap.dedent("""
    import asyncio, sys
    from desktop_app.sandbox import DockerSandbox, SandboxConfig

    async def main(project_id, folder, lease_dir, image):
        sb = DockerSandbox(project_id, folder, SandboxConfig(image=image, lease_dir=lease_dir))
        await sb.start()
        print("ready", sb.container_id, flush=True)
        loop = asyncio.get_running_loop()
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            r = await sb.exec(["sh", "-c", line.strip()])
            print("out", r.stdout.strip(), flush=True)
        await sb.close()

    asyncio.run(main(*sys.argv[1:]))
""")


def _holder(tmp_path: Path, name: str, lease_dir: Path) -> tuple[subprocess.Popen, str]:
    folder = make_workspace(tmp_path / name)
    script = tmp_path / "holder.py"
    script.write_text(HOLDER)
    proc = subprocess.Popen([sys.executable, str(script), f"prj_{name}_{uuid.uuid4().hex[:6]}", str(folder),
                             str(lease_dir), TEST_IMAGE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    line = proc.stdout.readline()
    assert line.startswith("ready"), line
    return proc, line.split()[1]


def test_a_crashed_desks_container_is_removed_and_a_live_ones_never(tmp_path, desk_env, docker_client):
    from desktop_app.runtime import lease_dir, remove_crashed_containers

    leases = lease_dir()
    live, live_id = _holder(tmp_path, "live", leases)
    dead, dead_id = _holder(tmp_path, "dead", leases)
    try:
        os.kill(dead.pid, signal.SIGKILL)  # a crash: nothing closed, the container left running
        dead.wait(timeout=30)
        assert docker_client.containers.get(dead_id).status == "running"
        for _ in range(2):  # two launches: the orphan goes at the first, the live one stays through both
            removed = remove_crashed_containers()
            assert all(live_id[:12] not in r for r in removed)
            assert docker_client.containers.get(live_id).status == "running"
        assert not docker_client.containers.list(all=True, filters={"id": dead_id})
        live.stdin.write("echo still-here\n")
        live.stdin.flush()
        assert live.stdout.readline().strip() == "out still-here"  # the live desk's sandbox still works
    finally:
        live.stdin.close()
        live.wait(timeout=60)
        for proc in (live, dead):
            if proc.poll() is None:
                proc.kill()
    # closed cleanly, its container stopped: nothing holds it, and a stopped one is not a crash's to sweep
    assert docker_client.containers.get(live_id).status != "running"
    assert remove_crashed_containers() == []
    docker_client.containers.get(live_id).remove(force=True)
