"""The host path of the project does not appear inside the container when its workspace is synced (a volume
on the engine, no bind mount): `/proc/self/mountinfo` and `/proc/1/mountinfo` name neither the folder, nor
any folder above it, nor the user; and the workspace still works both ways (a write in the sandbox reaches
the host folder, a host edit reaches the sandbox). On the local engine ("workspace": "synced") and on a
remote one. A bind mount cannot hide it: the kernel shows a bind's source as its path within its file
system, whatever path (a link, a folder of the desk's) it was mounted through."""

from __future__ import annotations

import getpass
import os
from pathlib import Path

import pytest

from tests.conftest import TEST_IMAGE

pytestmark = pytest.mark.docker


def _secrets_of(folder: Path) -> list[str]:
    """What must not be read inside: the folder, each folder above it with a name of its own, the user."""
    parts = [str(folder)] + [str(p) for p in folder.parents if len(p.name) > 3]
    names = [p.name for p in (folder, *folder.parents) if len(p.name) > 3]
    user = getpass.getuser()
    return sorted({*parts, *names, *([user] if user not in ("root", "sandbox") else [])})


async def _check(sb, workspace: Path) -> None:
    for proc in ("/proc/self/mountinfo", "/proc/1/mountinfo", "/proc/self/mounts"):
        res = await sb.exec(f"cat {proc}")
        assert res.exit_code == 0 and "/workspace" in res.stdout, res.stderr
        leaked = [s for s in _secrets_of(workspace) if s in res.stdout]
        assert leaked == [], f"{proc} names {leaked}:\n{res.stdout}"
    assert (await sb.exec("echo from-the-sandbox > made.txt")).exit_code == 0
    await sb.sync_workspace()
    assert (workspace / "made.txt").read_text() == "from-the-sandbox\n"
    (workspace / "host.txt").write_text("from-the-host\n")
    await sb.sync_workspace()
    assert (await sb.exec("cat host.txt")).stdout == "from-the-host\n"


@pytest.fixture
def named_workspace(workspace: Path) -> Path:
    """A project folder whose path names a person, as a home folder's does."""
    folder = workspace / "home-alice-secretproject"
    folder.mkdir()
    if os.geteuid() == 0:
        os.chown(folder, 1000, 1000)
    return folder


async def test_a_synced_workspace_on_the_local_engine_hides_the_host_path(make_docker_sandbox,
                                                                          named_workspace) -> None:
    from desktop_app.sandbox import SandboxConfig

    sb = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE, workspace="synced"), folder=named_workspace)
    await _check(sb, named_workspace)


async def test_a_remote_engines_workspace_hides_the_host_path(make_remote_sandbox, named_workspace) -> None:
    sb = await make_remote_sandbox(folder=named_workspace)
    await _check(sb, named_workspace)


async def test_a_bind_mount_would_name_it(make_docker_sandbox, named_workspace) -> None:
    """Why the workspace is synced to hide the path: a bind mount's source is in mountinfo, as the kernel
    sees it (this is the claim the synced tests above rely on, checked on this engine)."""
    from desktop_app.sandbox import SandboxConfig

    sb = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE, workspace="bind"), folder=named_workspace)
    res = await sb.exec("cat /proc/self/mountinfo")
    assert named_workspace.name in res.stdout
