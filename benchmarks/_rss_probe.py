"""The window's resident memory at scale, measured in a process of its own (bench_ui's app_rss_mb):
`python -m benchmarks._rss_probe DB SESSION PAGES` opens the real window and controller on DB, shows
SESSION's 10,000 calls in the timeline (full records with their trails, as the controller loads them), opens
the history over every record and pages PAGES pages down it, then prints `rss MB` lines: after the session,
after each hundred pages, and at the end. The conversation view is left out: it builds one rich-text table
per tool card, and 10,000 of them take minutes (not this part's room; said in the report)."""

from __future__ import annotations

import asyncio
import os
import sys
import time


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


async def _probe(db: str, session_id: str, pages: int) -> None:
    from desktop_app.config import Settings
    from desktop_app.core import EventBus
    from desktop_app.runtime import Desk
    from desktop_app.store import SqlStore
    from desktop_app.ui import AppController, MainWindow

    store = await SqlStore.open(db)
    bus = await EventBus.open(store)
    settings = Settings()
    window = MainWindow()
    window.resize(1440, 880)
    window.show()
    factory = Desk(settings=settings, store=store, bus=bus)
    controller = AppController(window, factory)
    try:
        controller.current_session = session_id
        records = await store.session_records(session_id)
        records.sort(key=lambda r: (r.created_at, r.batch_index))
        window.timeline_model.add_records(records)
        del records
        window.timeline.view.scrollToBottom()
        await asyncio.sleep(0.2)  # the timeline lays out
        print(f"calls {window.timeline_model.rowCount()}", flush=True)
        print(f"rss_session {rss_mb():.1f}", flush=True)
        history = controller.open_history()
        await controller.history_loading
        await _page(history, pages)
        print(f"history {history.model.total} rows {history.model.rowCount()} held {history.model.rows_held()}",
              flush=True)
        print(f"rss {rss_mb():.1f}", flush=True)
    finally:
        await controller.close()
        await factory.close()
        await store.close()


async def _page(history, pages: int) -> None:
    """Scroll the history's view to its end `pages` times, as a person dragging its scroll bar down."""
    from PySide6.QtWidgets import QApplication

    model = history.model
    t = time.perf_counter()
    for n in range(1, pages + 1):
        target = min(model.total, model.rowCount() + model.page)
        history.view.scrollToBottom()
        while model.rowCount() < target:
            if model.canFetchMore():
                model.fetchMore()
            await asyncio.sleep(0.001)
        QApplication.processEvents()
        if n % 100 == 0:
            print(f"rss_after_{n}_pages {rss_mb():.1f} ({time.perf_counter() - t:.1f} s)", flush=True)


def main(argv: list[str]) -> int:
    import qasync
    from PySide6.QtWidgets import QApplication

    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    db, session_id, pages = argv[0], argv[1], int(argv[2])
    app = QApplication(["agent-desk-rss"])
    app.setQuitOnLastWindowClosed(False)
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    with loop:
        loop.run_until_complete(_probe(db, session_id, pages))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
