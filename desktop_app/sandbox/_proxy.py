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
from . import _splice

log = logging.getLogger(__name__)

HEAD_LIMIT = 64 * 1024
CONNECT_TIMEOUT_S = 15.0
LINGER_S = 2.0  # how long a refused client that is still sending is read (and dropped) before closing
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
        if log.isEnabledFor(logging.INFO):  # its line is made only when someone reads the log
            log.info("%s", conn.summary())


# The system resolver's answers, kept a short while: a package manager opens dozens of connections to the same
# few hosts, and each lookup is a thread hand-off and a DNS round trip (glibc keeps nothing). Short, as a browser's
# cache is, and every answer is judged again at each connection (rebinding included), cached or not.
NAME_TTL_S = 30.0
NAME_CACHE_MAX = 256
_names: dict[tuple[str, int], tuple[float, list[str]]] = {}


async def system_resolver(host: str, port: int) -> list[str]:
    now = time.monotonic()
    hit = _names.get((host, port))
    if hit is not None and hit[0] > now:
        return list(hit[1])
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if len(_names) >= NAME_CACHE_MAX:
        _names.clear()
    _names[(host, port)] = (time.monotonic() + NAME_TTL_S, addresses)
    return list(addresses)


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
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._side, host, port, reuse_address=True)
        self.address = self._server.sockets[0].getsockname()[:2]

    async def start_unix(self, path: str) -> None:
        self._server = await asyncio.get_running_loop().create_unix_server(self._side, path)
        self.address = (path, 0)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    def _side(self) -> _Side:
        """A client's socket: its task starts as it connects."""
        def accepted(side: _Side) -> None:
            task = asyncio.ensure_future(self._client(side))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        return _Side(head=True, accepted=accepted)

    async def _client(self, side: _Side) -> None:
        transport = side.transport
        assert transport is not None
        try:
            peer = str((transport.get_extra_info("peername") or ("",))[0])
            if self.peers is not None and peer not in self.peers():
                log.warning("egress proxy: a connection from %s, not the sandbox, dropped", peer)
                return
            await self._serve(side, peer)
        except ConnectionError:
            pass
        except asyncio.CancelledError:  # the proxy closes: the task ends here (asyncio would log it otherwise)
            pass
        finally:
            transport.close()

    async def _serve(self, side: _Side, peer: str) -> None:
        head = await side.read_head()
        if head is None:
            side.write(b"HTTP/1.1 431 Request Header Fields Too Large\r\nConnection: close\r\n\r\n")
            side.write_eof()  # the client may still be sending: it reads the refusal, then closes
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(side.closed), LINGER_S)
            return
        try:
            method, host, port, upstream_head = parse_head(head)
        except ValueError as exc:
            side.write(_reply(400, str(exc)))
            return
        conn = NetworkConnection(host, port, time.time(), method=method, peer=peer)
        self.gate.attribute(conn)
        try:
            up = await self._admit(conn)
        except _Refused as exc:
            conn.verdict, conn.reason, conn.ended_at = "refused", str(exc), time.time()
            side.write(_reply(exc.status, f"agent-desk: {host}:{port} refused: {exc}"))
            await self.gate.record(conn)
            return
        conn.verdict = "allowed"
        try:
            loop = asyncio.get_running_loop()
            if upstream_head is None:
                side.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                await loop.sock_sendall(up, upstream_head)
                conn.bytes_up += len(upstream_head)
            await self._relay(side, up, conn)
        finally:
            conn.ended_at = time.time()
            up.close()
            await self.gate.record(conn)

    @staticmethod
    async def _relay(side: _Side, up: socket.socket, conn: NetworkConnection) -> None:
        """The kernel's relay when it has one and the client's socket can be handed over whole (nothing of the
        client's reply still queued, its input not ended); the protocols' otherwise."""
        client = side.detach() if _splice.AVAILABLE and not side.eof else None
        if client is None:
            _, up_side = await asyncio.get_running_loop().create_connection(_Side, sock=up)
            await side.relay(up_side, conn)
            return
        try:
            if side.buffer:  # what came after the head (a TLS greeting sent at once)
                await asyncio.get_running_loop().sock_sendall(up, bytes(side.buffer))
                conn.bytes_up += len(side.buffer)
                side.buffer.clear()
            relay = _splice.SpliceRelay(client, up, _counter(conn, "bytes_up"), _counter(conn, "bytes_down"))
        except BaseException:
            client.close()
            raise
        await relay.run()

    async def _ask(self, conn: NetworkConnection) -> bool:
        try:
            return await self.gate.ask(conn)
        except Exception:  # asking failed: refused, never let through
            log.exception("egress proxy: asking about %s:%d failed", conn.domain, conn.port)
            conn.reason = "not listed (asking failed)"
            return False

    async def _admit(self, conn: NetworkConnection) -> socket.socket:
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
                async with asyncio.timeout(CONNECT_TIMEOUT_S):  # no task of its own, unlike wait_for
                    addresses = await self.resolve(host, port)
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
        up = socket.socket(socket.AF_INET6 if ":" in conn.address else socket.AF_INET, socket.SOCK_STREAM)
        up.setblocking(False)
        try:
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await asyncio.get_running_loop().sock_connect(up, (conn.address, port))
        except (OSError, TimeoutError) as exc:
            up.close()
            raise _Refused(502, f"could not connect to {conn.address}:{port} ({type(exc).__name__})") from None
        except BaseException:
            up.close()
            raise
        up.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as asyncio's own connections
        return up


class _Side(asyncio.Protocol):
    """One socket of a connection through the proxy. A client's side first gathers the request's head (its
    reading paused once the head is in); once admitted, the two sides are relayed: what one receives is written
    to the other's socket as it comes (no stream buffer between, no task switch per chunk), counted, and
    reading from one pauses while writing to the other backs up. A side's end of input is passed on as the
    other's end of output; both ended (or one lost), both close."""

    def __init__(self, *, head: bool = False, accepted: Callable[[_Side], None] | None = None) -> None:
        loop = asyncio.get_running_loop()
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.count: Callable[[int], None] = _uncounted
        self.buffer = bytearray()
        self.eof = False
        self._accepted = accepted
        self._head: asyncio.Future[int] | None = loop.create_future() if head else None
        self.closed: asyncio.Future[None] = loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self._accepted is not None:
            self._accepted(self)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None:
            self.count(len(data))
            self.peer.write(data)
            return
        self.buffer += data
        head = self._head
        if head is None:
            return
        if not head.done():
            end = self.buffer.find(b"\r\n\r\n", 0, HEAD_LIMIT)
            if 0 <= end <= HEAD_LIMIT - 4:
                head.set_result(end + 4)
                self.pause_reading()
            elif len(self.buffer) >= HEAD_LIMIT:
                head.set_result(-1)  # refused; what follows is read and dropped, so the refusal is not reset
        if head.result() < 0:
            self.buffer.clear()

    def eof_received(self) -> bool:
        self.eof = True
        if self._head is not None and not self._head.done():
            self._head.set_exception(ConnectionResetError("closed before its request was whole"))
            return False
        if self.peer is not None:
            self.peer.write_eof()
            if self.peer.eof:  # both ways ended
                self.close()
                self.peer.close()
        return True  # the other way may still carry bytes

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head is not None and not self._head.done():
            self._head.set_exception(ConnectionResetError("closed before its request was whole"))
        if not self.closed.done():
            self.closed.set_result(None)
        if self.peer is not None:
            self.peer.close()

    def pause_writing(self) -> None:
        if self.peer is not None:
            self.peer.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None:
            self.peer.resume_reading()

    async def read_head(self) -> bytes | None:
        """The request's head, taken from what was received (the rest stays, for upstream); None: over the
        limit."""
        assert self._head is not None
        end = await self._head
        if end < 0:
            return None
        head = bytes(self.buffer[:end])
        del self.buffer[:end]
        return head

    def detach(self) -> socket.socket | None:
        """This client's socket, handed over whole (a duplicate; the transport closes without a word to the
        client); None when it cannot be: closing, or a reply still queued."""
        t = self.transport
        if t is None or t.is_closing() or t.get_write_buffer_size():
            return None
        sock = t.get_extra_info("socket").dup()
        sock.setblocking(False)
        t.pause_reading()
        t.abort()  # closes the transport's descriptor only: the connection lives on in `sock`
        return sock

    async def relay(self, up: _Side, conn: NetworkConnection) -> None:
        """Relay this client's side and `up` until both close, counting the bytes each way into `conn`."""
        self.peer, up.peer = up, self
        self.count, up.count = _counter(conn, "bytes_up"), _counter(conn, "bytes_down")
        for side in (self, up):  # what came before the link: the bytes after the head, an early greeting
            if side.buffer:
                side.count(len(side.buffer))
                side.peer.write(bytes(side.buffer))  # type: ignore[union-attr]
                side.buffer.clear()
            if side.eof:
                side.peer.write_eof()  # type: ignore[union-attr]
            if side.transport is not None and side.transport.is_closing():
                side.peer.close()  # type: ignore[union-attr]
        self.resume_reading()
        await asyncio.gather(self.closed, up.closed)

    # the transport's calls, each harmless once it is closing
    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def write_eof(self) -> None:
        t = self.transport
        if t is not None and not t.is_closing() and t.can_write_eof():
            with contextlib.suppress(OSError, RuntimeError):
                t.write_eof()

    def pause_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()

    def resume_reading(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


def _uncounted(n: int) -> None:
    del n


def _counter(conn: NetworkConnection, field: str) -> Callable[[int], None]:
    if field == "bytes_up":
        def up(n: int) -> None:
            conn.bytes_up += n
        return up

    def down(n: int) -> None:
        conn.bytes_down += n
    return down


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
