"""The slow path for images without python3: each operation is one `docker exec` of a small POSIX shell
script (see _scripts.py), answering with the same dicts as the in-container helper. The same
containment as the helper: commands in their own sessions with a run cookie, killed whole (bash_kill, timeout,
cancel, the session's end); writes that never follow a link; fs_grep that cannot backtrack."""

# ruff: noqa: ASYNC109  (a command's `timeout` is the sandbox's own deadline, passed down to it)

from __future__ import annotations

import asyncio
import contextlib
import errno
import posixpath
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...core import WORKSPACE, SandboxError, glob_regex
from .._frames import STDERR, end_input, read_frames
from .._helper_ops import ErrorCode, sandbox_error
from .._local import _re2_compile
from ..helper.processes import KILL_GRACE_S, Capture, start_error
from ..helper.search import GREP_LINE_MAX, GREP_MAX_FILE, SEARCH_TIMEOUT_S, rg_ignore_flag
from ..helper.workspace import MAX_WRITE
from ._regex import Untranslatable, ere_from_rust
from ._scripts import ERROR, OUTSIDE, script

ARG_MAX_ONE = 128 * 1024 - 1  # the kernel's MAX_ARG_STRLEN, less the NUL
ARG_MAX_ALL = 1536 * 1024  # well under the usual ARG_MAX (a quarter of an 8 MiB stack)
SHELL = 'if [ -x /bin/bash ]; then exec /bin/bash -c "$1"; fi; exec /bin/sh -c "$1"'
SWEEP_GRACE_MS = 200
GREP_DIALECT_ERE = "POSIX extended (GNU grep -E; translated from Rust syntax)"
_STAT_TYPES = {"regular file": "file", "regular empty file": "file", "directory": "dir", "symbolic link": "symlink"}
_TYPES = {"f": "file", "d": "dir", "l": "symlink"}


def _stat_line(line: str, rel: str) -> dict[str, Any]:
    kind, size, mtime, mode = line.strip().rsplit("|", 3)
    return {"path": rel, "type": _STAT_TYPES.get(kind, "other"), "size": int(size), "mtime": float(mtime),
            "mode": int(mode, 8)}  # fmt: skip


def _rel(real: str) -> str:
    return "." if real == WORKSPACE else real[len(WORKSPACE) + 1 :]


def _too_long(words: list[str]) -> None:
    """E2BIG named as what it is, before docker's exec fails on it."""
    sizes = [len(w.encode("utf-8", "surrogateescape")) + 1 for w in words]
    if max(sizes, default=0) > ARG_MAX_ONE or sum(sizes) > ARG_MAX_ALL:
        raise SandboxError(start_error("the command", OSError(errno.E2BIG, "argument list too long")))


def _command_words(command: str | list[str], env: dict[str, str] | None) -> list[str]:
    """What follows `env` in the scripts: NAME=VALUE words, then the command (bash when the image has it)."""
    pairs = [f"{k}={v}" for k, v in (env or {}).items() if k and "=" not in str(k)]
    argv = [str(x) for x in command] if isinstance(command, list) else ["/bin/sh", "-c", SHELL, "sh", command]
    if argv and "=" in argv[0]:
        argv = ["/usr/bin/env", "--", *argv] if not pairs else argv  # never read as an assignment
    return [*pairs, *argv]


class _Runs:
    """The cookies of this transport's runs (foreground commands and background processes): which are live
    (their processes are not strays), and what started each (for the sweep's report)."""

    def __init__(self) -> None:
        self.prefix = f"x{secrets.token_hex(6)}:"
        self._lock = threading.Lock()
        self._n = 0
        self.live: dict[str, str] = {}  # cookie -> "label: command"
        self.bg: dict[str, str] = {}  # background id -> cookie
        # Held while a kill judges by the live list, and while a background process is registered and started:
        # its leader is an orphan from its start, so it must be live in every list a scan is judged by.
        self.gate = threading.Lock()

    def new(self, label: str, command: str | list[str]) -> str:
        text = command if isinstance(command, str) else " ".join(map(str, command))
        with self._lock:
            self._n += 1
            cookie = f"{self.prefix}{self._n}"
            self.live[cookie] = f"{label}: {text[:300]}"
        return cookie

    def end(self, cookie: str) -> None:
        with self._lock:
            self.live.pop(cookie, None)

    def live_arg(self) -> str:
        with self._lock:
            return " " + " ".join(self.live) + " "

    def names(self) -> dict[str, str]:
        """What started each live run, taken before a sweep (a run it kills ends while it reports)."""
        with self._lock:
            return dict(self.live)


class ExecTransport:
    """The same `request(op, args)` as HelperChannel, one `docker exec` per call."""

    def __init__(self, api: Any, container_id: str, pool: ThreadPoolExecutor) -> None:
        self._api = api
        self._cid = container_id
        self._pool = pool
        self._runs = _Runs()
        self._n = 0
        self.dead = False

    # -- one exec, blocking
    def _run(
        self,
        op: str,
        argv: list[str],
        stdin: bytes | None = None,
        on_frame: Callable[[int, bytes], None] | None = None,
    ) -> tuple[int, bytes, bytes]:
        cmd = ["/bin/sh", "-c", script(op, self._runs.prefix, max_file=GREP_MAX_FILE), "agent-desk", *argv]
        exec_id = self._api.exec_create(self._cid, cmd, stdin=stdin is not None, workdir="/")["Id"]
        sock = self._api.exec_start(exec_id, socket=True)
        raw = getattr(sock, "_sock", sock)
        out, err = bytearray(), bytearray()
        try:
            if stdin is not None:
                raw.sendall(stdin)
                end_input(raw)
            # Until EOF: the stream ends when the last holder of the exec's stdout and stderr is gone.
            for stream, payload in read_frames(raw):
                if on_frame is not None:
                    on_frame(stream, payload)
                else:
                    (err if stream == STDERR else out).extend(payload)
        finally:
            with contextlib.suppress(OSError):
                raw.close()
            with contextlib.suppress(Exception):
                sock.close()
        return self._exit_code(exec_id), bytes(out), bytes(err)

    def _exit_code(self, exec_id: str) -> int:
        """The exec's exit code. The stream can end a moment before the engine records the exit: wait."""
        deadline = time.monotonic() + 5.0
        while True:
            info = self._api.exec_inspect(exec_id)
            code = info.get("ExitCode")
            if (code is not None and not info.get("Running")) or time.monotonic() > deadline:
                return code if code is not None else -1
            time.sleep(0.005)

    @staticmethod
    def _check(code: int, err: bytes, ok: tuple[int, ...] = (0,)) -> None:
        if code in ok:
            return
        text = err.decode(errors="replace").strip()
        if text.startswith(OUTSIDE):
            path = text[len(OUTSIDE) :].strip().splitlines()[0]
            message = f"{path} resolves outside the workspace ({WORKSPACE}); paths and symlinks must stay inside it"
            raise sandbox_error(ErrorCode.OUTSIDE_WORKSPACE, message)
        text = text.replace(ERROR + " ", "")
        raise SandboxError(text or f"the sandbox command failed with exit code {code}")

    # -- ops
    async def request(
        self, op: str, args: dict[str, Any], on_event: Callable | None = None, timeout: float = 120.0
    ) -> Any:
        loop = asyncio.get_running_loop()
        if op == "exec":
            cookie = self._runs.new("bash_run", args["command"])
            fut = loop.run_in_executor(self._pool, self._guarded, lambda a: self._exec(cookie, a, loop, on_event), args)
            try:
                return await asyncio.shield(fut)
            except asyncio.CancelledError:
                self._pool.submit(self._kill_run, cookie, int(KILL_GRACE_S * 1000))
                raise
        method = getattr(self, "_op_" + op, None)
        if method is None:
            raise SandboxError(f"unknown sandbox operation {op!r}")
        return await loop.run_in_executor(self._pool, self._guarded, method, args)

    def _guarded(self, method: Callable[[dict[str, Any]], Any], args: dict[str, Any]) -> Any:
        try:
            return method(args)
        except SandboxError:
            raise
        except Exception as exc:  # docker's errors: the container stopped, or the engine went away
            self.dead = True  # the next call makes sure the container runs again
            raise SandboxError(f"the sandbox container did not answer: {str(exc)[:300]}") from None

    def _exec(self, cookie: str, a: dict[str, Any], loop: asyncio.AbstractEventLoop, on_event: Callable | None) -> Any:
        try:
            words = _command_words(a["command"], a.get("env"))
            _too_long(words)
            return self._exec_run(cookie, words, a, loop, on_event)
        finally:
            self._runs.end(cookie)
            # The script killed the run's tree and the cookie-less strays as it ended; this pass, judged by the
            # exact live list, also takes orphans with a cookie of a run that is over (a forged one included).
            with contextlib.suppress(RuntimeError):  # the pool is shutting down: the sweep does it
                self._pool.submit(self._kill_run, cookie, 0)

    def _kill_run(self, cookie: str, grace_ms: int) -> None:
        with contextlib.suppress(Exception), self._runs.gate:
            self._run("cancel", [cookie, self._runs.live_arg(), str(grace_ms)])

    def _exec_run(
        self, cookie: str, words: list[str], a: dict[str, Any], loop: asyncio.AbstractEventLoop,
        on_event: Callable | None,
    ) -> dict[str, Any]:  # fmt: skip
        out = Capture(a.get("output_limit", 1_000_000))
        err = Capture(a.get("output_limit", 1_000_000))
        head = bytearray()

        def on_frame(stream: int, payload: bytes) -> None:
            if stream == STDERR and len(head) < 200 and not out.head and not err.head:
                head.extend(payload)
            cap, name = (err, "stderr") if stream == STDERR else (out, "stdout")
            live = cap.feed(payload)
            if live and on_event is not None:
                text = cap.decoder.decode(live)
                if text:
                    loop.call_soon_threadsafe(on_event, {"ev": "output", "stream": name, "data": text})

        start = time.monotonic()
        timeout = float(a.get("timeout", 120.0))
        argv = [a.get("cwd") or ".", cookie, f"{timeout}s", f"{KILL_GRACE_S}s", *words]
        code, _, _ = self._run("exec", argv, on_frame=on_frame)
        elapsed = time.monotonic() - start
        if code == 3 and (bytes(head).startswith(OUTSIDE.encode()) or bytes(head).startswith(ERROR.encode())):
            self._check(code, bytes(head))
        if code in (126, 127) and b"argument list too long" in bytes(head).lower():
            raise SandboxError(start_error("the command", OSError(errno.E2BIG, "argument list too long")))
        timed_out = code in (124, 137) and elapsed >= timeout - 0.05
        return {
            "exit_code": code,
            "stdout": out.text(),
            "stderr": err.text(),
            "timed_out": timed_out,
            "truncated": out.truncated or err.truncated,
            "duration_ms": elapsed * 1000.0,
            "oom_killed": False,
            "killed_signal": (15 if code == 124 else 9) if timed_out else None,
        }

    def _op_read(self, a: dict[str, Any]) -> Any:
        code, out, err = self._run(
            "read", [a["path"], str(int(a.get("offset", 0))), str(int(a.get("limit", 10 << 20)))]
        )
        self._check(code, err)
        size = int(err.decode().split()[0])
        return {"data": out, "size": size}

    def _op_read_text(self, a: dict[str, Any]) -> Any:
        limit = int(a.get("limit", 10 << 20))
        code, out, err = self._run("read", [a["path"], "0", str(limit + 1)])
        self._check(code, err)
        size = int(err.decode().split()[0])
        if size > limit:
            raise SandboxError(
                f"{a['path']} is {size} bytes, over the {limit}-byte limit for reading as text; read a range instead"
            )
        return out.decode("utf-8", "replace")

    def _op_write(self, a: dict[str, Any]) -> Any:
        data = bytes(a["data"]) if "data" in a else a["text"].encode("utf-8")
        if len(data) > MAX_WRITE:
            raise SandboxError(f"refusing to write {len(data)} bytes (limit {MAX_WRITE})")
        if "\x00" in a["path"]:
            raise SandboxError(f"invalid path (NUL byte): {a['path']!r}")
        code, out, err = self._run("write", [a["path"], "1" if a.get("make_dirs", True) else "0", str(len(data))],
                                   stdin=data)
        self._check(code, err)
        return self._stat_of(a["path"], out)

    def _stat_of(self, path: str, out: bytes) -> dict[str, Any]:
        line = out.decode().strip().splitlines()[-1]
        return _stat_line(line, self._rel_of(path))

    def _rel_of(self, path: str) -> str:
        full = path if path.startswith("/") else posixpath.join(WORKSPACE, path)
        return _rel(posixpath.normpath(full))

    def _op_real_path(self, a: dict[str, Any]) -> Any:
        if "\x00" in a["path"]:
            raise SandboxError(f"invalid path (NUL byte): {a['path']!r}")
        code, out, err = self._run("real_path", [a["path"]])
        self._check(code, err)
        return out.decode("utf-8", "surrogateescape")

    def _op_stat(self, a: dict[str, Any]) -> Any:
        code, out, err = self._run("stat", [a["path"]])
        self._check(code, err)
        text = out.decode().strip()
        return None if text == "NONE" else _stat_line(text, self._rel_of(a["path"]))

    def _entries(self, op: str, argv: list[str], full: bool = False) -> tuple[str, list[dict[str, Any]], str]:
        """Entries of a list (names relative to the folder) or a walk (`full`: full paths, made relative)."""
        code, out, err = self._run(op, argv)
        self._check(code, err)
        lines = err.decode("utf-8", "replace").strip().splitlines()
        base, rel_base = lines[0], _rel(lines[0])
        cut = len(base.rstrip("/")) + 1 if full else 0
        entries = []
        for rec in out.split(b"\0"):
            if not rec:
                continue
            kind, size, mtime, mode, name = rec.decode("utf-8", "replace").split("\t", 4)
            name = name[cut:]
            rel = name if rel_base == "." else f"{rel_base}/{name}"
            entries.append({"path": rel, "type": _TYPES.get(kind, "other"), "size": int(size),
                            "mtime": float(mtime), "mode": int(mode, 8), "_name": name})  # fmt: skip
        return base, entries, "\n".join(lines[1:])

    def _op_list(self, a: dict[str, Any]) -> Any:
        _, entries, _ = self._entries("list", [a.get("path", ".")])
        for e in entries:
            e.pop("_name")
        return sorted(entries, key=lambda d: d["path"])

    def _op_glob(self, a: dict[str, Any]) -> Any:
        pattern = a["pattern"]
        while pattern.startswith("./"):
            pattern = pattern[2:]
        rx = _re2_compile(glob_regex(pattern).pattern)  # RE2: no glob can hold a thread of the desk
        timeout = _search_timeout(a)
        argv = [a.get("path", "."), f"{timeout:g}s", _rg_ignore_flag(a)]
        _, entries, tail = self._entries("walk", argv, full=True)
        if "find 137" in tail or "find 124" in tail:
            raise SandboxError(_timeout_message("fs_glob", timeout))
        found = [e for e in entries if rx.match(e.pop("_name"))]
        found.sort(key=(lambda d: (-d["mtime"], d["path"])) if a.get("newest_first") else (lambda d: d["path"]))
        return found[: int(a.get("limit", 200))]

    def _op_grep(self, a: dict[str, Any]) -> Any:
        return _grep(self, a)

    # -- background processes
    def _op_bg_start(self, a: dict[str, Any]) -> Any:
        self._n += 1
        pid_id = f"bg-{self._n}-{time.monotonic_ns() % 10**9}"
        words = _command_words(a["command"], a.get("env"))
        _too_long(words)
        with self._runs.gate:
            cookie = self._runs.new(pid_id, a["command"])
            code, _out, err = self._run("bg_start", [a.get("cwd") or ".", pid_id, cookie, *words])
        if code != 0:
            self._runs.end(cookie)
        self._check(code, err)
        self._runs.bg[pid_id] = cookie
        return pid_id

    def _op_bg_logs(self, a: dict[str, Any]) -> Any:
        code, out, err = self._run("bg_logs", [a["process_id"]])
        self._check(code, err)
        running, exit_code, size = err.decode().strip().splitlines()[0].split("|")
        return {
            "process_id": a["process_id"],
            "output": out.decode("utf-8", "replace"),
            "running": running == "1",
            "exit_code": int(exit_code) if exit_code and running != "1" else None,
            "truncated": int(size or 0) > len(out),
        }

    def _op_bg_kill(self, a: dict[str, Any]) -> Any:
        cookie = self._runs.bg.get(a["process_id"])
        if cookie is None:
            raise SandboxError(f"no background process {a['process_id']!r}")
        grace = str(int(KILL_GRACE_S * 1000))
        with self._runs.gate:
            code, _, err = self._run("bg_kill", [a["process_id"], cookie, self._runs.live_arg(), grace])
        self._check(code, err)
        self._runs.end(cookie)
        return self._op_bg_logs(a)

    def _op_sweep(self, a: dict[str, Any]) -> Any:
        """The session's end: every process in the container but the init, its command and other docker
        execs' own processes is killed; {"killed": [...], "alive": [...]} as the helper's sweep answers."""
        grace = str(int(float(a.get("grace", SWEEP_GRACE_MS / 1000)) * 1000))
        with self._runs.gate:
            names = self._runs.names()
            code, out, err = self._run("sweep", [grace])
        self._check(code, err)
        found: dict[str, list[dict[str, Any]]] = {"K": [], "A": []}
        for line in out.decode("utf-8", "replace").splitlines():
            parts = line.split("\t", 3)
            if len(parts) == 4 and parts[0] in found and parts[1].isdigit():
                tag, pid, owner, cmd = parts
                started_by = names.get(owner) or ("" if owner in ("S", "") else f"run {owner}")
                found[tag].append({"pid": int(pid), "command": cmd.strip(), "started_by": started_by})
        for cookie in list(self._runs.bg.values()):
            self._runs.end(cookie)
        return {"killed": found["K"], "alive": found["A"]}

    def _op_ping(self, a: dict[str, Any]) -> Any:
        return {"version": 0}

    def close(self) -> None:
        self.dead = True


def _search_timeout(a: dict[str, Any]) -> float:
    """A request may shorten (never lengthen) the search deadline, as with the helper."""
    t = a.get("timeout")
    return float(t) if t and 0 < float(t) < SEARCH_TIMEOUT_S else SEARCH_TIMEOUT_S


def _rg_ignore_flag(a: dict[str, Any]) -> str:
    """The helper's rg flag for the ignore files. Without rg in the image nothing reads them: fs_grep and
    fs_glob see everything there (the tools say so)."""
    return rg_ignore_flag(bool(a.get("include_ignored")))


def _timeout_message(what: str, timeout: float) -> str:
    return (
        f"{what} stopped after {timeout:g} s and was killed: the pattern is too costly for this tree;"
        " narrow the path or glob, or simplify the pattern"
    )


def _grep(transport: ExecTransport, a: dict[str, Any]) -> list[dict[str, Any]]:
    """rg in the container when it has one (the pattern as given), else GNU grep -E on the translation;
    the glob is applied here, in the desk's one glob dialect."""
    pattern = a["pattern"]
    try:
        ere, inline_i = ere_from_rust(pattern)
        why = ""
    except Untranslatable as exc:
        ere, inline_i, why = "", False, str(exc)
    ic = "-i" if a.get("ignore_case") or inline_i else ""
    timeout = _search_timeout(a)
    argv = [a.get("path", "."), f"{timeout:g}s", pattern, ere, ic, _rg_ignore_flag(a)]
    code, out, err = transport._run("grep", argv)
    text = err.decode("utf-8", "replace")
    engine = "rg" if text.startswith("engine rg") else "grep"
    if code in (124, 137):
        raise SandboxError(_timeout_message("fs_grep", timeout))
    if "NO_ERE" in text:
        raise SandboxError(f"invalid regular expression {pattern!r} for this image's grep ({GREP_DIALECT_ERE}): {why}")
    if code == 2 and not out:
        dialect = "Rust regex (ripgrep)" if engine == "rg" else GREP_DIALECT_ERE
        detail = text.split("\n", 1)[-1].strip()[-600:]
        raise SandboxError(f"invalid regular expression {pattern!r} ({dialect}): {detail}")
    if code not in (0, 1, 2):  # 2 with output: some files could not be read
        transport._check(code, err)
    return _grep_matches(out, a)


def _grep_matches(out: bytes, a: dict[str, Any]) -> list[dict[str, Any]]:
    glob = a.get("glob")
    grx = _re2_compile(glob_regex(glob).pattern) if glob else None
    base = a.get("path", ".")
    matches: list[dict[str, Any]] = []
    for line in out.split(b"\n"):
        if b"\0" not in line:
            continue
        path, rest = line.split(b"\0", 1)
        num, _, body = rest.partition(b":")
        if not num.isdigit():
            continue
        rel = _rel(path.decode("utf-8", "replace"))
        if grx is not None and not grx.match(_glob_subject(rel, base, glob)):
            continue
        text = body.rstrip(b"\r").decode("utf-8", "replace")[:GREP_LINE_MAX]
        matches.append({"path": rel, "line": int(num), "text": text})
        if len(matches) >= int(a.get("max_results", 200)):
            break
    return matches


def _glob_subject(rel: str, base: str, glob: str) -> str:
    """What a grep glob is matched against, as the helper does: the name, or the path below the search root
    when the glob has a '/'."""
    if "/" not in glob:
        return posixpath.basename(rel)
    root = _rel(posixpath.normpath(base if base.startswith("/") else posixpath.join(WORKSPACE, base)))
    return rel if root == "." else posixpath.relpath(rel, root)
