"""The helper's processes, in-process: a background process's logs after a fast exit."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from desktop_app.sandbox.helper.processes import BackgroundProcess


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
