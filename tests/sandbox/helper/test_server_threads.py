"""The helper's server, in-process over a socket pair as the desk's door would be: a command runs on the thread
that read it, and a slow one hands the reading on, so what comes after it (a ping, its own cancel, other
commands) is read while it runs; the server's own input buffer, which knows when more is waiting. And PATH
lookups that trust only folders that cannot change."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from desktop_app.sandbox.helper import pathcache, processes
from desktop_app.sandbox.helper.server import Input, Server
from desktop_app.sandbox.helper.workspace import Workspace


class Desk:
    """The desk's end: requests written as JSON lines, answers read back by id."""

    def __init__(self, tmp_path: Path) -> None:
        ours, theirs = socket.socketpair()
        self.sock, self.answers = ours, {}
        self.file = ours.makefile("rb")
        self.server = Server(Workspace(str(tmp_path), str(tmp_path)), theirs.makefile("rb"), theirs.makefile("wb"))
        self.serving = threading.Thread(target=self.server.serve, daemon=True)
        self.serving.start()
        assert json.loads(self.file.readline())["ev"] == "hello"

    def send(self, rid: int | None, op: str, **args: object) -> None:
        req = {"id": rid, "op": op, "args": args} if op != "cancel" else {"id": rid, "op": op, **args}
        self.sock.sendall(json.dumps(req).encode() + b"\n")

    def answer(self, rid: int, within_s: float = 20.0) -> dict:
        self.sock.settimeout(within_s)
        while rid not in self.answers:
            msg = json.loads(self.file.readline())
            if "ev" not in msg:
                self.answers[msg["id"]] = msg
        return self.answers.pop(rid)

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_WR)  # the helper's stdin ends: it shuts down
        self.serving.join(10)
        self.sock.close()


def test_a_quick_command_runs_on_the_thread_that_read_it_and_a_slow_one_leaves_the_reading_to_another(
    tmp_path: Path, monkeypatch
) -> None:
    desk = Desk(tmp_path)
    read_on, run_on = {}, {}
    route, handle = desk.server._route, desk.server._handle

    def routed(conn, req):
        read_on[req.get("id")] = threading.get_ident()
        return route(conn, req)

    def handled(conn, req, *rest):
        run_on[req.get("id")] = threading.get_ident()
        return handle(conn, req, *rest)

    monkeypatch.setattr(desk.server, "_route", routed)
    monkeypatch.setattr(desk.server, "_handle", handled)
    try:
        threads = threading.active_count()
        for rid in range(1, 41):
            desk.send(rid, "exec", command=["true"])
            assert desk.answer(rid)["result"]["exit_code"] == 0
        assert all(run_on[rid] == read_on[rid] for rid in range(1, 41))  # no hand-over before the spawn
        # A thread kept in reserve, and now and then another (a `true` that took over 5 ms on a busy machine
        # hands on, and its thread joins the pool after its answer): the pool's bound, not one per command.
        assert threading.active_count() <= threads + Server.EXEC_IDLE_MAX

        desk.send(100, "exec", command="sleep 30; echo never")
        desk.send(101, "ping")
        started = time.monotonic()
        assert desk.answer(101)["ok"]  # read and answered while the command runs
        desk.send(102, "exec", command=["echo", "beside"])
        assert desk.answer(102)["result"]["stdout"] == "beside\n"  # another command runs beside it
        desk.send(None, "cancel", target=100)
        slow = desk.answer(100)["result"]
        assert slow["cancelled"] and slow["stdout"] == ""
        assert time.monotonic() - started < 10  # cancelled: not the 30 s
    finally:
        desk.close()
    assert not desk.serving.is_alive()


def test_commands_at_once_each_get_their_answer_and_the_reading_goes_on(tmp_path: Path) -> None:
    desk = Desk(tmp_path)
    try:
        for rid in range(1, 9):
            desk.send(rid, "exec", command=f"sleep 0.3; echo {rid}")
        desk.send(50, "stat", path=".")
        assert desk.answer(50)["result"]["type"] == "dir"
        for rid in range(1, 9):
            assert desk.answer(rid)["result"]["stdout"] == f"{rid}\n"
        desk.send(60, "exec", command=["true"])
        assert desk.answer(60)["result"]["exit_code"] == 0
    finally:
        desk.close()


def test_a_burst_of_commands_is_handed_on_at_once_not_one_by_one(tmp_path: Path, monkeypatch) -> None:
    """Commands that arrive together (one write: the model's parallel calls) each start at once: the reading is
    handed on as soon as another request is waiting, not when the one before has run for HAND_OFF_S (made
    longer than the commands here, so that only the burst's own hand-over can run them side by side)."""
    monkeypatch.setattr(processes, "HAND_OFF_S", 30.0)
    desk = Desk(tmp_path)
    try:
        burst = b"".join(
            json.dumps({"id": rid, "op": "exec", "args": {"command": "sleep 1"}}).encode() + b"\n"
            for rid in range(1, 5)
        )
        started = time.monotonic()
        desk.sock.sendall(burst)
        for rid in range(1, 5):
            assert desk.answer(rid)["result"]["exit_code"] == 0
        assert time.monotonic() - started < 3.0  # side by side: one after another takes 4 s
    finally:
        desk.close()


def test_a_cancel_in_the_same_write_as_its_command_is_not_lost(tmp_path: Path, monkeypatch) -> None:
    """The reading goes on before the command runs when more is waiting; the command is registered before that,
    so its cancel, read by the next thread, finds it (the wait made 30 s: only that hand-over reads it). The
    command's making is slowed (50 ms, the GIL let go) so that a hand-over before its registration loses the
    cancel every time, not once in a while."""
    monkeypatch.setattr(processes, "HAND_OFF_S", 30.0)
    argv = processes._argv
    monkeypatch.setattr(processes, "_argv", lambda *a: (time.sleep(0.05), argv(*a))[1])
    desk = Desk(tmp_path)
    try:
        for rid in range(1, 6):
            both = json.dumps({"id": rid, "op": "exec", "args": {"command": "sleep 30", "grace": 0.2}}) + "\n"
            both += json.dumps({"id": None, "op": "cancel", "target": rid}) + "\n"
            desk.sock.sendall(both.encode())
            assert desk.answer(rid, within_s=10)["result"]["cancelled"]
    finally:
        desk.close()


def test_a_request_that_breaks_the_reading_thread_ends_the_helper(tmp_path: Path, monkeypatch) -> None:
    """Whatever fails in the thread that reads stdin ends the helper (as it did when the main thread read it),
    rather than leave it waiting for a stdin nobody reads."""
    desk = Desk(tmp_path)

    def broken(conn, req):
        raise RuntimeError("a bug in routing")

    monkeypatch.setattr(desk.server, "_route", broken)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the thread's traceback is expected
    desk.send(1, "ping")
    desk.serving.join(10)
    assert not desk.serving.is_alive()
    desk.sock.close()


def test_the_input_reads_lines_and_frames_across_reads_and_knows_when_more_is_waiting() -> None:
    r, w = os.pipe()
    inp = Input(os.fdopen(r, "rb", buffering=0))
    try:
        assert not inp.waiting()
        os.write(w, b'{"id": 1, "op"')
        writer = threading.Thread(target=lambda: (time.sleep(0.2), os.write(w, b': "ping"}\nM3\nabc')))
        writer.start()
        assert inp.readline() == b'{"id": 1, "op": "ping"}\n'  # waited for the rest of the line
        writer.join()
        assert inp.waiting()  # read, not yet parsed
        assert inp.readline() == b"M3\n" and inp.read(3) == b"abc"
        big = os.urandom(3 * Input.CHUNK + 5)
        sender = threading.Thread(target=lambda: os.write(w, b"x" + big))
        sender.start()
        assert inp.read(1) == b"x"
        frame = inp.read(len(big))  # more than a read's most: straight into a buffer of its own
        sender.join()
        assert frame == big and isinstance(frame, (bytes, bytearray))
        os.write(w, b"tail")
        os.close(w)
        w = -1
        assert inp.read(10) == b"tail"  # the end came first: what there was
        assert inp.readline() == b"" and inp.read(Input.CHUNK * 2) == b""
    finally:
        if w >= 0:
            os.close(w)


def test_path_lookups_check_again_every_folder_that_can_change(tmp_path: Path) -> None:
    """On a writable folder (and under a symlink) a cached lookup is checked each time: a program put in an
    earlier folder shadows it, one removed is gone. Nothing on this machine's own writable root is fixed."""
    first, second, link = tmp_path / "first", tmp_path / "second", tmp_path / "link"
    first.mkdir()
    second.mkdir()
    link.symlink_to(second)
    tool = second / "tool"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    old = time.time() - 10  # settled: a folder changed within the last second is not trusted
    for d in (first, second):
        os.utime(d, (old, old))
    cache = pathcache.PathCache()
    path = f"{first}:{link}"
    assert cache.find("tool", path) == f"{link}/tool"
    assert cache._can_change(str(first)) and cache._can_change(str(link)) and cache._can_change(str(second))
    assert [d for d, _ in cache.entries[("tool", path)][1]] == [str(first), str(link)]
    shadow = first / "tool"
    shadow.write_text("#!/bin/sh\n")
    shadow.chmod(0o755)
    assert cache.find("tool", path) == str(shadow)
    shadow.unlink()
    tool.unlink()
    assert cache.find("tool", path) is None


@pytest.mark.parametrize(("folder", "read_only", "fixed"), [
    ("/usr/bin", {"/", "/usr", "/usr/bin"}, True),
    ("/usr/bin", {"/usr", "/usr/bin"}, False),  # / can change: /usr could be renamed away
    ("/usr/local/bin", {"/", "/usr"}, False),  # a writable mount of its own
    ("/usr/bin/", {"/", "/usr", "/usr/bin"}, False),  # not its own real path: checked again
])  # fmt: skip
def test_a_folder_is_fixed_only_when_it_and_every_folder_above_are_read_only(
    monkeypatch, folder: str, read_only: set[str], fixed: bool
) -> None:
    monkeypatch.setattr(pathcache, "_read_only", lambda p: p in read_only)
    assert pathcache.PathCache()._can_change(folder) is not fixed
