"""SQLite's WAL checkpoints beside the writer instead of inside its commits.

With WAL, SQLite moves the log's pages into the database file (and syncs it) from within the commit that
takes the log past 1,000 pages: one commit in a few hundred then holds the writer thread, and every call
waiting on it, for the copy and the fsync. Here a thread of its own does that work with a connection of its
own, `PRAGMA wal_checkpoint(PASSIVE)` (it never blocks a writer or a reader), at most every `INTERVAL_S`
while commits come and not at all while none do; the writer only nudges it after each commit. The writer's
own checkpoint stays armed at `WRITER_AUTOCHECKPOINT_PAGES`, a floor under the log's growth should this
thread fall behind or stop. A commit is in the log when it returns, as before (a killed process loses nothing);
with `synchronous=NORMAL` the log is synced at checkpoints, so against a power cut a commit is now on disk
within about `INTERVAL_S` while commits come, where the writer's own waited for the next 1,000 pages."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
import time
from pathlib import Path
from urllib.parse import quote

log = logging.getLogger(__name__)

INTERVAL_S = 0.5
# The writer connection's own wal_autocheckpoint (SQLite's default is 1,000 pages): reached only when this
# thread falls behind or is gone, and then the commit does it as before.
WRITER_AUTOCHECKPOINT_PAGES = 10_000


class Checkpointer(threading.Thread):
    """Checkpoints the WAL of the SQLite file at `path`; `nudge()` after a commit, `close()` once done."""

    def __init__(self, path: Path, busy_timeout_ms: int) -> None:
        super().__init__(name="agent-desk-store-checkpoint", daemon=True)
        self.path = path
        self.busy_timeout_ms = busy_timeout_ms
        self._wake = threading.Event()
        self._closing = threading.Event()
        self.runs = 0  # checkpoints made
        self.last: tuple[int, int, int] | None = None  # (busy, frames in the log, frames checkpointed)
        self.failed = ""  # the last checkpoint's error, if it failed

    def nudge(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._closing.set()
        self._wake.set()
        if self.is_alive():
            self.join()

    def run(self) -> None:
        try:
            con = sqlite3.connect(f"file:{quote(str(self.path))}", uri=True, isolation_level=None,
                                  timeout=self.busy_timeout_ms / 1000.0, check_same_thread=False)
        except sqlite3.Error as exc:
            log.warning("the audit database's checkpoints stay with its writer: %s", exc)
            return
        try:
            last = 0.0
            while True:
                self._wake.wait()
                # cleared before `_closing` is looked at: a close (which sets `_closing`, then `_wake`) at any
                # moment after this is seen below or wakes the next round. Cleared after the look, a close
                # landing between the two was lost and the thread slept on, its join with it (a hang in CI).
                self._wake.clear()
                wait = last + INTERVAL_S - time.monotonic()
                # the commits of the next moment ride along; a close ends the wait (the last connection to
                # close does the final checkpoint itself)
                if self._closing.wait(wait) if wait > 0 else self._closing.is_set():
                    return
                self._checkpoint(con)
                last = time.monotonic()
        finally:
            with contextlib.suppress(sqlite3.Error):
                con.close()

    def _checkpoint(self, con: sqlite3.Connection) -> None:
        try:
            row = con.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()
        except sqlite3.Error as exc:  # the writer's own checkpoint still bounds the log
            if str(exc) != self.failed:
                log.warning("checkpoint of the audit database %s failed: %s", self.path, exc)
            self.failed = str(exc)
            return
        self.failed = ""
        self.runs += 1
        self.last = (int(row[0]), int(row[1]), int(row[2])) if row else None
