"""Attacks on the cli part: the single-instance socket (a squatted or shared folder, a stranger's or a
malformed message), the log file (a link planted in its place, a key in a traceback), and the doctor's
endpoint check (a redirect that would carry the key elsewhere)."""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from desktop_app.core import ConfigError
from desktop_app.doctor import _endpoint_check
from desktop_app.logs import SECRETS, log_file, remember_secret, setup_logging
from desktop_app.ui import InstanceServer
from desktop_app.ui._instance import MAX_MESSAGE, instance_socket, send_to_running


@pytest.fixture
def runtime_dir(tmp_path: Path, monkeypatch) -> Path:
    d = tmp_path / "run"
    d.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(d))
    monkeypatch.setenv("AGENT_DESK_DATA_DIR", str(tmp_path / "data"))
    return d


@pytest.mark.parametrize("plant", ["symlink", "open-mode", "file"])
def test_a_planted_socket_folder_is_refused(runtime_dir: Path, tmp_path: Path, plant: str) -> None:
    target = runtime_dir / "agent-desk"
    if plant == "symlink":  # a link to a folder another user controls
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir(mode=0o700)
        target.symlink_to(elsewhere)
    elif plant == "open-mode":
        target.mkdir()
        target.chmod(0o777)
    else:
        target.write_text("")
    with pytest.raises(ConfigError):
        instance_socket()


def test_no_socket_or_a_foreign_file_is_no_running_window(runtime_dir: Path) -> None:
    path = instance_socket()
    assert send_to_running({"open": "/"}, path) is None
    path.write_text("not a socket")  # a regular file where the socket should be: never written to
    assert send_to_running({"open": "/"}, path) is None
    assert path.read_text() == "not a socket"


def _raw(path: Path, payload: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(10)
        s.connect(str(path))
        try:
            s.sendall(payload)
            out = b""
            while chunk := s.recv(4096):
                out += chunk
        except OSError:
            return b""
    return out


def test_malformed_messages_are_refused_and_the_server_keeps_serving(qtbot, runtime_dir: Path,
                                                                      tmp_path: Path) -> None:
    seen: list[dict[str, str]] = []

    def on_message(msg: dict[str, str]) -> str:
        seen.append(msg)
        folder = msg.get("open", "")
        return "ok" if os.path.isabs(folder) and os.path.isdir(folder) else "error: not a folder"

    server = InstanceServer(on_message)
    assert server.listen()

    def send(fn, *args):  # the client blocks: on a thread, while the test's Qt loop serves
        result: list = []
        t = threading.Thread(target=lambda: result.append(fn(*args)), daemon=True)
        t.start()
        qtbot.waitUntil(lambda: not t.is_alive(), timeout=15000)
        return result[0]

    try:
        assert server.path.stat().st_mode & 0o077 == 0, "only this user may connect"
        for payload in (b"not json\n", b'["a list"]\n', b'{"open": 5}\n', b"\xff\xfe\n"):
            assert send(_raw, server.path, payload).startswith(b"error: a malformed message"), payload
        assert send(_raw, server.path, b"x" * (MAX_MESSAGE * 4)) == b"", "an oversized message is cut off"
        assert send(_raw, server.path, b'{"open": "relative/dir"}\n').startswith(b"error")
        assert seen == [{"open": "relative/dir"}], "only well-formed messages reach the window"
        assert send(send_to_running, {"open": str(tmp_path)}, server.path) == "ok"
    finally:
        server.close()


def test_a_link_planted_as_the_log_file_is_not_followed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENT_DESK_LOG_DIR", str(tmp_path / "log"))
    (tmp_path / "log").mkdir(mode=0o700)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    log_file().symlink_to(victim)
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        assert setup_logging(False) is None  # no file rather than a write through the link
        logging.getLogger("desktop_app.test").warning("a line")
        assert victim.read_text() == "keep me\n"
    finally:
        for h in [h for h in root.handlers if h not in before]:
            root.removeHandler(h)
            h.close()


def test_a_key_in_a_traceback_is_redacted_in_the_file(tmp_path: Path, desk_env: Path, monkeypatch) -> None:
    monkeypatch.setenv("AGENT_DESK_LOG_DIR", str(tmp_path / "log"))
    key = "gw-token-Q9z8Y7x6W5v4"
    root = logging.getLogger()
    before = list(root.handlers)
    try:
        path = setup_logging(False)
        remember_secret(key)
        try:
            raise RuntimeError(f"upstream said: bad key {key} / sk-ant-api03-{'y' * 40}")
        except RuntimeError:
            logging.getLogger("desktop_app.test").exception("failed with %s", key)
        for h in root.handlers:
            h.flush()
        text = path.read_text()
        assert "RuntimeError" in text and "[REDACTED]" in text
        assert key not in text and "sk-ant-api03-yyyy" not in text
    finally:
        for h in [h for h in root.handlers if h not in before]:
            root.removeHandler(h)
            h.close()
        SECRETS.redactor = SECRETS.redactor.__class__()


def test_the_endpoint_check_never_follows_a_redirect_with_the_key(monkeypatch) -> None:
    received: list[str | None] = []

    class Catcher(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            received.append(self.headers.get("x-api-key"))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a) -> None:
            return

    class Redirector(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(307)
            self.send_header("Location", f"http://127.0.0.1:{catcher.server_port}/steal")
            self.end_headers()

        def log_message(self, *a) -> None:
            return

    catcher = ThreadingHTTPServer(("127.0.0.1", 0), Catcher)
    redirector = ThreadingHTTPServer(("127.0.0.1", 0), Redirector)
    for srv in (catcher, redirector):
        threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        from desktop_app.config import Settings

        monkeypatch.setenv("ANTHROPIC_BASE_URL", f"http://127.0.0.1:{redirector.server_port}")
        check = _endpoint_check(Settings(), "sk-ant-secret-redirect-1234")
        assert received == [], "the key never reached the redirect's target"
        assert "307" in check.detail and "sk-ant-secret" not in json.dumps(check.detail)
    finally:
        catcher.shutdown()
        redirector.shutdown()
