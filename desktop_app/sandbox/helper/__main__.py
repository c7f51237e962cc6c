"""The helper's entry point: `python3 -I -S helper.pyz ROOT` in the container (ROOT is the workspace)."""

import fcntl
import os
import signal
import sys
import time

from .processes import KILL_GRACE_S
from .search import ChildSearch, child_main
from .server import Server
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


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--search"]:  # a child helper running one fs_grep or fs_glob (see search.ChildSearch)
        child_main(sys.stdin.buffer, sys.stdout.buffer)
        os._exit(0)
    root = argv[0] if argv else "/workspace"
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
