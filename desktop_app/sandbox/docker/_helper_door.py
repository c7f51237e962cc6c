"""The helper's door: a unix socket straight between the desk and the helper of a container on this machine, so
requests and answers skip dockerd and the containerd shim (an exec stream crosses both, both ways).

The desk listens and the helper connects. The socket lives in a private folder of the desk's, mounted read-only
into the container: nothing in the sandbox can make, replace, rename or remove a file there. It exists only while
one helper starts: the desk keeps the one connection whose peer is that helper's process (SO_PEERCRED against the
engine's pid for the exec), closes anything else that connects unread, then closes and removes the socket. When
the engine is not on this machine, or the helper could not connect, the exec stream carries everything, as
before (it carries the helper's stdin and stderr in any case: its life is the stream's)."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import secrets
import socket
import stat
import struct
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

CONTAINER_DIR = "/run/agent-desk/helper"
# How long the desk waits for the helper's connection once its hello said it connected: it is queued by then (the
# helper says hello after its connect returned), so only strangers ahead of it take time.
TAKE_TIMEOUT_S = 0.5
MAX_STRANGERS = 64  # connections from other processes closed before the desk stops waiting for the helper's
STALE_AFTER_S = 60.0  # a socket older than this is a crashed desk's (a helper connects within milliseconds)
_SUFFIX = ".sock"
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


def door_possible(engine: str) -> bool:
    """Whether a door can reach this engine's containers: the engine on this machine (a unix socket: a remote
    engine cannot see a folder of this machine's, nor connect a socket across) and a kernel that names a peer."""
    return engine.startswith("unix://") and sys.platform.startswith("linux") and hasattr(socket, "SO_PEERCRED")


def door_root() -> Path:
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or Path(tempfile.gettempdir()) / f"agent-desk-{os.getuid()}")
    return base / "agent-desk-helper"


@dataclass(frozen=True)
class DoorFolder:
    """One container's door folder on this machine, and the mode its socket gets (only what the container's
    user needs: 0600 when that user is the desk's, else 0666 inside a folder only searchable)."""

    path: Path
    socket_mode: int


def door_dir(container: str, uid: int) -> DoorFolder:
    """The door folder of the container named `container`, whose processes run as `uid`: made here, owned by this
    user, never a link; its parents private (0700). Its own mode is 0700 when the container's user is the desk's,
    else 0711 (searchable, not listable: the container's user gets through to the socket; no one else can reach
    the folder through its parents). OSError when a part of the path is not this user's folder."""
    root = door_root()
    base = root.parent
    leaf = root / hashlib.sha256(container.encode()).hexdigest()[:16]  # short: a socket's path has 107 bytes
    same = uid == os.getuid()
    for folder, mode in ((base, 0o700), (root, 0o700), (leaf, 0o700 if same else 0o711)):
        with contextlib.suppress(FileExistsError):
            folder.mkdir(mode=mode)
        st = folder.lstat()
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            raise OSError(f"{folder} is not a folder of this user's")
        if folder != base and stat.S_IMODE(st.st_mode) != mode:
            folder.chmod(mode)
    return DoorFolder(leaf, 0o600 if same else 0o666)


def remove_door_dir(container: str) -> None:
    """Remove a removed container's door folder (its sockets too; anything else in it: left, and the folder)."""
    leaf = door_root() / hashlib.sha256(container.encode()).hexdigest()[:16]
    with contextlib.suppress(OSError):
        for entry in os.scandir(leaf):
            if entry.name.endswith(_SUFFIX) and entry.is_socket():
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)
        leaf.rmdir()


def _sweep(folder: Path) -> None:
    """A crashed desk's sockets: gone (a handshake takes milliseconds; another desk's live one is young)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                if entry.name.endswith(_SUFFIX) and stat.S_ISSOCK(st.st_mode) and now - st.st_mtime > STALE_AFTER_S:
                    os.unlink(entry.path)


def peer_pid(conn: socket.socket) -> int:
    """The pid, in this machine's view, of the process that connected `conn` (0 when it is not visible here)."""
    pid, _uid, _gid = _CRED.unpack(conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return pid


class HelperDoor:
    """One helper start's listening socket, under a fresh name (desks sharing a container never meet)."""

    def __init__(self, folder: DoorFolder) -> None:
        _sweep(folder.path)
        name = secrets.token_hex(8) + _SUFFIX
        self.host_path = folder.path / name
        self.container_path = f"{CONTAINER_DIR}/{name}"
        self._listener: socket.socket | None = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._listener.bind(str(self.host_path))
            os.chmod(self.host_path, folder.socket_mode)
            self._listener.listen(16)
        except OSError:
            self.close()
            raise

    def take(self, pid: int, timeout: float = TAKE_TIMEOUT_S) -> socket.socket | None:
        """The connection of process `pid` (the helper, as the engine names it), or None when it does not come
        within `timeout` or too many others come first. Every other connection is closed unread. The door is
        closed after, either way."""
        listener = self._listener
        if listener is None or pid <= 0:
            self.close()
            return None
        deadline = time.monotonic() + timeout
        try:
            for _ in range(MAX_STRANGERS + 1):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                listener.settimeout(left)
                conn, _ = listener.accept()
                if peer_pid(conn) == pid:
                    conn.settimeout(None)
                    return conn
                log.warning("a process in the sandbox other than its helper connected to the helper's door")
                conn.close()
        except OSError as exc:  # the deadline (TimeoutError), or the listener failed
            log.info("the helper's door: no connection from the helper (%s)", exc)
        finally:
            self.close()
        return None

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.host_path)
