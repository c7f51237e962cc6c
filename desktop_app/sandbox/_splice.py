"""The egress proxy's relay where the kernel can move the bytes itself (Linux: `splice(2)` through a pipe each
way): an admitted connection's bytes go from one socket to the other without being copied into Python, each way
counted as it is delivered. A way whose destination backs up stops reading its source until it drains; a
source's end of input is passed on as the other socket's end of output; both ended, or either lost, both close."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import socket
from collections.abc import Callable

AVAILABLE = hasattr(os, "splice")
PIPE_SIZE = 1024 * 1024  # the most a pipe holds without privilege (/proc/sys/fs/pipe-max-size)
_CHUNK = PIPE_SIZE
_FLAGS = getattr(os, "SPLICE_F_MOVE", 0) | getattr(os, "SPLICE_F_NONBLOCK", 0)
_GONE = (ConnectionError, BrokenPipeError, OSError)


class _Way:
    """One direction: `src` -> a pipe -> `dst`; `count` hears each delivered byte count."""

    def __init__(self, relay: SpliceRelay, src: socket.socket, dst: socket.socket,
                 count: Callable[[int], None]) -> None:
        self.relay, self.src, self.dst, self.count = relay, src, dst, count
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        with contextlib.suppress(OSError):  # a smaller pipe still works, in more turns
            fcntl.fcntl(self.w, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_SIZE)
        self.held = 0  # bytes in the pipe, not yet delivered
        self.ended = False  # the source's input ended and all of it is delivered

    def start(self) -> None:
        self.relay.loop.add_reader(self.src.fileno(), self.readable)

    def readable(self) -> None:
        try:
            n = os.splice(self.src.fileno(), self.w, _CHUNK, flags=_FLAGS)
        except BlockingIOError:
            return
        except _GONE:
            self.relay.finish()
            return
        if n == 0:  # the source's end of input
            self.relay.loop.remove_reader(self.src.fileno())
            self.ended = True
            if not self.held:
                self.relay.half_closed(self)
            return
        self.held += n
        self.writable()

    def writable(self) -> None:
        loop = self.relay.loop
        while self.held:
            try:
                n = os.splice(self.r, self.dst.fileno(), self.held, flags=_FLAGS)
            except BlockingIOError:  # the destination backs up: stop reading until it drains
                loop.remove_reader(self.src.fileno())
                loop.add_writer(self.dst.fileno(), self.writable)
                return
            except _GONE:
                self.relay.finish()
                return
            self.held -= n
            self.count(n)
        loop.remove_writer(self.dst.fileno())
        if self.ended:
            self.relay.half_closed(self)
        elif not self.relay.done.done():
            loop.add_reader(self.src.fileno(), self.readable)

    def close(self) -> None:
        loop = self.relay.loop
        for fd, remove in ((self.src.fileno(), loop.remove_reader), (self.dst.fileno(), loop.remove_writer)):
            if fd >= 0:
                remove(fd)
        for fd in (self.r, self.w):
            with contextlib.suppress(OSError):
                os.close(fd)


class SpliceRelay:
    """Both ways between `a` (the client's socket) and `b` (upstream's), non-blocking sockets this relay owns
    from now on; `up(n)`, `down(n)` count what reached `b` and `a`. `await run()` returns once both are closed."""

    def __init__(self, a: socket.socket, b: socket.socket, up: Callable[[int], None],
                 down: Callable[[int], None]) -> None:
        self.loop = asyncio.get_running_loop()
        self.a, self.b = a, b
        self.done: asyncio.Future[None] = self.loop.create_future()
        self.ways: list[_Way] = []
        try:
            self.ways = [_Way(self, a, b, up), _Way(self, b, a, down)]
        except OSError:
            self.finish()
            raise

    async def run(self) -> None:
        for way in self.ways:
            way.start()
        try:
            await asyncio.shield(self.done)
        finally:
            self.finish()  # cancelled (the proxy closes): nothing stays registered or open

    def half_closed(self, way: _Way) -> None:
        """`way`'s source ended and all it sent is delivered: its destination's output ends too."""
        with contextlib.suppress(OSError):
            way.dst.shutdown(socket.SHUT_WR)
        if all(w.ended and not w.held for w in self.ways):
            self.finish()

    def finish(self) -> None:
        if self.done.done():
            return
        for way in self.ways:
            way.close()
        for sock in (self.a, self.b):
            sock.close()
        self.done.set_result(None)
