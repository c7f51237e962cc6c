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
