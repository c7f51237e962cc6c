"""UI test kit: a qasync event loop installed on the test QApplication, and a helper that runs a
coroutine on it while Qt processes events (waiting on the task, never sleeping)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import qasync

from desktop_app.runtime import QuitBoundedExecutor
from desktop_app.ui._gc import MainThreadGarbageCollector

T = TypeVar("T")


@pytest.fixture
def qloop(qapp):
    """qasync's loop as the running asyncio loop while pytest-qt drives the Qt event loop."""
    collector = MainThreadGarbageCollector()  # as the app: QObjects die on the GUI thread only
    collector.start()
    loop = qasync.QEventLoop(qapp, already_running=True)
    executor = QuitBoundedExecutor(grace=60)  # the app's (app.new_loop); a loaded CI machine gets longer
    loop.set_default_executor(executor)
    asyncio.set_event_loop(loop)
    yield loop
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in pending:
        t.cancel()
    for _ in range(500):  # let the cancellations unwind (closing clients may take a few turns)
        if all(t.done() for t in pending):
            break
        qapp.processEvents()
    # Not loop.stop(): it calls QApplication.exit(), which with no exec() running leaves Qt's quit flag
    # set and breaks the timers of the next test. Mark the loop stopped directly instead.
    loop._QEventLoop__is_running = False
    asyncio.events._set_running_loop(None)
    loop.close()
    asyncio.set_event_loop(None)
    gc.collect()  # the test's cycles (windows, models, this loop) go now, on this thread
    collector.stop()
    stuck = executor.running()  # the app would quit past them after its grace; a test names them as a bug
    assert not stuck, f"background jobs still running after the loop closed: {', '.join(stuck)}"


@pytest.fixture
def run(qtbot, qloop) -> Callable[..., Any]:
    """run(coro, timeout_ms) -> its result, processing Qt events (and so asyncio tasks) meanwhile."""

    def _run(coro: Awaitable[T], timeout: int = 15_000) -> T:
        task = asyncio.ensure_future(coro)
        qtbot.waitUntil(task.done, timeout=timeout)
        return task.result()

    return _run


@pytest.fixture
def store(tmp_path, run):
    from desktop_app.store import SqlStore

    s = run(SqlStore.open(tmp_path / "audit.db"))
    yield s
    run(s.close())


@pytest.fixture(autouse=True)
def _app(qapp):
    """Every UI test needs the QApplication (pixmaps, fonts), even pure model tests."""
    return qapp


@pytest.fixture
def window_project(monkeypatch, tmp_path):
    """(folder, ProjectInfo) of a project with a README on an explicitly local sandbox (these tests are about
    the window; the Docker path has its own), keys in files and no inherited Anthropic key or endpoint."""
    from desktop_app.core import ProjectInfo

    monkeypatch.setenv("AGENT_DESK_NO_KEYRING", "1")
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "README.md").write_text("demo\n")
    project = ProjectInfo("prj_rt", "demo", str(folder), permission_mode="ask", settings={"sandbox": "local"})
    return folder, project
