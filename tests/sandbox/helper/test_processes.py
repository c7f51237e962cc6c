"""The helper's processes, in-process: a background process's logs after a fast exit."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from desktop_app.sandbox.helper.processes import BackgroundProcess
from tests.kit import wait_until


def test_background_logs_of_an_exited_process_wait_for_its_last_output(tmp_path: Path) -> None:
    """A fast exit must not be reported before the reader has drained the pipe (the race behind
    a lost 'finishing' line): the reader is slowed on purpose, and the output must still be there."""

    class SlowReader(BackgroundProcess):
        def _read(self) -> None:
            time.sleep(0.1)
            super()._read()

    bp = SlowReader("bg-1", "echo finishing; exit 4", str(tmp_path))
    bp.proc.wait()
    logs = bp.logs()
    assert logs["running"] is False and logs["exit_code"] == 4
    assert "finishing" in logs["output"]
    bp.kill()
    assert not any(t.name == "bg-bg-1" for t in threading.enumerate())


def test_a_process_caught_mid_exec_is_named_by_a_later_kill_round(tmp_path: Path) -> None:
    """A process read in the middle of an exec has no command line for a moment: the sweep's list must not
    keep that empty (or bracketed) name when a later kill round sees the real one."""
    import subprocess

    from desktop_app.sandbox.helper import proctree

    tracker = proctree.Tracker(container=False)
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        # Popen returns once the exec began: the kernel sets the new name before the new command line, so the
        # child can itself be caught mid-exec here. Wait for the line before the first look.
        assert wait_until(lambda: proctree.cmdline_of(proc.pid) == "sleep 30", within_s=10)
        tracker.recording = {proc.pid: {"pid": proc.pid, "command": "", "started_by": ""}}
        tracker._note(tracker.describe([proc.pid]))
        assert tracker.recording[proc.pid]["command"] == "sleep 30"
        tracker.recording[proc.pid]["command"] = "[sleep]"
        tracker._note([{"pid": proc.pid, "command": "sleep 30", "started_by": ""}])
        assert tracker.recording[proc.pid]["command"] == "sleep 30"
        tracker._note([{"pid": proc.pid, "command": "[sh]", "started_by": ""}])  # a named one stays
        assert tracker.recording[proc.pid]["command"] == "sleep 30"
    finally:
        proc.kill()
        proc.wait()
    assert proctree.cmdline_of(proc.pid) == ""  # gone: nothing to name


def test_a_command_skips_the_look_for_strays_only_when_no_process_started_since_the_last_look() -> None:
    """Tracker.alone_since: the namespace's newest pid must be the command's own, and the one right after
    the last look's; anything else (a child, a thread, another exec, a background process's fork) looks."""
    from desktop_app.sandbox.helper import proctree

    tracker = proctree.Tracker(container=False)
    newest = [0]
    tracker.last_pid = lambda: newest[0]  # the kernel's ns_last_pid, as the container's helper reads it
    newest[0] = 41
    assert not tracker.alone_since(41)  # no look yet: nothing is known
    tracker.seen = 40
    assert tracker.alone_since(41) and tracker.seen == 41  # the next command may skip again
    newest[0] = 43
    assert not tracker.alone_since(42)  # 43 came after it: a child (or anything else) started
    tracker.seen = 41
    assert not tracker.alone_since(43)  # 42 came between the last look and it
    newest[0] = None
    tracker.seen = 42
    assert not tracker.alone_since(43)  # unreadable: always look


def test_marshal_requests_are_served_and_a_broken_one_ends_the_stream(tmp_path: Path) -> None:
    """The desk sends `M<size>` and marshal bytes when the hello offers it; the answer is JSON as ever. A size
    that is no size cannot be followed: the helper stops reading rather than guess."""
    import io
    import json
    import marshal

    from desktop_app.sandbox.helper.server import Server
    from desktop_app.sandbox.helper.workspace import Workspace

    body = marshal.dumps({"id": 7, "op": "stat", "args": {"path": "."}}, 4)
    stream = b"M%d\n" % len(body) + body + b'{"id": 8, "op": "ping", "args": {}}\nMnope\n' + b"M5\n" + body[:5]
    out = io.BytesIO()
    server = Server(Workspace(str(tmp_path), str(tmp_path)), io.BytesIO(stream), out)
    server.serve()
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert lines[0]["ev"] == "hello" and "marshal" in lines[0]["requests"]
    assert wait_until(lambda: len(out.getvalue().splitlines()) == 3, within_s=10)
    answers = {m["id"]: m for m in map(json.loads, out.getvalue().splitlines()[1:])}
    assert answers[7]["ok"] and answers[7]["result"]["type"] == "dir"
    assert answers[8]["ok"] and "version" in answers[8]["result"]


def test_a_child_forked_as_its_parent_died_during_a_look_is_killed_by_the_next_look() -> None:
    """A kill round's look lists /proc, then reads each process: a daemon's shell SIGKILLed a moment before
    can fork after the listing and die before its own read, so that look finds nothing, and its child (still
    carrying the shell's command line until it execs) was in no listing (a CI failure: `ps` showed it after
    the command). The sweep ends only on a second look that finds nothing; a look that finds nothing first
    kills nothing and looks no more."""
    from desktop_app.sandbox.helper import proctree

    tracker = proctree.Tracker(container=False)
    looks = [[101], [], [102], [], []]  # the shell; nothing (it died, its child unlisted); the child; nothing
    killed: list[int] = []
    tracker.targets = lambda cookie=None, everything=False: looks.pop(0)
    tracker.signal = lambda pids, sig: killed.extend(pids)
    tracker.describe = lambda pids: [{"pid": p, "command": "sh", "started_by": ""} for p in pids]
    tracker.kill("run")
    assert killed == [101, 102]
    assert looks == []  # after the child's kill: a look that found nothing and one more to confirm it, no more
    looks[:] = [[], [203]]
    tracker.kill("run")
    assert looks == [[203]] and killed == [101, 102]  # nothing found at first: nothing killed, one look
