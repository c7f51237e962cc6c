"""The sandbox helper: file operations and process control, run inside the container (or imported by
LocalSandbox), speaking line-delimited JSON on stdin/stdout, requests multiplexed by id.

Stdlib only, and only what Debian's python3-minimal ships (no json, queue, shutil): it is passed to
`python3 -I -S -c` verbatim, so it must stay one file under ~100 KB.
"""

import base64
import codecs
import errno
import os
import re
import selectors
import signal
import stat as _stat
import subprocess
import sys
import threading
import time

PROTOCOL_VERSION = 1
CHUNK = 65536
KILL_GRACE_S = 1.0  # SIGTERM, then SIGKILL of the whole group after this long
LINGER_S = 0.2  # after the command exits, how long to wait for grandchildren to close its pipes
MAX_WRITE = 100 * 1024 * 1024
MAX_OUTPUT_LIMIT = 16 * 1024 * 1024  # per stream; a caller asking for more gets this much
GREP_MAX_FILE = 20 * 1024 * 1024
GREP_LINE_MAX = 500
WALK_MAX_ENTRIES = 200000
BG_OUTPUT_LIMIT = 1024 * 1024
SKIP_DIRS = (".git",)

try:  # in the container, core's glob module is shipped ahead of this source
    glob_regex  # noqa: B018
except NameError:
    from desktop_app.core._glob import glob_regex

# ---------------------------------------------------------------------------------------------- codec
try:
    import json as _json

    def dumps(obj):
        return _json.dumps(obj, ensure_ascii=False, separators=(",", ":"))

    loads = _json.loads
except ImportError:  # python3-minimal: a small JSON codec good enough for this protocol
    import ast as _ast

    _ESC = re.compile('[\\x00-\\x1f"\\\\\ud800-\udfff]')
    _ESC_MAP = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}

    def _esc(m):
        c = m.group()
        return _ESC_MAP.get(c) or f"\\u{ord(c):04x}"

    def _enc_str(s):
        # Fast path (base64, most text lines): nothing to escape; str methods here are C loops.
        if s.isascii() and s.isprintable() and '"' not in s and "\\" not in s:
            return '"' + s + '"'
        # Slices bound the memory of re.sub's pieces when escapes are dense (e.g. a flood of NULs).
        return '"' + "".join(_ESC.sub(_esc, s[i : i + 65536]) for i in range(0, len(s), 65536)) + '"'

    def _enc(obj, out):
        if isinstance(obj, str):
            out.append(_enc_str(obj))
        elif obj is None:
            out.append("null")
        elif obj is True:
            out.append("true")
        elif obj is False:
            out.append("false")
        elif isinstance(obj, (int, float)):
            out.append(repr(obj))
        elif isinstance(obj, dict):
            out.append("{")
            first = True
            for k, v in obj.items():
                if not first:
                    out.append(",")
                first = False
                _enc(str(k), out)
                out.append(":")
                _enc(v, out)
            out.append("}")
        elif isinstance(obj, (list, tuple)):
            out.append("[")
            for i, v in enumerate(obj):
                if i:
                    out.append(",")
                _enc(v, out)
            out.append("]")
        else:
            raise TypeError(f"cannot encode {type(obj)!r}")

    def dumps(obj):
        out = []
        _enc(obj, out)
        return "".join(out)

    _TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|\btrue\b|\bfalse\b|\bnull\b')
    _WORDS = {"true": "True", "false": "False", "null": "None"}

    def loads(text):
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        return _ast.literal_eval(_TOKENS.sub(lambda m: _WORDS.get(m.group(), m.group()), text))


# --------------------------------------------------------------------------------------------- errors
class HelperError(Exception):
    kind = "SandboxError"


class OutsideWorkspace(HelperError):
    kind = "PathOutsideWorkspace"


def _os_error(exc, shown):
    reasons = {
        errno.ENOENT: "no such file or directory",
        errno.EISDIR: "is a directory",
        errno.ENOTDIR: "not a directory",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.EROFS: "the workspace is read-only",
        errno.ELOOP: "too many levels of symbolic links",
        errno.ENOSPC: "no space left on device",
        errno.EDQUOT: "disk quota exceeded",
    }
    return HelperError(f"{shown}: {reasons.get(exc.errno) or exc.strerror or str(exc)}")


# ---------------------------------------------------------------------------------------- file system
class Workspace:
    """Maps workspace paths (relative, or absolute under the alias) to real paths, refusing any that
    resolve outside the root in this machine's own view, symlinks included."""

    def __init__(self, root, alias="/workspace"):
        self.root = os.path.realpath(root)
        self.alias = alias.rstrip("/") or "/"

    def _inside(self, real):
        return real == self.root or real.startswith(self.root.rstrip("/") + "/")

    def _joined(self, path):
        path = "." if path in (None, "") else str(path)
        if "\x00" in path:
            raise HelperError(f"invalid path (NUL byte): {path!r}")
        if os.path.isabs(path):
            for prefix in (self.alias, self.root):
                if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                    return os.path.join(self.root, path[len(prefix) :].lstrip("/"))
            raise OutsideWorkspace(f"{path} is outside the workspace ({self.alias})")
        return os.path.join(self.root, path)

    def resolve(self, path):
        real = os.path.realpath(self._joined(path))
        if not self._inside(real):
            raise OutsideWorkspace(
                f"{path} resolves outside the workspace ({self.alias}); paths and symlinks must stay inside it"
            )
        return real

    def rel(self, real):
        r = os.path.relpath(real, self.root)
        return "." if r == "." else r

    def shown(self, real):
        rel = self.rel(real)
        return self.alias if rel == "." else self.alias.rstrip("/") + "/" + rel


def _type_of(mode):
    if _stat.S_ISREG(mode):
        return "file"
    if _stat.S_ISDIR(mode):
        return "dir"
    if _stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _stat_dict(ws, real, st):
    return {
        "path": ws.rel(real),
        "type": _type_of(st.st_mode),
        "size": st.st_size,
        "mtime": st.st_mtime,
        "mode": _stat.S_IMODE(st.st_mode),
    }


def _open_regular(ws, real):
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise _os_error(exc, ws.shown(real)) from None
    st = os.fstat(fd)
    if not _stat.S_ISREG(st.st_mode):
        os.close(fd)
        what = "a directory" if _stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise HelperError(f"{ws.shown(real)}: {what}")
    return fd, st


def fs_read(ws, path, offset=0, limit=10 * 1024 * 1024):
    """Bytes [offset, offset+limit) of a regular file."""
    real = ws.resolve(path)
    fd, st = _open_regular(ws, real)
    try:
        if offset:
            os.lseek(fd, int(offset), os.SEEK_SET)
        parts, left = [], max(0, int(limit))
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            parts.append(b)
            left -= len(b)
        return b"".join(parts), st.st_size
    finally:
        os.close(fd)


def fs_read_text(ws, path, limit=10 * 1024 * 1024):
    real = ws.resolve(path)
    fd, st = _open_regular(ws, real)
    try:
        if st.st_size > limit:
            raise HelperError(
                f"{ws.shown(real)} is {st.st_size} bytes, over the {limit}-byte limit for reading as text;"
                " read a range instead"
            )
        parts = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            parts.append(b)
            if sum(len(p) for p in parts) > limit:
                raise HelperError(f"{ws.shown(real)} grew over the {limit}-byte limit while reading")
        return b"".join(parts).decode("utf-8", "replace")
    finally:
        os.close(fd)


def fs_write(ws, path, data, make_dirs=True):
    """Write atomically (temp file + rename in the same folder), keeping an existing file's mode."""
    if len(data) > MAX_WRITE:
        raise HelperError(f"refusing to write {len(data)} bytes (limit {MAX_WRITE})")
    real = ws.resolve(path)
    if real == ws.root:
        raise HelperError(f"{ws.alias}: is a directory")
    parent = os.path.dirname(real)
    if make_dirs and not os.path.isdir(parent):
        try:
            os.makedirs(parent, exist_ok=True)
        except OSError as exc:
            raise _os_error(exc, ws.shown(parent)) from None
        ws.resolve(parent)  # a racing symlink swap must not have taken us outside
    mode = 0o644
    try:
        st = os.lstat(real)
        if _stat.S_ISDIR(st.st_mode):
            raise HelperError(f"{ws.shown(real)}: is a directory")
        mode = _stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise _os_error(exc, ws.shown(real)) from None
    tmp = os.path.join(parent, f".{os.path.basename(real)}.agent-desk-{os.getpid()}-{threading.get_ident()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
        try:
            view = memoryview(data)
            while view:
                n = os.write(fd, view)
                view = view[n:]
        finally:
            os.close(fd)
        os.chmod(tmp, mode)
        os.rename(tmp, real)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise _os_error(exc, ws.shown(real)) from None
    return _stat_dict(ws, real, os.lstat(real))


def fs_stat(ws, path):
    real = ws.resolve(path)
    try:
        return _stat_dict(ws, real, os.lstat(real))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _os_error(exc, ws.shown(real)) from None


def fs_list(ws, path="."):
    real = ws.resolve(path)
    out = []
    try:
        with os.scandir(real) as it:
            for entry in it:
                try:
                    out.append(_stat_dict(ws, entry.path, entry.stat(follow_symlinks=False)))
                except OSError:
                    continue
    except OSError as exc:
        raise _os_error(exc, ws.shown(real)) from None
    out.sort(key=lambda d: d["path"])
    return out


def _walk(real, skip_hidden_git=True):
    """(dirpath, name, is_dir) under `real`, sorted, never following symlinks, bounded."""
    count = 0
    for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
        dirnames[:] = sorted(d for d in dirnames if not (skip_hidden_git and d in SKIP_DIRS))
        for d in dirnames:
            yield dirpath, d, True
        for f in sorted(filenames):
            yield dirpath, f, False
        count += len(dirnames) + len(filenames)
        if count > WALK_MAX_ENTRIES:
            return


def fs_glob(ws, pattern, path=".", limit=200):
    """Matches of `pattern` relative to `path`, newest first."""
    base = ws.resolve(path)
    if not os.path.isdir(base):
        raise HelperError(f"{ws.shown(base)}: not a directory")
    if os.path.isabs(pattern):
        rel = os.path.relpath(ws.resolve(os.path.dirname(pattern) or "/"), base)
        if rel.startswith(".."):
            raise OutsideWorkspace(f"{pattern} is outside the search folder {ws.shown(base)}")
        pattern = os.path.join(rel, os.path.basename(pattern)) if rel != "." else os.path.basename(pattern)
    while pattern.startswith("./"):
        pattern = pattern[2:]
    rx = glob_regex(pattern)
    found = []
    for dirpath, name, _is_dir in _walk(base):
        full = os.path.join(dirpath, name)
        if rx.match(os.path.relpath(full, base)):
            try:
                found.append(_stat_dict(ws, full, os.lstat(full)))
            except OSError:
                continue
    found.sort(key=lambda d: (-d["mtime"], d["path"]))
    return found[: max(0, int(limit))]


def fs_grep(ws, pattern, path=".", glob=None, ignore_case=False, max_results=200):
    """Lines matching a Python regex, in files under `path` (binary files and .git skipped)."""
    try:
        rx = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
    except re.error as exc:
        raise HelperError(f"invalid regular expression {pattern!r}: {exc}") from None
    base = ws.resolve(path)
    grx = glob_regex(glob) if glob else None
    if os.path.isfile(base):
        files = [base]
    elif os.path.isdir(base):
        files = (os.path.join(d, n) for d, n, is_dir in _walk(base) if not is_dir)
    else:
        raise HelperError(f"{ws.shown(base)}: no such file or directory")
    out = []
    for full in files:
        if grx is not None:
            subject = os.path.relpath(full, base) if "/" in glob else os.path.basename(full)
            if not grx.match(subject):
                continue
        try:
            st = os.lstat(full)
            if not _stat.S_ISREG(st.st_mode) or st.st_size > GREP_MAX_FILE:
                continue
            with open(full, "rb") as fh:
                data = fh.read()
        except OSError:
            continue
        if b"\x00" in data[:8192]:
            continue
        text = data.decode("utf-8", "replace")
        if not rx.search(text):
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if rx.search(line):
                out.append({"path": ws.rel(full), "line": lineno, "text": line[:GREP_LINE_MAX]})
                if len(out) >= max_results:
                    return out
    return out


# ------------------------------------------------------------------------------------------ processes
_OOM_FILES = ["/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"]  # v2, v1


def _oom_kills():
    """The cgroup's OOM-kill counter, or None where there is none to read."""
    for p in list(_OOM_FILES):
        try:
            with open(p, "rb") as fh:
                data = fh.read()
        except OSError:
            if len(_OOM_FILES) > 1:
                _OOM_FILES.remove(p)  # absent here: do not look again
            continue
        i = data.find(b"oom_kill ")
        if i >= 0:
            return int(data[i + 9 :].split(b"\n", 1)[0])
    return None


def _killpg(pid, sig):
    try:
        os.killpg(pid, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False


# A command of plain words needs no shell: running it directly saves the shell's start-up (~1 ms).
# Anything a shell would interpret (quotes, $, globs, redirections, ~, comments), a variable assignment,
# a builtin or keyword, or a name not on PATH goes through the shell as usual.
_SIMPLE = re.compile(r"[A-Za-z0-9_@%+=:,./-]+(?: [A-Za-z0-9_@%+=:,./-]+)*\Z")
_SHELL_WORDS = frozenset(
    "alias bg bind break builtin caller cd command compgen complete compopt continue declare dirs disown echo "
    "enable eval exec exit export fc fg getopts hash help history jobs kill let local logout mapfile popd printf "
    "pushd pwd read readarray readonly return set shift shopt source suspend test times trap type typeset ulimit "
    "umask unalias unset wait . [ [[ ]] if then else elif fi case esac for select while until do done in function "
    "time coproc { } !".split()
)


def _which(name, path):
    if "/" in name:  # a relative path is relative to the command's cwd: leave it to the shell
        return name if name.startswith("/") and os.access(name, os.X_OK) and not os.path.isdir(name) else None
    for d in (path or "/usr/local/bin:/usr/bin:/bin").split(":"):
        if not d.startswith("/"):
            continue
        full = os.path.join(d, name)
        if os.access(full, os.X_OK) and not os.path.isdir(full):
            return full
    return None


def _argv(command, env=None):
    if isinstance(command, (list, tuple)):
        return [str(a) for a in command]
    if _SIMPLE.match(command):
        words = command.split(" ")
        if "=" not in words[0] and words[0] not in _SHELL_WORDS:
            exe = _which(words[0], (env or os.environ).get("PATH"))
            if exe is not None:
                return [exe, *words[1:]]
    shell = "/bin/bash" if os.path.exists("/bin/bash") else "/bin/sh"
    return [shell, "-c", command]


def _env(env, base=None):
    merged = dict(os.environ if base is None else base)
    for k, v in (env or {}).items():
        merged[str(k)] = str(v)
    return merged


class _Capture:
    """One output stream: keeps the head and the tail within `limit` bytes, drops the middle."""

    def __init__(self, limit):
        self.limit = max(0, int(limit))
        self.head_cap = self.limit - self.limit // 4
        self.tail_cap = self.limit // 4
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data):
        """Store `data`; return the part that went into the head (what is streamed live)."""
        room = self.head_cap - len(self.head)
        live = data[:room] if room > 0 else b""
        if live:
            self.head += live
        rest = data[len(live) :]
        if rest:
            self.tail += rest
            over = len(self.tail) - self.tail_cap
            if over > 0:
                del self.tail[:over]
                self.dropped += over
        return live

    @property
    def truncated(self):
        return self.dropped > 0

    def text(self):
        if not self.dropped:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", "replace")
        return (
            bytes(self.head).decode("utf-8", "replace")
            + f"\n[... {self.dropped} bytes of output truncated ...]\n"
            + bytes(self.tail).decode("utf-8", "replace")
        )


class CommandRun:
    """One command in its own process group: streamed output, timeout, cancel, and clean-up of
    everything it started (an exec leaves no process behind; use a background process for that)."""

    def __init__(
        self,
        command,
        cwd,
        env=None,
        timeout=120.0,
        output_limit=1_000_000,
        on_chunk=None,
        grace=KILL_GRACE_S,
        base_env=None,
    ):
        self.env = _env(env, base_env)
        self.argv = _argv(command, self.env)
        self.cwd = cwd
        self.timeout = float(timeout)
        self.on_chunk = on_chunk
        self.grace = grace
        self.out = _Capture(output_limit)
        self.err = _Capture(output_limit)
        self._cancel_r, self._cancel_w = os.pipe()
        self.cancelled = False

    def cancel(self):
        self.cancelled = True
        try:
            os.write(self._cancel_w, b"x")
        except OSError:
            pass

    def run(self):
        start = time.monotonic()
        oom_before = _oom_kills()
        try:
            proc = subprocess.Popen(
                self.argv,
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                bufsize=0,
            )
        except FileNotFoundError:
            self._close_cancel()
            return self._result(127, start, stderr=f"{self.argv[0]}: command not found\n")
        except PermissionError:
            self._close_cancel()
            return self._result(126, start, stderr=f"{self.argv[0]}: permission denied\n")
        except OSError as exc:
            self._close_cancel()
            raise HelperError(f"could not start the command: {exc.strerror} (is the pids limit reached?)") from None
        try:
            return self._drive(proc, start, oom_before)
        finally:
            for f in (proc.stdout, proc.stderr):
                try:
                    f.close()
                except OSError:
                    pass
            self._close_cancel()

    def _close_cancel(self):
        for fd in (self._cancel_r, self._cancel_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _drive(self, proc, start, oom_before):
        sel = selectors.DefaultSelector()
        streams = {proc.stdout.fileno(): ("stdout", self.out), proc.stderr.fileno(): ("stderr", self.err)}
        for fd in streams:
            sel.register(fd, selectors.EVENT_READ, "pipe")
        sel.register(self._cancel_r, selectors.EVENT_READ, "cancel")
        pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(proc.pid)
                sel.register(pidfd, selectors.EVENT_READ, "exit")
            except OSError:
                pidfd = None
        deadline = start + self.timeout
        kill_at = None  # when SIGKILL follows the SIGTERM
        linger_until = None  # after exit: wait this long for pipes to close
        timed_out = False
        last_signal = None
        try:
            while True:
                now = time.monotonic()
                if proc.returncode is None and (pidfd is None or kill_at is not None):
                    proc.poll()
                if proc.returncode is not None:
                    if linger_until is None:
                        linger_until = now + LINGER_S
                    if not streams or now >= linger_until:
                        break
                else:
                    if kill_at is None and now >= deadline and not self.cancelled:
                        timed_out = True
                        last_signal = signal.SIGTERM
                        _killpg(proc.pid, signal.SIGTERM)
                        kill_at = now + self.grace
                    elif kill_at is not None and now >= kill_at:
                        last_signal = signal.SIGKILL
                        _killpg(proc.pid, signal.SIGKILL)
                        kill_at = now + 0.05
                waits = [
                    linger_until,
                    kill_at if proc.returncode is None else None,
                    deadline if kill_at is None and proc.returncode is None else None,
                ]
                waits = [w for w in waits if w is not None]
                wait = max(0.0, min(waits) - now) if waits else None
                if pidfd is None and proc.returncode is None:
                    wait = 0.05 if wait is None else min(wait, 0.05)
                for key, _ in sel.select(wait):
                    if key.data == "pipe":
                        fd = key.fd
                        try:
                            data = os.read(fd, CHUNK)
                        except OSError:
                            data = b""
                        if not data:
                            sel.unregister(fd)
                            streams.pop(fd)
                            continue
                        name, cap = streams[fd]
                        live = cap.feed(data)
                        if live and self.on_chunk is not None:
                            text = cap.decoder.decode(live)
                            if text:
                                self.on_chunk(name, text)
                    elif key.data == "exit":
                        sel.unregister(pidfd)
                        proc.wait()
                    elif key.data == "cancel":
                        sel.unregister(self._cancel_r)
                        if proc.returncode is None and kill_at is None:
                            last_signal = signal.SIGTERM
                            _killpg(proc.pid, signal.SIGTERM)
                            kill_at = time.monotonic() + self.grace
        finally:
            sel.close()
            if pidfd is not None:
                os.close(pidfd)
            # Leftovers of the group (e.g. `sleep 100 &`) go with the command.
            _killpg(proc.pid, signal.SIGKILL)
            if proc.returncode is None:
                proc.wait()
        rc = proc.returncode
        sig = -rc if rc < 0 else None
        if sig is None and timed_out and rc in (128 + signal.SIGTERM, 128 + signal.SIGKILL):
            sig = rc - 128
        oom_after = _oom_kills()
        oom = bool(
            oom_before is not None
            and oom_after is not None
            and oom_after > oom_before
            and (sig == signal.SIGKILL or rc == 128 + signal.SIGKILL)
            and last_signal != signal.SIGKILL
        )
        return self._result(rc if rc >= 0 else 128 + sig, start, timed_out=timed_out, killed_signal=sig, oom=oom)

    def _result(self, code, start, stderr="", timed_out=False, killed_signal=None, oom=False):
        return {
            "exit_code": code,
            "stdout": self.out.text(),
            "stderr": self.err.text() + stderr,
            "timed_out": timed_out,
            "truncated": self.out.truncated or self.err.truncated,
            "duration_ms": (time.monotonic() - start) * 1000.0,
            "oom_killed": oom,
            "killed_signal": killed_signal,
            "cancelled": self.cancelled,
        }


class BackgroundProcess:
    """A long process: output (stdout and stderr merged) kept in a bounded buffer, the tail wins."""

    def __init__(self, pid_id, command, cwd, env=None, base_env=None):
        self.id = pid_id
        self.command = command
        self.buf = bytearray()
        self.dropped = 0
        self.lock = threading.Lock()
        try:
            self.proc = subprocess.Popen(
                _argv(command),
                cwd=cwd,
                env=_env(env, base_env),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                bufsize=0,
            )
        except OSError as exc:
            raise HelperError("could not start the background process: %s" % (exc.strerror or exc)) from None
        self.reader = threading.Thread(target=self._read, name="bg-" + pid_id, daemon=True)
        self.reader.start()

    def _read(self):
        fd = self.proc.stdout.fileno()
        while True:
            try:
                data = os.read(fd, CHUNK)
            except OSError:
                break
            if not data:
                break
            with self.lock:
                self.buf += data
                over = len(self.buf) - BG_OUTPUT_LIMIT
                if over > 0:
                    del self.buf[:over]
                    self.dropped += over
        self.proc.stdout.close()

    def logs(self):
        rc = self.proc.poll()
        if rc is not None:
            # The process has exited, but its last output may still sit in the pipe: let the reader
            # drain it first, or a fast exit would be reported without its output.
            self.reader.join(LINGER_S)
        with self.lock:
            text = bytes(self.buf).decode("utf-8", "replace")
            dropped = self.dropped
        return {
            "process_id": self.id,
            "output": text,
            "running": rc is None,
            "exit_code": None if rc is None else (rc if rc >= 0 else 128 - rc),
            "truncated": dropped > 0,
        }

    def kill(self, grace=KILL_GRACE_S):
        if self.proc.poll() is None:
            _killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        _killpg(self.proc.pid, signal.SIGKILL)  # and whatever it left behind
        self.proc.wait()
        self.reader.join(1.0)
        return self.logs()


class Processes:
    """Background processes by id."""

    def __init__(self, base_env=None):
        self.base_env = base_env
        self.items = {}
        self.lock = threading.Lock()
        self.counter = 0

    def start(self, command, cwd, env=None):
        with self.lock:
            self.counter += 1
            pid_id = f"bg-{self.counter}"
        bp = BackgroundProcess(pid_id, command, cwd, env, self.base_env)
        with self.lock:
            self.items[pid_id] = bp
        return pid_id

    def get(self, pid_id):
        with self.lock:
            bp = self.items.get(pid_id)
        if bp is None:
            raise HelperError(f"no background process {pid_id!r}")
        return bp

    def kill_all(self):
        with self.lock:
            items = list(self.items.values())
        for bp in items:
            try:
                bp.kill(grace=0.2)
            except Exception:
                pass


# ------------------------------------------------------------------------------------------ the server
class Server:
    """Reads requests from `inp`, runs them concurrently, writes responses and events to `out`."""

    FILE_WORKERS = 4
    EXEC_IDLE_MAX = 4  # exec threads kept waiting for the next command

    def __init__(self, ws, inp, out):
        self.ws = ws
        self.inp = inp
        self.out = out
        self.out_lock = threading.Lock()
        self.runs = {}
        self.runs_lock = threading.Lock()
        self.procs = Processes()
        self.jobs = []
        self.jobs_cv = threading.Condition()
        self.exec_cv = threading.Condition()
        self.exec_jobs = []
        self.exec_idle = 0
        self.closing = False

    def send(self, obj):
        line = (dumps(obj) + "\n").encode("utf-8", "backslashreplace")
        with self.out_lock:
            self.out.write(line)
            self.out.flush()

    def serve(self):
        # File workers exist before any command runs, so a fork bomb cannot starve them of threads.
        workers = [threading.Thread(target=self._worker, daemon=True) for _ in range(self.FILE_WORKERS)]
        for t in workers:
            t.start()
        self.send(
            {
                "id": 0,
                "ev": "hello",
                "version": PROTOCOL_VERSION,
                "pid": os.getpid(),
                "uid": os.getuid(),
                "python": ".".join(str(v) for v in sys.version_info[:3]),
                "root": self.ws.root,
            }
        )
        while True:
            line = self.inp.readline()
            if not line:
                break
            try:
                req = loads(line)
            except Exception as exc:
                self.send(
                    {"id": None, "ok": False, "error": {"kind": "SandboxError", "message": f"bad request: {exc}"}}
                )
                continue
            op = req.get("op")
            if op == "cancel":
                with self.runs_lock:
                    run = self.runs.get(req.get("target"))
                if run is not None:
                    run.cancel()
            elif op == "exec":
                try:
                    self._start_exec(req)
                except RuntimeError:
                    self.send(
                        {
                            "id": req.get("id"),
                            "ok": False,
                            "error": {
                                "kind": "SandboxError",
                                "message": "the sandbox cannot start a thread (pids limit reached?)",
                            },
                        }
                    )
            else:
                with self.jobs_cv:
                    self.jobs.append(req)
                    self.jobs_cv.notify()
        self.shutdown()

    def _start_exec(self, req):
        """Hand an exec to an idle exec thread, or start one (each command needs its own thread)."""
        with self.exec_cv:
            if self.exec_idle > 0:
                self.exec_jobs.append(req)
                self.exec_idle -= 1
                self.exec_cv.notify()
                return
        threading.Thread(target=self._exec_worker, args=(req,), daemon=True).start()

    def _exec_worker(self, req):
        while req is not None:
            self._handle(req)
            req = None
            with self.exec_cv:
                if self.exec_idle >= self.EXEC_IDLE_MAX or self.closing:
                    return
                self.exec_idle += 1
                while not self.exec_jobs and not self.closing:
                    self.exec_cv.wait()
                if self.exec_jobs:
                    req = self.exec_jobs.pop(0)

    def shutdown(self):
        self.closing = True
        with self.runs_lock:
            runs = list(self.runs.values())
        for run in runs:
            run.cancel()
        self.procs.kill_all()
        with self.jobs_cv:
            self.jobs_cv.notify_all()
        with self.exec_cv:
            self.exec_cv.notify_all()

    def _worker(self):
        while True:
            with self.jobs_cv:
                while not self.jobs and not self.closing:
                    self.jobs_cv.wait()
                if self.closing and not self.jobs:
                    return
                req = self.jobs.pop(0)
            self._handle(req)

    def _handle(self, req):
        rid = req.get("id")
        try:
            result = self.dispatch(req)
            self.send({"id": rid, "ok": True, "result": result})
        except HelperError as exc:
            self.send({"id": rid, "ok": False, "error": {"kind": exc.kind, "message": str(exc)}})
        except Exception as exc:
            self.send(
                {"id": rid, "ok": False, "error": {"kind": "SandboxError", "message": f"{type(exc).__name__}: {exc}"}}
            )

    def dispatch(self, req):
        op, a, ws = req.get("op"), req.get("args") or {}, self.ws
        if op == "exec":
            rid = req.get("id")
            on_chunk = None
            if a.get("stream"):

                def on_chunk(stream, text):
                    self.send({"id": rid, "ev": "output", "stream": stream, "data": text})

            run = CommandRun(
                a["command"],
                ws.resolve(a.get("cwd") or "."),
                a.get("env"),
                a.get("timeout", 120.0),
                min(int(a.get("output_limit", 1_000_000)), MAX_OUTPUT_LIMIT),
                on_chunk,
                a.get("grace", KILL_GRACE_S),
            )
            with self.runs_lock:
                self.runs[rid] = run
            try:
                return run.run()
            finally:
                with self.runs_lock:
                    self.runs.pop(rid, None)
        return call_op(ws, self.procs, op, a)


def call_op(ws, procs, op, a):
    """Every non-exec operation, shared by the helper server and LocalSandbox."""
    if op == "read":
        data, size = fs_read(ws, a["path"], a.get("offset", 0), a.get("limit", 10 * 1024 * 1024))
        return {"data": base64.b64encode(data).decode("ascii"), "size": size}
    if op == "read_text":
        return fs_read_text(ws, a["path"], a.get("limit", 10 * 1024 * 1024))
    if op == "write":
        data = base64.b64decode(a["data"]) if "data" in a else a["text"].encode("utf-8")
        return fs_write(ws, a["path"], data, a.get("make_dirs", True))
    if op == "stat":
        return fs_stat(ws, a["path"])
    if op == "list":
        return fs_list(ws, a.get("path", "."))
    if op == "glob":
        return fs_glob(ws, a["pattern"], a.get("path", "."), a.get("limit", 200))
    if op == "grep":
        return fs_grep(
            ws, a["pattern"], a.get("path", "."), a.get("glob"), a.get("ignore_case", False), a.get("max_results", 200)
        )
    if op == "bg_start":
        return procs.start(a["command"], ws.resolve(a.get("cwd") or "."), a.get("env"))
    if op == "bg_logs":
        return procs.get(a["process_id"]).logs()
    if op == "bg_kill":
        return procs.get(a["process_id"]).kill()
    if op == "ping":
        return {"version": PROTOCOL_VERSION, "uid": os.getuid()}
    raise HelperError(f"unknown operation {op!r}")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    root = argv[0] if argv else "/workspace"
    try:
        os.chdir("/")
    except OSError:
        pass
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    server = Server(Workspace(root, root), sys.stdin.buffer, sys.stdout.buffer)
    server.serve()
    # Let cancelled commands finish killing their groups, then leave without the interpreter's
    # shutdown, which aborts when a daemon thread still holds stdout's lock.
    deadline = time.monotonic() + KILL_GRACE_S + 2.0
    while server.runs and time.monotonic() < deadline:
        time.sleep(0.01)
    try:
        with server.out_lock:
            sys.stdout.flush()
    except Exception:
        pass
    os._exit(0)


if __name__ == "__main__":
    main()
