"""The helper's server: requests read as JSON lines, run concurrently (file ops on a few workers, each
command on its own thread: the one that read it, another reading on), responses and output events written
back, matched by id. Bulk bytes (fs_read's answer, fs_write's request) travel as a binary frame: the line
says `"bin": N`, N raw bytes follow it.
A request may instead come as `M<size>` and that many bytes of marshal (format 4): the desk sends that when
the hello offers it, as python3-minimal has no json and its fallback parser costs ~0.1 ms a request. Only
requests: the desk never reads marshal, what the container says stays JSON."""

import marshal
import os
import sys
import threading

from .errors import HelperError
from .processes import KILL_GRACE_S, MAX_OUTPUT_LIMIT, CommandRun, Processes
from .search import Search
from .sync import sync_op
from .wire import Encoded, dumps, loads
from .workspace import READ_LIMIT, fs_list, fs_read, fs_read_text, fs_stat, fs_write

PROTOCOL_VERSION = 2
MAX_FRAME = 128 * 1024 * 1024  # a binary frame larger than this is read and dropped


class Input:
    """A stream of requests read through a buffer of the server's own, so that it can tell whether another
    request is already waiting (read, not yet parsed): a burst of commands is then handed on at once, instead
    of one every HAND_OFF_S (see Server._reader)."""

    __slots__ = ("_buf", "_fd", "_src")
    CHUNK = 1 << 16  # a read's most (under malloc's mmap threshold: no mapping made and dropped per read)

    def __init__(self, src):
        self._src, self._buf = src, bytearray()
        try:
            self._fd = src.fileno()
        except (AttributeError, OSError, ValueError):  # in memory (the tests' streams): read through it
            self._fd = None

    def _fill(self):
        """Read what the stream has (blocking until it has something); False at its end."""
        data = os.read(self._fd, self.CHUNK) if self._fd is not None else self._src.read1(self.CHUNK)
        self._buf += data
        return bool(data)

    def readline(self):
        """A line with its newline; at the end, what is left (b"" when nothing is)."""
        start = 0
        while True:
            i = self._buf.find(b"\n", start)
            if i >= 0:
                line = bytes(self._buf[: i + 1])
                del self._buf[: i + 1]
                return line
            start = len(self._buf)
            if not self._fill():
                line = bytes(self._buf)
                self._buf.clear()
                return line

    def read(self, n):
        """`n` bytes, fewer at the end. A large read (fs_write's frame) comes straight into a bytearray of its
        own: one copy, as a buffered reader's."""
        if n > self.CHUNK and n > len(self._buf):
            out = bytearray(n)
            have = len(self._buf)
            out[:have] = self._buf
            self._buf.clear()
            with memoryview(out) as view:
                while have < n:
                    with view[have:] as rest:
                        got = os.readv(self._fd, [rest]) if self._fd is not None else self._src.readinto(rest)
                    if not got:
                        break
                    have += got
            del out[have:]  # the end came first: what there was
            return out
        while len(self._buf) < n and self._fill():
            pass
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    def waiting(self):
        """True when another request is already read and not yet parsed: what came in the same write (the
        desk's parallel calls). No system call: one that comes later is read on at HAND_OFF_S."""
        return bool(self._buf)


class Conn:
    """One way in and out: requests read from `inp`, answers and events written to `out`, one message at a time."""

    __slots__ = ("inp", "lock", "out")

    def __init__(self, inp, out):
        self.inp, self.out, self.lock = Input(inp), out, threading.Lock()

    def send(self, obj, blob=None):
        """One message; `blob` (bytes) follows its line as a binary frame."""
        if blob is not None:
            obj = {"bin": len(blob), **obj}  # first, so the host finds it without parsing the line
        line = (dumps(obj) + "\n").encode("utf-8", "backslashreplace")
        with self.lock:
            self.out.write(line)
            if blob is not None:
                self.out.write(blob)
            self.out.flush()

    def send_result(self, rid, result, blob=None):
        """A request's answer; an `Encoded` result goes into the line as the JSON it already is, its id and "ok"
        after it (the last of a repeated key counts: a child's text that carried its own cannot re-route it)."""
        if not isinstance(result, Encoded):
            self.send({"id": rid, "ok": True, "result": result}, blob)
            return
        line = ('{"result":' + result + ',"ok":true,"id":' + dumps(rid) + "}\n").encode("utf-8", "backslashreplace")
        with self.lock:
            self.out.write(line)
            self.out.flush()


class Server:
    """Reads requests from `inp` (and a door, when one is added), runs them concurrently, writes responses and
    events back where each request came from."""

    FILE_WORKERS = 4
    EXEC_IDLE_MAX = 4  # reading threads kept waiting, beside the ones reading

    def __init__(self, ws, inp, out):
        self.ws = ws
        self.conn = Conn(inp, out)
        self.out_lock = self.conn.lock
        self.door = None  # the door's Conn while the desk uses it
        self.runs = {}
        self.runs_lock = threading.Lock()
        self.procs = Processes()
        self.jobs = []
        self.jobs_cv = threading.Condition()
        self.exec_cv = threading.Condition()
        self.exec_jobs = []  # connections waiting for a thread to read them
        self.exec_idle = 0
        self.stdin_ended = threading.Event()
        self.closing = False
        self.spawn_cwd = None  # the helper's own working directory, once it has made it the workspace
        self.base_env = dict(os.environ)  # what commands start with: the helper never changes its own

    def send(self, obj, blob=None):
        """One message on stdout."""
        self.conn.send(obj, blob)

    def serve(self, door=None):
        """Serve stdin (and `door`, a Conn, on a thread of its own) until stdin ends."""
        # File workers exist before any command runs, so a fork bomb cannot starve them of threads.
        workers = [threading.Thread(target=self._worker, daemon=True) for _ in range(self.FILE_WORKERS)]
        for t in workers:
            t.start()
        self.door = door
        self.send(
            {
                "id": 0,
                "ev": "hello",
                "version": PROTOCOL_VERSION,
                "pid": os.getpid(),
                "uid": os.getuid(),
                "python": ".".join(str(v) for v in sys.version_info[:3]),
                "root": self.ws.root,
                "requests": ["json", "marshal"],
                "door": door is not None,
            }
        )
        for conn in (self.conn, door):
            if conn is not None:
                threading.Thread(target=self._reader, args=(conn,), daemon=True).start()
        self.stdin_ended.wait()
        self.shutdown()

    def _reader(self, conn=None):
        """A thread of the reading pool. It reads `conn` and runs each command it reads itself: a quick one
        (`true`, `ls`) ends before anyone else wakes; a slower one hands the reading, after HAND_OFF_S (at
        once when another request is already waiting: a burst), to a thread reserved before its spawn (there
        is always one to have then, even when a fork bomb takes every pid after). Then it waits for a
        connection to read. Started for a reservation (no `conn`), it waits at once, already counted out of
        the idle ones."""
        reserved = conn is None
        while True:
            while conn is not None:
                try:
                    req = self._read(conn)
                except BaseException:
                    if conn is self.conn:  # nothing reads stdin any more: the helper ends, as it does at its end
                        self.stdin_ended.set()
                    raise
                if req is None:
                    if conn is self.conn:
                        self.stdin_ended.set()
                    conn = None
                elif self._run_exec(conn, req):
                    conn = None  # another thread reads it now
            with self.exec_cv:
                if not reserved:
                    if self.exec_idle >= self.EXEC_IDLE_MAX or self.closing:
                        return
                    self.exec_idle += 1
                reserved = False
                while not self.exec_jobs and not self.closing:
                    self.exec_cv.wait()
                if not self.exec_jobs:
                    return
                conn = self.exec_jobs.pop(0)

    def _run_exec(self, conn, req):
        """Run an exec read from `conn` on this thread; True when the reading went to another thread meanwhile.
        Refused, the reading staying here, when no thread can be reserved (pids limit reached?)."""
        rid = req.get("id")
        try:
            with self.exec_cv:
                if self.exec_idle > 0:
                    self.exec_idle -= 1
                    started = None
                else:
                    started = threading.Thread(target=self._reader, daemon=True)
            if started is not None:
                started.start()
        except RuntimeError:
            message = "the sandbox cannot start a thread (pids limit reached?)"
            conn.send({"id": rid, "ok": False, "error": {"kind": "SandboxError", "message": message}})
            return False
        handed, settled = [], []

        def hand_reading():
            with self.exec_cv:
                self.exec_jobs.append(conn)
                self.exec_cv.notify()
            handed.append(True)

        def settle():  # before the answer, so that the desk's next request finds the reservation back
            if not handed and not settled:  # it goes back: its thread waits on, idle
                settled.append(True)
                with self.exec_cv:
                    self.exec_idle += 1

        try:
            self._handle(conn, req, hand_reading, settle)
        finally:
            settle()
        return bool(handed)

    def _read(self, conn):
        """Route `conn`'s requests until it ends (or cannot be followed): None; or until an exec comes: its
        request, for this thread to run."""
        inp = conn.inp
        while True:
            try:
                line = inp.readline()
            except OSError:  # the door reset (the desk closed it unread)
                break
            if not line:
                break
            try:
                req = self._marshalled(line, inp) if line[:1] == b"M" else loads(line)
            except EOFError:
                break
            except Exception as exc:
                message = f"bad request: {exc}"
                conn.send({"id": None, "ok": False, "error": {"kind": "SandboxError", "message": message}})
                continue
            if req.get("bin") is not None and not self._read_blob(req, inp):
                break
            if self._route(conn, req):
                return req
        return None

    def _marshalled(self, line, inp):
        """A marshal request: its size on the line, then its bytes. EOFError when the stream cannot be
        followed past it (a size that is no size, or the end of the input)."""
        size = line[1:].strip()
        if not size.isdigit() or int(size) > MAX_FRAME:
            raise EOFError
        size = int(size)
        data = inp.read(size)
        if len(data) < size:
            raise EOFError
        req = marshal.loads(data)
        if not isinstance(req, dict):
            raise ValueError("a request must be a dict")
        return req

    def _read_blob(self, req, inp):
        """The binary frame after a request's line goes into its args as `data`; False at EOF."""
        size = req["bin"]
        if not isinstance(size, int) or size < 0:
            return False  # the stream cannot be followed past a frame of unknown length
        if size > MAX_FRAME:  # never held: read past it, and refuse the request
            while size > 0:
                chunk = inp.read(min(size, 1 << 20))
                if not chunk:
                    return False
                size -= len(chunk)
            req["op"], req["args"] = "refuse", {"message": f"a request of over {MAX_FRAME} bytes"}
            return True
        data = inp.read(size) if size else b""
        if len(data) < size:
            return False
        if not isinstance(req.get("args"), dict):
            req["args"] = {}
        req["args"]["data"] = data
        return True

    def _route(self, conn, req):
        """A cancel acts at once, everything but an exec queues for the workers; True for an exec, which the
        reading thread runs itself (see _reader)."""
        op = req.get("op")
        if op == "cancel":
            target = req.get("target")
            with self.runs_lock:
                run = self.runs.get(target) if isinstance(target, (int, str)) else None
            if run is not None:
                run.cancel()
        elif op == "exec":
            return True
        else:
            with self.jobs_cv:
                self.jobs.append((conn, req))
                self.jobs_cv.notify()
        return False

    def shutdown(self):
        self.closing = True
        with self.runs_lock:
            runs = list(self.runs.values())
        for run in runs:
            run.cancel()
        try:
            _close_idle_searches(self.ws)
            self.procs.sweep()  # nothing it started outlives the helper's session
        except Exception:
            pass
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
                job = self.jobs.pop(0)
            self._handle(*job)

    def _handle(self, conn, req, on_slow=None, settle=None):
        """Do `req` and answer it; `settle` runs between the two (see _run_exec)."""
        rid = req.get("id")
        error = None
        try:
            result = self.dispatch(req, conn, on_slow)
            blob = result.pop("data") if isinstance(result, dict) and isinstance(result.get("data"), bytes) else None
        except HelperError as exc:
            error = {"kind": exc.kind, "message": str(exc)}
        except Exception as exc:
            error = {"kind": "SandboxError", "message": f"{type(exc).__name__}: {exc}"}
        if settle is not None:
            settle()
        if error is None:
            try:
                conn.send_result(rid, result, blob)
                return
            except Exception as exc:  # a result that cannot be encoded
                error = {"kind": "SandboxError", "message": f"{type(exc).__name__}: {exc}"}
        conn.send({"id": rid, "ok": False, "error": error})

    def dispatch(self, req, conn=None, on_slow=None):
        op, a = req.get("op"), req.get("args") or {}
        if op == "exec":
            return self._exec(req.get("id"), a, conn or self.conn, on_slow)
        return call_op(self.ws, self.procs, op, a)

    def _exec(self, rid, a, conn, on_slow=None):
        on_chunk = None
        if a.get("stream"):

            def on_chunk(stream, text):
                conn.send({"id": rid, "ev": "output", "stream": stream, "data": text})

        cwd = a.get("cwd") or "."
        run = CommandRun(
            a["command"],
            # the workspace's root is where the helper runs: a command starts there (spawn_cwd) by no path
            self.spawn_cwd if cwd in (".", self.ws.alias) and self.spawn_cwd == self.ws.root else self.ws.resolve(cwd),
            a.get("env"),
            a.get("timeout", 120.0),
            min(int(a.get("output_limit", 1_000_000)), MAX_OUTPUT_LIMIT),
            on_chunk,
            a.get("grace", KILL_GRACE_S),
            base_env=self.base_env,
            tracker=self.procs.tracker,
            spawn_cwd=self.spawn_cwd,
            on_slow=on_slow,
        )
        with self.runs_lock:
            self.runs[rid] = run  # before another thread reads on (see _reader): a cancel finds it
        if on_slow is not None and conn.inp.waiting():  # a burst: the next request is read now, not in 5 ms
            run.on_slow = None
            on_slow()
        try:
            return run.run()
        finally:
            with self.runs_lock:
                self.runs.pop(rid, None)


def _searcher(ws, a):
    """The workspace's own searcher (a child helper in the container, RE2 on the host), else a plain one;
    a request may shorten (never lengthen) its deadline."""
    if ws.searcher is None:
        ws.searcher = Search()
    timeout = a.get("timeout")
    if timeout and 0 < float(timeout) < ws.searcher.timeout:
        return ws.searcher.with_timeout(float(timeout))
    return ws.searcher


def _close_idle_searches(ws):
    close = getattr(ws.searcher, "close_idle", None)
    if close is not None:
        close()


def call_op(ws, procs, op, a):
    """Every non-exec operation, shared by the helper server and LocalSandbox."""
    if op == "read":
        data, size = fs_read(ws, a["path"], a.get("offset", 0), a.get("limit", READ_LIMIT))
        return {"data": data, "size": size}  # bytes: a binary frame on the wire
    if op == "read_text":
        return fs_read_text(ws, a["path"], a.get("limit", READ_LIMIT))
    if op == "write":
        data = a["data"] if "data" in a else a["text"].encode("utf-8")
        if not isinstance(data, (bytes, bytearray)):  # a large frame is read into a bytearray (Input.read)
            raise HelperError("fs_write's bytes must come as a binary frame")
        return fs_write(ws, a["path"], data, a.get("make_dirs", True))
    if op == "stat":
        return fs_stat(ws, a["path"])
    if op == "real_path":
        return ws.real_path(a["path"])
    if op == "list":
        return fs_list(ws, a.get("path", "."))
    if op == "glob":
        ignored = bool(a.get("include_ignored"))
        newest = bool(a.get("newest_first"))
        return _searcher(ws, a).glob(ws, a["pattern"], a.get("path", "."), a.get("limit", 200), ignored, newest)
    if op == "grep":
        where, ic, most = a.get("path", "."), a.get("ignore_case", False), a.get("max_results", 200)
        return _searcher(ws, a).grep(ws, a["pattern"], where, a.get("glob"), ic, most, bool(a.get("include_ignored")))
    if op == "bg_start":
        return procs.start(a["command"], ws.resolve(a.get("cwd") or "."), a.get("env"))
    if op == "bg_logs":
        return procs.get(a["process_id"]).logs()
    if op == "bg_kill":
        return procs.get(a["process_id"]).kill()
    if op == "sweep":
        _close_idle_searches(ws)
        return procs.sweep(float(a.get("grace", 0.2)))
    if op in ("sync_manifest", "sync_read", "sync_apply"):  # a synced workspace's sync container (sync.py)
        return sync_op(ws, op, a)
    if op == "refuse":
        raise HelperError(a["message"])
    if op == "ping":
        return {"version": PROTOCOL_VERSION, "uid": os.getuid()}
    raise HelperError(f"unknown operation {op!r}")
