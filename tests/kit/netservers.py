"""Local servers for the network allowlist tests: an HTTP and an HTTPS server on loopback (a certificate made
here), each saying which one answered and the Host it was sent, and a test resolver that maps test domains to
them (the proxy's `resolve`). Nothing leaves this machine."""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

NETCLIENT = Path(__file__).resolve().parent.parent / "sandbox" / "netclient.py"


PAGE = (b"<html><head><title>t</title><script>var secret = 1;</script></head><body><h1>Release notes</h1>"
        b"<p>See <a href='/docs'>the docs</a> and <code>pip install x</code>.</p><ul><li>one</li><li>two</li></ul>"
        b"</body></html>")


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        size = int(self.path.rsplit("/", 1)[-1]) if self.path.startswith("/bytes/") else 5
        body, ctype = b"x" * size, "application/octet-stream"
        if self.path == "/page":
            body, ctype = PAGE, "text/html; charset=utf-8"
        elif self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/page")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Server", self.server.tag)  # type: ignore[attr-defined]
        self.send_header("X-Seen-Host", self.headers.get("Host", ""))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def _self_signed(folder: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "good.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


@dataclass
class LocalServers:
    """`http_port`, `https_port` on 127.0.0.1; `names` is the test resolver's table."""

    http_port: int
    https_port: int
    names: dict[str, list[str]] = field(default_factory=dict)
    asked: list[str] = field(default_factory=list)

    async def resolve(self, host: str, port: int) -> list[str]:
        self.asked.append(host)
        if host in self.names:
            return list(self.names[host])
        raise OSError(f"the test resolver does not know {host}")


def _serve(tag: str, context: ssl.SSLContext | None = None) -> http.server.ThreadingHTTPServer:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.tag = tag  # type: ignore[attr-defined]
    srv.daemon_threads = True
    if context is not None:
        srv.socket = context.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, args=(0.05,), daemon=True).start()
    return srv


@contextmanager
def local_servers(folder: Path) -> Iterator[LocalServers]:
    """good.test -> the servers (127.0.0.1 is listed by the tests that use it), rebind.test -> a private address
    nobody listed, short.test -> 127.0.0.2 (loopback, not listed)."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = _self_signed(folder)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    plain, tls = _serve("plain"), _serve("tls", ctx)
    servers = LocalServers(plain.server_address[1], tls.server_address[1], {
        "good.test": ["127.0.0.1"], "also.good.test": ["127.0.0.1"], "rebind.test": ["10.20.30.40"],
        "mixed.test": ["127.0.0.1", "192.168.7.7"], "short.test": ["127.0.0.2"],
    })
    try:
        yield servers
    finally:
        for srv in (plain, tls):
            srv.shutdown()
            srv.server_close()
