"""How the desk reaches a remote engine: over ssh (a real sshd on loopback) a sandbox runs and syncs; each way a
remote engine can fail to answer (an unknown host key, a refused key, no sshd, plain HTTP to a TLS engine, a
certificate from another CA, a missing client certificate, an unknown host) is said with the address, its
cause and its fix, never "install Docker"; a plain tcp:// link to another address is warned by doctor, the
window's status and the CLI."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from desktop_app.config import Settings
from desktop_app.core import SandboxError
from desktop_app.doctor import AMBER, FAIL, OK, WARN, check_project_sandbox, docker_checks, engine_link_note
from desktop_app.sandbox import DockerSandbox, SandboxConfig, connect, engine_link
from tests.conftest import TEST_IMAGE
from tests.sandbox.engine_access import make_tls_files, plain_tcp_forward, ssh_server
from tests.sandbox.remote_engine import BRIDGE_ADDRESS

pytestmark = pytest.mark.docker

ENGINE_VARS = ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "SSH_AUTH_SOCK")


@pytest.fixture
def engine_env(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Set the engine's variables for this test only (the others unset)."""
    for name in ENGINE_VARS:
        monkeypatch.delenv(name, raising=False)

    def use(**values: str) -> None:
        for name in ENGINE_VARS:
            monkeypatch.delenv(name, raising=False)
        for name, value in values.items():
            monkeypatch.setenv(name, value)
    return use


def refusal() -> SandboxError:
    with pytest.raises(SandboxError) as caught:
        connect().close()
    return caught.value


def engine_line() -> Any:
    checks = docker_checks(Settings())
    return next(c for c in checks if c.name == "Docker engine")


async def test_over_ssh_a_sandbox_runs_and_each_ssh_failure_is_named(remote_engine, engine_env, monkeypatch,
                                                                     tmp_path: Path, workspace: Path) -> None:
    with ssh_server(tmp_path / "ssh", remote_engine.socket) as sshd:
        monkeypatch.setenv("HOME", str(sshd.home))
        engine_env(DOCKER_HOST=f"ssh://{sshd.target}")
        client = connect()
        (workspace / "in.txt").write_text("from the host\n")
        sb = DockerSandbox("ssh-link-test", workspace, SandboxConfig(image=TEST_IMAGE), client=client)
        try:
            await sb.start()
            done = await sb.exec(["sh", "-c", "cat in.txt && echo back > out.txt"])
            assert done.exit_code == 0 and done.stdout == "from the host\n"
            assert sb.describe().to_dict()["where"] == f"remote engine, synced workspace (ssh://{sshd.target})"
        finally:
            await sb.close()  # the last sync brings the sandbox's file back over the same link
            for label in ("org.agent-desk.project", "org.agent-desk.sync-of"):
                for c in client.containers.list(all=True, filters={"label": f"{label}=ssh-link-test"}):
                    c.remove(force=True)
            for v in client.volumes.list(filters={"label": "org.agent-desk.workspace-of=ssh-link-test"}):
                v.remove(force=True)
            client.close()
        assert (workspace / "out.txt").read_text() == "back\n"
        assert engine_line().status == OK

        port = sshd.target.rsplit(":", 1)[1]
        known = sshd.home / ".ssh" / "known_hosts"
        saved = known.read_text()
        known.write_text("")
        unknown = refusal()
        assert f"ssh://{sshd.target}" in str(unknown) and "host key of 127.0.0.1 is not in" in str(unknown)
        assert f"ssh -p {port} root@127.0.0.1" in unknown.hint
        line = engine_line()
        assert line.status == FAIL and "install" not in line.fix.lower() and "ssh -p" in line.fix
        known.write_text(saved)

        key = sshd.home / ".ssh" / "id_ed25519"
        shutil.move(key, tmp_path / "kept")
        shutil.move(f"{key}.pub", tmp_path / "kept.pub")
        (sshd.home / ".ssh" / "id_ed25519").write_bytes(make_other_key(tmp_path))
        assert "refused the login" in str(refusal())

    closed = refusal()  # the same address, its sshd stopped
    assert "nothing listens" in str(closed) and "sshd" in closed.hint


def make_other_key(tmp_path: Path) -> bytes:
    """A private key the server never authorized."""
    import subprocess

    path = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True, capture_output=True)
    return path.read_bytes()


def test_each_tls_failure_is_named_with_its_fix(remote_engine, engine_env, tmp_path: Path) -> None:
    url = remote_engine.url
    engine_env(DOCKER_HOST=url, DOCKER_TLS_VERIFY="1", DOCKER_CERT_PATH=str(remote_engine.cert_path))
    connect().close()  # the right certificates: it answers (REQUESTS_CA_BUNDLE or not)

    engine_env(DOCKER_HOST=url)
    plain = refusal()
    assert url in str(plain) and "speaks TLS" in str(plain) and "DOCKER_TLS_VERIFY=1" in plain.hint
    line = engine_line()
    assert line.status == FAIL and "install" not in line.fix.lower()

    other = make_tls_files(tmp_path / "other-ca")
    mixed = tmp_path / "mixed"
    mixed.mkdir()
    shutil.copy(other / "ca.pem", mixed / "ca.pem")
    for name in ("cert.pem", "key.pem"):
        shutil.copy(remote_engine.cert_path / name, mixed / name)
    engine_env(DOCKER_HOST=url, DOCKER_TLS_VERIFY="1", DOCKER_CERT_PATH=str(mixed))
    assert "not signed by the CA in DOCKER_CERT_PATH" in str(refusal())

    (mixed / "cert.pem").unlink()
    engine_env(DOCKER_HOST=url, DOCKER_TLS_VERIFY="1", DOCKER_CERT_PATH=str(mixed))
    assert "lacks cert.pem or key.pem" in str(refusal())

    engine_env(DOCKER_HOST="tcp://no-such-engine.invalid:2376", DOCKER_TLS_VERIFY="1",
               DOCKER_CERT_PATH=str(remote_engine.cert_path))
    nameless = refusal()
    assert "no-such-engine.invalid" in str(nameless) and "DOCKER_HOST" in nameless.hint


def test_a_plain_tcp_link_to_another_address_is_warned_everywhere(remote_engine, engine_env, workspace) -> None:
    address = BRIDGE_ADDRESS.split("/")[0]  # the second engine's bridge: this machine, but not loopback
    with plain_tcp_forward(address, remote_engine.socket) as url:
        engine_env(DOCKER_HOST=url)
        line = engine_line()
        assert line.status == WARN and "plain tcp" in line.detail and "unencrypted" in line.detail
        assert "DOCKER_TLS_VERIFY=1" in line.fix and "ssh://" in line.fix
        status = check_project_sandbox(str(workspace), TEST_IMAGE, {})
        assert status.level == AMBER and status.text == "The link to the engine is not encrypted", status
        assert "plain tcp" in engine_link_note() and "fix:" in engine_link_note()
    # what is not warned: loopback, TLS verified, ssh, the local socket
    for quiet, env in (("tcp://127.0.0.1:2375", {}), ("tcp://localhost:2375", {}),
                       ("tcp://10.0.0.5:2376", {"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": "/c"}),
                       ("ssh://me@build-host", {}), ("unix:///var/run/docker.sock", {})):
        assert engine_link(quiet, env).warning() == ("", ""), quiet
    unverified = engine_link("tcp://10.0.0.5:2376", {"DOCKER_CERT_PATH": "/c"}).warning()
    assert "without checking its certificate" in unverified[0]
    assert "plain tcp" in engine_link("tcp://[2001:db8::1]:2375", {}).warning()[0]


async def test_an_image_without_python3_writes_files_over_tls(remote_engine, workspace: Path) -> None:
    """The exec transport's writes end by size, not by EOF: a TLS stream cannot half-close (Python's ssl drops
    the session), and the write used to wait for an EOF that never came."""
    from tests.kit import no_python_image

    client, _ = remote_engine
    config = SandboxConfig(image=no_python_image(client, TEST_IMAGE), workspace="bind")
    sb = DockerSandbox("tls-exec-test", workspace, config, client=client)
    try:
        await sb.start()
        assert sb.transport == "exec"
        payload = bytes(range(256)) * 4099  # past one 1 MiB block of dd, with every byte value
        assert (await sb.write_file("blob.bin", payload)).size == len(payload)
        assert (await sb.write_file("empty.txt", b"")).size == 0
        assert (workspace / "blob.bin").read_bytes() == payload and (workspace / "empty.txt").read_bytes() == b""
        with pytest.raises(SandboxError):
            await sb.write_file(".agent-desk/x", b"refused")  # a refusal drains its input and answers
        assert (await sb.write_file("after.txt", b"still answers\n")).size == 14
    finally:
        await sb.close()
        for c in client.containers.list(all=True, filters={"label": "org.agent-desk.project=tls-exec-test"}):
            c.remove(force=True)
