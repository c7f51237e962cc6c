"""The model streams off the event loop: one worker process per desk runs every session's SDK request
building and stream parsing, and sends each stream's events back in batches.

With the GIL, a thread would still take the loop's time; a second process takes the second core. The
parent keeps one control socket to the worker and hands it a socketpair per event loop (SCM_RIGHTS); on
that pair go length-prefixed pickles, both ends being this module: ("stream", id, client class, config,
request, session_id) and ("cancel", id) down, ("events", [(id, event), ...]), ("reply", id, reply) and ("error",
id, message, hint, status) up. Frames are ordered, so a stream's events come before its reply. Where the
worker cannot run (not POSIX, a frozen build, a failed start), the client streams in its own loop.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import logging
import os
import pickle
import socket
import struct
import subprocess
import sys
import threading
import weakref
from dataclasses import dataclass, field
from typing import Any

from ._errors import ModelError
from ._llm import Emit, ModelReply, ModelRequest

log = logging.getLogger(__name__)
_HEAD = struct.Struct("!I")
Config = tuple[tuple[str, Any], ...]  # the client's settings, as keyword arguments: a key to its SDK client


def worker_available() -> bool:
    return os.name == "posix" and not getattr(sys, "frozen", False) and hasattr(socket, "send_fds")


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = _HEAD.unpack(await reader.readexactly(_HEAD.size))
    return pickle.loads(await reader.readexactly(size))


def _frame(obj: Any) -> bytes:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    return _HEAD.pack(len(data)) + data


# The parent side --------------------------------------------------------------------------------------
class _Process:
    """The worker process and its control socket; started once, restarted when it died."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.control: socket.socket | None = None

    def connect(self) -> socket.socket:
        """A new socketpair to the worker: the worker serves the other end (starts the worker if needed)."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self._start()
            mine, theirs = socket.socketpair()
            try:
                try:
                    self._hand_over(theirs)
                except OSError:  # it is dying (killed, say) though not yet reaped: a new one
                    self._start()
                    self._hand_over(theirs)
            except OSError:
                mine.close()
                raise
            finally:
                theirs.close()
            return mine

    def _hand_over(self, sock: socket.socket) -> None:
        assert self.control is not None
        socket.send_fds(self.control, [b"c"], [sock.fileno()])

    def _start(self) -> None:
        self.stop_locked()
        mine, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", __name__, str(theirs.fileno())], pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, close_fds=True)
        except OSError:
            mine.close()
            raise
        finally:
            theirs.close()
        self.control = mine

    def stop_locked(self) -> None:
        if self.control is not None:
            self.control.close()  # the worker ends when its control socket closes
            self.control = None
        if self.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def stop(self) -> None:
        with self.lock:
            self.stop_locked()


_PROCESS = _Process()
atexit.register(_PROCESS.stop)


@dataclass
class _Stream:
    emit: Emit
    done: asyncio.Future[ModelReply]


@dataclass
class WorkerLink:
    """One event loop's connection to the worker: sends requests, routes the events and replies back."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    streams: dict[int, _Stream] = field(default_factory=dict)
    users: int = 0
    ids: itertools.count = field(default_factory=itertools.count)
    task: asyncio.Task[None] | None = None
    broken: str = ""

    async def stream(self, cls: type, config: Config, request: ModelRequest, emit: Emit,
                     session_id: str) -> ModelReply:
        """Stream one step in the worker with a `cls(**config)` there (a client class that streams in its
        own loop when built without off_loop)."""
        if self.broken:
            raise ModelError(f"The model worker process stopped: {self.broken}.", hint="Retry the step.")
        sid = next(self.ids)
        done: asyncio.Future[ModelReply] = asyncio.get_running_loop().create_future()
        self.streams[sid] = _Stream(emit, done)
        try:
            self.writer.write(_frame(("stream", sid, cls, config, request, session_id)))
            await self.writer.drain()
            return await done
        except asyncio.CancelledError:
            if not self.broken:  # stop the worker's stream; what it still sends for it is dropped
                self.writer.write(_frame(("cancel", sid)))
            raise
        except (ConnectionError, OSError) as e:
            self._fail(f"the connection to it broke ({e})")
            raise ModelError("The model worker process stopped.", hint="Retry the step.") from e
        finally:
            self.streams.pop(sid, None)

    async def run(self) -> None:
        """Route what the worker sends until the connection ends."""
        try:
            while True:
                self._route(await _read_frame(self.reader))
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as e:
            self._fail(f"the connection to it ended ({type(e).__name__})")
            self.writer.close()

    def _route(self, frame: tuple[Any, ...]) -> None:
        kind, *rest = frame
        if kind == "events":
            for sid, event in rest[0]:
                st = self.streams.get(sid)
                if st is not None and not st.done.done():
                    try:
                        st.emit(event)
                    except Exception:  # a broken listener must not stop the other streams
                        log.exception("publishing a model stream event failed")
            return
        st = self.streams.get(rest[0])
        if st is None or st.done.done():
            return
        if kind == "reply":
            st.done.set_result(rest[1])
        elif kind == "error":
            message, hint, status = rest[1:]
            st.done.set_exception(ModelError(message, hint=hint, status_code=status))

    def _fail(self, why: str) -> None:
        self.broken = why or "broken"
        for st in self.streams.values():
            if not st.done.done():
                st.done.set_exception(ModelError(f"The model worker process stopped: {why}.",
                                                 hint="Retry the step."))

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self.writer.close()


_LINKS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, WorkerLink] = weakref.WeakKeyDictionary()


async def worker_link() -> WorkerLink | None:
    """This loop's link to the worker (made, and the worker started, on first use); None where none can
    run, and the caller streams in its own loop."""
    loop = asyncio.get_running_loop()
    link = _LINKS.get(loop)
    if link is not None and not link.broken:
        return link
    if not worker_available():
        return None
    try:
        sock = await asyncio.to_thread(_PROCESS.connect)
        reader, writer = await asyncio.open_connection(sock=sock)
    except OSError as e:
        log.warning("the model worker process did not start (%s): streaming on the event loop", e)
        return None
    link = _LINKS.get(loop)  # another stream may have made one meanwhile
    if link is not None and not link.broken:
        writer.close()
        return link
    link = _LINKS[loop] = WorkerLink(reader, writer)
    link.task = loop.create_task(link.run(), name="model-worker-link")
    return link


def release(link: WorkerLink) -> None:
    """A client of this link closed: the last one closes the loop's connection (the worker stays)."""
    link.users -= 1
    if link.users <= 0:
        link.close()
        for loop, known in list(_LINKS.items()):
            if known is link:
                del _LINKS[loop]


def prestart() -> None:
    """Start the worker now, in the background: importing the SDK takes it a second or more, which the
    first step should not wait for."""
    if not worker_available():
        return
    with _PROCESS.lock:
        if _PROCESS.proc is None or _PROCESS.proc.poll() is not None:
            try:
                _PROCESS._start()
            except OSError as e:
                log.warning("the model worker process did not start (%s)", e)


def stop_worker() -> None:
    """End the worker process (it also ends by itself when this process does)."""
    _PROCESS.stop()


# The worker side --------------------------------------------------------------------------------------
class _Connection:
    """One parent loop's connection, served in the worker: each stream a task, events sent in batches."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, clients: dict) -> None:
        self.reader, self.writer, self.clients = reader, writer, clients
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.pending: list[tuple[int, Any]] = []

    async def serve(self) -> None:
        try:
            while True:
                kind, sid, *rest = await _read_frame(self.reader)
                if kind == "stream":
                    self.tasks[sid] = asyncio.ensure_future(self._stream(sid, *rest))
                elif kind == "cancel" and sid in self.tasks:
                    self.tasks.pop(sid).cancel()
        except (asyncio.IncompleteReadError, ConnectionError, OSError):
            pass
        finally:
            for task in self.tasks.values():
                task.cancel()
            self.writer.close()

    def _emit(self, sid: int, event: Any) -> None:
        if not self.pending:  # the first event of a batch: the rest of this loop pass joins it
            asyncio.get_running_loop().call_soon(self._flush)
        self.pending.append((sid, event))

    def _flush(self) -> None:
        if self.pending:
            batch, self.pending = self.pending, []
            self.writer.write(_frame(("events", batch)))

    async def _stream(self, sid: int, cls: type, config: Config, request: ModelRequest, session_id: str) -> None:
        client = self.clients.get((cls, config))
        if client is None:
            client = self.clients[(cls, config)] = cls(**dict(config))
        try:
            reply = await client.stream(request, emit=lambda e: self._emit(sid, e), session_id=session_id)
            out: tuple[Any, ...] = ("reply", sid, reply)
        except ModelError as e:
            out = ("error", sid, str(e), e.hint, e.status_code)
        except Exception as e:  # a bug here is the step's error, not the worker's end
            log.exception("model worker: the stream failed")
            out = ("error", sid, f"The model stream failed: {type(e).__name__}: {e}", "Retry the step.", None)
        finally:
            self.tasks.pop(sid, None)
        self._flush()
        self.writer.write(_frame(out))
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.drain()


async def _serve(control_fd: int) -> None:
    loop = asyncio.get_running_loop()
    control = socket.socket(fileno=control_fd)
    control.setblocking(False)
    ended = loop.create_future()
    clients: dict[tuple[type, Config], Any] = {}
    serving: set[asyncio.Task[None]] = set()

    def accept() -> None:
        try:
            _msg, fds, _flags, _addr = socket.recv_fds(control, 1, 4)
        except BlockingIOError:
            return
        except OSError:
            fds, _msg = [], b""
        if not _msg and not ended.done():
            ended.set_result(None)  # the parent is gone
        for fd in fds:
            task = loop.create_task(_open(fd))
            serving.add(task)
            task.add_done_callback(serving.discard)

    async def _open(fd: int) -> None:
        reader, writer = await asyncio.open_connection(sock=socket.socket(fileno=fd))
        await _Connection(reader, writer, clients).serve()

    loop.add_reader(control.fileno(), accept)
    await ended
    loop.remove_reader(control.fileno())
    for task in list(serving):
        task.cancel()
    for client in clients.values():
        with contextlib.suppress(Exception):
            await client.close()


def main(argv: list[str]) -> int:
    import gc

    import anthropic  # noqa: F401  (loaded before the freeze: the SDK's modules are long-lived)

    gc.freeze()  # the imports are long-lived: collections walk only what the streams make
    asyncio.run(_serve(int(argv[0])))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
