"""HelperChannel: one attached `docker exec` of the helper, requests out on its stdin (JSON lines, or marshal
when the helper offers it), responses and output events back on its stdout as JSON lines, matched by id. The
stream is read on the event loop that uses the channel (a thread for a stream that is no plain socket: TLS,
ssh). Bulk bytes ride as a binary frame after their line (`"bin": N`, then N raw bytes), never base64 in JSON.
With a door (a local engine: see _helper_door.py) the same messages go over a unix socket straight to the helper
instead, unframed; the exec stream then only keeps the helper alive and brings its stderr."""

# ruff: noqa: ASYNC109  (a request's `timeout` is the sandbox's own deadline for the helper's answer)

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import marshal
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...core import WORKSPACE, SandboxError
from .._client import short_reason
from .._frames import STDERR, FrameDecoder, send_now
from .._helper_ops import error_from
from ._helper_archive import NO_PYTHON, NOT_WRITTEN, helper_command
from ._helper_door import DoorFolder, HelperDoor

log = logging.getLogger(__name__)
_SIGNALS = {signal.SIGKILL: "SIGKILL", signal.SIGTERM: "SIGTERM", signal.SIGINT: "SIGINT", signal.SIGHUP: "SIGHUP"}

OP_TIMEOUT_S = 120.0
PING_TIMEOUT_S = 5.0  # after a request times out: a helper that does not answer a ping this fast is wedged
_BIN = b'{"bin":'  # how a line that a binary frame follows begins (the helper puts the field first)


class _PendingRequest:
    __slots__ = ("fut", "loop", "on_event")

    def __init__(self, loop: asyncio.AbstractEventLoop, fut: asyncio.Future, on_event: Callable | None) -> None:
        self.loop, self.fut, self.on_event = loop, fut, on_event


def _post(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    """call_soon_threadsafe that tolerates a loop already closed (its caller is gone)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(fn, *args)


def _resolve(fut: asyncio.Future, msg: dict[str, Any] | BaseException) -> None:
    if fut.done():
        return
    if isinstance(msg, BaseException):
        fut.set_exception(msg)
    else:
        fut.set_result(msg)


class HelperChannel:
    """One attached `docker exec` of the helper: requests out as JSON lines on its stdin, responses and
    output events back on its stdout (Docker's multiplexed stream), matched by id."""

    def __init__(self, api: Any, container_id: str, pool: ThreadPoolExecutor, door: DoorFolder | None = None) -> None:
        self._api = api
        self._door = door
        self.direct = False  # requests and answers go through the door, not the exec stream
        self._stream: Any = None  # the exec stream, kept open beside the door (its end ends the helper)
        self._stream_reader: threading.Thread | None = None
        self._cid = container_id
        self._pool = pool
        self._pending: dict[int, _PendingRequest] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._next = 0
        self._sock: Any = None
        self._keep: Any = None
        self._frames = FrameDecoder()
        self._early: list[bytes] = []
        self._lines = bytearray()
        self._blob_for: tuple[bytes, int] | None = None  # a line waiting for its binary frame, and its size
        self._scan = 0
        self._stderr = bytearray()
        self.dead = False
        self.hello: dict[str, Any] = {}
        self._exec_id = ""
        self._ending = ""  # why we ended the helper ourselves, when we did
        self._home: asyncio.AbstractEventLoop | None = None  # the loop that reads the stream
        self._fd = -1  # the socket's descriptor while a loop reads it
        self._threaded = False  # read by a thread instead (a stream that is no plain socket)
        self._marshal = False  # the helper takes marshal requests (its hello says so)
        self._release_posted = False  # the reading loop was asked to stop reading and close the socket

    # -- blocking side (pool / reader thread)
    def open(self, timeout: float = 20.0) -> bool:
        """Start the helper; True when it said hello, False when the image has no python3."""
        door = self._open_door()
        try:
            if not self._start(door, timeout):
                return False
            if door is not None and self.hello.get("door"):
                self._go_direct(door)
        finally:
            if door is not None:
                door.close()
        self._marshal = "marshal" in (self.hello.get("requests") or ())
        if type(self._sock) is not socket.socket:  # TLS or ssh: no descriptor an event loop can wait on alone
            self._threaded = True
            threading.Thread(target=self._reader, name=f"sandbox-helper-{self._cid[:12]}", daemon=True).start()
        return True

    def _open_door(self) -> HelperDoor | None:
        if self._door is None:
            return None
        try:
            return HelperDoor(self._door)
        except OSError as exc:  # the exec stream carries everything instead
            log.warning("the helper's door could not open in %s: %s", self._door.path, short_reason(exc))
            return None

    def _start(self, door: HelperDoor | None, timeout: float) -> bool:
        """The helper's exec and its hello; False when the image has no python3."""
        cmd = helper_command(WORKSPACE, door.container_path if door is not None else "")
        exec_id = self._api.exec_create(self._cid, cmd, stdin=True, stdout=True, stderr=True, workdir="/")["Id"]
        self._exec_id = exec_id
        sock = self._api.exec_start(exec_id, socket=True)
        self._keep = sock
        self._sock = getattr(sock, "_sock", sock)
        self._sock.settimeout(timeout)
        try:
            first = self._read_first_line()
        except OSError as exc:
            self._close_socket()
            raise SandboxError(f"the sandbox helper did not start: {short_reason(exc)}") from None
        finally:
            if self._sock is not None:
                self._sock.settimeout(None)
        if first is None or first.strip() == NO_PYTHON.encode():
            self._close_socket()
            if first is None:
                log.warning("sandbox helper exited at start: %s", self._stderr_tail(500))
            return False
        self.hello = self._parse_hello(first)
        return True

    def _go_direct(self, door: HelperDoor) -> None:
        """Take the helper's connection at the door (the engine names its pid): from now on requests and answers
        go through it; the exec stream is only read for the helper's stderr. Nothing changes when it is not
        there (the helper serves its stdin in any case)."""
        try:
            pid = int(self._api.exec_inspect(self._exec_id).get("Pid") or 0)
        except Exception as exc:  # the engine's error: stay on the stream
            log.warning("the helper's door: the engine did not say the helper's pid (%s)", short_reason(exc))
            return
        conn = door.take(pid)
        if conn is None:
            return
        self._stream, self._sock = self._sock, conn
        self._lines.clear()  # what the stream said after the hello was not for the door
        self._early, self._scan, self.direct = [], 0, True
        self._stream_reader = threading.Thread(target=self._read_stream, args=(self._stream,),
                                               name=f"sandbox-helper-stderr-{self._cid[:12]}", daemon=True)
        self._stream_reader.start()

    def _read_stream(self, sock: Any) -> None:
        """The exec stream beside the door, until it ends: the helper's stderr kept (its last 8 KiB), its stdout
        (nothing but the hello is written there) dropped. The stream's decoder goes on where the hello left it."""
        with contextlib.suppress(OSError):
            while data := sock.recv(65536):
                for stream, payload in self._frames.feed(data):
                    if stream == STDERR:
                        self._stderr += payload
                        del self._stderr[:-8192]

    # -- reading on the event loop
    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        """Read the stream on `loop` (called on it). The loop that reads resolves its own futures directly,
        and posts other loops' answers to them; it stays the reader while it runs, and a request from another
        loop takes the reading over once it stopped or closed (nothing is lost: the bytes wait in the socket)."""
        with self._lock:
            home = self._home
            if self._threaded or home is loop or self._sock is None or self.dead:
                return
            if home is not None and home.is_running() and not home.is_closed():
                return
            if home is not None and not home.is_closed():
                home.remove_reader(self._fd)  # a stopped loop: safe to change from here
            self._home, self._fd = loop, self._sock.fileno()
            early, self._early = self._early, []
            loop.add_reader(self._fd, self._on_readable)
        for line, blob in early:
            self._dispatch(line, blob)

    def _on_readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        try:
            data = sock.recv(1 << 20, socket.MSG_DONTWAIT)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            self._lost()
            return
        try:
            messages = self._feed(data)
        except OSError:  # a bad frame header: the stream cannot be followed
            self._lost()
            return
        for line, blob in messages:
            self._dispatch(line, blob)

    def _lost(self) -> None:
        """The stream ended (on the reading loop): stop reading; why, and telling the waiting calls, on a
        thread (the engine is asked why, which blocks)."""
        self.dead = True
        self._detach()
        threading.Thread(target=self._die, name=f"sandbox-helper-end-{self._cid[:12]}", daemon=True).start()

    def _detach(self) -> bool:
        """Stop the reading loop watching the socket; False when that must happen on the loop, later (it runs
        in another thread): the caller then leaves the socket's closing to it."""
        with self._lock:
            home, fd = self._home, self._fd
            self._home = None
            if self._release_posted:
                return False
            if home is None or home.is_closed():
                return True
            if not home.is_running() or _running_loop() is home:
                home.remove_reader(fd)
                return True
            try:
                home.call_soon_threadsafe(self._release, fd)
            except RuntimeError:  # closed meanwhile: its selector went with it
                return True
            self._release_posted = True
            return False

    def _release(self, fd: int) -> None:
        """On the reading loop: stop watching `fd`, then close the socket (its number may be reused after)."""
        with contextlib.suppress(Exception):
            asyncio.get_running_loop().remove_reader(fd)
        with self._lock:
            self._release_posted = False
        self._close_now()

    def _parse_hello(self, first: bytes) -> dict[str, Any]:
        if first.strip() == NOT_WRITTEN.encode():
            self._close_socket()
            raise SandboxError(
                f"could not write the sandbox helper to the container's /tmp: {self._stderr_tail(300)}",
                hint="/tmp may be full: stop what fills it, or restart the sandbox",
            )
        try:
            return json.loads(first)
        except ValueError:
            self._close_socket()
            raise SandboxError(f"the sandbox helper said something unexpected: {first[:200]!r}") from None

    def _stderr_tail(self, n: int) -> str:
        return self._stderr.decode(errors="replace").strip()[-n:]

    def _feed(self, data: bytes) -> list[tuple[bytes, bytes | None]]:
        """Demultiplex Docker's stream (the door's bytes are the helper's own); return complete stdout
        messages, each a line and the binary frame that followed it, if any (stderr keeps its last 8 KiB)."""
        if self.direct:
            self._lines += data
            return self._messages()
        for stream, payload in self._frames.feed(data):
            if stream == STDERR:
                self._stderr += payload
                del self._stderr[:-8192]
            else:
                self._lines += payload
        return self._messages()

    def _messages(self) -> list[tuple[bytes, bytes | None]]:
        buf, out, pos = self._lines, [], 0
        scan, self._scan = self._scan, 0  # where the newline search resumes (a long line comes in many reads)
        while True:
            if self._blob_for is not None:
                line, size = self._blob_for
                if len(buf) - pos < size:
                    break
                out.append((line, bytes(buf[pos : pos + size])))
                pos += size
                self._blob_for = None
                continue
            nl = buf.find(b"\n", max(pos, scan))
            if nl < 0:
                self._scan = len(buf) - pos
                break
            line = bytes(buf[pos:nl])
            pos = nl + 1
            size = _blob_size(line)
            if size is None:
                out.append((line, None))
            else:
                self._blob_for = (line, size)
        del buf[:pos]
        return out

    def _read_first_line(self) -> bytes | None:
        messages: list[tuple[bytes, bytes | None]] = []
        while not messages:
            data = self._sock.recv(65536)
            if not data:
                return None
            messages = self._feed(data)
        self._early = messages[1:]
        return messages[0][0]

    def _reader(self) -> None:
        sock = self._sock
        try:
            for line, blob in self._early:
                self._dispatch(line, blob)
            while sock is not None:
                data = sock.recv(1 << 20)
                if not data:
                    break
                for line, blob in self._feed(data):
                    self._dispatch(line, blob)
        except OSError:
            pass
        finally:
            self._die()

    def _dispatch(self, line: bytes, blob: bytes | None = None) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            log.warning("sandbox helper sent a bad line: %r", line[:200])
            return
        if not isinstance(msg, dict):
            log.warning("sandbox helper sent a bad line: %r", line[:200])
            return
        if blob is not None and isinstance(msg.get("result"), dict):
            msg["result"]["data"] = blob
        rid = msg.get("id")
        if "ev" in msg:
            with self._lock:
                p = self._pending.get(rid)
            if p is not None and p.on_event is not None:
                self._deliver(p, p.on_event, msg)
            return
        with self._lock:
            p = self._pending.pop(rid, None)
        if p is not None:
            self._deliver(p, _resolve, p.fut, msg)

    def _deliver(self, p: _PendingRequest, fn: Callable[..., Any], *args: Any) -> None:
        """At once on the reading loop when the call is its own; posted to the call's loop otherwise."""
        if p.loop is self._home and not self._threaded and _running_loop() is p.loop:
            try:
                fn(*args)
            except Exception as exc:  # a caller's output callback: reported as the loop would, the batch goes on
                p.loop.call_exception_handler({"message": "sandbox helper event callback failed", "exception": exc})
        else:
            _post(p.loop, fn, *args)

    def _die(self) -> None:
        self.dead = True
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        if pending:  # only a call that was waiting needs to know why; a close needs no docker call
            err = SandboxError(self._death_reason(), hint="the next call starts a new helper")
            for p in pending:
                _post(p.loop, _resolve, p.fut, err)
        self._close_socket()

    def _death_reason(self) -> str:
        """Why the helper's stream ended, from the engine: the container stopped (out of memory or not),
        or the helper alone was killed (a command such as `pkill python3` or `kill $PPID`)."""
        if self._stream_reader is not None:
            self._stream_reader.join(1.0)  # the stream's last stderr, after the door ended
        tail = self._stderr_tail(300)
        tail = f": {tail}" if tail else ""
        if self._ending:
            return self._ending
        try:
            for _ in range(20):  # the engine may not have seen the exit yet
                ex = self._api.exec_inspect(self._exec_id)
                if not ex.get("Running"):
                    break
                time.sleep(0.05)
            state = self._api.inspect_container(self._cid).get("State") or {}
        except Exception as exc:  # the engine went away, or the container was removed
            return f"the sandbox helper stopped, and the engine could not say why ({short_reason(exc)}){tail}"
        if state.get("OOMKilled"):
            return f"the sandbox container ran out of memory and the helper was killed{tail}"
        if not state.get("Running"):
            return f"the sandbox container stopped{tail}"
        code = ex.get("ExitCode")
        if isinstance(code, int) and code > 128:
            name = _SIGNALS.get(code - 128, f"signal {code - 128}")
            return (
                f"the sandbox helper was killed ({name}) while the container kept running: most likely by a command"
                f" (e.g. `pkill python3` or `kill $PPID`){tail}"
            )
        return f"the sandbox helper exited (exit code {code}) while the container kept running{tail}"

    def kill(self, reason: str) -> None:
        """End a helper that does not answer: SIGKILL its process in the container (a wedged helper does
        not read the EOF of its stdin), then drop the stream. The next call starts a new helper."""
        self._ending = reason
        self.dead = True
        pid = self.hello.get("pid")
        if isinstance(pid, int) and pid > 1:
            with contextlib.suppress(Exception):
                kid = self._api.exec_create(self._cid, ["kill", "-KILL", str(pid)], stdout=True, stderr=True)["Id"]
                self._api.exec_start(kid)
        self._close_socket()

    def _send(self, line: bytes, blob: bytes = b"") -> None:
        with self._send_lock:
            if self._sock is None:
                raise SandboxError("the sandbox helper is not running")
            self._sock.sendall(line)
            if blob:
                self._sock.sendall(blob)

    def _try_send_now(self, data: bytes) -> bool:
        """Send a small request without blocking (the usual case: the socket buffer has room);
        False sends nothing and leaves it to the pool."""
        if len(data) > 32768 or not self._send_lock.acquire(blocking=False):
            return False
        try:
            if self._sock is None:
                return False
            n = send_now(self._sock, data)
            if not n:
                return False
            if n < len(data):
                self._sock.sendall(data[n:])  # rare: a nearly full buffer; the rest follows at once
            return True
        finally:
            self._send_lock.release()

    def _close_socket(self) -> None:
        for sock in (self._sock, self._stream):
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(2)  # SHUT_RDWR: EOF on the helper's stdin, it kills what it started
        if self._detach():
            self._close_now()

    def _close_now(self) -> None:
        sock, self._sock = self._sock, None
        stream, self._stream = self._stream, None
        for one in (sock, stream):
            if one is not None:
                with contextlib.suppress(OSError):
                    one.close()
        with contextlib.suppress(Exception):
            self._keep.close()

    def close(self) -> None:
        self.dead = True
        self._close_socket()

    # -- async side
    async def _timed_out(self, op: str, timeout: float) -> SandboxError:
        """The error for a request past its deadline. A helper that no longer answers a ping is wedged:
        it is killed, so the next call gets a fresh one instead of timing out in turn."""
        said = f"the sandbox did not answer a {op} request within {timeout:g} s"
        if op == "ping" or self.dead:
            return SandboxError(said)
        try:
            await self.request("ping", {}, timeout=PING_TIMEOUT_S)
        except SandboxError:
            reason = f"{said}, nor a ping within {PING_TIMEOUT_S:g} s: the helper was wedged and has been restarted"
            await asyncio.get_running_loop().run_in_executor(self._pool, self.kill, reason)
            return SandboxError(reason, hint="the next call starts a new helper; retry the call")
        return SandboxError(f"{said} (the helper itself still answers: the operation was too slow)")

    async def request(
        self,
        op: str,
        args: dict[str, Any],
        on_event: Callable[[dict], None] | None = None,
        timeout: float = OP_TIMEOUT_S,
    ) -> Any:
        if self.dead:
            raise SandboxError("the sandbox helper is not running")
        loop = asyncio.get_running_loop()
        if self._home is not loop and not self._threaded:
            self.attach(loop)
        fut = loop.create_future()
        with self._lock:
            self._next += 1
            rid = self._next
            self._pending[rid] = _PendingRequest(loop, fut, on_event)
        data, blob = _request_bytes(rid, op, args, self._marshal)
        try:
            if len(blob) > 32768 or not self._try_send_now(data + blob):
                await loop.run_in_executor(self._pool, self._send, data, blob)
            async with asyncio.timeout(timeout):
                msg = await fut
        except asyncio.CancelledError:
            with self._lock:
                self._pending.pop(rid, None)
            if op == "exec" and not self.dead:
                cancel = json.dumps({"id": None, "op": "cancel", "target": rid}) + "\n"
                with contextlib.suppress(Exception):
                    self._pool.submit(self._send, cancel.encode())
            raise
        except TimeoutError:
            with self._lock:
                self._pending.pop(rid, None)
            raise await self._timed_out(op, timeout) from None
        except OSError as exc:
            with self._lock:
                self._pending.pop(rid, None)
            self.dead = True  # a broken pipe: the helper is gone (the next call starts another); its end is read later
            raise SandboxError(f"lost the connection to the sandbox helper: {short_reason(exc)}") from None
        if not msg.get("ok"):
            raise error_from(msg.get("error") or {})
        return msg.get("result")


def _blob_size(line: bytes) -> int | None:
    """The size of the binary frame that follows `line`, or None when none does."""
    if not line.startswith(_BIN):
        return None
    end = line.find(b",", len(_BIN))
    digits = line[len(_BIN) : end if end >= 0 else None].rstrip(b"}")
    if not digits.isdigit():
        raise OSError(f"the sandbox helper sent a bad frame header: {line[:80]!r}")  # the stream is lost
    return int(digits)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _request_bytes(rid: int, op: str, args: dict[str, Any], use_marshal: bool = False) -> tuple[bytes, bytes]:
    """A request's line, and its `data` bytes (fs_write's) as the binary frame that follows it. A request
    without bytes goes as marshal when the helper takes it (and marshal takes it: plain types only)."""
    if use_marshal and "data" not in args:
        try:
            body = marshal.dumps({"id": rid, "op": op, "args": args}, 4)
        except ValueError:
            pass
        else:
            return b"M%d\n" % len(body) + body, b""
    blob = args.get("data")
    if isinstance(blob, (bytes, bytearray, memoryview)):
        args = {k: v for k, v in args.items() if k != "data"}
        head: dict[str, Any] = {"bin": len(blob), "id": rid, "op": op, "args": args}
        blob = bytes(blob)
    else:
        head, blob = {"id": rid, "op": op, "args": args}, b""
    line = json.dumps(head, ensure_ascii=False, separators=(",", ":")) + "\n"
    return line.encode("utf-8"), blob
