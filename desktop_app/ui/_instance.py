"""One window per user and database: the first `agent-desk` listens on a local socket in a private (0700)
folder; a later `agent-desk PATH` hands it the folder and exits instead of opening a second window."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import socket
import stat
import struct
import tempfile
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer
from PySide6.QtNetwork import QLocalServer, QLocalSocket

from ..config import data_dir
from ..core import ConfigError

log = logging.getLogger(__name__)

MAX_MESSAGE = 8192  # a path and a little JSON; more is refused, not buffered
READ_TIMEOUT_MS = 3000
REPLY_TIMEOUT_S = 10.0


def instance_socket() -> Path:
    """The socket's path: in $XDG_RUNTIME_DIR/agent-desk (else /tmp/agent-desk-UID), a folder only this user
    may enter, named after the data folder (two databases, two windows)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    base = Path(runtime) / "agent-desk" if runtime else Path(tempfile.gettempdir()) / f"agent-desk-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        base.mkdir(mode=0o700, parents=False)
    st = os.lstat(base)
    # another user could have made /tmp/agent-desk-UID first, or a link to elsewhere: refused, not used
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise ConfigError(f"{base} is not a private folder of yours (a link, another owner, or open to others).",
                          hint=f"remove {base}, or set XDG_RUNTIME_DIR to a folder only you may enter")
    key = hashlib.sha256(os.fsencode(os.path.realpath(data_dir()))).hexdigest()[:16]
    return base / f"instance-{key}"


def send_to_running(message: dict[str, str], path: Path | None = None) -> str | None:
    """Hand `message` to the running instance: its answer ("ok" or an error), or None when none runs."""
    path = path or instance_socket()
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        return None
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(REPLY_TIMEOUT_S)
        try:
            s.connect(str(path))
        except OSError:  # a socket left by a crash: nobody listens
            return None
        if _peer_uid(s.fileno()) not in (None, os.getuid()):
            return None
        s.sendall(json.dumps(message).encode() + b"\n")
        reply = b""
        with contextlib.suppress(TimeoutError, OSError):
            while not reply.endswith(b"\n") and len(reply) < MAX_MESSAGE:
                chunk = s.recv(1024)
                if not chunk:
                    break
                reply += chunk
    return reply.decode("utf-8", "replace").strip() or "error: the running window did not answer"


def _peer_uid(fd: int) -> int | None:
    """The uid of the process at the other end of a Unix socket (Linux), None where it cannot be read."""
    if not hasattr(socket, "SO_PEERCRED"):
        return None
    try:
        with socket.socket(fileno=os.dup(fd)) as s:
            _pid, uid, _gid = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                               struct.calcsize("3i")))
            return uid
    except OSError:
        return None


class InstanceServer(QObject):
    """Listens for later `agent-desk` processes of this user; each message goes to `on_message`, whose
    answer ("ok" or "error: …") is sent back. A client of another user, or one that sends too much or too
    slowly, is dropped."""

    def __init__(self, on_message: Callable[[dict[str, str]], str], path: Path | None = None, parent=None) -> None:
        super().__init__(parent)
        self.path = path or instance_socket()
        self.on_message = on_message
        self.server = QLocalServer(self)
        self.server.setSocketOptions(QLocalServer.SocketOption.UserAccessOption)
        self.server.newConnection.connect(self._accept)

    def listen(self) -> bool:
        """Listen; a socket left by a crashed instance is removed first (a live one answered before)."""
        if self.server.listen(str(self.path)):
            return True
        if send_to_running({"ping": "1"}, self.path) is None and self.path.is_socket():
            self.path.unlink(missing_ok=True)
            if self.server.listen(str(self.path)):
                return True
        log.warning("another window listens at %s; this one takes no folders", self.path)
        return False

    def close(self) -> None:
        self.server.close()

    def _accept(self) -> None:
        while (conn := self.server.nextPendingConnection()) is not None:
            if _peer_uid(int(conn.socketDescriptor())) not in (None, os.getuid()):
                conn.abort()
                continue
            buf = bytearray()
            timer = QTimer(conn)
            timer.setSingleShot(True)
            timer.timeout.connect(lambda c=conn: c.abort())
            timer.start(READ_TIMEOUT_MS)
            conn.readyRead.connect(lambda c=conn, b=buf: self._read(c, b))
            conn.disconnected.connect(conn.deleteLater)

    def _read(self, conn: QLocalSocket, buf: bytearray) -> None:
        buf += bytes(conn.readAll().data())
        if len(buf) > MAX_MESSAGE:
            conn.abort()
            return
        if not buf.endswith(b"\n"):
            return
        try:
            message = json.loads(bytes(buf))
            if not isinstance(message, dict) or not all(isinstance(v, str) for v in message.values()):
                raise ValueError("not an object of strings")
            answer = self.on_message(message)
        except (ValueError, UnicodeDecodeError) as e:
            answer = f"error: a malformed message ({type(e).__name__})"
        conn.write(answer.encode("utf-8", "replace")[:MAX_MESSAGE - 1] + b"\n")
        conn.flush()
        conn.disconnectFromServer()
