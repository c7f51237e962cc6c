"""Which process belongs to which command, read from /proc, so that a command's whole tree can be killed:
setsid'd, double-forked, renamed and env-scrubbed daemons included. Stdlib only (the container's python3
has no ctypes, so no subreaper: orphans go to the container's init and are found there)."""

import os
import signal
import threading
import time

RUN_ENV = "AGENT_DESK_RUN"  # the cookie each command carries: "<pid>-<tracker>:<n>"
SWEEP_ROUNDS = 60  # SIGKILL rounds before giving up on a fork loop
PROTECTED, STRAY = "protected", "stray"
_LAST_PID = "/proc/sys/kernel/ns_last_pid"  # the newest pid this PID namespace handed out (threads' too)


def _open(path):
    """A kept descriptor for a kernel counter read again with pread (no open and close per read)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None


def _read(path, size=4096):
    fd = _open(path)
    if fd is None:
        return None
    try:
        return os.read(fd, size)
    except OSError:
        return None
    finally:
        os.close(fd)


def scan():
    """Every live process: pid -> (ppid, pgid, sid, start ticks). Zombies are left out (dead)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        data = _read("/proc/" + name + "/stat", 1024)
        if not data:
            continue
        # comm may hold spaces and parentheses: the fields start after the last ')'.
        f = data[data.rfind(b")") + 2 :].split(b" ", 20)
        if len(f) < 20 or f[0] in (b"Z", b"X"):
            continue
        table[int(name)] = (int(f[1]), int(f[2]), int(f[3]), int(f[18]))  # ppid, pgid, sid, starttime
    return table


def cookie_of(pid):
    """The run cookie in a process's initial environment, or None (scrubbed, or unreadable)."""
    data = _read(f"/proc/{pid}/environ", 1 << 20)
    if not data:
        return None
    key = RUN_ENV.encode() + b"="
    for item in data.split(b"\0"):
        if item.startswith(key):
            return item[len(key) :].decode("ascii", "replace")
    return None


def cmdline_of(pid):
    """The process's command line; a process caught in the middle of an exec has none for a moment: then
    its name in brackets ("[sh]"), as ps shows it; "" when it is gone."""
    data = _read(f"/proc/{pid}/cmdline", 8192)
    if data:
        return data.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    comm = _read(f"/proc/{pid}/comm", 64)
    return f"[{comm.strip().decode('utf-8', 'replace')}]" if comm else ""


class Run:
    __slots__ = ("command", "cookie", "label", "leader")

    def __init__(self, cookie, leader, label, command):
        self.cookie, self.leader, self.label, self.command = cookie, leader, label, command


class Tracker:
    """The runs (foreground commands and background processes) of one helper or LocalSandbox, and the
    attribution of every process to one of them, or to none (a stray: a scrubbed, orphaned daemon).

    `container` is True inside the sandbox's PID namespace: there every orphan under the init that is
    not claimed by a live run is a stray. On the host (LocalSandbox) only processes that carry this
    tracker's cookie or sit in one of its runs' sessions are ever touched."""

    _serial = 0

    def __init__(self, container=None):
        # Started by `docker exec` (no parent in our PID namespace): the sandbox's helper.
        self.container = os.getppid() == 0 if container is None else container
        self.me = os.getpid()
        Tracker._serial += 1
        self.prefix = f"{self.me}-{Tracker._serial}:"
        self.runs = {}  # cookie -> Run
        self.lock = threading.Lock()
        self.counter = 0
        self.since = None  # start ticks of the first run: nothing older is ours
        self.recording = None  # during a sweep: pid -> description of everything killed
        self.keepalive = self._keepalive() if self.container else None
        self.seen = None  # ns_last_pid when the last look for strays began (see alone_since)
        self._last_pid_fd = _open(_LAST_PID) if self.container else None

    def last_pid(self):
        """The namespace's newest pid, or None where it cannot be read (on the host it says nothing)."""
        fd = self._last_pid_fd
        if fd is None:
            return None
        try:
            return int(os.pread(fd, 32, 0))
        except (OSError, ValueError):
            return None

    def alone_since(self, pid):
        """True when `pid` (exited, not yet reaped, so no new process can take its number) is the only
        process this PID namespace created since the last look for strays began: it started nothing, and
        nothing else started a process since that look, so a new look would find nothing new. Pids are
        handed out in order, so `pid` must be the one after the look's and still the newest."""
        seen = self.seen
        if seen is None or pid != seen + 1 or self.last_pid() != pid:
            return False
        self.seen = pid
        return True

    @staticmethod
    def _keepalive():
        """The container's own command under its init (the earliest child of PID 1), never killed."""
        if b"init" not in (_read("/proc/1/cmdline", 256) or b""):
            return None
        kids = [(v[3], pid) for pid, v in scan().items() if v[0] == 1]
        return min(kids)[1] if kids else None

    def cookie(self, label, command):
        """A new run's cookie, known before its process starts (so no sweep takes it for a stray)."""
        text = command if isinstance(command, str) else " ".join(map(str, command))
        with self.lock:
            self.counter += 1
            cookie = f"{self.prefix}{self.counter}"
            self.runs[cookie] = Run(cookie, None, label, text)
        return cookie

    def register(self, cookie, leader):
        """The run's process started: its pid leads its tree (and its group and session)."""
        with self.lock:
            run = self.runs.get(cookie)
            if run is not None:
                run.leader = leader
        if self.since is None:
            st = scan().get(leader)
            self.since = st[3] if st else 0

    def forget(self, cookie):
        with self.lock:
            self.runs.pop(cookie, None)

    # -- attribution
    def owners(self, table):
        """pid -> cookie of its run, STRAY or PROTECTED, for every process in `table`."""
        with self.lock:
            runs = dict(self.runs)
        leaders = {r.leader: c for c, r in runs.items() if r.leader is not None}
        memo = {}
        for pid in table:
            self._owner(pid, table, leaders, runs, memo)
        return memo

    def _owner(self, pid, table, leaders, runs, memo):
        if pid in memo:
            return memo[pid]
        chain, p, found = [], pid, None
        while found is None:
            if p in memo:
                found = memo[p]
            elif p in leaders:
                found = leaders[p]
            elif p == self.me or p == 1 or p == self.keepalive or p not in table:
                found = PROTECTED
            else:
                chain.append(p)
                parent = table[p][0]
                if parent == self.me or parent == 0:
                    found = PROTECTED  # a child being registered now, or another `docker exec`
                elif parent == 1 and self.container:
                    found = self._orphan(p, table, leaders, runs)
                else:
                    p = parent
        if not self.container:
            # On the host, ancestors are the user's session: only a run's leader above claims a process;
            # otherwise it is judged by itself.
            if found == PROTECTED:
                found = self._orphan(pid, table, leaders, runs)
            memo[pid] = found
            return found
        for q in chain:
            memo[q] = found
        memo[pid] = found
        return found

    def _orphan(self, pid, table, leaders, runs):
        """An orphan's run: by its session or group (a leader's), then by its cookie; else a stray in the
        container, left alone on the host."""
        _ppid, pgid, sid, start = table[pid]
        for key in (pgid, sid):
            if key in leaders:
                return leaders[key]
        if not self.container and (self.since is None or start < self.since):
            return PROTECTED  # on the host: older than anything this tracker started
        c = cookie_of(pid)
        if c is not None and c.startswith(self.prefix):
            return c if c in runs else STRAY
        # Any other cookie is no proof: the agent runs as the helper's user and can write any cookie (one
        # naming a live helper included). So an orphan in the container that no live run of this helper owns
        # is a stray, another desk's escaped daemon too (its helper's own children are never orphans).
        return STRAY if self.container else PROTECTED

    # -- killing
    def targets(self, cookie=None, everything=False):
        """The pids to kill for a run (its tree and every stray), or for the session's end (everything
        but the helper, the init and the container's own command)."""
        table = scan()
        owners = self.owners(table)
        out = []
        for pid, owner in owners.items():
            if pid == self.me or pid not in table:
                continue
            if owner == STRAY or owner == cookie or (everything and owner != PROTECTED):
                out.append(pid)
            elif everything and self.container and self._in_my_tree(pid, table):
                out.append(pid)
        return out

    def _in_my_tree(self, pid, table):
        p = table[pid][0]
        while p in table and p not in (0, 1):
            if p == self.me:
                return True
            p = table[p][0]
        return p == self.me

    def signal(self, pids, sig):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass

    def kill(self, cookie=None, everything=False, grace=0.0):
        """SIGTERM (when `grace`), then SIGKILL rounds until nothing of the run is left (a fork loop keeps
        making more), seen twice: a process killed during a look may have forked just before it died, after
        that look listed /proc, so its child was not in it; the dead fork no more, so a second look that finds
        nothing is final. Returns what was found first: [{pid, command, started_by}]."""
        self.seen = self.last_pid()  # before the look: what starts during it is newer, and looked at later
        first = self.targets(cookie, everything)
        found = self.describe(first)
        self._note(found)
        if grace > 0 and first:
            self.signal(first, signal.SIGTERM)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self.targets(cookie, everything):
                time.sleep(0.02)
        pids, confirmed = first, not first
        for _ in range(SWEEP_ROUNDS):
            if not pids:
                if confirmed:
                    break
                confirmed = True
                pids = self.targets(cookie, everything)
                continue
            confirmed = False
            self._note(self.describe([p for p in pids if self._unnamed(p)]))
            self.signal(pids, signal.SIGKILL)
            pids = self.targets(cookie, everything)
        return found

    def _note(self, described):
        """While a sweep records (`recording`: pid -> description), every process a kill round is about to
        signal is described first, so the list names all that was killed, not only what the first look saw."""
        if self.recording is not None:
            for d in described:
                if self._unnamed(d["pid"]) and (d["command"] or d["pid"] not in self.recording):
                    self.recording[d["pid"]] = d

    def _unnamed(self, pid):
        """Recording, and this pid is not yet described by its command line (new, or caught mid-exec)."""
        if self.recording is None:
            return False
        seen = self.recording.get(pid)
        return seen is None or not seen["command"] or seen["command"].startswith("[")

    def describe(self, pids):
        with self.lock:
            runs = dict(self.runs)
        out = []
        for pid in pids:
            c = cookie_of(pid)
            run = runs.get(c) if c else None
            started = f"{run.label}: {run.command}" if run else ("" if c is None else f"run {c}")
            out.append({"pid": pid, "command": cmdline_of(pid), "started_by": started})
        return out

    def alive(self):
        """What is still running besides the helper, the init and the container's own command."""
        return self.describe(self.targets(everything=True))
