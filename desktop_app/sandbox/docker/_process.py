"""DockerSandbox's `open_process`: a long-lived process in the project's container with its stdin and stdout
on one attached `docker exec` socket for its whole life (an MCP server's stdio), and the kill of its tree."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import secrets
import socket
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...core import SandboxError
from .._client import short_reason
from .._frames import STDERR, FrameDecoder, send_now
from ..helper.proctree import RUN_ENV

log = logging.getLogger(__name__)

STDERR_TAIL_BYTES = 8192
BUFFER_LIMIT = 1 << 20  # stdout bytes read but not yet taken by read(): past it the socket waits (back-pressure)
CLOSE_GRACE_S = 1.0  # after EOF on its stdin, how long a server has to exit on its own before the kill
START_TIMEOUT_S = 20.0
_MARK = b"agent-desk-process "
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NOT_IN_IMAGE = ("the project's sandbox image does not have it: pick an image that does (project settings, or "
                 "--image; the catalog's `mcp` image has mcp-server-time, -git and -fetch, and "
                 "mcp-server-memory, -everything and -filesystem)")
_SAFE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# sh, not the helper: it runs in images without python3 too. It says its pid (the `docker exec`'s own, a
# session leader) on stdout before exec'ing the program, so the host knows the tree to kill at close.
_LAUNCH = (
    'command -v -- "$1" >/dev/null 2>&1 || { echo "agent-desk: $1: command not found" >&2; exit 127; }; '
    "printf 'agent-desk-process %s\\n' $$; exec \"$@\""
)

# Every process of the channel: the leader's descendants, what is still in its session or group (a
# daemon that left the tree), and what carries its cookie; the script's own processes are never touched.
# SIGKILL in rounds until nothing is left (a fork loop keeps making more).
_KILL_TREE = rf"""set -f; PATH={_SAFE_PATH}
P="$1"; C="$2"
pick() {{
  {{ set +f
    for d in /proc/[0-9]*; do
      {{ read -r s < "$d/stat"; }} 2>/dev/null || continue
      set -- ${{s##*) }}
      case "$1" in Z|X) continue;; esac
      echo "S ${{d#/proc/}} $2 $3 $4"
    done
    grep -l -z -x "{RUN_ENV}=$C" /proc/[0-9]*/environ 2>/dev/null | sed -n 's|^/proc/\([0-9]*\)/environ$|C \1|p'
  }} | awk -v P="$P" -v self=$$ '
    $1 == "S" {{ pp[$2] = $3; pg[$2] = $4; sd[$2] = $5; next }}
    $1 == "C" {{ ck[$2] = 1; next }}
    function under(p, q,   n) {{
      for (n = 0; (p in pp) && n < 4096; n++) {{ if (p == q) return 1; p = pp[p] }}
      return 0
    }}
    END {{ for (p in pp) if (p != 1 && !under(p, self) && (under(p, P) || sd[p] == P || pg[p] == P || (p in ck)))
             printf "%s ", p }}'
}}
i=0; t=$(pick)
while [ -n "$t" ] && [ $i -lt 60 ]; do kill -KILL $t 2>/dev/null; t=$(pick); i=$((i + 1)); done
[ -z "$t" ]
"""


def process_env(env: Mapping[str, str] | None, cookie: str) -> dict[str, str]:
    """What the process gets on top of the container's own environment (never the host's)."""
    out: dict[str, str] = {}
    for key, value in (env or {}).items():
        k, v = str(key), str(value)
        if not _ENV_NAME.match(k) or "\0" in v:
            raise SandboxError(
                f"cannot pass the environment variable {k[:60]!r} to a process in the sandbox",
                hint="a name is letters, digits and _ (not starting with a digit); a value holds no NUL byte",
            )
        out[k] = v
    out[RUN_ENV] = cookie
    return out


class DockerProcessChannel:
    """`ProcessChannel` over one attached `docker exec`: stdout and a stderr tail demultiplexed by a reader
    thread (the socket is never read on the event loop), stdin written in place when the socket has room."""

    def __init__(self, api: Any, container_id: str, argv: list[str], user: str, pool: ThreadPoolExecutor) -> None:
        self._api, self._cid, self._argv, self._user, self._pool = api, container_id, list(argv), user, pool
        self.cookie = f"mcp-{secrets.token_hex(8)}"
        self.pid = 0  # in the container's PID namespace
        self.exec_id = ""
        self._keep: Any = None
        self._sock: Any = None
        self._frames = FrameDecoder()
        self._first: list[bytes] = []
        self._stderr = bytearray()
        self._returncode: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[bytes] = asyncio.Queue()
        self._buffered = 0
        self._room = threading.Condition()
        self._ended = False  # its stdout reached EOF (returncode is set first)
        self._done = asyncio.Event()
        self._write_lock = asyncio.Lock()
        self._closed = False

    # -- start (blocking, in the sandbox's pool)
    def start(self, cwd: str, env: Mapping[str, str] | None) -> None:
        if not self._argv or not all(isinstance(a, str) and "\0" not in a for a in self._argv):
            raise SandboxError("no command to start, or an argument holds a NUL byte")
        cmd = ["/bin/sh", "-c", _LAUNCH, "agent-desk-process", *self._argv]
        self.exec_id = self._api.exec_create(
            self._cid, cmd, stdin=True, stdout=True, stderr=True, tty=False, user=self._user, workdir=cwd,
            environment=process_env(env, self.cookie),
        )["Id"]
        self._keep = self._api.exec_start(self.exec_id, socket=True)
        self._sock = getattr(self._keep, "_sock", self._keep)
        self._sock.settimeout(START_TIMEOUT_S)
        try:
            line = self._first_line()
        except OSError as exc:
            self._close_socket()
            raise SandboxError(f"cannot start {self._argv[0]!r}: {short_reason(exc)}") from None
        if line is None or not line.startswith(_MARK):
            self._close_socket()
            said = self.stderr_tail().strip() or (line or b"").decode("utf-8", "replace").strip() or "it exited"
            missing = "command not found" in said
            raise SandboxError(f"cannot start {self._argv[0]!r} in the sandbox: {said[-500:]}",
                               hint=_NOT_IN_IMAGE if missing else "is the program in the sandbox image, and is the "
                               "folder there?")
        self.pid = int(line[len(_MARK):].strip() or 0)
        self._sock.settimeout(None)

    def _first_line(self) -> bytes | None:
        """The launcher's line with the pid; what the program wrote after it is kept for read()."""
        pending = bytearray()
        while True:
            data = self._sock.recv(65536)
            if not data:
                return None
            pending += self._split(data)
            nl = pending.find(b"\n")
            if nl >= 0:
                if len(pending) > nl + 1:
                    self._first.append(bytes(pending[nl + 1 :]))
                return bytes(pending[:nl])

    def _split(self, data: bytes) -> bytes:
        """Demultiplex Docker's stream: stdout returned, stderr kept as a tail."""
        out = bytearray()
        for stream, payload in self._frames.feed(data):
            if stream == STDERR:
                self._stderr += payload
                del self._stderr[:-STDERR_TAIL_BYTES]
            else:
                out += payload
        return bytes(out)

    def run_reader(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        for chunk in self._first:
            self._push(chunk)
        threading.Thread(target=self._reader, name=f"sandbox-process-{self.pid}", daemon=True).start()

    # -- the reader thread
    def _reader(self) -> None:
        sock = self._sock
        try:
            while sock is not None:
                data = sock.recv(1 << 16)
                if not data:
                    break
                out = self._split(data)
                if out:
                    self._wait_for_room()
                    self._push(out)
        except (OSError, ValueError):
            pass
        finally:
            self._returncode = self._exit_code()
            self._push(b"")

    def _wait_for_room(self) -> None:
        with self._room:
            while self._buffered > BUFFER_LIMIT and not self._closed:
                self._room.wait(0.5)

    def _push(self, data: bytes) -> None:
        with self._room:
            self._buffered += len(data)
        assert self._loop is not None
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody reads any more
            self._loop.call_soon_threadsafe(self._arrived, data)

    def _arrived(self, data: bytes) -> None:
        self._queue.put_nowait(data)
        if not data:
            self._done.set()

    def _exit_code(self) -> int:
        for _ in range(40):  # the engine may not have seen the exit yet
            try:
                ex = self._api.exec_inspect(self.exec_id)
            except Exception:  # the engine or the container went away
                return -1
            if not ex.get("Running"):
                code = ex.get("ExitCode")
                return code if isinstance(code, int) else -1
            time.sleep(0.05)
        return -1

    # -- the ProcessChannel protocol
    async def read(self) -> bytes:
        if self._ended and self._queue.empty():
            return b""
        data = await self._queue.get()
        parts = [data]
        while data and not self._queue.empty() and sum(map(len, parts)) < 1 << 16:
            data = self._queue.get_nowait()
            parts.append(data)
        if not data:  # EOF: what came before it now, b"" from the next read on
            self._ended = True
            parts.pop()
        out = b"".join(parts)
        with self._room:
            self._buffered -= len(out)
            self._room.notify()
        return out

    async def write(self, data: bytes) -> None:
        async with self._write_lock:
            if self._ended or self._returncode is not None or self._closed or self._sock is None:
                raise SandboxError(self._gone(), hint="the process has ended: start it again")
            view = memoryview(data)
            with contextlib.suppress(OSError, ValueError):
                view = view[send_now(self._sock, view) or 0:]
            if view:
                try:
                    await asyncio.to_thread(self._sock.sendall, view)
                except (OSError, AttributeError):
                    raise SandboxError(self._gone(), hint="the process has ended: start it again") from None

    def _gone(self) -> str:
        code = "" if self._returncode is None else f" (exit {self._returncode})"
        tail = self.stderr_tail().strip()[-300:]
        return f"{self._argv[0]!r} in the sandbox has ended{code}" + (f": {tail}" if tail else "")

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    @property
    def returncode(self) -> int | None:
        return self._returncode

    async def close(self) -> None:
        """EOF on its stdin; a moment to exit on its own; then its whole tree is killed."""
        if self._closed:
            return
        self._closed = True
        with self._room:
            self._room.notify_all()
        with contextlib.suppress(OSError, AttributeError):
            self._sock.shutdown(socket.SHUT_WR)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._done.wait(), CLOSE_GRACE_S)
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._pool, self.kill_tree)
        except RuntimeError:  # the sandbox's pool is shut down: kill from a thread of our own
            await asyncio.to_thread(self.kill_tree)
        self._close_socket()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._done.wait(), 5.0)

    def kill_tree(self) -> bool:
        """SIGKILL every process of this channel in the container; True when none is left."""
        if self.pid <= 1:
            return True
        try:
            cmd = ["/bin/sh", "-c", _KILL_TREE, "kill-tree", str(self.pid), self.cookie]
            kid = self._api.exec_create(self._cid, cmd, stdout=True, stderr=True, user=self._user)["Id"]
            self._api.exec_start(kid)
            return self._api.exec_inspect(kid).get("ExitCode") == 0
        except Exception as exc:  # the container is gone: so is every process in it
            log.info("could not kill the tree of %s: %s", self._argv[0], short_reason(exc))
            return False

    def _close_socket(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        with contextlib.suppress(Exception):
            self._keep.close()
