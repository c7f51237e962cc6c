"""One container per project: found again by label, recreated when its configuration changes,
orphans swept; clear errors for a missing engine or image; the exec-per-call fallback."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import threading
import time
from pathlib import Path

import docker.errors
import pytest

from desktop_app.config import Settings
from desktop_app.core import PathOutsideWorkspace, SandboxError
from desktop_app.doctor import docker_checks
from desktop_app.sandbox import DockerSandbox, SandboxConfig, connect, container_name, remove_orphans
from desktop_app.sandbox import _client as client_module
from tests.conftest import no_engine

from .conftest import TEST_IMAGE, make_workspace

pytestmark = pytest.mark.docker
LABEL = "org.agent-desk.project"


def containers_of(client, project: str) -> list:
    return client.containers.list(all=True, filters={"label": f"{LABEL}={project}"})


async def test_found_again_by_label(make_docker_sandbox, docker_client, project_id) -> None:
    first = await make_docker_sandbox()
    await first.write_text("note.txt", "kept")
    cid = first.container_id
    await first.close()
    assert docker_client.containers.get(cid).status == "exited"
    again = await make_docker_sandbox()
    assert again.container_id == cid and docker_client.containers.get(cid).status == "running"
    assert (await again.exec("cat note.txt")).stdout == "kept"
    c = docker_client.containers.get(cid)
    assert c.name == container_name(project_id) and c.labels[LABEL] == project_id


async def test_recreated_when_the_configuration_changes(make_docker_sandbox, docker_client, project_id) -> None:
    first = await make_docker_sandbox()
    old = first.container_id
    await first.close()
    bigger = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE, memory=3 * 1024**3, network=True))
    assert bigger.container_id != old
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(old)
    assert [c.id for c in containers_of(docker_client, project_id)] == [bigger.container_id]
    d = bigger.describe()
    assert d.network == "bridge" and d.relaxations == ["network: on (bridge)", "memory: 3 GiB (default 2 GiB)"]
    assert docker_client.api.inspect_container(bigger.container_id)["HostConfig"]["Memory"] == 3 * 1024**3


async def test_orphans_are_removed(make_docker_sandbox, docker_client, tmp_path: Path) -> None:
    gone_dir = make_workspace(tmp_path / "gone")
    idle_dir = make_workspace(tmp_path / "idle")
    live_dir = make_workspace(tmp_path / "live")
    gone = await make_docker_sandbox(folder=gone_dir, project="orphan-gone-" + tmp_path.name[-8:])
    idle = await make_docker_sandbox(folder=idle_dir, project="orphan-idle-" + tmp_path.name[-8:])
    live = await make_docker_sandbox(folder=live_dir, project="orphan-live-" + tmp_path.name[-8:])
    await gone.close()
    await idle.close()
    shutil.rmtree(gone_dir)
    scope = {gone.project_id, idle.project_id, live.project_id}
    # Stopped for a day already, as far as the sweep can tell: idle past a one-hour limit.
    removed = remove_orphans(docker_client, idle_limit_s=3600, only=scope, now=time.time() + 86400)
    assert sorted(removed) == sorted([container_name(gone.project_id), container_name(idle.project_id)])
    assert containers_of(docker_client, gone.project_id) == [] and containers_of(docker_client, idle.project_id) == []
    assert [c.status for c in containers_of(docker_client, live.project_id)] == ["running"]
    # a project the app no longer knows is an orphan too
    removed = remove_orphans(docker_client, known_projects=set(), only={live.project_id})
    assert removed == [container_name(live.project_id)]


async def test_folder_owner_is_the_container_user(make_docker_sandbox, tmp_path: Path) -> None:
    folder = tmp_path / "owned"
    folder.mkdir()
    if os.geteuid() == 0:
        os.chown(folder, 4321, 4321)
    sb = await make_docker_sandbox(folder=folder)
    expected = "4321" if os.geteuid() == 0 else str(os.geteuid())
    assert (await sb.exec("id -u")).stdout.strip() == expected
    await sb.write_text("made-inside.txt", "x")
    assert (folder / "made-inside.txt").stat().st_uid == int(expected)


async def test_read_only_workspace(make_docker_sandbox, workspace: Path) -> None:
    (workspace / "a.txt").write_text("read me")
    sb = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE, workspace_readonly=True))
    assert await sb.read_text("a.txt") == "read me"
    with pytest.raises(SandboxError, match="read-only"):
        await sb.write_text("b.txt", "no")
    assert sb.describe().limits["workspace"] == "read-only"


async def test_missing_image_names_the_build_command(make_docker_sandbox, monkeypatch, tmp_path: Path) -> None:
    # a tag from the catalog: the hint names its build command
    (tmp_path / "images.toml").write_text(
        '[images.extra]\nlabel = "Extra"\ndescription = "d"\ncontains = []\n'
        'dockerfile = "extra/Dockerfile"\ntag = "agent-desk/extra-nope:latest"\n'
    )
    monkeypatch.setenv("AGENT_DESK_IMAGES_DIR", str(tmp_path))
    sb = await make_docker_sandbox(SandboxConfig(image="agent-desk/extra-nope:latest"), start=False)
    with pytest.raises(SandboxError, match="not on this machine") as info:
        await sb.start()
    assert "agent-desk images build extra" in info.value.hint
    # any other tag: the hint points at the project's settings
    other = await make_docker_sandbox(SandboxConfig(image="example/unknown-nope:1"), start=False)
    with pytest.raises(SandboxError, match="not on this machine") as info:
        await other.start()
    assert "project's settings" in info.value.hint  # the window offers the button; the CLI the command


async def test_missing_engine_says_how_to_fix_it(monkeypatch, workspace: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{workspace}/no-such-docker.sock")
    sb = DockerSandbox("no-engine", workspace)
    with pytest.raises(SandboxError, match="no Docker engine answers") as info:
        await sb.exec("true")
    assert info.value.hint == "start Docker, or set DOCKER_HOST"
    await sb.close()


@contextlib.contextmanager
def _silent_engine(address):
    """A listener at `address` (a unix path or a loopback (host, port)) that takes each connection, reads its
    request, and never answers: a hung dockerd. Yields the DOCKER_HOST that names it."""
    family = socket.AF_UNIX if isinstance(address, str) else socket.AF_INET
    server = socket.socket(family, socket.SOCK_STREAM)
    server.bind(address)
    server.listen(8)
    held, stop = [], threading.Event()

    def serve() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            held.append(conn)  # kept open and never answered

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    try:
        host = address if isinstance(address, str) else f"{address[0]}:{server.getsockname()[1]}"
        yield f"unix://{host}" if family == socket.AF_UNIX else f"tcp://{host}"
    finally:
        stop.set()
        t.join(5)
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.parametrize("where", ["unix", "tcp"])
def test_a_hung_engine_is_named_in_seconds_not_a_minute(where, monkeypatch, tmp_path: Path) -> None:
    """An engine that accepts and stays silent (a wedged dockerd, a tunnel with nothing behind it) is reported
    within the short ping bound, as hung, not after the SDK's minute per request."""
    monkeypatch.setattr(client_module, "ENGINE_PING_TIMEOUT_S", 1.0)
    address = str(tmp_path / "hung.sock") if where == "unix" else ("127.0.0.1", 0)
    with _silent_engine(address) as url:
        monkeypatch.setenv("DOCKER_HOST", url)
        for var in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
            monkeypatch.delenv(var, raising=False)
        t0 = time.monotonic()
        with pytest.raises(SandboxError) as info:
            connect()
        took = time.monotonic() - t0
        engine = docker_checks(Settings(path=None))[0]  # what `doctor` says of it, and its fix
    assert took < 10, f"the hung engine took {took:.1f} s to be named"
    if where == "unix":
        assert "no Docker engine answers" in str(info.value) and "is dockerd hung?" in str(info.value)
        assert info.value.hint == client_module.ENGINE_HUNG_HINT
        assert engine.status == "fail" and "is dockerd hung?" in engine.detail
        assert engine.fix == client_module.ENGINE_HUNG_HINT  # "restart dockerd", never "install Docker"
    else:
        assert "does not answer" in str(info.value) and "did not answer in time" in str(info.value), info.value


def test_the_engine_client_keeps_the_long_bound_for_its_work(docker_client) -> None:
    """Only the ping is bounded short: a build or a big copy on the client connect() returns has the request
    bound, so a slow answer there is not cut at the ping's seconds."""
    client = connect()
    try:
        assert client.api.timeout == client_module.REQUEST_TIMEOUT_S > client_module.ENGINE_PING_TIMEOUT_S
        assert client.ping()
    finally:
        client.close()


async def test_concurrent_reads_share_one_channel(docker_sandbox) -> None:
    await docker_sandbox.write_file("blob", os.urandom(256 * 1024))
    want = await docker_sandbox.read_file("blob")
    got = await asyncio.gather(*(docker_sandbox.read_file("blob") for _ in range(100)))
    assert all(g == want for g in got) and len(want) == 256 * 1024
    assert docker_sandbox.describe().limits["transport"] == "helper"


# -- an image without python3: one docker exec per call, same answers -----------------------------
BASE_IMAGE = "agent-desk/base:bookworm"


@pytest.fixture
async def exec_sandbox(make_docker_sandbox, docker_client):
    try:
        docker_client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        no_engine(f"{BASE_IMAGE} is missing (sandbox_images/engine.sh builds it)")  # fails when CI=true
    sb = await make_docker_sandbox(SandboxConfig(image=BASE_IMAGE))
    assert sb.describe().limits["transport"] == "exec"
    return sb


async def test_fallback_exec(exec_sandbox) -> None:
    chunks: list[tuple[str, str]] = []
    res = await exec_sandbox.exec(
        "echo out; echo err >&2; exit 3", on_output=lambda s, t: chunks.append((s, t)), env={"A": "1"}
    )
    assert (res.exit_code, res.stdout, res.stderr) == (3, "out\n", "err\n") and ("stdout", "out\n") in chunks
    res = await exec_sandbox.exec("trap '' TERM; sleep 30", timeout=1)
    assert res.timed_out and res.duration_ms < 6000
    res = await exec_sandbox.exec("seq 1 100000", output_limit=1000)
    assert res.truncated and res.stdout.endswith("100000\n")
    with pytest.raises(PathOutsideWorkspace):
        await exec_sandbox.exec("pwd", cwd="/etc")


async def test_fallback_files(exec_sandbox, workspace: Path) -> None:
    st = await exec_sandbox.write_text("src/a.py", "import os\nprint('x')\n")
    assert (st.path, st.type, st.size) == ("src/a.py", "file", 21)
    await exec_sandbox.write_file("src/b.bin", b"\x00\x01\x02abc")
    assert await exec_sandbox.read_text("/workspace/src/a.py") == "import os\nprint('x')\n"
    assert await exec_sandbox.read_file("src/b.bin", offset=3, limit=2) == b"ab"
    assert (await exec_sandbox.stat("src")).type == "dir" and await exec_sandbox.stat("nope") is None
    assert [e.path for e in await exec_sandbox.list_dir("src")] == ["src/a.py", "src/b.bin"]
    assert [e.path for e in await exec_sandbox.glob("**/*.py")] == ["src/a.py"]
    hits = await exec_sandbox.grep("PRINT", ignore_case=True)
    assert [(h.path, h.line, h.text) for h in hits] == [("src/a.py", 2, "print('x')")]
    os.symlink("/etc/passwd", workspace / "passwd")
    for op in (
        exec_sandbox.read_text("passwd"),
        exec_sandbox.read_text("../etc/passwd"),
        exec_sandbox.write_text("passwd", "x"),
        exec_sandbox.list_dir("/etc"),
    ):
        with pytest.raises(PathOutsideWorkspace):
            await op
    with pytest.raises(SandboxError, match="no such file"):
        await exec_sandbox.read_text("missing")


async def test_fallback_background(exec_sandbox) -> None:
    pid = await exec_sandbox.start_background("echo up; exec sleep 30")
    logs = await exec_sandbox.logs(pid)
    for _ in range(300):
        if "up" in logs.output:
            break
        await asyncio.sleep(0.01)
        logs = await exec_sandbox.logs(pid)
    assert logs.running and logs.output == "up\n"
    killed = await exec_sandbox.kill(pid)
    assert not killed.running and killed.exit_code == 143


async def test_fallback_recovers_when_the_container_stops(exec_sandbox, docker_client) -> None:
    docker_client.containers.get(exec_sandbox.container_id).stop(timeout=1)
    with pytest.raises(SandboxError, match="did not answer"):
        await exec_sandbox.exec("true")
    assert (await exec_sandbox.exec("echo back")).stdout == "back\n"


async def test_helper_recovers_when_the_container_is_removed(docker_sandbox, docker_client) -> None:
    old = docker_sandbox.container_id
    docker_client.containers.get(old).remove(force=True)
    try:  # the helper's end of file may or may not have been seen yet: either way no hang
        await docker_sandbox.exec("true")
    except SandboxError as exc:
        assert "helper" in str(exc) or "did not answer" in str(exc)
    res = await docker_sandbox.exec("echo back")
    assert res.stdout == "back\n" and docker_sandbox.container_id != old


async def test_fallback_real_path(exec_sandbox) -> None:
    res = await exec_sandbox.exec("mkdir -p secrets src/a/b && ln -s secrets link && ln -s src/a/b deep"
                                  " && ln -s /etc out && ln -s /workspace/secrets /tmp/into")
    assert res.exit_code == 0, res.stderr
    for spelling in ("secrets/k", "//workspace/secrets/k", "src/../secrets//k", "link/k", "/tmp/into/k"):
        assert await exec_sandbox.real_path(spelling) == "/workspace/secrets/k", spelling
    assert await exec_sandbox.real_path("deep/../x") == "/workspace/src/a/x"
    assert await exec_sandbox.real_path("new/dir/f") == "/workspace/new/dir/f"
    for outside in ("../x", "/etc/passwd", "out/passwd", "/tmp/x"):
        with pytest.raises(PathOutsideWorkspace):
            await exec_sandbox.real_path(outside)
