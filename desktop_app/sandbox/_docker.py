"""DockerSandbox: one long-lived, hardened container per project, reached through the in-container
helper over a single attached exec stream (or a `docker exec` per call when the image has no python3).
Every docker call runs in the sandbox's own thread pool, never on the event loop."""

# ruff: noqa: ASYNC109  (a command's `timeout` is the sandbox's own deadline, passed down to it)

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    WORKSPACE,
    ExecResult,
    OutputCallback,
    SandboxDescription,
    SandboxError,
)
from ..core import _glob as _glob_module
from . import _agent
from ._config import SandboxConfig, human_size
from ._convert import clamp_timeout, error_from, exec_result
from ._fileops import HelperOps

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

LABEL_MANAGED = "org.agent-desk.sandbox"
LABEL_PROJECT = "org.agent-desk.project"
LABEL_HASH = "org.agent-desk.config-hash"
LABEL_PATH = "org.agent-desk.host-path"
HOME = "/home/sandbox"
FALLBACK_UID = 1000
HELPER_SOURCE = (
    Path(_glob_module.__file__).read_text(encoding="utf-8") + "\n" + Path(_agent.__file__).read_text(encoding="utf-8")
)
# One shell line decides the transport: the helper when python3 exists, else a marker line.
HELPER_CMD = [
    "/bin/sh",
    "-c",
    'if command -v python3 >/dev/null 2>&1; then exec python3 -I -S -c "$1" "$2"; fi; echo NOPYTHON',
    "agent-desk-helper",
    HELPER_SOURCE,
    WORKSPACE,
]
OP_TIMEOUT_S = 120.0
ENGINE_HINT = "start Docker, or set DOCKER_HOST"


_ENGINE_CAUSES = (
    ("FileNotFoundError", "nothing listens there: is dockerd running?"),
    ("Connection refused", "the connection was refused: is dockerd running?"),
    ("PermissionError", "permission denied: is your user allowed to use Docker (the docker group)?"),
    ("Permission denied", "permission denied: is your user allowed to use Docker (the docker group)?"),
    ("timed out", "the engine did not answer in time"),
)


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for marker, plain in _ENGINE_CAUSES:
        if marker in text:
            return plain
    return text[:300]


def connect() -> docker.DockerClient:
    """A client for the engine DOCKER_HOST names (or the default socket); SandboxError if none answers."""
    import docker

    host = os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except Exception as exc:
        raise SandboxError(f"no Docker engine answers at {host} ({_short(exc)})", hint=ENGINE_HINT) from None
    return client


def _slug(text: str) -> str:
    import hashlib

    base = re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-.")[:40] or "project"
    return f"{base}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def container_name(project_id: str) -> str:
    return f"agent-desk-{_slug(project_id)}"


def folder_owner(folder: str) -> tuple[int, int]:
    """The uid:gid the container runs as: the folder's owner, or 1000 when that is root."""
    st = os.stat(folder)
    if st.st_uid == 0:
        return FALLBACK_UID, FALLBACK_UID
    return st.st_uid, st.st_gid


def _parse_time(text: str) -> float:
    """Docker's RFC 3339 timestamps (nanoseconds, Z) to epoch seconds; 0 for the zero time."""
    from datetime import datetime

    if not text or text.startswith("0001-"):
        return 0.0
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?", text)
    if not m:
        return 0.0
    tz = m.group(3) or "Z"
    tz = "+00:00" if tz == "Z" else tz
    frac = float(m.group(2) or 0)
    return datetime.fromisoformat(m.group(1) + tz).timestamp() + frac


def remove_orphans(
    client: docker.DockerClient,
    *,
    known_projects: Collection[str] | None = None,
    idle_limit_s: float | None = None,
    only: Collection[str] | None = None,
    now: float | None = None,
) -> list[str]:
    """Remove agent-desk containers whose project is gone (its folder no longer exists, or its id is
    not in `known_projects` when given), or that have been stopped longer than `idle_limit_s`.
    `only` limits the sweep to those project ids. Returns the names removed."""
    import docker.errors

    now = time.time() if now is None else now
    removed = []
    for c in client.containers.list(all=True, filters={"label": LABEL_MANAGED}):
        labels = c.labels or {}
        pid, path = labels.get(LABEL_PROJECT, ""), labels.get(LABEL_PATH, "")
        if only is not None and pid not in only:
            continue
        gone = not path or not os.path.isdir(path)
        if known_projects is not None and pid not in known_projects:
            gone = True
        idle = False
        if idle_limit_s is not None and c.status != "running":
            finished = _parse_time(c.attrs.get("State", {}).get("FinishedAt", "")) or _parse_time(
                c.attrs.get("Created", "")
            )
            idle = finished > 0 and now - finished > idle_limit_s
        if gone or idle:
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)
            removed.append(c.name)
            log.info("removed sandbox container %s (%s)", c.name, "project gone" if gone else "idle")
    return removed


# ------------------------------------------------------------------------------------------ transport
class _Pending:
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

    def __init__(self, api: Any, container_id: str, pool: ThreadPoolExecutor) -> None:
        self._api = api
        self._cid = container_id
        self._pool = pool
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._next = 0
        self._sock: Any = None
        self._keep: Any = None
        self._buf = bytearray()
        self._lines = bytearray()
        self._stderr = bytearray()
        self.dead = False
        self.hello: dict[str, Any] = {}

    # -- blocking side (pool / reader thread)
    def open(self, timeout: float = 20.0) -> bool:
        """Start the helper; True when it said hello, False when the image has no python3."""
        exec_id = self._api.exec_create(self._cid, HELPER_CMD, stdin=True, stdout=True, stderr=True, workdir="/")["Id"]
        sock = self._api.exec_start(exec_id, socket=True)
        self._keep = sock
        self._sock = getattr(sock, "_sock", sock)
        self._sock.settimeout(timeout)
        try:
            first = self._read_first_line()
        except OSError as exc:
            self._close_socket()
            raise SandboxError(f"the sandbox helper did not start: {_short(exc)}") from None
        finally:
            if self._sock is not None:
                self._sock.settimeout(None)
        if first is None or first.strip() == b"NOPYTHON":
            self._close_socket()
            if first is None:
                log.warning("sandbox helper exited at start: %s", self._stderr.decode(errors="replace")[-500:])
            return False
        try:
            self.hello = json.loads(first)
        except ValueError:
            self._close_socket()
            raise SandboxError(f"the sandbox helper said something unexpected: {first[:200]!r}") from None
        threading.Thread(target=self._reader, name=f"sandbox-helper-{self._cid[:12]}", daemon=True).start()
        return True

    def _feed(self, data: bytes) -> list[bytes]:
        """Demultiplex Docker's 8-byte-header frames; return complete stdout lines."""
        self._buf += data
        out: list[bytes] = []
        while len(self._buf) >= 8:
            size = int.from_bytes(self._buf[4:8], "big")
            if len(self._buf) < 8 + size:
                break
            stream, payload = self._buf[0], bytes(self._buf[8 : 8 + size])
            del self._buf[: 8 + size]
            if stream == 2:
                self._stderr += payload
                del self._stderr[:-8192]
                continue
            start = len(self._lines)
            self._lines += payload
            nl = self._lines.find(b"\n", start)
            while nl >= 0:
                out.append(bytes(self._lines[:nl]))
                del self._lines[: nl + 1]
                nl = self._lines.find(b"\n")
        return out

    def _read_first_line(self) -> bytes | None:
        lines: list[bytes] = []
        while not lines:
            data = self._sock.recv(65536)
            if not data:
                return None
            lines = self._feed(data)
        self._early = lines[1:]
        return lines[0]

    def _reader(self) -> None:
        sock = self._sock
        try:
            for line in getattr(self, "_early", []):
                self._dispatch(line)
            while sock is not None:
                data = sock.recv(1 << 20)
                if not data:
                    break
                for line in self._feed(data):
                    self._dispatch(line)
        except OSError:
            pass
        finally:
            self._die()

    def _dispatch(self, line: bytes) -> None:
        try:
            msg = json.loads(line)
        except ValueError:
            log.warning("sandbox helper sent a bad line: %r", line[:200])
            return
        rid = msg.get("id")
        if "ev" in msg:
            with self._lock:
                p = self._pending.get(rid)
            if p is not None and p.on_event is not None:
                _post(p.loop, p.on_event, msg)
            return
        with self._lock:
            p = self._pending.pop(rid, None)
        if p is not None:
            _post(p.loop, _resolve, p.fut, msg)

    def _die(self) -> None:
        self.dead = True
        tail = self._stderr.decode(errors="replace").strip()[-300:]
        err = SandboxError(
            "the sandbox helper stopped (the container was stopped, or ran out of memory)"
            + (f": {tail}" if tail else ""),
            hint="the next call restarts it",
        )
        with self._lock:
            pending, self._pending = list(self._pending.values()), {}
        for p in pending:
            _post(p.loop, _resolve, p.fut, err)
        self._close_socket()

    def _send(self, line: bytes) -> None:
        with self._send_lock:
            if self._sock is None:
                raise SandboxError("the sandbox helper is not running")
            self._sock.sendall(line)

    def _try_send_now(self, data: bytes) -> bool:
        """Send a small request without blocking (the usual case: the socket buffer has room);
        False sends nothing and leaves it to the pool."""
        if len(data) > 32768 or not self._send_lock.acquire(blocking=False):
            return False
        try:
            if self._sock is None:
                return False
            try:
                n = self._sock.send(data, socket.MSG_DONTWAIT)
            except (BlockingIOError, InterruptedError):
                return False
            if n < len(data):
                self._sock.sendall(data[n:])  # rare: a nearly full buffer; the rest follows at once
            return True
        finally:
            self._send_lock.release()

    def _close_socket(self) -> None:
        sock, self._sock = self._sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(2)  # SHUT_RDWR: EOF on the helper's stdin, it kills what it started
            with contextlib.suppress(OSError):
                sock.close()
        with contextlib.suppress(Exception):
            self._keep.close()

    def close(self) -> None:
        self.dead = True
        self._close_socket()

    # -- async side
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
        fut = loop.create_future()
        with self._lock:
            self._next += 1
            rid = self._next
            self._pending[rid] = _Pending(loop, fut, on_event)
        line = json.dumps({"id": rid, "op": op, "args": args}, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            data = line.encode("utf-8")
            if not self._try_send_now(data):
                await loop.run_in_executor(self._pool, self._send, data)
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
            raise SandboxError(f"the sandbox did not answer a {op} request within {timeout:g} s") from None
        except OSError as exc:
            with self._lock:
                self._pending.pop(rid, None)
            raise SandboxError(f"lost the connection to the sandbox helper: {_short(exc)}") from None
        if not msg.get("ok"):
            raise error_from(msg.get("error") or {})
        return msg.get("result")


# ------------------------------------------------------------------------------------------ sandbox
class DockerSandbox(HelperOps):
    """The Sandbox protocol in a hardened per-project container (see SandboxConfig for the knobs)."""

    def __init__(
        self,
        project_id: str,
        folder: str | os.PathLike[str],
        config: SandboxConfig | None = None,
        *,
        client: docker.DockerClient | None = None,
        max_workers: int = 8,
    ) -> None:
        self.project_id = project_id
        self.folder = os.path.realpath(folder)
        self.config = config or SandboxConfig()
        self._client = client
        self._pool = ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix=f"agent-desk-docker-{project_id[:16]}"
        )
        self._container: Any = None
        self._image_id = ""
        self._uid, self._gid = 0, 0
        self._channel: HelperChannel | None = None
        self._fallback: _ExecTransport | None = None
        self._start_lock = asyncio.Lock()
        self._closed = False
        self.transport = ""  # "helper" or "exec", once started

    # -- lifecycle
    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def start(self) -> None:
        async with self._start_lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            if self._transport_ready():
                return
            try:
                await self._run(self._ensure_container)
                channel = HelperChannel(self._client.api, self._container.id, self._pool)
                has_python = await self._run(channel.open)
            except SandboxError:
                raise
            except Exception as exc:  # docker's and requests' errors: the engine went away or refused
                raise SandboxError(f"Docker failed: {_short(exc)}", hint=ENGINE_HINT) from None
            if has_python:
                self._channel, self._fallback, self.transport = channel, None, "helper"
            else:
                log.info("image %s has no python3: one docker exec per call", self.config.image)
                self._channel, self._fallback = None, _ExecTransport(self._client.api, self._container.id, self._pool)
                self.transport = "exec"

    def _transport_ready(self) -> bool:
        if self._channel is not None and not self._channel.dead:
            return True
        return self._fallback is not None and not self._fallback.dead

    def _ensure_container(self) -> None:
        import docker.errors

        if self._client is None:
            self._client = connect()
        client = self._client
        if not os.path.isdir(self.folder):
            raise SandboxError(f"the project folder {self.folder} does not exist")
        try:
            image = client.images.get(self.config.image)
        except docker.errors.ImageNotFound:
            from ._images import image_name_for_tag

            name = image_name_for_tag(self.config.image)
            hint = (f"build it with `agent-desk images build {name}`" if name else
                    "pull or build that tag, or pick an image from `agent-desk images list` (--image or the "
                    "project settings)")
            raise SandboxError(f"the sandbox image {self.config.image} is not on this machine", hint=hint) from None
        except docker.errors.DockerException as exc:
            raise SandboxError(f"Docker failed: {_short(exc)}", hint=ENGINE_HINT) from None
        self._image_id = image.id
        try:
            remove_orphans(client, idle_limit_s=self.config.idle_limit_s)
        except Exception as exc:  # clean-up must never stop a sandbox from starting
            log.warning("could not remove orphan sandbox containers: %s", _short(exc))
        self._uid, self._gid = (self.config.uid, self.config.uid) if self.config.uid else folder_owner(self.folder)
        st = os.stat(self.folder)
        # The folder's inode too: a bind mount keeps a deleted-and-recreated folder's old inode.
        want = self.config.container_hash(
            image_id=image.id, folder=self.folder, inode=(st.st_dev, st.st_ino), uid=self._uid, gid=self._gid
        )
        found = client.containers.list(all=True, filters={"label": f"{LABEL_PROJECT}={self.project_id}"})
        keep = None
        for c in found:
            if keep is None and (c.labels or {}).get(LABEL_HASH) == want:
                keep = c
            else:
                log.info("removing sandbox container %s: its configuration changed", c.name)
                with contextlib.suppress(docker.errors.NotFound):
                    c.remove(force=True)
        if keep is None:
            keep = self._create(want)
        if keep.status != "running":
            try:
                keep.start()
            except docker.errors.APIError as exc:
                raise SandboxError(f"the sandbox container did not start: {_short(exc)}") from None
            keep.reload()
        self._container = keep

    def _create(self, config_hash: str) -> Any:
        import docker.errors
        from docker.types import Mount

        cfg = self.config
        ids = f"uid={self._uid},gid={self._gid}"
        try:
            return self._client.containers.create(
                cfg.image,
                command=["sleep", "infinity"],
                name=container_name(self.project_id),
                hostname="sandbox",
                labels={
                    LABEL_MANAGED: "1",
                    LABEL_PROJECT: self.project_id,
                    LABEL_HASH: config_hash,
                    LABEL_PATH: self.folder,
                },
                user=f"{self._uid}:{self._gid}",
                working_dir=WORKSPACE,
                environment={"HOME": HOME, "LANG": "C.UTF-8", "USER": "sandbox"},
                mounts=[Mount(WORKSPACE, self.folder, type="bind", read_only=cfg.workspace_readonly)],
                tmpfs={
                    "/tmp": f"rw,nosuid,nodev,exec,size={cfg.tmp_size},mode=1777",
                    HOME: f"rw,nosuid,nodev,exec,size={cfg.home_size},mode=0700,{ids}",
                },
                read_only=True,
                network_mode="bridge" if cfg.network else "none",
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                pids_limit=cfg.pids,
                mem_limit=cfg.memory,
                memswap_limit=cfg.memory,
                nano_cpus=int(cfg.cpus * 1e9),
                init=True,
                ipc_mode="private",
                detach=True,
            )
        except docker.errors.APIError as exc:
            raise SandboxError(f"could not create the sandbox container: {_short(exc)}") from None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        if self._container is not None and not self.config.keep_running:
            with contextlib.suppress(Exception):
                await self._run(lambda: self._container.stop(timeout=2))
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def stop_container(self) -> None:
        """Stop the container now (every process in it dies); the next call starts it again."""
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        if self._container is not None:
            await self._run(lambda: self._container.stop(timeout=2))

    @property
    def container_id(self) -> str:
        return self._container.id if self._container is not None else ""

    def describe(self) -> SandboxDescription:
        cfg = self.config
        return SandboxDescription(
            engine="docker",
            unsandboxed=False,
            container_id=self.container_id[:12],
            image=cfg.image,
            image_digest=self._image_id,
            network="bridge" if cfg.network else "none",
            limits={
                "memory": human_size(cfg.memory),
                "cpus": cfg.cpus,
                "pids": cfg.pids,
                "workspace": "read-only" if cfg.workspace_readonly else "read-write",
                "root_fs": "read-only",
                "capabilities": "none",
                "no_new_privileges": True,
                "user": f"{self._uid}:{self._gid}",
                "transport": self.transport,
            },
            relaxations=cfg.relaxations(),
            workspace=WORKSPACE,
            host_path=self.folder,
        )

    # -- calls
    async def _call(
        self, op: str, args: dict[str, Any], on_event: Callable | None = None, timeout: float = OP_TIMEOUT_S
    ) -> Any:
        if self._closed:
            raise SandboxError("the sandbox is closed")
        if not self._transport_ready():
            await self.start()
        if self._channel is not None:
            return await self._channel.request(op, args, on_event, timeout)
        assert self._fallback is not None
        return await self._fallback.request(op, args, on_event, timeout)

    async def exec(
        self,
        command: str | list[str],
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        on_output: OutputCallback | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult:
        timeout = clamp_timeout(timeout, MAX_TIMEOUT_S)
        args = {
            "command": command,
            "cwd": cwd,
            "env": dict(env or {}),
            "timeout": timeout,
            "output_limit": int(output_limit),
            "stream": on_output is not None,
        }
        on_event = None
        if on_output is not None:

            def on_event(msg: dict[str, Any]) -> None:
                on_output(msg["stream"], msg["data"])

        res = await self._call("exec", args, on_event, timeout + _agent.KILL_GRACE_S + 30.0)
        return exec_result(res)

    async def _op(self, op: str, args: dict[str, Any]) -> Any:
        return await self._call(op, args)


from ._exec_fallback import _ExecTransport  # noqa: E402  (it uses names defined above)
