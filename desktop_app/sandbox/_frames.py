"""Docker's multiplexed exec stream (an 8-byte header: stream, size; then the payload) cut into frames,
for both transports. Not docker.utils.socket.frames_iter: it polls and calls recv twice per frame, where
the helper channel's reader cuts whole 1 MiB reads in place."""

from __future__ import annotations

import socket
import ssl
from collections.abc import Iterator
from typing import Any

STDOUT = 1
STDERR = 2


class FrameDecoder:
    """Incremental: feed it whatever recv returned; it returns the complete frames and keeps the rest."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[tuple[int, bytes]]:
        buf = self._buf
        buf += data
        frames = []
        pos, end = 0, len(buf)
        while end - pos >= 8:
            stop = pos + 8 + int.from_bytes(buf[pos + 4 : pos + 8], "big")
            if stop > end:
                break
            frames.append((buf[pos], bytes(buf[pos + 8 : stop])))
            pos = stop
        del buf[:pos]
        return frames


def read_frames(sock: Any) -> Iterator[tuple[int, bytes]]:
    """Every (stream, payload) frame of a socket, until EOF (blocking)."""
    decoder = FrameDecoder()
    while data := sock.recv(1 << 20):
        yield from decoder.feed(data)


def send_now(sock: Any, data: bytes | memoryview) -> int | None:
    """Send what the socket takes without blocking: the bytes sent, or None when this stream cannot be written
    that way (a TLS socket refuses flags, an ssh channel takes none): the caller then sends blocking."""
    if type(sock) is not socket.socket or isinstance(sock, ssl.SSLSocket):
        return None
    try:
        return sock.send(data, socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return 0


def end_input(sock: Any) -> None:
    """EOF on the exec's stdin where the stream can half-close (a plain socket, an ssh channel). A TLS socket
    cannot: Python's ssl drops the session on shutdown, and what follows would be read as ciphertext. The
    scripts that take input read the size they are told, so they never wait for that EOF."""
    if not isinstance(sock, ssl.SSLSocket):
        sock.shutdown(socket.SHUT_WR)
