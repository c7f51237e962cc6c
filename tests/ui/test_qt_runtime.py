"""Guards against a broken Qt binding: PySide6 6.12.0 drops a reference to True on every signal emit
under Python 3.11, and the app aborts ("bool_dealloc") after a few hundred events."""

from __future__ import annotations

import sys

from PySide6.QtCore import QObject, Signal


class _Emitter(QObject):
    fired = Signal(object)


def test_signal_emit_keeps_the_refcount_of_true():
    e = _Emitter()
    e.fired.connect(lambda _x: None)
    before = sys.getrefcount(True)
    for _ in range(200):
        e.fired.emit(1)
    leaked = before - sys.getrefcount(True)
    assert leaked < 50, (
        f"each signal emit dropped a reference to True ({leaked} in 200 emits): this PySide6 build "
        "crashes the app; use PySide6-Essentials < 6.12"
    )


def test_garbage_is_collected_on_the_gui_thread_by_the_timer(qtbot):
    import gc

    from desktop_app.ui._gc import MainThreadGarbageCollector

    collector = MainThreadGarbageCollector()
    collector.start()
    try:
        assert not gc.isenabled()  # no collection in whatever thread allocates next
        gc.collect()

        class Node:
            def __init__(self) -> None:
                self.me = self

        for _ in range(gc.get_threshold()[0] + 10):
            Node()
        assert gc.get_count()[0] > gc.get_threshold()[0]
        assert collector.check() > 0
    finally:
        collector.stop()
    assert gc.isenabled()
