"""Desktop window benchmarks: start-up, event-loop lag under a fast text stream, a 100k-row timeline,
and opening the audit history over 1,000,000 records. Prints `bench NAME VALUE UNIT` lines."""

from __future__ import annotations

import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

ROOT = Path(__file__).resolve().parent.parent
CHUNKS_PER_S = 5_000
STREAM_S = 3.0


def bench_startup(runs: int = 3) -> float:
    """Seconds from process start to the main window's first show (median of `runs`)."""
    samples = []
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    for _ in range(runs):
        t0 = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-m", "desktop_app.app", "--exit-on-show"], cwd=ROOT, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("shown"):
                samples.append(time.perf_counter() - t0)
                break
        proc.wait(timeout=30)
    return statistics.median(samples)


def _app():
    from PySide6.QtWidgets import QApplication

    app = QApplication.instance() or QApplication(["bench"])
    app.setQuitOnLastWindowClosed(False)  # closing one benchmark's window must not stop the loop
    return app


def _run(coro):
    import qasync

    app = _app()
    loop = qasync.QEventLoop(app)
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()
        asyncio.set_event_loop(None)


async def bench_stream_lag() -> tuple[float, int]:
    """Worst event-loop lag (ms) while 5,000 chunks/s go bus -> EventBridge -> ConversationView."""
    from desktop_app.core import EventBus, MemoryStore, TextChunk
    from desktop_app.ui._bridge import EventBridge
    from desktop_app.ui._conversation import ConversationView

    store = MemoryStore()
    bus = EventBus(store)
    bridge = EventBridge(bus)
    view = ConversationView()
    view.resize(900, 700)
    view.show()
    bridge.textChunk.connect(lambda _s, mid, t: view.append_chunk(mid, t))
    # answer-like text: words, with a line break every dozen words and a paragraph now and then
    words = [*"the quick brown fox jumps over the lazy dog and then".split(), "`code`", "**bold**"]
    done = False
    worst = 0.0

    async def monitor() -> None:
        nonlocal worst
        tick = 0.005
        while not done:
            t = time.perf_counter()
            await asyncio.sleep(tick)
            worst = max(worst, (time.perf_counter() - t - tick) * 1000.0)

    async def produce() -> None:
        period = 0.01  # publish a burst every 10 ms: 50 chunks per burst
        per_burst = int(CHUNKS_PER_S * period)
        start = time.perf_counter()
        n = 0
        while time.perf_counter() - start < STREAM_S:
            for i in range(per_burst):
                k = n + i
                sep = "\n\n" if k % 97 == 96 else "\n" if k % 13 == 12 else " "
                bus.publish(TextChunk(session_id="s", text=words[k % len(words)] + sep, message_id="m1"))
            n += per_burst
            await asyncio.sleep(max(0.0, start + (n / CHUNKS_PER_S) - time.perf_counter()))

    mon = asyncio.ensure_future(monitor())
    await asyncio.sleep(0.2)  # settle: the first show and layout are not part of the stream
    worst = 0.0
    await produce()
    done = True
    await mon
    t = time.perf_counter()
    view.finish_message()
    print(f"# final Markdown render of the streamed answer: {(time.perf_counter() - t) * 1000:.0f} ms",
          file=sys.stderr)
    bridge.detach()
    view.close()
    return worst, len(store.events)


async def bench_timeline(n: int = 100_000) -> float:
    """ms to load n records into the timeline (model + its table view, filter proxy on)."""
    from PySide6.QtWidgets import QApplication

    from desktop_app.core import ToolCallRecord, ToolCallState
    from desktop_app.ui.timeline import TimelineDock, TimelineModel

    records = []
    for i in range(n):
        r = ToolCallRecord(name=("bash_run", "fs_read", "fs_edit")[i % 3], input={"command": f"make step{i}"},
                           id=f"call_{i}", session_id="s", state=ToolCallState.COMPLETED, duration_ms=12.0)
        records.append(r)
    model = TimelineModel()
    dock = TimelineDock(model)
    dock.resize(700, 800)
    dock.show()
    QApplication.processEvents()
    t = time.perf_counter()
    model.add_records(records)
    dock.view.scrollToBottom()
    QApplication.processEvents()
    elapsed = (time.perf_counter() - t) * 1000.0
    assert model.rowCount() == n
    dock.close()
    return elapsed


def _million_fixture() -> Path | None:
    try:
        from benchmarks.bench_store import fixture
    except Exception:
        return None
    return fixture()


async def bench_history(path: Path, runs: int = 3) -> tuple[list[float], int]:
    """ms from opening the history window (count query + first page) until its table is filled, per run."""
    from PySide6.QtWidgets import QApplication

    from desktop_app.store import SqlStore
    from desktop_app.ui.history import HistoryWindow

    samples = []
    total = 0
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "history.db"  # a copy: the store may migrate or write its head
        shutil.copy(path, db)
        store = await SqlStore.open(db)
        try:
            for _ in range(runs):
                win = HistoryWindow(store)
                t = time.perf_counter()
                win.show()
                await win.refresh()
                QApplication.processEvents()
                samples.append((time.perf_counter() - t) * 1000.0)
                total = win.model.total
                win.close()
                win.deleteLater()
        finally:
            await store.close()
    return samples, total


def main() -> None:
    from benchmarks._util import emit, measure, repeat, report

    measure("window_startup_s", "s", lambda: bench_startup(runs=1), runs=3)

    def stream() -> None:
        lag, events = _run(bench_stream_lag())
        print(f"# streamed {events} chunks in {STREAM_S:.0f} s", file=sys.stderr)
        report("event_loop_lag_ms", lag, "ms")

    repeat(stream, runs=3)
    measure("timeline_100k_ms", "ms", lambda: _run(bench_timeline()), runs=5)
    path = _million_fixture()
    if path is None:
        print("# history_open_1m_ms skipped: the store benchmark's fixture is unavailable", file=sys.stderr)
        return
    samples, total = _run(bench_history(path, runs=5))
    print(f"# history over {total:,} records", file=sys.stderr)
    emit("history_open_1m_ms", samples, "ms")


if __name__ == "__main__":
    main()
