"""The slow path for images without python3: each operation is one `docker exec` of a small POSIX
shell script (coreutils, findutils, grep), answering with the same dicts as the in-container helper.
Paths are still resolved inside the container (realpath there), so a symlink out of /workspace is refused."""

# ruff: noqa: ASYNC109  (a command's `timeout` is the sandbox's own deadline, passed down to it)

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core import WORKSPACE, SandboxError, glob_regex
from ._frames import STDERR, read_frames
from ._helper_ops import ErrorCode, sandbox_error
from .helper.processes import KILL_GRACE_S, Capture
from .helper.search import GREP_LINE_MAX
from .helper.workspace import MAX_WRITE

OUTSIDE = b"__AGENT_DESK_OUTSIDE__"
PRELUDE = f"""
ws={WORKSPACE}
resolve() {{
  case "$1" in /*) _q="$1";; *) _q="$ws/$1";; esac
  _r=$(realpath -m -- "$_q") || exit 2
  case "$_r" in "$ws"|"$ws"/*) printf '%s' "$_r";; *) echo "{OUTSIDE.decode()} $1" >&2; exit 3;; esac
}}
"""
STAT_FMT = "%F|%s|%.6Y|%a"
BG_DIR = "/tmp/.agent-desk-bg"
EXEC_DIR = "/tmp/.agent-desk-exec"

SCRIPTS = {
    "exec": """p=$(resolve "$1") || exit 3
[ -d "$p" ] || { echo "__AGENT_DESK_ERROR__ $1: not a directory" >&2; exit 3; }
cd "$p" || exit 3
id=$2; t=$3; g=$4; shift 4
mkdir -p "$EXEC_DIR" && echo $$ > "$EXEC_DIR/$id"
exec timeout -s TERM -k "$g" "$t" "$@"
""",
    "read": """p=$(resolve "$1") || exit 3
if [ ! -f "$p" ]; then
  if [ -d "$p" ]; then echo "__AGENT_DESK_ERROR__ $1: is a directory" >&2
  elif [ -e "$p" ]; then echo "__AGENT_DESK_ERROR__ $1: not a regular file" >&2
  else echo "__AGENT_DESK_ERROR__ $1: no such file or directory" >&2; fi
  exit 4
fi
stat -c %s -- "$p" >&2
tail -c +$(( $2 + 1 )) -- "$p" | head -c "$3"
""",
    "write": """p=$(resolve "$1") || exit 3
d=$(dirname -- "$p")
if [ "$2" = 1 ]; then mkdir -p -- "$d" || exit 4; fi
resolve "$d" >/dev/null || exit 3
[ -d "$p" ] && { echo "__AGENT_DESK_ERROR__ $1: is a directory" >&2; exit 4; }
t="$d/.$(basename -- "$p").agent-desk-$$.tmp"
cat > "$t" || { rm -f -- "$t"; exit 4; }
[ -e "$p" ] && chmod --reference="$p" -- "$t"
mv -f -- "$t" "$p" && stat -c '%STAT%' -- "$p"
""",
    "real_path": """resolve "$1" || exit 3
""",
    "stat": """p=$(resolve "$1") || exit 3
if [ -e "$p" ] || [ -L "$p" ]; then stat -c '%STAT%' -- "$p"; else echo NONE; fi
""",
    "list": """p=$(resolve "$1") || exit 3
[ -d "$p" ] || { echo "__AGENT_DESK_ERROR__ $1: not a directory" >&2; exit 4; }
printf '%s\\n' "$p" >&2
find "$p" -mindepth 1 -maxdepth 1 -printf '%y\\t%s\\t%T@\\t%m\\t%P\\0'
""",
    "walk": """p=$(resolve "$1") || exit 3
[ -d "$p" ] || { echo "__AGENT_DESK_ERROR__ $1: not a directory" >&2; exit 4; }
printf '%s\\n' "$p" >&2
find "$p" -mindepth 1 -name .git -prune -o -printf '%y\\t%s\\t%T@\\t%m\\t%P\\0' | head -z -n 200000
""",
    "grep": """p=$(resolve "$1") || exit 3
[ -e "$p" ] || { echo "__AGENT_DESK_ERROR__ $1: no such file or directory" >&2; exit 4; }
shift
grep -rnIHZ --exclude-dir=.git "$@" -- "$p"
""",
    "bg_start": """p=$(resolve "$1") || exit 3
cd "$p" || exit 3
id=$2; shift 2
mkdir -p "$BG_DIR" || exit 4
setsid sh -c 'echo $$ > "$0.pid"; "$@" > "$0.log" 2>&1; echo $? > "$0.exit"' "$BG_DIR/$id" "$@" \
  </dev/null >/dev/null 2>&1 &
i=0; while [ ! -s "$BG_DIR/$id.pid" ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done
cat "$BG_DIR/$id.pid"
""",
    "bg_logs": """f="$BG_DIR/$1"
pid=$(cat "$f.pid" 2>/dev/null) || { echo "__AGENT_DESK_ERROR__ no background process $1" >&2; exit 4; }
if kill -0 "$pid" 2>/dev/null; then r=1; else r=0; fi
echo "$r|$(cat "$f.exit" 2>/dev/null)|$(stat -c %s "$f.log" 2>/dev/null || echo 0)" >&2
tail -c 1048576 "$f.log" 2>/dev/null
""",
    "bg_kill": """f="$BG_DIR/$1"
pid=$(cat "$f.pid" 2>/dev/null) || { echo "__AGENT_DESK_ERROR__ no background process $1" >&2; exit 4; }
kill -TERM -"$pid" 2>/dev/null; code=143
i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 10 ]; do sleep 0.1; i=$((i+1)); done
if kill -0 "$pid" 2>/dev/null; then code=137; fi
kill -KILL -"$pid" 2>/dev/null
i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 50 ]; do sleep 0.02; i=$((i+1)); done
[ -s "$f.exit" ] || echo $code > "$f.exit"
""",
    "cancel": """pid=$(cat "$EXEC_DIR/$1" 2>/dev/null) || exit 0
kill -TERM -"$pid" 2>/dev/null; sleep "$2"; kill -KILL -"$pid" 2>/dev/null; true
""",
}


def _script(op: str) -> str:
    body = SCRIPTS[op].replace("%STAT%", STAT_FMT)
    return f"EXEC_DIR={EXEC_DIR}; BG_DIR={BG_DIR}\n{PRELUDE}\n{body}"


_TYPES = {"f": "file", "d": "dir", "l": "symlink"}


def _stat_line(line: str, rel: str) -> dict[str, Any]:
    kind, size, mtime, mode = line.strip().rsplit("|", 3)
    t = {"regular file": "file", "regular empty file": "file", "directory": "dir", "symbolic link": "symlink"}
    return {"path": rel, "type": t.get(kind, "other"), "size": int(size), "mtime": float(mtime), "mode": int(mode, 8)}


def _rel(real: str) -> str:
    return "." if real == WORKSPACE else real[len(WORKSPACE) + 1 :]


class ExecTransport:
    """The same `request(op, args)` as HelperChannel, one `docker exec` per call."""

    def __init__(self, api: Any, container_id: str, pool: ThreadPoolExecutor) -> None:
        self._api = api
        self._cid = container_id
        self._pool = pool
        self._bg: dict[str, str] = {}
        self._n = 0
        self.dead = False

    # -- one exec, blocking
    def _run(
        self,
        op: str,
        argv: list[str],
        stdin: bytes | None = None,
        env: dict[str, str] | None = None,
        on_frame: Callable[[int, bytes], None] | None = None,
    ) -> tuple[int, bytes, bytes]:
        cmd = ["/bin/sh", "-c", _script(op), "agent-desk", *argv]
        exec_id = self._api.exec_create(self._cid, cmd, stdin=stdin is not None, environment=env or None, workdir="/")[
            "Id"
        ]
        sock = self._api.exec_start(exec_id, socket=True)
        raw = getattr(sock, "_sock", sock)
        out, err = bytearray(), bytearray()
        try:
            if stdin is not None:
                raw.sendall(stdin)
                raw.shutdown(1)  # SHUT_WR: EOF on the script's stdin
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
        code = self._api.exec_inspect(exec_id).get("ExitCode")
        return (code if code is not None else -1), bytes(out), bytes(err)

    @staticmethod
    def _check(code: int, err: bytes, ok: tuple[int, ...] = (0,)) -> None:
        if code in ok:
            return
        text = err.decode(errors="replace").strip()
        if text.startswith(OUTSIDE.decode()):
            path = text[len(OUTSIDE) :].strip().splitlines()[0]
            message = f"{path} resolves outside the workspace ({WORKSPACE}); paths and symlinks must stay inside it"
            raise sandbox_error(ErrorCode.OUTSIDE_WORKSPACE, message)
        text = text.replace("__AGENT_DESK_ERROR__ ", "")
        raise SandboxError(text or f"the sandbox command failed with exit code {code}")

    # -- ops
    async def request(
        self, op: str, args: dict[str, Any], on_event: Callable | None = None, timeout: float = 120.0
    ) -> Any:
        loop = asyncio.get_running_loop()
        if op == "exec":
            self._n += 1
            run_id = f"x{self._n}-{time.monotonic_ns()}"
            fut = loop.run_in_executor(self._pool, self._guarded, lambda a: self._exec(run_id, a, loop, on_event), args)
            try:
                return await asyncio.shield(fut)
            except asyncio.CancelledError:
                self._pool.submit(self._run, "cancel", [run_id, str(KILL_GRACE_S)])
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

    def _exec(self, run_id: str, a: dict[str, Any], loop: asyncio.AbstractEventLoop, on_event: Callable | None) -> Any:
        command = a["command"]
        argv = [str(x) for x in command] if isinstance(command, list) else ["/bin/sh", "-c", command]
        if not isinstance(command, list):
            # Prefer bash like the helper does, when the image has it.
            argv = [
                "/bin/sh",
                "-c",
                'if [ -x /bin/bash ]; then exec /bin/bash -c "$1"; fi; exec /bin/sh -c "$1"',
                "sh",
                command,
            ]
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
        code, _, _ = self._run(
            "exec",
            [a.get("cwd") or ".", run_id, f"{timeout}s", f"{KILL_GRACE_S}s", *argv],
            env=a.get("env") or None,
            on_frame=on_frame,
        )
        elapsed = time.monotonic() - start
        if code == 3 and (bytes(head).startswith(OUTSIDE) or bytes(head).startswith(b"__AGENT_DESK_ERROR__")):
            self._check(code, bytes(head))
        timed_out = code in (124, 137) and elapsed >= timeout - 0.05
        sig = (15 if code == 124 else 9) if timed_out else None
        return {
            "exit_code": code,
            "stdout": out.text(),
            "stderr": err.text(),
            "timed_out": timed_out,
            "truncated": out.truncated or err.truncated,
            "duration_ms": elapsed * 1000.0,
            "oom_killed": False,
            "killed_signal": sig,
        }

    def _op_read(self, a: dict[str, Any]) -> Any:
        import base64

        code, out, err = self._run(
            "read", [a["path"], str(int(a.get("offset", 0))), str(int(a.get("limit", 10 << 20)))]
        )
        self._check(code, err)
        size = int(err.decode().split()[0])
        return {"data": base64.b64encode(out).decode("ascii"), "size": size}

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
        import base64

        data = base64.b64decode(a["data"]) if "data" in a else a["text"].encode("utf-8")
        if len(data) > MAX_WRITE:
            raise SandboxError(f"refusing to write {len(data)} bytes (limit {MAX_WRITE})")
        code, out, err = self._run("write", [a["path"], "1" if a.get("make_dirs", True) else "0"], stdin=data)
        self._check(code, err)
        return self._stat_of(a["path"], out)

    def _stat_of(self, path: str, out: bytes) -> dict[str, Any]:
        line = out.decode().strip().splitlines()[-1]
        return _stat_line(line, self._rel_of(path))

    def _rel_of(self, path: str) -> str:
        import posixpath

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

    def _entries(self, op: str, path: str) -> tuple[str, list[dict[str, Any]]]:
        code, out, err = self._run(op, [path])
        self._check(code, err)
        base = err.decode().strip().splitlines()[0]
        entries = []
        for rec in out.split(b"\0"):
            if not rec:
                continue
            kind, size, mtime, mode, name = rec.decode("utf-8", "replace").split("\t", 4)
            rel_base = _rel(base)
            rel = name if rel_base == "." else f"{rel_base}/{name}"
            entries.append(
                {
                    "path": rel,
                    "type": _TYPES.get(kind, "other"),
                    "size": int(size),
                    "mtime": float(mtime),
                    "mode": int(mode, 8),
                    "_name": name,
                }
            )
        return base, entries

    def _op_list(self, a: dict[str, Any]) -> Any:
        _, entries = self._entries("list", a.get("path", "."))
        for e in entries:
            e.pop("_name")
        return sorted(entries, key=lambda d: d["path"])

    def _op_glob(self, a: dict[str, Any]) -> Any:
        pattern = a["pattern"]
        while pattern.startswith("./"):
            pattern = pattern[2:]
        rx = glob_regex(pattern)
        _, entries = self._entries("walk", a.get("path", "."))
        found = [e for e in entries if rx.match(e.pop("_name"))]
        found.sort(key=lambda d: (-d["mtime"], d["path"]))
        return found[: int(a.get("limit", 200))]

    def _op_grep(self, a: dict[str, Any]) -> Any:
        flags = ["-P"]
        if a.get("ignore_case"):
            flags.append("-i")
        if a.get("glob"):
            flags.append(f"--include={a['glob']}")
        flags += ["-e", a["pattern"]]
        code, out, err = self._run("grep", [a.get("path", "."), *flags])
        self._check(code, err, ok=(0, 1))
        matches = []
        for line in out.split(b"\n"):
            if b"\0" not in line:
                continue
            path, rest = line.split(b"\0", 1)
            num, _, text = rest.partition(b":")
            matches.append(
                {
                    "path": _rel(path.decode("utf-8", "replace")),
                    "line": int(num),
                    "text": text.decode("utf-8", "replace")[:GREP_LINE_MAX],
                }
            )
            if len(matches) >= int(a.get("max_results", 200)):
                break
        return matches

    def _op_bg_start(self, a: dict[str, Any]) -> Any:
        self._n += 1
        pid_id = f"bg-{self._n}-{time.monotonic_ns() % 10**9}"
        argv = ["/bin/sh", "-c", 'if [ -x /bin/bash ]; then exec /bin/bash -c "$1"; fi; exec /bin/sh -c "$1"', "sh"]
        code, _out, err = self._run(
            "bg_start", [a.get("cwd") or ".", pid_id, *argv, a["command"]], env=a.get("env") or None
        )
        self._check(code, err)
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
        code, _, err = self._run("bg_kill", [a["process_id"]])
        self._check(code, err)
        return self._op_bg_logs(a)

    def _op_ping(self, a: dict[str, Any]) -> Any:
        return {"version": 0}

    def close(self) -> None:
        self.dead = True
