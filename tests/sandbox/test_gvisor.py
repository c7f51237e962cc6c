"""gVisor as a sandbox option: a project that says `"runtime": "runsc"` gets its container under gVisor's own
kernel with every other hardening unchanged; doctor sees the runtime; a runtime the desk does not know is
refused by name. Run on the second engine, which registers runsc when it is installed (as `make engine
RUNSC=1` does). runsc is Debian's `runsc` package, which `make remote-tools` installs (as root): missing, the
tests skip with the reason, and fail under CI=true (where `make test` installed it). Installed but refused by
this machine's kernel (gVisor needs ptrace or KVM and seccomp), they skip, saying why, in CI too: no install
step can fix that; tests/README.md says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop_app.core import ConfigError
from desktop_app.doctor import OK, runtime_check
from desktop_app.sandbox import DockerSandbox, SandboxConfig
from tests.conftest import TEST_IMAGE, in_ci, remove_project


def runsc_or_skip(remote_engine) -> None:
    """Skip, saying why, unless the engine has runsc and a container starts under it here; a missing runsc
    fails under CI=true."""
    if "runsc" not in remote_engine.runtimes:
        why = ("gVisor is not installed here (no runsc on PATH): `make remote-tools` installs Debian's runsc "
               "package, as root")
        if in_ci():
            pytest.fail(f"{why}; it is required in CI", pytrace=False)
        pytest.skip(why)
    client, _ = remote_engine
    try:
        client.containers.run(TEST_IMAGE, ["true"], runtime="runsc", network_mode="none", remove=True)
    except Exception as exc:  # the kernel or the container refuses what gVisor needs (ptrace, seccomp)
        pytest.skip(f"gVisor's runsc does not run containers on this machine: {str(exc).strip()[:300]}")


def test_an_unknown_runtime_is_refused_by_name() -> None:
    for bad in ("kata", "io.containerd.runc.v2", "runsc --debug", "RUNSC"):
        with pytest.raises(ConfigError) as caught:
            SandboxConfig.from_settings({"runtime": bad})
        assert repr(bad) in str(caught.value) and "runsc" in caught.value.hint
    assert SandboxConfig.from_settings({}).container_hash() != SandboxConfig(runtime="runsc").container_hash()


@pytest.mark.docker
async def test_a_project_on_runsc_runs_under_gvisor_with_the_same_hardening(remote_engine, workspace: Path,
                                                                           project_id: str) -> None:
    runsc_or_skip(remote_engine)
    client, _ = remote_engine
    assert runtime_check(client).status == OK and "runsc" in runtime_check(client).detail
    config = SandboxConfig.from_settings({"runtime": "runsc", "workspace": "bind"}, image=TEST_IMAGE)
    sb = DockerSandbox(project_id, workspace, config, client=client)
    try:
        await sb.start()
        kernel = await sb.exec(["sh", "-c", "dmesg 2>&1 | head -n 3; uname -r"])
        assert "gVisor" in kernel.stdout, kernel  # gVisor's own kernel answers, not the host's
        wrote = await sb.exec(["sh", "-c", "echo under gvisor > made.txt"])
        assert wrote.exit_code == 0 and (workspace / "made.txt").read_text() == "under gvisor\n"
        host = client.api.inspect_container(sb.container_id)["HostConfig"]
        assert host["Runtime"] == "runsc"
        assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"]
        assert host["ReadonlyRootfs"] is True and host["NetworkMode"] == "none" and host["Init"] is True
        assert host["PidsLimit"] == config.pids and host["Memory"] == config.memory == host["MemorySwap"]
        assert host["NanoCpus"] == int(config.cpus * 1e9) and host["IpcMode"] == "private"
        assert sb.describe().to_dict()["limits"]["runtime"] == "runsc"
    finally:
        await sb.close()
        remove_project(client, project_id)
