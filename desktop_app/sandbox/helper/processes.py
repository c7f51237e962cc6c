"""Processes the helper runs: one command at a time to completion (CommandRun), long ones in the
background (BackgroundProcess, Processes), and the bounded capture of their output (Capture)."""

import codecs
import errno
import fcntl
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time

from .errors import HelperError
from .pathcache import which as _which
from .proctree import RUN_ENV, Tracker

CHUNK = 65536
KILL_GRACE_S = 1.0  # SIGTERM, then SIGKILL of the whole group after this long
HAND_OFF_S = 0.005  # a command still running this long after its start calls its on_slow (see Server._reader)
LINGER_S = 0.2  # after the command exits, how long to wait for grandchildren to close its pipes
MAX_OUTPUT_LIMIT = 16 * 1024 * 1024  # per stream; a caller asking for more gets this much
BG_OUTPUT_LIMIT = 1024 * 1024
DRAIN_MAX_S = 2.0  # at most this long for a background process's last output to reach its buffer
_FIONREAD = 0x541B  # Linux's ioctl for a pipe's unread bytes (python3-minimal has no termios)

# ------------------------------------------------------------------------------------------ processes
_OOM_FILES = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")  # v2, v1
_oom_fd = []  # the counter's file, opened once and read again with pread; empty: not opened yet


def _oom_kills():
    """The cgroup's OOM-kill counter, or None where there is none to read."""
    if not _oom_fd:
        fds = [fd for fd in map(_open_counter, _OOM_FILES) if fd is not None]
        _oom_fd.append(fds[0] if fds else None)
        for fd in fds[1:]:
            os.close(fd)
    fd = _oom_fd[0]
    if fd is None:
        return None
    try:
        data = os.pread(fd, 4096, 0)
    except OSError:
        return None
    i = data.find(b"oom_kill ")
    return int(data[i + 9 :].split(b"\n", 1)[0]) if i >= 0 else None


def _open_counter(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    if b"oom_kill " in os.pread(fd, 4096, 0):
        return fd
    os.close(fd)
    return None


def start_error(what, exc):
    """Why a process did not start, named by its errno (E2BIG is not a pids limit)."""
    if exc.errno == errno.E2BIG:
        return (
            f"could not start {what}: argument too long (one argument or variable over 128 KB, or all of them"
            " over the system's ARG_MAX); pass large text through a file instead"
        )
    if exc.errno == errno.EAGAIN:
        return f"could not start {what}: no more processes (the sandbox's pids limit is reached)"
    if exc.errno == errno.ENOMEM:
        return f"could not start {what}: out of memory"
    return f"could not start {what}: {exc.strerror or exc}"


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


# ------------------------------------------------------------------------------------------ spawning
_SPAWN_ACTIONS = hasattr(os, "posix_spawn") and hasattr(os, "POSIX_SPAWN_DUP2")
# Python ignores these at start-up; Popen's restore_signals gives a command them back at their defaults.
_DEFAULT_SIGNALS = tuple(getattr(signal, n) for n in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, n))


class Spawned:
    """A process started by os.posix_spawn, with the slice of Popen's interface that CommandRun uses."""

    __slots__ = ("pid", "returncode")

    def __init__(self, pid):
        self.pid = pid
        self.returncode = None

    def _reap(self, flags):
        pid, status = os.waitpid(self.pid, flags)
        if pid:
            self.returncode = os.waitstatus_to_exitcode(status)

    def poll(self):
        if self.returncode is None:
            self._reap(os.WNOHANG)
        return self.returncode

    def wait(self):
        if self.returncode is None:
            self._reap(0)
        return self.returncode


def spawn(argv, cwd, env, spawn_cwd=None):
    """Start `argv` in a session of its own, stdin on /dev/null, stdout and stderr on new pipes; return
    (process, stdout fd, stderr fd). os.posix_spawn (a vfork: no copy of the helper's memory, no Python
    in the child) where it can: an absolute program, and `cwd` the process's own working directory
    (`spawn_cwd`: Python 3.11 has no chdir action), which only a process that owns its cwd may claim.
    It closes no descriptor: that relies on every other one being close-on-exec, as Python makes them.
    Elsewhere Popen, as before."""
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        if _SPAWN_ACTIONS and spawn_cwd is not None and cwd == spawn_cwd and argv[0].startswith("/"):
            actions = [
                (os.POSIX_SPAWN_OPEN, 0, "/dev/null", os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, out_w, 1),
                (os.POSIX_SPAWN_DUP2, err_w, 2),
            ]
            pid = os.posix_spawn(argv[0], argv, env, file_actions=actions, setsid=True,
                                 setsigdef=_DEFAULT_SIGNALS, setsigmask=())  # fmt: skip
            proc = Spawned(pid)
        else:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out_w, stderr=err_w,
                                    start_new_session=True, close_fds=True)  # fmt: skip
    except BaseException:
        os.close(out_r)
        os.close(err_r)
        raise
    finally:
        os.close(out_w)
        os.close(err_w)
    return proc, out_r, err_r


class Poller:
    """The wait loop's few descriptors on one poll(2) object: lighter than a selector (no epoll descriptor to
    make and close per command, no key objects). Its interface is the slice of a selector's the loop uses."""

    __slots__ = ("_poll", "fds")

    def __init__(self):
        self._poll = select.poll()
        self.fds = {}  # fd -> what it is ("pipe", "cancel", "exit"); None once closed

    def register(self, fd, data):
        self._poll.register(fd, select.POLLIN)
        self.fds[fd] = data

    def unregister(self, fd):
        if self.fds is not None and self.fds.pop(fd, None) is not None:
            self._poll.unregister(fd)

    def select(self, timeout):
        """(fd, data) of each ready descriptor; `timeout` in seconds, None to wait for one."""
        ms = None if timeout is None else timeout * 1000.0
        fds = self.fds
        return [(fd, fds[fd]) for fd, _ in self._poll.poll(ms) if fd in fds]

    def close(self):
        self.fds = None


class Capture:
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
        tracker=None,
        spawn_cwd=None,
        on_slow=None,
    ):
        self.on_slow = on_slow  # called once, HAND_OFF_S after the spawn, if the command is still running
        self.env = _env(env, base_env)
        self.spawn_cwd = spawn_cwd
        self.argv = _argv(command, self.env)
        self.tracker = tracker if tracker is not None else Tracker()
        self.cookie = self.tracker.cookie("bash_run", command)
        self.env[RUN_ENV] = self.cookie
        self.cwd = cwd
        self.timeout = float(timeout)
        self.on_chunk = on_chunk
        self.grace = grace
        self.out = Capture(output_limit)
        self.err = Capture(output_limit)
        self._cancel_r, self._cancel_w = os.pipe()
        self.cancelled = False
        self._alone = False  # set when the command exits: True when it started no process (see _drive)

    def cancel(self):
        self.cancelled = True
        try:
            os.write(self._cancel_w, b"x")
        except OSError:
            pass

    def run(self):
        start = time.monotonic()
        oom_before = _oom_kills()  # the only read of the counter unless the command dies of SIGKILL
        try:
            proc, out_fd, err_fd = spawn(self.argv, self.cwd, self.env, self.spawn_cwd)
        except FileNotFoundError:
            self._close_cancel()
            self.tracker.forget(self.cookie)
            return self._result(127, start, stderr=f"{self.argv[0]}: command not found\n")
        except PermissionError:
            self._close_cancel()
            self.tracker.forget(self.cookie)
            return self._result(126, start, stderr=f"{self.argv[0]}: permission denied\n")
        except OSError as exc:
            self._close_cancel()
            self.tracker.forget(self.cookie)
            raise HelperError(start_error("the command", exc)) from None
        self.tracker.register(self.cookie, proc.pid)
        try:
            return self._drive(proc, (out_fd, err_fd), start, oom_before)
        finally:
            # Whatever it started outside its group (setsid, double fork, a scrubbed env) goes too, and any
            # stray: unless no process at all was created since the last look (see Tracker.alone_since).
            try:
                if not self._alone:
                    self.tracker.kill(self.cookie)
            finally:
                self.tracker.forget(self.cookie)
            for fd in (out_fd, err_fd):
                try:
                    os.close(fd)
                except OSError:
                    pass
            self._close_cancel()

    def _close_cancel(self):
        for fd in (self._cancel_r, self._cancel_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def _drive(self, proc, fds, start, oom_before):
        """Wait for the command, streaming its output, escalating SIGTERM to SIGKILL at the deadline or
        on cancel; then kill what is left of its group."""
        self._watch(proc, fds, start)
        try:
            while True:
                now = time.monotonic()
                if self._finished(proc, now):
                    break
                wait = self._wait_s(proc, now)
                if self.on_slow is not None:
                    if now >= start + HAND_OFF_S:
                        self.on_slow, on_slow = None, self.on_slow
                        on_slow()
                    else:
                        slow_in = start + HAND_OFF_S - now
                        wait = slow_in if wait is None else min(wait, slow_in)
                for fd, what in self._sel.select(wait):
                    if what == "pipe":
                        self._on_pipe(fd)
                    elif what == "exit":
                        self._sel.unregister(self._pidfd)
                        if proc.returncode is None:  # a zombie still holds its pid: see Tracker.alone_since
                            self._alone = self.tracker.alone_since(proc.pid)
                        proc.wait()
                    elif what == "cancel":
                        self._on_cancel(proc)
        finally:
            self._sel.close()
            if self._pidfd is not None:
                os.close(self._pidfd)
            # Leftovers of the group (e.g. `sleep 100 &`) go with the command; a command that was alone has none.
            if not self._alone:
                _killpg(proc.pid, signal.SIGKILL)
            if proc.returncode is None:
                proc.wait()
            self._drain_rest()
        return self._outcome(proc, start, oom_before)

    def _drain_rest(self):
        """What still sits in a pipe that the linger left open (a process outside the group holds it):
        read without blocking, so nothing the command wrote before its exit is lost."""
        for fd in list(self._streams):
            try:
                os.set_blocking(fd, False)
                for _ in range(MAX_OUTPUT_LIMIT // CHUNK + 1):
                    self._on_pipe(fd)
                    if fd not in self._streams:
                        break
            except (BlockingIOError, OSError):
                continue

    def _watch(self, proc, fds, start):
        """The wait loop's state: a selector over the pipes, the cancel pipe and (where there is one)
        a pidfd for the exit; the deadline; when SIGKILL follows a SIGTERM; how long to linger."""
        self._sel = sel = Poller()
        self._streams = {fds[0]: ("stdout", self.out), fds[1]: ("stderr", self.err)}
        for fd in self._streams:
            sel.register(fd, "pipe")
        sel.register(self._cancel_r, "cancel")
        self._pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                self._pidfd = os.pidfd_open(proc.pid)
                sel.register(self._pidfd, "exit")
            except OSError:
                self._pidfd = None
        self._deadline = start + self.timeout
        self._kill_at = None  # when SIGKILL follows the SIGTERM
        self._linger_until = None  # after exit: wait this long for pipes to close
        self._timed_out = False
        self._last_signal = None

    def _finished(self, proc, now):
        """True when the command has exited and its pipes are closed (or lingered long enough);
        until then, send the signal that is due."""
        if proc.returncode is None and (self._pidfd is None or self._kill_at is not None):
            proc.poll()
        if proc.returncode is not None:
            if self._linger_until is None:
                self._linger_until = now + LINGER_S
            return not self._streams or now >= self._linger_until
        if self._kill_at is None and now >= self._deadline and not self.cancelled:
            self._timed_out = True
            self._signal(proc, signal.SIGTERM, now + self.grace)
        elif self._kill_at is not None and now >= self._kill_at:
            self._signal(proc, signal.SIGKILL, now + 0.05)
        return False

    def _signal(self, proc, sig, kill_at):
        self._last_signal = sig
        _killpg(proc.pid, sig)
        self._kill_at = kill_at

    def _wait_s(self, proc, now):
        """How long select may block: until the next thing due (linger end, SIGKILL, deadline)."""
        running = proc.returncode is None
        waits = [
            self._linger_until,
            self._kill_at if running else None,
            self._deadline if self._kill_at is None and running else None,
        ]
        waits = [w for w in waits if w is not None]
        wait = max(0.0, min(waits) - now) if waits else None
        if self._pidfd is None and running:
            wait = 0.05 if wait is None else min(wait, 0.05)
        return wait

    def _on_pipe(self, fd):
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            raise  # drained (see _drain_rest)
        except OSError:
            data = b""
        if not data:
            self._sel.unregister(fd)  # nothing once the poller is closed (the final drain)
            self._streams.pop(fd)
            return
        name, cap = self._streams[fd]
        live = cap.feed(data)
        if live and self.on_chunk is not None:
            text = cap.decoder.decode(live)
            if text:
                self.on_chunk(name, text)

    def _on_cancel(self, proc):
        self._sel.unregister(self._cancel_r)
        if proc.returncode is None and self._kill_at is None:
            self._signal(proc, signal.SIGTERM, time.monotonic() + self.grace)

    def _outcome(self, proc, start, oom_before):
        rc = proc.returncode
        sig = -rc if rc < 0 else None
        if sig is None and self._timed_out and rc in (128 + signal.SIGTERM, 128 + signal.SIGKILL):
            sig = rc - 128
        killed = (sig == signal.SIGKILL or rc == 128 + signal.SIGKILL) and self._last_signal != signal.SIGKILL
        oom_after = _oom_kills() if killed and oom_before is not None else None  # only a SIGKILL can be one
        oom = bool(killed and oom_after is not None and oom_after > oom_before)
        code = rc if rc >= 0 else 128 + sig
        return self._result(code, start, timed_out=self._timed_out, killed_signal=sig, oom=oom)

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
    """A long process: output (stdout and stderr merged) kept in a bounded buffer, the tail wins. It owns
    every process it starts, in its group or not, until it is killed."""

    def __init__(self, pid_id, command, cwd, env=None, base_env=None, tracker=None):
        self.id = pid_id
        self.command = command
        self.buf = bytearray()
        self.dropped = 0
        self.lock = threading.Lock()
        self.busy = False
        self.closed = False
        self.tracker = tracker if tracker is not None else Tracker()
        self.cookie = self.tracker.cookie(pid_id, command)
        merged = _env(env, base_env)
        merged[RUN_ENV] = self.cookie
        try:
            self.proc = subprocess.Popen(
                _argv(command),
                cwd=cwd,
                env=merged,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                bufsize=0,
            )
        except OSError as exc:
            self.tracker.forget(self.cookie)
            raise HelperError(start_error("the background process", exc)) from None
        self.tracker.register(self.cookie, self.proc.pid)
        self.reader = threading.Thread(target=self._read, name="bg-" + pid_id, daemon=True)
        self.reader.start()

    def _read(self):
        fd = self.proc.stdout.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        while True:
            try:
                poller.poll()
                # `busy` from before the read to after the append: with the pipe's unread count, it tells
                # logs() when every byte written so far is in the buffer (see _settled).
                self.busy = True
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
            self.busy = False
        with self.lock:
            self.proc.stdout.close()
            self.closed = True
        self.busy = False

    def _settled(self):
        """True when nothing is left in the pipe nor between the pipe and the buffer."""
        with self.lock:
            if self.closed:
                return True
            try:
                unread = int.from_bytes(fcntl.ioctl(self.proc.stdout.fileno(), _FIONREAD, b"\0\0\0\0"), sys.byteorder)
            except OSError:
                unread = 0
        return unread == 0 and not self.busy  # this order: a read begun before the count is still `busy`

    def logs(self):
        rc = self.proc.poll()
        if rc is not None:
            # The process has exited, but its last output may still sit in the pipe: let the reader
            # drain it first, or a fast exit would be reported without its output. A process it left
            # behind may hold the pipe open, so wait for the pipe to be empty, not for its end.
            deadline = time.monotonic() + DRAIN_MAX_S
            while not self._settled() and time.monotonic() < deadline:
                time.sleep(0.002)
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
        """SIGTERM to its whole tree (its group, and what left the group), SIGKILL after `grace`."""
        if self.proc.poll() is None:
            _killpg(self.proc.pid, signal.SIGTERM)
        self.tracker.signal(self.tracker.targets(self.cookie), signal.SIGTERM)
        try:
            self.proc.wait(grace)
        except subprocess.TimeoutExpired:
            pass
        _killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        self.tracker.kill(self.cookie, grace=grace)  # what left the group: setsid, double fork, env -i
        self.tracker.forget(self.cookie)
        self.reader.join(1.0)
        return self.logs()


class Processes:
    """Background processes by id, and the tracker of every process this helper's commands start."""

    def __init__(self, base_env=None, tracker=None):
        self.base_env = base_env
        self.tracker = tracker if tracker is not None else Tracker()
        self.items = {}
        self.lock = threading.Lock()
        self.counter = 0

    def start(self, command, cwd, env=None):
        with self.lock:
            self.counter += 1
            pid_id = f"bg-{self.counter}"
        bp = BackgroundProcess(pid_id, command, cwd, env, self.base_env, self.tracker)
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

    def sweep(self, grace=0.2):
        """The session's end: every process but the helper is killed (background processes, commands
        still running, daemons they left). Returns what was running, and what is still alive after."""
        killed = {d["pid"]: d for d in self.tracker.describe(self.tracker.targets(everything=True))}
        self.tracker.recording = killed
        try:
            self.kill_all()
            self.tracker.kill(everything=True, grace=grace)
        finally:
            self.tracker.recording = None
        return {"killed": list(killed.values()), "alive": self.tracker.alive()}
