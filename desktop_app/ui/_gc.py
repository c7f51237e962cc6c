"""Run Python's cyclic garbage collector on the GUI thread only (as qutebrowser does).

Left automatic, the collector runs in whatever thread allocates next, a store reader or a Docker call,
and a QObject caught in a cycle is then destroyed off the GUI thread: Qt warns ("Timers cannot be
stopped from another thread") or crashes. So automatic collection is turned off and a timer collects
on the GUI thread, generation by generation, when the counts pass the usual thresholds.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer


class MainThreadGarbageCollector(QObject):
    INTERVAL_MS = 500

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._timer = QTimer(self, interval=self.INTERVAL_MS)
        self._timer.timeout.connect(self.check)
        self._was_enabled = gc.isenabled()

    def start(self) -> None:
        gc.disable()
        self._timer.start()

    def stop(self) -> None:
        self._timer.stop()
        if self._was_enabled:
            gc.enable()

    def check(self) -> int:
        """Collect the oldest generation whose count passed its threshold; returns objects found."""
        t0, t1, t2 = gc.get_threshold()
        c0, c1, c2 = gc.get_count()
        if c0 > t0:
            gen = 2 if c2 > t2 else 1 if c1 > t1 else 0
            return gc.collect(gen)
        return 0
