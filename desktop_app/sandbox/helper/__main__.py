"""The helper's entry point: `python3 -I -S helper.pyz ROOT [DOOR]` in the container (ROOT is the workspace,
DOOR the desk's socket to connect to, when it offers one: see docker/_helper_door.py)."""

import fcntl
import os
import signal
import socket
import sys
import time

from .processes import KILL_GRACE_S
from .search import ChildSearch, child_main
from .server import Conn, Server
from .workspace import Workspace

_F_SETPIPE_SZ = 1031  # Linux's fcntl; python3-minimal's fcntl module may not name it


def _widen_pipes():
    """A 1 MiB pipe to the engine on stdin and stdout: a 1 MB read or write crosses in one go instead of
    sixteen 64 KiB turns (unprivileged processes may raise a pipe to /proc/sys/fs/pipe-max-size)."""
    for fd in (0, 1):
        try:
            fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
        except OSError:
            pass  # not a pipe, or over the limit: the default size works, only slower


def _door(path):
    """A Conn on the desk's door at `path`, or None (none offered, or it cannot be reached: the desk then uses
    stdin and stdout). Its descriptor is close-on-exec, as Python makes every one: no command inherits it."""
    if not path:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(2.0)
        sock.connect(path)
        sock.settimeout(None)
        for opt in (socket.SO_SNDBUF, socket.SO_RCVBUF):  # as the widened pipes: a 1 MB read in one go
            try:
                sock.setsockopt(socket.SOL_SOCKET, opt, 1 << 20)
            except OSError:
                pass
    except OSError:
        sock.close()
        return None
    return Conn(sock.makefile("rb"), sock.makefile("wb"))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--search"]:  # a child helper running one fs_grep or fs_glob (see search.ChildSearch)
        child_main(sys.stdin.buffer, sys.stdout.buffer)
        os._exit(0)
    root = argv[0] if argv else "/workspace"
    door = _door(argv[1] if len(argv) > 1 else "")
    try:  # commands run in the workspace by default: there they start by posix_spawn (processes.spawn)
        os.chdir(root)
        spawn_cwd = os.path.realpath(root)
    except OSError:
        spawn_cwd = None
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    _widen_pipes()
    ws = Workspace(root, root)
    ws.searcher = ChildSearch([sys.executable, "-I", "-S", os.path.abspath(sys.argv[0]), "--search"])
    server = Server(ws, sys.stdin.buffer, sys.stdout.buffer)
    server.spawn_cwd = spawn_cwd
    server.serve(door)
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
