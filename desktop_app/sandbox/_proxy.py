"""The egress proxy of a sandbox in the `allowlist` network mode: an HTTP(S) proxy in the desk's process, on a
unix socket the sandbox's container reaches (its only way out). It resolves names itself, admits a destination
only as its gate says, passes TLS through (CONNECT) and counts every byte, each way."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Protocol
from urllib.parse import urlsplit

from ..core import NetworkAllowlist, NetworkConnection, is_ip_literal, is_public

log = logging.getLogger(__name__)

HEAD_LIMIT = 64 * 1024
CHUNK = 256 * 1024
CONNECT_TIMEOUT_S = 15.0
Resolver = Callable[[str, int], Awaitable[list[str]]]


class NetworkGate(Protocol):
    """What decides and records for the proxy: the list, who made a connection, the person, the audit."""

    def allowlist(self) -> NetworkAllowlist: ...

    def attribute(self, conn: NetworkConnection) -> None: ...

    async def ask(self, conn: NetworkConnection) -> bool: ...

    async def record(self, conn: NetworkConnection) -> None: ...


class ListOnlyGate:
    """The gate of a sandbox nobody watches: what is listed passes, anything else is refused; logged only."""

    def __init__(self, allowlist: NetworkAllowlist) -> None:
        self._list = allowlist
        self.connections: list[NetworkConnection] = []

    def allowlist(self) -> NetworkAllowlist:
        return self._list

    def attribute(self, conn: NetworkConnection) -> None:
        conn.attribution = "no session watches this sandbox"

    async def ask(self, conn: NetworkConnection) -> bool:
        conn.reason = "not listed (nobody to ask)"
        return False

    async def record(self, conn: NetworkConnection) -> None:
        self.connections.append(conn)
        log.info("%s", conn.summary())


async def system_resolver(host: str, port: int) -> list[str]:
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(info[4][0]) for info in infos))


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status


class EgressProxy:
    """One project's proxy. `peers()` names the addresses that may use it (the sandbox's container); others
    are dropped unanswered. `resolve` is the name resolver (tests map their own names to local servers)."""

    def __init__(self, gate: NetworkGate, *, resolve: Resolver | None = None,
                 peers: Callable[[], set[str]] | None = None) -> None:
        self.gate = gate
        self.resolve = resolve or system_resolver
        self.peers = peers
        self._server: asyncio.base_events.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.address: tuple[str, int] = ("", 0)

    async def start(self, host: str, port: int) -> None:
        self._server = await asyncio.start_server(self._client, host, port, limit=HEAD_LIMIT, reuse_address=True)
        self.address = self._server.sockets[0].getsockname()[:2]

    async def start_unix(self, path: str) -> None:
        self._server = await asyncio.start_unix_server(self._client, path, limit=HEAD_LIMIT)
        self.address = (path, 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)  # type: ignore[arg-type]
        try:
            peer = str((writer.get_extra_info("peername") or ("",))[0])
            if self.peers is not None and peer not in self.peers():
                log.warning("egress proxy: a connection from %s, not the sandbox, dropped", peer)
                return
            await self._serve(reader, writer, peer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except asyncio.CancelledError:  # the proxy closes: the task ends here (asyncio would log it otherwise)
            pass
        finally:
            self._tasks.discard(task)  # type: ignore[arg-type]
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: str) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            writer.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n")
            return
        try:
            method, host, port, upstream_head = parse_head(head)
        except ValueError as exc:
            writer.write(_reply(400, str(exc)))
            return
        conn = NetworkConnection(host, port, time.time(), method=method, peer=peer)
        self.gate.attribute(conn)
        try:
            up_reader, up_writer = await self._admit(conn)
        except _Refused as exc:
            conn.verdict, conn.reason, conn.ended_at = "refused", str(exc), time.time()
            writer.write(_reply(exc.status, f"agent-desk: {host}:{port} refused: {exc}"))
            await self.gate.record(conn)
            return
        conn.verdict = "allowed"
        try:
            if upstream_head is None:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                up_writer.write(upstream_head)
                conn.bytes_up += len(upstream_head)
            await _pipe_both(reader, writer, up_reader, up_writer, conn)
        finally:
            conn.ended_at = time.time()
            up_writer.close()
            await self.gate.record(conn)

    async def _ask(self, conn: NetworkConnection) -> bool:
        try:
            return await self.gate.ask(conn)
        except Exception:  # asking failed: refused, never let through
            log.exception("egress proxy: asking about %s:%d failed", conn.domain, conn.port)
            conn.reason = "not listed (asking failed)"
            return False

    async def _admit(self, conn: NetworkConnection) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """Judge the destination and connect to what the proxy resolved itself; _Refused says why not."""
        allow = self.gate.allowlist()
        host, port = conn.domain, conn.port
        if is_ip_literal(host):
            address = host.strip("[]")
            if not allow.admits_address(address, port):
                raise _Refused(403, "an IP address, not listed")
            conn.address, conn.reason = address, "listed address"
        else:
            try:
                addresses = await asyncio.wait_for(self.resolve(host, port), CONNECT_TIMEOUT_S)
            except (OSError, TimeoutError, UnicodeError) as exc:
                log.info("egress proxy: %s does not resolve: %s", host, exc)
                raise _Refused(502, "the name does not resolve") from None
            if not addresses:
                raise _Refused(502, "the name does not resolve")
            private = [a for a in addresses if not is_public(a) and not allow.admits_address(a)]
            if private:  # one private answer is enough to refuse: the client cannot choose which one it gets
                raise _Refused(403, f"rebinding: the name resolves to the non-public address {private[0]}")
            conn.address = addresses[0]
            if allow.admits_name(host, port):
                conn.reason = "listed"
            elif not await self._ask(conn):
                raise _Refused(403, conn.reason or "not listed")
        try:
            return await asyncio.wait_for(asyncio.open_connection(conn.address, port, limit=CHUNK),
                                          CONNECT_TIMEOUT_S)
        except (OSError, TimeoutError) as exc:
            raise _Refused(502, f"could not connect to {conn.address}:{port} ({type(exc).__name__})") from None


_HOST = re.compile(r"[a-z0-9._-]{1,253}|[0-9a-f:.]{2,45}")


def parse_head(head: bytes) -> tuple[str, str, int, bytes | None]:
    """(method, host, port, the head to send upstream or None for a CONNECT tunnel); ValueError when it is not a
    proxy request."""
    text = head.decode("latin-1")
    first, _, rest = text.partition("\r\n")
    parts = first.split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise ValueError("not an HTTP/1 proxy request")
    method, target, version = parts
    if method == "CONNECT":
        host, _, port_text = target.rpartition(":")
        if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise ValueError("CONNECT needs host:port")
        return method, _host(host.strip("[]")), int(port_text), None
    url = urlsplit(target)
    if url.scheme != "http" or not url.hostname:
        raise ValueError("a plain request through the proxy needs an absolute http:// URL (https goes by CONNECT)")
    try:
        port = url.port or 80
    except ValueError:
        raise ValueError("bad port in the URL") from None
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    headers = [h for h in rest.split("\r\n") if h and not h.lower().startswith(("proxy-", "connection:"))]
    upstream = f"{method} {path} {version}\r\n" + "".join(f"{h}\r\n" for h in headers) + "Connection: close\r\n\r\n"
    return method, _host(url.hostname), port, upstream.encode("latin-1")


def _host(text: str) -> str:
    """A host name or an address, lower case; anything else (spaces, controls, other scripts) is no host."""
    host = text.lower()
    if not _HOST.fullmatch(host):
        raise ValueError("not a host name")
    return host


def _reply(status: int, reason: str) -> bytes:
    body = (reason + "\n").encode("utf-8", "replace")
    title = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}.get(status, "Error")
    return (f"HTTP/1.1 {status} {title}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
            "X-Agent-Desk-Proxy: refused\r\nConnection: close\r\n\r\n").encode() + body


async def _pipe_both(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter, u_reader: asyncio.StreamReader,
                     u_writer: asyncio.StreamWriter, conn: NetworkConnection) -> None:
    def up(n: int) -> None:
        conn.bytes_up += n

    def down(n: int) -> None:
        conn.bytes_down += n

    await asyncio.gather(_pipe(c_reader, u_writer, up), _pipe(u_reader, c_writer, down), return_exceptions=True)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, count: Callable[[int], None]) -> None:
    try:
        while True:
            data = await reader.read(CHUNK)
            if not data:
                break
            writer.write(data)
            count(len(data))
            await writer.drain()
    finally:
        with contextlib.suppress(Exception):
            if writer.can_write_eof():
                writer.write_eof()
