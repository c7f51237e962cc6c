"""A client the network tests run inside the sandbox (python3 with only socket and ssl, as the minimal image
has): it goes through the proxy the sandbox's environment names, as pip or curl would.

    python3 - MODE HOST PORT [PATH [CLAIMED]]
        MODE: http (absolute-form GET), https (CONNECT, then TLS, then GET), direct (a plain connection,
        bypassing the proxy), dns (resolve HOST). CLAIMED: the Host header (and TLS server name) sent instead.
Prints one line: "status NNN bytes N server S" or "error TEXT"."""

import os
import socket
import ssl
import sys


def proxy():
    url = os.environ.get("HTTPS_PROXY") or os.environ["HTTP_PROXY"]
    host, port = url.split("//", 1)[1].rstrip("/").rsplit(":", 1)
    return host, int(port)


def read_response(sock):
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    server = [h.split(b":", 1)[1].strip().decode() for h in head.split(b"\r\n") if h.lower().startswith(b"x-server:")]
    return int(head.split(b" ", 2)[1]), body, (server or ["-"])[0]


def connect_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(1)
        if not chunk:
            break
        data += chunk
    return int(data.split(b" ", 2)[1]) if data else 0, data


def main(mode, host, port, path="/", claimed=None):
    port = int(port)
    claimed = claimed or host
    if mode == "dns":
        return "resolved " + socket.gethostbyname(host)
    if mode == "direct":
        socket.create_connection((host, port), timeout=1).close()
        return "connected"
    sock = socket.create_connection(proxy(), timeout=20)
    if mode == "http":
        sock.sendall(f"GET http://{host}:{port}{path} HTTP/1.1\r\nHost: {claimed}\r\n\r\n".encode())
        status, body, server = read_response(sock)
        return f"status {status} bytes {len(body)} server {server}"
    sock.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    status, _head = connect_head(sock)
    if status != 200:
        rest = sock.recv(65536)
        return f"status {status} refused {rest.decode(errors='replace').strip()}"
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE  # a test server's own certificate
    tls = ctx.wrap_socket(sock, server_hostname=claimed)
    tls.sendall(f"GET {path} HTTP/1.1\r\nHost: {claimed}\r\nConnection: close\r\n\r\n".encode())
    status, body, server = read_response(tls)
    return f"status {status} bytes {len(body)} server {server}"


if __name__ == "__main__":
    try:
        print(main(*sys.argv[1:]))
    except Exception as exc:  # the test reads the line
        print(f"error {type(exc).__name__}: {exc}")
