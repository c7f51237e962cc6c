"""The proxy's socket folders are cleaned: a closed proxy takes its socket and folder with it (unless its
container keeps running: it holds the folder mounted), and the first proxy of a process sweeps the folders no
desk serves any more, never a live one, a young one, a link or one with other files in it."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from desktop_app.core import NetworkAllowlist
from desktop_app.sandbox.docker import _egress
from desktop_app.sandbox.docker._egress import SOCKET_NAME, SandboxEgress, egress_root, sweep_stale


@pytest.fixture(autouse=True)
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700)
    monkeypatch.setattr(_egress, "_swept", False)
    return tmp_path / "run"


def _old(path: Path) -> None:
    os.utime(path, (1_000_000, 1_000_000))


async def test_a_closed_proxy_takes_its_socket_and_folder() -> None:
    for keep in (False, True):
        egress = SandboxEgress(NetworkAllowlist.parse(["pypi.org"]), f"proj-{keep}")
        await egress.start()
        assert egress.folder is not None and (egress.folder / SOCKET_NAME).is_socket()
        await egress.close(keep_folder=keep)
        assert not (egress.folder / SOCKET_NAME).exists() and egress.folder.exists() is keep


async def test_the_first_start_sweeps_what_no_desk_serves(tmp_path: Path) -> None:
    root = egress_root()
    root.mkdir(parents=True, mode=0o700)
    dead = root / "dead"
    dead.mkdir()
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(dead / SOCKET_NAME))
    listener.close()  # a socket file nobody listens on: an earlier desk's
    empty, young, busy, live = root / "empty", root / "young", root / "busy", root / "live"
    for folder in (empty, young, busy, live):
        folder.mkdir()
    (busy / "notes.txt").write_text("not the desk's")
    serving = socket.socket(socket.AF_UNIX)
    serving.bind(str(live / SOCKET_NAME))
    serving.listen(1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "link").symlink_to(elsewhere)
    for folder in (dead, empty, busy, live):
        _old(folder)
    try:
        egress = SandboxEgress(NetworkAllowlist.parse(["pypi.org"]), "mine")
        await egress.start()
        assert sorted(p.name for p in root.iterdir()) == ["busy", "link", "live", "mine", "young"]
        assert elsewhere.exists() and (live / SOCKET_NAME).is_socket()
        assert sweep_stale("mine") == []  # the second look finds nothing more
        await egress.close()
    finally:
        serving.close()
