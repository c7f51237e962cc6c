"""`agent-desk PATH` and the single instance, with two real processes offscreen: the first window opens the
folder's project; a second `agent-desk PATH` hands its folder over and exits 0 without a window."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import wait_until
from tests.kit.cli import cli_environ


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    return {**cli_environ(tmp_path), "XDG_RUNTIME_DIR": str(runtime), "DOCKER_HOST": "unix:///nonexistent.sock"}


def projects(data: Path) -> set[str]:
    db = data / "agent-desk.db"
    if not db.exists():
        return set()
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as conn:
            return {r[0] for r in conn.execute("select path from projects")}
    except sqlite3.OperationalError:  # not migrated yet
        return set()


def in_a_minute(cond) -> bool:
    """Poll every 0.2 s for up to 60 s: the window starts in seconds, slower on a loaded machine."""
    return wait_until(cond, 60, every_s=0.2)


@pytest.fixture
def first_window(env, tmp_path: Path):
    a = tmp_path / "alpha"
    a.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "desktop_app.cli", str(a)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    sockets = Path(env["XDG_RUNTIME_DIR"]) / "agent-desk"
    try:
        assert in_a_minute(lambda: any(p.is_socket() for p in sockets.glob("instance-*"))), "the first window listens"
        assert in_a_minute(lambda: str(a.resolve()) in projects(tmp_path / "data")), "PATH became a project"
        yield proc, sockets
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_second_agent_desk_path_hands_the_folder_to_the_running_window(env, tmp_path: Path,
                                                                         first_window) -> None:
    proc, sockets = first_window
    st = sockets.stat()
    assert st.st_mode & 0o077 == 0, "the socket's folder is private"
    b = tmp_path / "beta"
    b.mkdir()
    second = subprocess.run([sys.executable, "-m", "desktop_app.cli", str(b)], env=env, capture_output=True,
                            text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert "the running window took it" in second.stderr
    assert in_a_minute(lambda: str(b.resolve()) in projects(tmp_path / "data")), "the first window opened beta"
    assert proc.poll() is None, "the first window still runs"
    again = subprocess.run([sys.executable, "-m", "desktop_app.cli"], env=env, capture_output=True, text=True,
                           timeout=60)
    assert again.returncode == 0, "without PATH the running window is raised, no second one opens"


def test_a_missing_folder_is_refused_before_any_window(env, tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "desktop_app.cli", str(tmp_path / "nope")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "is not a folder" in out.stderr and "Traceback" not in out.stderr
