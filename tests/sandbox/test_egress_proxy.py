"""The egress proxy on loopback, with local servers and the test resolver: what it admits, what it refuses and
why, the bytes it counts each way, and the requests it will not read."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from desktop_app.core import NetworkAllowlist
from desktop_app.sandbox._proxy import EgressProxy, ListOnlyGate, parse_head
from tests.kit.netservers import LocalServers, local_servers
from tests.kit.waiting import wait_until_async


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    with local_servers(tmp_path) as s:
        yield s


@pytest.fixture
async def proxy(servers: LocalServers) -> AsyncIterator[EgressProxy]:
    ports = f"{servers.http_port},{servers.https_port}"
    gate = ListOnlyGate(NetworkAllowlist.parse([f"good.test:{ports}", f"*.good.test:{ports}", f"127.0.0.1:{ports}"]))
    p = EgressProxy(gate, resolve=servers.resolve)
    await p.start("127.0.0.1", 0)
    yield p
    await p.close()


async def _exchange(proxy: EgressProxy, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection(*proxy.address)
    writer.write(request)
    await writer.drain()
    try:
        data = await reader.read()
    except ConnectionResetError:  # dropped unread
        data = b""
    writer.close()
    return data


async def _tls_get(proxy: EgressProxy, host: str, port: int, path: str = "/bytes/100") -> bytes:
    """CONNECT, then TLS through the tunnel, then a GET: the response (or the proxy's refusal)."""
    reader, writer = await asyncio.open_connection(*proxy.address)
    writer.write(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        rest = await reader.read()
        writer.close()
        return head + rest
    ctx = ssl.create_default_context()
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE
    await writer.start_tls(ctx, server_hostname=host)
    writer.write(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    body = await reader.read()
    writer.close()
    return body


async def test_a_listed_name_passes_both_ways_and_its_bytes_are_counted(proxy: EgressProxy,
                                                                        servers: LocalServers) -> None:
    request = (f"GET http://good.test:{servers.http_port}/bytes/5000 HTTP/1.1\r\nHost: good.test\r\n"
               "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n").encode()
    reply = await _exchange(proxy, request)
    assert reply.startswith(b"HTTP/1.1 200") and b"X-Server: plain" in reply
    body = await _tls_get(proxy, "good.test", servers.https_port, "/bytes/70000")
    assert body.startswith(b"HTTP/1.1 200") and b"X-Server: tls" in body and body.endswith(b"x" * 70000)
    conns = proxy.gate.connections  # type: ignore[attr-defined]
    assert await wait_until_async(lambda: len(conns) == 2, 10)  # the tunnel's record: once both sides closed
    assert [(c.domain, c.verdict, c.reason, c.method) for c in conns] == [
        ("good.test", "allowed", "listed", "GET"), ("good.test", "allowed", "listed", "CONNECT")]
    plain, tunnel = conns
    assert plain.bytes_down == len(reply)  # every byte the server sent came back, and was counted
    upstream = parse_head(request)[3]
    assert upstream is not None and plain.bytes_up == len(upstream)
    assert b"Proxy-" not in upstream and b"Connection: close" in upstream  # the proxy's own headers stay here
    assert tunnel.bytes_down > 70000 and tunnel.bytes_up > 0  # TLS passed through, encrypted, counted
    assert all(c.ended_at is not None and c.ended_at >= c.started_at for c in conns)
    assert plain.address == "127.0.0.1"


@pytest.mark.parametrize(("target", "why"), [
    ("other.test:{http}", "the name does not resolve"),
    ("rebind.test:{http}", "rebinding: the name resolves to the non-public address 10.20.30.40"),
    ("mixed.test:{http}", "rebinding: the name resolves to the non-public address 192.168.7.7"),
    ("short.test:{http}", "rebinding: the name resolves to the non-public address 127.0.0.2"),
    ("127.0.0.2:{http}", "an IP address, not listed"),
    ("[::1]:{http}", "an IP address, not listed"),
    ("good.test:{unlisted}", "not listed (nobody to ask)"),
    ("good.test.evil.test:{http}", "the name does not resolve"),
])
async def test_refused_destinations(proxy: EgressProxy, servers: LocalServers, target: str, why: str) -> None:
    servers.names["good.test.evil.test"] = []
    dest = target.format(http=servers.http_port, unlisted=servers.http_port + 1 if servers.http_port < 65535 else 1)
    reply = await _exchange(proxy, f"CONNECT {dest} HTTP/1.1\r\nHost: {dest}\r\n\r\n".encode())
    assert reply.startswith((b"HTTP/1.1 403", b"HTTP/1.1 502")), reply
    assert why.encode() in reply
    [conn] = proxy.gate.connections  # type: ignore[attr-defined]
    assert (conn.verdict, conn.reason, conn.bytes_up, conn.bytes_down) == ("refused", why, 0, 0)


async def test_a_listed_address_literal_passes(proxy: EgressProxy, servers: LocalServers) -> None:
    reply = await _exchange(proxy, f"GET http://127.0.0.1:{servers.http_port}/bytes/3 HTTP/1.1\r\n\r\n".encode())
    assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"xxx")


@pytest.mark.parametrize("request_bytes", [
    b"GET / HTTP/1.1\r\nHost: good.test\r\n\r\n",  # origin form: not a proxy request
    b"GET https://good.test/ HTTP/1.1\r\n\r\n",  # https goes by CONNECT
    b"CONNECT good.test HTTP/1.1\r\n\r\n",  # no port
    b"CONNECT good.test:0 HTTP/1.1\r\n\r\n",
    b"SSH-2.0-OpenSSH\r\n\r\n",
    b"GET http://good.test:99999/ HTTP/1.1\r\n\r\n",
    b"CONNECT good\x1b[2J.test:443 HTTP/1.1\r\n\r\n",  # a terminal escape in the name
    b"CONNECT g\xf6\xf6d.test:443 HTTP/1.1\r\n\r\n",
])
async def test_what_is_not_a_proxy_request_is_refused_unconnected(proxy: EgressProxy, request_bytes: bytes) -> None:
    reply = await _exchange(proxy, request_bytes)
    assert reply.startswith(b"HTTP/1.1 400")
    assert proxy.gate.connections == []  # type: ignore[attr-defined]


def test_the_host_judged_is_the_host_connected_to() -> None:
    """A user part that looks like a listed name is not the host: the proxy judges (and connects to) `evil`."""
    assert parse_head(b"GET http://good.test%2f@evil/ HTTP/1.1\r\nHost: good.test\r\n\r\n")[1] == "evil"
    assert parse_head(b"GET http://good.test:80@evil:8080/ HTTP/1.1\r\n\r\n")[1:3] == ("evil", 8080)
    assert parse_head(b"CONNECT GOOD.test:443 HTTP/1.1\r\n\r\n")[1:3] == ("good.test", 443)


async def test_a_huge_head_is_refused(proxy: EgressProxy) -> None:
    reply = await _exchange(proxy, b"GET http://good.test/ HTTP/1.1\r\nX: " + b"a" * 70000 + b"\r\n\r\n")
    assert reply.startswith(b"HTTP/1.1 431")


async def test_a_huge_head_in_pieces_is_refused(proxy: EgressProxy) -> None:
    """The limit holds across reads: a head sent a piece at a time, none of them over it, is refused whole."""
    reader, writer = await asyncio.open_connection(*proxy.address)
    writer.write(b"GET http://good.test/ HTTP/1.1\r\n")
    for _ in range(20):
        writer.write(b"X-Pad: " + b"b" * 4000 + b"\r\n")
        await writer.drain()
    writer.write(b"\r\n")
    reply = await reader.read()
    writer.close()
    assert reply.startswith(b"HTTP/1.1 431") and proxy.gate.connections == []  # type: ignore[attr-defined]


@pytest.mark.parametrize("kernel", [True, False], ids=["splice relay", "protocol relay"])
async def test_bytes_sent_with_the_head_reach_the_server_and_are_counted(proxy: EgressProxy, servers: LocalServers,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         kernel: bool) -> None:
    """A client that sends its first bytes in the same write as its CONNECT (as some do, not waiting for the 200)
    loses none of them; its end of output passes through, and the tunnel still carries the answer back."""
    from desktop_app.sandbox import _splice

    monkeypatch.setattr(_splice, "AVAILABLE", kernel)
    get = b"GET /bytes/3000 HTTP/1.1\r\nHost: good.test\r\nConnection: close\r\n\r\n"
    reader, writer = await asyncio.open_connection(*proxy.address)
    writer.write(f"CONNECT good.test:{servers.http_port} HTTP/1.1\r\n\r\n".encode() + get)
    writer.write_eof()  # half-closed: nothing more to send, the answer still comes back
    data = await reader.read()
    writer.close()
    established, _, answer = data.partition(b"\r\n\r\n")
    assert established == b"HTTP/1.1 200 Connection established"
    assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"x" * 3000)
    conns = proxy.gate.connections  # type: ignore[attr-defined]
    assert await wait_until_async(lambda: len(conns) == 1, 10)
    assert (conns[0].bytes_up, conns[0].bytes_down) == (len(get), len(answer))


@pytest.mark.parametrize("kernel", [True, False], ids=["splice relay", "protocol relay"])
async def test_a_slow_reader_gets_every_byte(proxy: EgressProxy, servers: LocalServers,
                                            monkeypatch: pytest.MonkeyPatch, kernel: bool) -> None:
    """A client that reads slowly holds the server back (the proxy stops reading while its writes wait) and
    still gets every byte, counted once: with the kernel's relay (at most a pipe's megabyte held, in the
    kernel) and with the protocols' (where splice is missing)."""
    from desktop_app.sandbox import _proxy, _splice

    held: list[int] = []
    if kernel:
        writable = _splice._Way.writable

        def backing_up(way: _splice._Way) -> None:
            writable(way)
            if way.held:  # left in the pipe: the destination backs up
                held.append(way.held)

        monkeypatch.setattr(_splice._Way, "writable", backing_up)
    else:
        monkeypatch.setattr(_splice, "AVAILABLE", False)
        pause = _proxy._Side.pause_writing

        def pausing(side: _proxy._Side) -> None:
            assert side.transport is not None
            held.append(side.transport.get_write_buffer_size())
            pause(side)

        monkeypatch.setattr(_proxy._Side, "pause_writing", pausing)
    # the client's receive buffer kept small (the kernel would otherwise grow it to megabytes on loopback and take
    # in what the proxy should hold back)
    client = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16 * 1024)
    client.setblocking(False)
    await asyncio.get_running_loop().sock_connect(client, proxy.address)
    reader, writer = await asyncio.open_connection(sock=client, limit=4096)
    size = 8 * 1024 * 1024
    writer.write(f"GET http://good.test:{servers.http_port}/bytes/{size} HTTP/1.1\r\nHost: good.test\r\n\r\n"
                 .encode())
    got = 0
    while chunk := await reader.read(4096):
        got += len(chunk)
        if got < 2 * 1024 * 1024:
            await asyncio.sleep(0)  # the first megabytes a chunk per turn of the loop: the writes back up
    writer.close()
    conns = proxy.gate.connections  # type: ignore[attr-defined]
    assert await wait_until_async(lambda: len(conns) == 1, 10)
    assert got == conns[0].bytes_down and got > size
    # it held back the server, never the whole download in memory
    assert held and max(held) <= (_splice.PIPE_SIZE if kernel else 1024 * 1024 - 1)


async def test_the_system_resolver_keeps_answers_a_short_while(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name asked again within NAME_TTL_S is answered without a lookup; a failed lookup is not kept; past the
    time, it is asked again; what is kept is a copy (a caller cannot change it)."""
    import socket as socket_module

    from desktop_app.sandbox import _proxy

    monkeypatch.setattr(_proxy, "_names", {})
    asked: list[str] = []
    answers = {"pypi.example": ["203.0.113.7"]}

    async def getaddrinfo(host: str, port: int, **_: object) -> list:
        asked.append(host)
        if host not in answers:
            raise socket_module.gaierror(-2, "Name or service not known")
        return [(socket_module.AF_INET, socket_module.SOCK_STREAM, 6, "", (a, port)) for a in answers[host]]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    first = await _proxy.system_resolver("pypi.example", 443)
    first.append("10.0.0.1")  # the caller's copy
    assert await _proxy.system_resolver("pypi.example", 443) == ["203.0.113.7"]
    assert asked == ["pypi.example"]
    for _ in range(2):
        with pytest.raises(OSError):
            await _proxy.system_resolver("gone.example", 443)
    assert asked == ["pypi.example", "gone.example", "gone.example"]  # a failure is asked again
    answers["pypi.example"] = ["203.0.113.8"]
    monkeypatch.setattr(_proxy, "NAME_TTL_S", 0.0)
    _proxy._names.clear()
    assert await _proxy.system_resolver("pypi.example", 443) == ["203.0.113.8"]
    assert await _proxy.system_resolver("pypi.example", 443) == ["203.0.113.8"]
    assert asked.count("pypi.example") == 3  # past its time, an answer is asked again


async def test_only_the_sandbox_may_use_it(servers: LocalServers) -> None:
    gate = ListOnlyGate(NetworkAllowlist.parse(["good.test"]))
    p = EgressProxy(gate, resolve=servers.resolve, peers=lambda: {"172.31.99.99"})
    await p.start("127.0.0.1", 0)
    try:
        reply = await _exchange(p, f"CONNECT good.test:{servers.http_port} HTTP/1.1\r\n\r\n".encode())
    finally:
        await p.close()
    assert reply == b"" and gate.connections == [] and servers.asked == []


def test_bad_settings_mean_no_network_never_a_full_one() -> None:
    from desktop_app.core import ConfigError
    from desktop_app.sandbox import SandboxConfig

    bad = SandboxConfig.from_settings({"network": "allowlist", "network_allow": ["pypi.org", "http://x y"]})
    assert (bad.network, bad.network_allow) == (False, None)
    assert "network_allow" in bad.network_problem and "no network" in bad.network_problem
    assert bad.relaxations() == []  # nothing loosened: no network at all
    good = SandboxConfig.from_settings({"network": "allowlist", "network_allow": ["@python"]})
    assert (good.network, good.network_allow) == (False, ("@python",))
    assert SandboxConfig.from_settings({"network_allow": ["pypi.org"]}).network_allow is None  # the mode decides
    with pytest.raises(ConfigError, match="network setting"):
        SandboxConfig.from_settings({"network": "some"})


async def test_a_proxy_that_cannot_start_leaves_no_network(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from desktop_app.sandbox import DockerSandbox, SandboxConfig
    from desktop_app.sandbox.docker._egress import SandboxEgress

    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / ("d" * 120)))  # a socket path longer than unix allows
    egress = SandboxEgress(NetworkAllowlist.parse(["pypi.org"]), "p-1234")
    await egress.start()
    assert egress.proxy is None and 'the network setting "allowlist"' in egress.problem
    assert "no network" in egress.problem
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "file"))  # not a folder
    sb = DockerSandbox("p", tmp_path, SandboxConfig.from_settings({"network": "allowlist", "network_allow": []}))
    assert sb._egress_mount() == {} and sb.egress is not None and "cannot be made" in sb.egress.problem
    desc = sb.describe()
    assert desc.network == "none" and any(sb.egress.problem in r for r in desc.relaxations)
