"""What the remote-engine tests need beyond the second dockerd itself: TLS certificates made for it (a CA, the
engine's certificate for 127.0.0.1, a client certificate: the files DOCKER_CERT_PATH names), and a real sshd
on loopback (Debian's openssh-server, not a daemon, on a free port, with a throwaway host key and authorized
key) whose sessions reach the second engine's unix socket."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SSHD = "/usr/sbin/sshd"


def _key() -> object:
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _write(path: Path, key: object, cert: object) -> None:
    from cryptography.hazmat.primitives import serialization

    path.with_name(path.name + "-key.pem").write_bytes(key.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()))
    path.with_name(path.name + ".pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))  # type: ignore[attr-defined]


def _cert(subject: str, key: object, issuer: tuple[str, object] | None, *, server: bool = False, ca: bool = False):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = (subject, key) if issuer is None else issuer
    b = (x509.CertificateBuilder().subject_name(name)
         .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer_name)]))
         .public_key(key.public_key()).serial_number(x509.random_serial_number())  # type: ignore[attr-defined]
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        b = b.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]), critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    elif not ca:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    return b.sign(issuer_key, hashes.SHA256())  # type: ignore[arg-type]


def make_tls_files(folder: Path) -> Path:
    """ca.pem, server.pem/server-key.pem (for dockerd) and cert.pem/key.pem (the client's) in `folder`, as
    DOCKER_CERT_PATH expects them; returns `folder`."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca = _cert("agent-desk test CA", ca_key, None, ca=True)
    _write(folder / "ca", ca_key, ca)
    server_key = _key()
    _write(folder / "server", server_key, _cert("127.0.0.1", server_key, ("agent-desk test CA", ca_key), server=True))
    client_key = _key()
    _write(folder / "cert", client_key, _cert("desk", client_key, ("agent-desk test CA", ca_key)))
    (folder / "cert-key.pem").rename(folder / "key.pem")
    (folder / "ca-key.pem").unlink()  # nobody signs anything more
    return folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True, slots=True)
class SshServer:
    """A running sshd: `target` (root@127.0.0.1:PORT, for DOCKER_HOST=ssh://…) and the client's home, whose
    .ssh holds the key and the server's host key in known_hosts."""

    target: str
    home: Path


def _ssh_keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "agent-desk-test", "-f", str(path)],
                   check=True, capture_output=True, timeout=30)
    return Path(f"{path}.pub").read_text().strip()


@contextlib.contextmanager
def ssh_server(folder: Path, docker_socket: str) -> Iterator[SshServer]:
    """sshd -D on 127.0.0.1:<free port> as root (to reach the engine's socket), keys only, its sessions
    with DOCKER_HOST set to `docker_socket`; stopped on exit."""
    if not os.path.exists(SSHD) or not shutil.which("ssh-keygen"):
        raise RuntimeError(f"{SSHD} or ssh-keygen is missing: run `make remote-tools` as root (Debian's "
                           "openssh-server)")
    folder.mkdir(parents=True, exist_ok=True)
    home = folder / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    host_pub = _ssh_keygen(folder / "host_key")
    user_pub = _ssh_keygen(home / ".ssh" / "id_ed25519")
    (folder / "authorized_keys").write_text(user_pub + "\n")
    port = _free_port()
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{port} {' '.join(host_pub.split()[:2])}\n")
    config = folder / "sshd_config"
    config.write_text("\n".join([
        f"Port {port}", "ListenAddress 127.0.0.1", f"HostKey {folder / 'host_key'}", f"PidFile {folder / 'sshd.pid'}",
        f"AuthorizedKeysFile {folder / 'authorized_keys'}", "StrictModes no", "UsePAM no",
        "PasswordAuthentication no", "KbdInteractiveAuthentication no", "PermitRootLogin prohibit-password",
        "AllowUsers root", f"SetEnv DOCKER_HOST=unix://{docker_socket}", ""]))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    log = folder / "sshd.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_listening(port, proc, log)
        yield SshServer(f"root@127.0.0.1:{port}", home)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _wait_listening(port: int, proc: subprocess.Popen, log: Path) -> None:
    import time

    end = time.monotonic() + 30
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {log.read_text()[-2000:]}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            return
        time.sleep(0.1)
    raise RuntimeError(f"sshd did not listen on 127.0.0.1:{port} in 30 s: {log.read_text()[-2000:]}")


@contextlib.contextmanager
def plain_tcp_forward(address: str, unix_socket: str) -> Iterator[str]:
    """A plain tcp:// listener on `address` (port 0: a free one) that relays each connection to the engine's
    unix socket: an engine reached unencrypted from another address than loopback, as a person might set one
    up (dockerd -H tcp://0.0.0.0:2375). Yields its tcp:// address."""
    import socketserver
    import threading

    class Relay(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            with socket.socket(socket.AF_UNIX) as engine:
                engine.connect(unix_socket)
                back = threading.Thread(target=_pump, args=(engine, self.request), daemon=True)
                back.start()
                _pump(self.request, engine)
                back.join(timeout=30)

    server = socketserver.ThreadingTCPServer((address, 0), Relay)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"tcp://{address}:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(65536):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
