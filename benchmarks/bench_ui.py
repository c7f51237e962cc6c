"""Desktop window benchmarks: start-up, event-loop lag under a fast text stream, a 100k-row timeline,
reopening a session of 10,000 calls, opening the audit history over 1,000,000 records and drawing its charts. Prints
`bench NAME VALUE UNIT` lines."""

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


def _with_answers_and_costs(db: Path) -> None:
    """The store fixture as a desk leaves it for the charts: a person's answer on each call that asked (waits of
    1 s to ~17 min) and a token_usage event for every ten calls (cost per day and project)."""
    import sqlite3

    from desktop_app.store._rollup import wait_backfill_sql

    con = sqlite3.connect(db, isolation_level=None)
    con.execute("BEGIN")
    con.execute("UPDATE tool_calls SET approval = json_object('required', json('true'), 'decided_by', 'ada', "
                "'decided_at', created_at + 1 + (pk % 1000)) WHERE id IN (SELECT record_id FROM audit_entries "
                "WHERE state = 'APPROVAL_REQUIRED')")
    con.execute(wait_backfill_sql("sqlite")[0])  # answered in place (no transition): their waits filled as a migration
    top = con.execute("SELECT coalesce(max(seq), 0) FROM events").fetchone()[0]
    con.execute("INSERT INTO events (seq, channel, type, time, session_id, payload) SELECT :top + pk, 'monitor', "
                "'token_usage', created_at, session_id, json_object('cost_usd', 0.002 + (pk % 7) / 1000.0) "
                "FROM tool_calls WHERE pk % 10 = 0", {"top": top})
    con.execute("INSERT OR IGNORE INTO sessions (id, project_id, title, model, created_at, updated_at, meta) "
                "SELECT DISTINCT session_id, project_id, '', '', 0, 0, '{}' FROM tool_calls")
    con.execute("INSERT OR IGNORE INTO projects (id, name, path, image, permission_mode, settings, created_at) "
                "SELECT DISTINCT project_id, project_id, '/tmp', '', 'ask', '{}', 0 FROM tool_calls")
    con.execute("COMMIT")
    con.execute("ANALYZE")
    con.close()


async def bench_history_chart(path: Path, runs: int = 5) -> tuple[list[float], int]:
    """ms from asking for the history's charts over every record (1,000,000) until all are drawn: the store's
    aggregation, the SVG written off the GUI thread, and each chart painted. One sample per run."""
    from desktop_app.store import SqlStore
    from desktop_app.ui.history import HistoryWindow

    samples = []
    with tempfile.TemporaryDirectory() as d:
        db = Path(d) / "charts.db"
        shutil.copy(path, db)
        _with_answers_and_costs(db)
        store = await SqlStore.open(db)
        try:
            win = HistoryWindow(store)
            win.resize(1300, 900)
            win.show()
            for _ in range(runs + 1):  # the first warms the page cache and pygal's imports
                win.charts.filters = None
                t = time.perf_counter()
                await win.show_charts()
                for view in win.charts.views:
                    view.repaint()
                samples.append((time.perf_counter() - t) * 1000.0)
            calls = win.charts.data.calls
            win.close()
        finally:
            await store.close()
    return samples[1:], calls


SESSION_CALLS = 10_000
RSS_SESSION = "ses_rss_10k"
HISTORY_PAGES = 200  # of 500 rows: the history paged 100,000 rows down; the model holds six pages whatever


async def _add_session(db: Path, n: int = SESSION_CALLS) -> None:
    """A session of n calls (bash_run, 1 KB of output each, three audit entries and two messages per call),
    written through the store as an agent would, many at a time so that the group commit keeps it quick."""
    from desktop_app.core import (
        AuditEntry,
        Outcome,
        ProjectInfo,
        SessionInfo,
        StoredMessage,
        ToolCallRecord,
        ToolCallState,
    )
    from desktop_app.store import SqlStore

    store = await SqlStore.open(db)
    project = ProjectInfo(id="prj_rss", name="rss", path=str(ROOT))
    await store.save_project(project)
    await store.save_session(SessionInfo(id=RSS_SESSION, project_id=project.id, title="10,000 calls"))
    output = "".join(f"line {k}: compiling module_{k} ... ok\n" for k in range(30))[:1000]

    async def one(i: int) -> ToolCallRecord:
        rec = ToolCallRecord(name="bash_run", input={"command": f"make step{i}"}, id=f"call_rss_{i:05d}",
                             tool_use_id=f"toolu_rss_{i:05d}", session_id=RSS_SESSION, project_id=project.id)
        await store.save_transition(rec, AuditEntry(rec.id, ToolCallState.PENDING, rec.created_at, "model", ""))
        await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor"))
        rec.result = {"content": [{"type": "text", "text": output}], "details": {"exit_code": 0}}
        await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="executor",
                                                        outcome=Outcome.OK))
        return rec

    try:
        for first in range(0, n, 500):
            records = await asyncio.gather(*(one(i) for i in range(first, min(n, first + 500))))
            await asyncio.gather(*(
                store.append_message(StoredMessage(RSS_SESSION, role, content)) for rec in records
                for role, content in (("assistant", [{"type": "tool_use", "id": rec.tool_use_id,
                                                      "name": rec.name, "input": rec.input}]),
                                      ("user", [{"type": "tool_result", "tool_use_id": rec.tool_use_id,
                                                 "content": rec.result["content"]}]))))
    finally:
        await store.close()


def bench_app_rss(path: Path, runs: int = 3) -> None:
    """Resident memory (MB) of the window, in a process of its own, after showing a 10,000-call session
    and paging the history over the 1,000,000 records (benchmarks/_rss_probe.py)."""
    from benchmarks._util import repeat, report

    with tempfile.TemporaryDirectory() as d:  # a copy: the session is added to it
        db = Path(d) / "rss.db"
        shutil.copy(path, db)
        asyncio.run(_add_session(db))
        env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}

        def one() -> None:
            out = subprocess.run([sys.executable, "-m", "benchmarks._rss_probe", str(db), RSS_SESSION,
                                  str(HISTORY_PAGES)], cwd=ROOT, env=env, capture_output=True, text=True,
                                 timeout=600)
            lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
            if out.returncode != 0 or "rss" not in lines:
                raise RuntimeError(f"the RSS probe failed ({out.returncode}): {out.stderr[-2000:]}")
            for key in ("calls", "rss_session", "history", *(k for k in lines if k.startswith("rss_after"))):
                print(f"# app_rss_mb {key} {lines.get(key)}", file=sys.stderr)
            report("app_rss_mb", float(lines["rss"]), "MB")

        repeat(one, runs=runs)


# lifecycle (issue 14): reopening a long session --------------------------------------------------------
async def _long_session(store, calls: int, per_step: int = 10) -> str:
    """A session as the agent leaves it: `calls` completed calls, `per_step` per model step, each step an
    assistant message of tool_use blocks and a user message of their results, with the step's token usage."""
    from desktop_app.core import (
        EventBus,
        Outcome,
        ProjectInfo,
        SessionInfo,
        StoredMessage,
        TokenUsage,
        ToolCallRecord,
        ToolCallState,
    )

    await store.save_project(ProjectInfo("prj_bench", "bench", "/tmp"))
    await store.save_session(SessionInfo("ses_bench", "prj_bench", "a long session"))
    bus = EventBus(store)
    at = 1_750_000_000.0
    for step in range(calls // per_step):
        uses, results = [], []
        for k in range(per_step):
            i = step * per_step + k
            rec = ToolCallRecord(name="bash_run", input={"command": f"make target{i}"}, id=f"call_{i:05d}",
                                 tool_use_id=f"toolu_{i:05d}", session_id="ses_bench", project_id="prj_bench",
                                 batch_index=k, created_at=at)
            await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="executor", at=at))
            rec.result = {"content": [{"type": "text", "text": f"built {i}"}]}
            await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="executor",
                                                            at=at + 0.02, outcome=Outcome.OK))
            uses.append({"type": "tool_use", "id": rec.tool_use_id, "name": "bash_run", "input": rec.input})
            results.append({"type": "tool_result", "tool_use_id": rec.tool_use_id,
                            "content": [{"type": "text", "text": f"built {i}"}]})
            at += 0.05
        await store.append_message(StoredMessage("ses_bench", "assistant",
                                                 [{"type": "text", "text": f"Step {step}."}, *uses], created_at=at))
        await store.append_message(StoredMessage("ses_bench", "user", results, created_at=at))
        bus.publish(TokenUsage(session_id="ses_bench", model="claude", input_tokens=1000, output_tokens=50,
                               cost_usd=0.003))
    await store.flush()
    return "ses_bench"


async def bench_session_reopen(calls: int = 10_000, runs: int = 3) -> list[float]:
    """ms from choosing a session of `calls` calls in the sidebar until its conversation, timeline and token
    totals are shown and the conversation is scrolled to its end (ready to scroll): one sample per run.

    The garbage collector runs as the app runs it (app.main): off, collected on the GUI thread by its timer, the
    start-up frozen once the window has started. The collector's pauses from the choice until its timer has had
    a turn after the view is ready are printed beside the figure: work the reopen leaves for later is shown."""
    from PySide6.QtWidgets import QApplication

    from benchmarks._util import GcPauses
    from desktop_app.config import Settings
    from desktop_app.core import EventBus, SessionInfo
    from desktop_app.runtime import Desk, settle_after_startup
    from desktop_app.runtime._gc import unsettle
    from desktop_app.store import SqlStore
    from desktop_app.ui import AppController, MainThreadGarbageCollector, MainWindow

    samples = []
    collector = MainThreadGarbageCollector()
    with tempfile.TemporaryDirectory() as d:
        store = await SqlStore.open(Path(d) / "long.db")
        try:
            sid = await _long_session(store, calls)
            await store.save_session(SessionInfo("ses_other", "prj_bench", "another"))
            collector.start()
            bus = await EventBus.open(store)
            window = MainWindow()
            controller = AppController(window, Desk(settings=Settings(path=None), store=store, bus=bus))
            window.show()
            await controller.start(check_docker=False)
            settle_after_startup()
            cpu, later = [], []
            for _ in range(runs):
                await controller.select_session("ses_other")
                window.status._usage.clear()  # as a fresh window: the totals come from the store
                # Qt's posted events (layout, paint requests) only: processEvents inside a running task would
                # let qasync step another task in the middle of this one
                QApplication.sendPostedEvents()
                await asyncio.sleep(collector.INTERVAL_MS / 1000.0 * 1.5)  # the other session's garbage goes
                with GcPauses() as pauses:
                    t, c = time.perf_counter(), time.process_time()
                    await controller.select_session(sid)
                    QApplication.sendPostedEvents()
                    samples.append((time.perf_counter() - t) * 1000.0)
                    cpu.append((time.process_time() - c) * 1000.0)
                    await asyncio.sleep(collector.INTERVAL_MS / 1000.0 * 1.5)  # the timer's next turn
                later.append(sum(pauses.pauses))
            assert window.timeline_model.rowCount() == calls
            assert window.conversation.has_card(f"call_{calls - 1:05d}")
            # on a shared machine the wall clock waits for other processes; the CPU time (all threads) does not
            print(f"# session_reopen_10k_calls: {statistics.median(cpu):.0f} ms of CPU (all threads); the "
                  f"collector's pauses from the choice to its next turn {statistics.median(later):.0f} ms",
                  file=sys.stderr)
            await controller.close()
            for _ in range(20):  # the cancelled background tasks unwind before the loop closes
                await asyncio.sleep(0)
            window.close()
        finally:
            collector.stop()
            unsettle()
            await store.close()
    return samples


def main() -> None:
    from benchmarks._util import emit, measure, repeat, report

    measure("window_startup_s", "s", lambda: bench_startup(runs=1), runs=3)

    def stream() -> None:
        lag, events = _run(bench_stream_lag())
        print(f"# streamed {events} chunks in {STREAM_S:.0f} s", file=sys.stderr)
        report("event_loop_lag_ms", lag, "ms")

    repeat(stream, runs=3)
    measure("timeline_100k_ms", "ms", lambda: _run(bench_timeline()), runs=5)
    emit("session_reopen_10k_calls_ms", _run(bench_session_reopen(runs=3)), "ms")
    path = _million_fixture()
    if path is None:
        print("# history_open_1m_ms skipped: the store benchmark's fixture is unavailable", file=sys.stderr)
        return
    samples, total = _run(bench_history(path, runs=5))
    print(f"# history over {total:,} records", file=sys.stderr)
    emit("history_open_1m_ms", samples, "ms")
    samples, calls = _run(bench_history_chart(path))
    print(f"# charts over {calls:,} records", file=sys.stderr)
    emit("history_chart_1m_ms", samples, "ms")
    bench_app_rss(path)


if __name__ == "__main__":
    main()
