"""The hardened container against hostile commands and paths: each attack is refused or stopped,
nothing leaks to the host, and the sandbox still answers afterwards."""

# ruff: noqa: ASYNC240  (the tests look at the host folder directly, on purpose)

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from desktop_app.core import PathOutsideWorkspace
from desktop_app.sandbox import SandboxConfig

from .conftest import TEST_IMAGE, vm_rss_kib

pytestmark = pytest.mark.docker


async def still_answers(sb) -> None:
    res = await sb.exec("echo alive")
    assert (res.exit_code, res.stdout) == (0, "alive\n")


async def test_symlink_to_etc_passwd_is_refused(docker_sandbox, workspace: Path) -> None:
    os.symlink("/etc/passwd", workspace / "passwd")
    os.symlink("/etc", workspace / "etc")
    host_passwd = Path("/etc/passwd").read_bytes()
    for op in (
        docker_sandbox.read_text("passwd"),
        docker_sandbox.read_file("etc/passwd"),
        docker_sandbox.write_text("passwd", "root::0:0::/:/bin/sh\n"),
        docker_sandbox.list_dir("etc"),
        docker_sandbox.write_text("etc/evil", "x"),
        docker_sandbox.stat("passwd"),
    ):
        with pytest.raises(PathOutsideWorkspace):
            await op
    assert Path("/etc/passwd").read_bytes() == host_passwd and not Path("/etc/evil").exists()
    listed = [(e.path, e.type) for e in await docker_sandbox.list_dir(".")]
    assert listed == [(".agent-desk", "dir"), ("etc", "symlink"), ("passwd", "symlink")]  # the desk makes .agent-desk
    await still_answers(docker_sandbox)


async def test_dotdot_traversal_is_refused(docker_sandbox, workspace: Path) -> None:
    for bad in ("../etc/passwd", "sub/../../x", "/etc/passwd", "/workspace/../etc/hostname"):
        with pytest.raises(PathOutsideWorkspace):
            await docker_sandbox.read_text(bad)
    with pytest.raises(PathOutsideWorkspace):
        await docker_sandbox.write_text("../escaped.txt", "x")
    with pytest.raises(PathOutsideWorkspace):
        await docker_sandbox.exec("pwd", cwd="/")
    assert not (workspace.parent / "escaped.txt").exists()
    await still_answers(docker_sandbox)


async def test_no_network(docker_sandbox) -> None:
    assert docker_sandbox.describe().network == "none"
    res = await docker_sandbox.exec(
        "python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=3)\"", timeout=20
    )
    assert res.exit_code != 0 and "Network is unreachable" in res.stderr
    ifaces = await docker_sandbox.exec("ls /sys/class/net")
    assert ifaces.stdout.split() == ["lo"]
    await still_answers(docker_sandbox)


async def test_fork_bomb_is_stopped_by_the_pids_limit(make_docker_sandbox) -> None:
    sb = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE, pids=64))
    # The classic bomb backgrounds itself: its first shell returns at once, and the group it leaves
    # behind is killed with it (an exec leaves no process running).
    res = await sb.exec("bomb() { bomb | bomb & }; bomb; wait", timeout=4)
    assert "Resource temporarily unavailable" in res.stderr  # fork failed: the limit held
    assert res.duration_ms < 10_000
    # One that never returns is killed at its timeout.
    res = await sb.exec("bomb() { bomb | bomb; }; bomb", timeout=3)
    assert res.timed_out and res.duration_ms < 10_000
    await still_answers(sb)
    count = await sb.exec("ls -d /proc/[0-9]* | wc -l")
    assert int(count.stdout) < 10, count.stdout  # init, sleep, the helper, this shell: the bomb is gone


async def test_memory_hog_is_oom_killed_and_reported(make_docker_sandbox) -> None:
    sb = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE, memory=64 * 1024**2))
    res = await sb.exec("python3 -c \"b = b'x' * (400 * 1024 * 1024); print(len(b))\"", timeout=60)
    assert res.oom_killed and res.exit_code == 137 and res.stdout == ""
    assert not (await sb.exec("true")).oom_killed
    await still_answers(sb)


async def test_huge_output_is_truncated_and_memory_stays_bounded(docker_sandbox) -> None:
    streamed = 0

    def on_output(stream: str, text: str) -> None:
        nonlocal streamed
        streamed += len(text)

    before = vm_rss_kib()
    res = await docker_sandbox.exec(
        "head -c 100000000 /dev/zero | tr '\\0' a", on_output=on_output, output_limit=1_000_000, timeout=120
    )
    grown_mib = (vm_rss_kib() - before) / 1024
    assert res.exit_code == 0 and res.truncated
    assert "99000000 bytes of output truncated" in res.stdout
    assert len(res.stdout) < 1_100_000 and streamed <= 1_000_000
    assert grown_mib < 40, f"the app grew by {grown_mib:.0f} MiB for 100 MB of output"
    await still_answers(docker_sandbox)


async def test_term_ignoring_command_is_killed_at_its_timeout(docker_sandbox) -> None:
    res = await docker_sandbox.exec("trap '' TERM; sleep 60.5 & sleep 60.5; wait", timeout=1)
    assert res.timed_out and res.killed_signal == 9
    assert 1000 <= res.duration_ms < 6000
    left = await docker_sandbox.exec("pgrep -f '^sleep 60.5' || true")
    assert left.stdout == ""
    await still_answers(docker_sandbox)


async def test_cancelled_exec_is_killed(docker_sandbox, workspace: Path) -> None:
    task = asyncio.create_task(docker_sandbox.exec("touch started; sleep 60.6; touch finished"))
    for _ in range(500):
        if (workspace / "started").exists():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gone = await docker_sandbox.exec(
        "for i in $(seq 50); do pgrep -f '^sleep 60.6' >/dev/null || exit 0; sleep 0.1; done; exit 1"
    )
    assert gone.exit_code == 0 and not (workspace / "finished").exists()


async def test_background_process_dies_at_kill(docker_sandbox) -> None:
    pid = await docker_sandbox.start_background("echo up; exec sleep 60.7")
    logs = await docker_sandbox.logs(pid)
    for _ in range(300):
        if "up" in logs.output:
            break
        await asyncio.sleep(0.01)
        logs = await docker_sandbox.logs(pid)
    assert logs.running and logs.output == "up\n"
    killed = await docker_sandbox.kill(pid)
    assert not killed.running and killed.exit_code == 143
    assert (await docker_sandbox.exec("pgrep -f '^sleep 60.7' || true")).stdout == ""


async def test_background_process_dies_when_the_container_stops(docker_sandbox, docker_client, workspace: Path) -> None:
    await docker_sandbox.start_background("while :; do date +%s%N > beat; sleep 0.05; done")
    beat = workspace / "beat"
    for _ in range(500):
        if beat.exists() and beat.read_text().strip():
            break
        await asyncio.sleep(0.01)
    assert beat.exists()
    await docker_sandbox.stop_container()
    container = docker_client.containers.get(docker_sandbox.container_id)
    assert container.status == "exited"
    last = beat.read_text()
    await asyncio.sleep(0.3)  # several beats' worth: none comes
    assert beat.read_text() == last
    # the next call starts the container and a new helper; the old process stays dead
    await still_answers(docker_sandbox)
    assert (await docker_sandbox.exec("pgrep -f 'date +%s%N' || true")).stdout == ""


async def test_inside_the_user_is_unprivileged(docker_sandbox) -> None:
    res = await docker_sandbox.exec("id -u; grep -E '^(CapEff|CapPrm|CapBnd|NoNewPrivs)' /proc/self/status")
    lines = res.stdout.split("\n")
    assert lines[0] == "1000"
    status = dict(line.split(":\t") for line in lines[1:] if line)
    assert status == {
        "CapPrm": "0000000000000000",
        "CapEff": "0000000000000000",
        "CapBnd": "0000000000000000",
        "NoNewPrivs": "1",
    }
    ro = await docker_sandbox.exec("touch /usr/x || echo refused; touch /tmp/x ~/x && echo tmp-ok")
    assert "Read-only file system" in ro.stderr and ro.stdout == "refused\ntmp-ok\n"
    sock = await docker_sandbox.exec("ls /var/run/docker.sock /run/docker.sock 2>&1 || true")
    assert "No such file" in sock.stdout
    d = docker_sandbox.describe()
    assert d.kind == "docker" and not d.unsandboxed and d.relaxations == []
    assert d.limits["pids"] == 256 and d.limits["memory"] == "2 GiB" and d.limits["cpus"] == 2.0
    assert d.image_digest.startswith("sha256:") and d.container_id


async def test_container_settings_as_docker_sees_them(docker_sandbox, docker_client) -> None:
    hc = docker_client.api.inspect_container(docker_sandbox.container_id)["HostConfig"]
    assert hc["NetworkMode"] == "none" and hc["CapDrop"] == ["ALL"] and hc["ReadonlyRootfs"]
    assert "no-new-privileges" in hc["SecurityOpt"] and hc["Init"] is True
    assert hc["PidsLimit"] == 256 and hc["Memory"] == 2 * 1024**3 and hc["NanoCpus"] == 2 * 10**9
    assert set(hc["Tmpfs"]) == {"/tmp", "/home/sandbox"} and not hc.get("Privileged")
    mounts = docker_client.api.inspect_container(docker_sandbox.container_id)["Mounts"]
    # .agent-desk read-only over the workspace (tests/security/test_control_files.py); the helper's door folder
    # read-only (tests/security/test_helper_door.py)
    want = [("/run/agent-desk/helper", False), ("/workspace", True), ("/workspace/.agent-desk", False)]
    assert sorted((m["Destination"], m["RW"]) for m in mounts) == want
    assert all("docker.sock" not in m["Source"] for m in mounts)
