"""A second Docker engine for the synced-workspace tests, started by the tests themselves: its own data root
(kept under a stable temp path, so the test image is loaded from the main engine only once), exec root
and pidfile, listening on tcp://127.0.0.1:PORT with TLS verified both ways (--tlsverify, certificates the
test makes) and on a unix socket (what an ssh session reaches), with gVisor's runsc registered when it is
installed, a bridge of its own and no iptables so that it lives beside the main engine. The folder's lock
keeps two test sessions from sharing it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STATE = Path(os.environ.get("AGENT_DESK_REMOTE_ENGINE_DIR", "/tmp/agent-desk-remote-engine"))
START_WAIT_S = 90.0
BRIDGE, BRIDGE_ADDRESS = "adrbr0", "10.213.57.1/24"


def _own_bridge() -> None:
    """The second engine's bridge (a name and a /24 of its own), made once and kept."""
    if subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True).returncode != 0:
        subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True, capture_output=True)
        subprocess.run(["ip", "addr", "add", BRIDGE_ADDRESS, "dev", BRIDGE], check=True, capture_output=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SecondEngine:
    """The second engine: a client (over TLS), its tcp:// address, the folder DOCKER_CERT_PATH names, its unix
    socket and its runtimes. Unpacks as (client, url)."""

    client: Any
    url: str
    cert_path: Path
    socket: str
    runtimes: list[str] = field(default_factory=list)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.client, self.url))

    def tls_environ(self) -> dict[str, str]:
        return {"DOCKER_HOST": self.url, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(self.cert_path)}


def tls_client(url: str, certs: Path) -> Any:
    """The product's own client for the engine (connect(), as DOCKER_TLS_VERIFY and DOCKER_CERT_PATH say)."""
    from desktop_app.sandbox import connect

    env = {"DOCKER_HOST": url, "DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": str(certs)}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        return connect()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _wait_up(url: str, certs: Path, proc: subprocess.Popen, log: Path) -> Any:
    """A client, once the engine answers a ping."""
    end = time.monotonic() + START_WAIT_S
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"the second dockerd exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(Exception):
            client = tls_client(url, certs)
            client.ping()
            return client
        time.sleep(0.2)
    raise RuntimeError(f"the second dockerd did not answer in {START_WAIT_S:g} s: {log.read_text()[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def _load_image(url: str, image: str) -> None:
    """`docker save | docker load` from the main engine, once (the data root is kept between runs)."""
    save = subprocess.Popen(["docker", "save", image], stdout=subprocess.PIPE)
    subprocess.run(["docker", "load", "-q"], stdin=save.stdout, env={**os.environ, "DOCKER_HOST": url},
                   check=True, capture_output=True, timeout=600)
    save.stdout.close()
    if save.wait(timeout=60) != 0:
        raise RuntimeError(f"docker save {image} failed")


def _lock(fh: Any, wait_s: float = 900.0) -> None:
    """The data root is one engine's: another test session using it is waited for, not shared."""
    end = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() > end:
                raise RuntimeError(f"{STATE} stayed locked by another test session for {wait_s:g} s") from None
            time.sleep(0.5)


@contextlib.contextmanager
def second_engine(image: str) -> Iterator[SecondEngine]:
    """A freshly started second dockerd (see SecondEngine), stopped afterwards."""
    import docker

    from tests.sandbox.engine_access import make_tls_files

    if os.geteuid() != 0 or not shutil.which("dockerd"):
        raise RuntimeError("starting a second dockerd needs root and dockerd on PATH")
    STATE.mkdir(parents=True, exist_ok=True)
    with open(STATE / "lock", "w") as lock:
        _lock(lock)
        exec_root = Path(tempfile.mkdtemp(prefix="adr-", dir="/tmp"))  # short: containerd's socket path
        port = _free_port()
        url = f"tcp://127.0.0.1:{port}"
        sock = str(exec_root / "docker.sock")
        certs = make_tls_files(exec_root / "certs")
        log = STATE / "dockerd.log"
        # A bridge of its own, never --bridge=none: a dockerd without a bridge deletes the host's docker0,
        # which the main engine's containers with a network need.
        _own_bridge()
        args = ["dockerd", "--data-root", str(STATE / "data"), "--exec-root", str(exec_root),
                "--pidfile", str(exec_root / "dockerd.pid"), "-H", url, "-H", f"unix://{sock}", "--tlsverify",
                f"--tlscacert={certs / 'ca.pem'}", f"--tlscert={certs / 'server.pem'}",
                f"--tlskey={certs / 'server-key.pem'}", f"--bridge={BRIDGE}", "--iptables=false",
                "--ip6tables=false", "--ip-masq=false", "--ip-forward=false", "--userland-proxy=false"]
        if shutil.which("runsc"):  # gVisor, registered as `make engine RUNSC=1` does (sandbox_images/engine.sh)
            config = exec_root / "daemon.json"
            config.write_text(json.dumps({"runtimes": {"runsc": {"path": shutil.which("runsc"),
                                                                 "runtimeArgs": ["--network=none"]}}}))
            args.append(f"--config-file={config}")
        with open(log, "w") as out:
            proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        client = None
        try:
            client = _wait_up(url, certs, proc, log)
            try:
                client.images.get(image)
            except docker.errors.ImageNotFound:
                _load_image(f"unix://{sock}", image)
            yield SecondEngine(client, url, certs, sock, sorted(client.info().get("Runtimes") or {}))
        finally:
            if client is not None:
                client.close()
            _stop(proc)
            shutil.rmtree(exec_root, ignore_errors=True)
