"""The window's default executor (runtime/_quit_executor.py): jobs run and answer as on any pool, and a quit
waits for a stuck one at most its grace. The quit is tried for real: the app's own loop (`new_loop`, qasync on
an offscreen QApplication) in a process of its own, a job stuck for ever beside one that finishes."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import thread as pool_threads
from pathlib import Path

import pytest

from desktop_app.runtime import QuitBoundedExecutor

ROOT = Path(__file__).resolve().parents[1]
KEY = "sk-ant-api03-" + "Q7" * 40  # looks like a real key


def test_jobs_answer_raise_and_reuse_idle_threads() -> None:
    pool = QuitBoundedExecutor(max_workers=3, grace=5)
    try:
        assert pool.submit(lambda a, b=0: a + b, 2, b=3).result(5) == 5
        with pytest.raises(ZeroDivisionError):
            pool.submit(lambda: 1 / 0).result(5)
        for _ in range(20):  # one at a time: the idle thread takes each
            pool.submit(time.sleep, 0).result(5)
        assert len(pool._threads) == 1
        gate = threading.Event()
        waiting = [pool.submit(gate.wait, 5) for _ in range(6)]  # more than max_workers at once: they queue
        assert len(pool._threads) == 3
        gate.set()
        assert all(f.result(5) for f in waiting)
        assert all(t.daemon for t in pool._threads)
    finally:
        pool.shutdown()
    with pytest.raises(RuntimeError, match="after shutdown"):
        pool.submit(print)


def test_shutdown_runs_what_was_queued_or_cancels_it_when_asked() -> None:
    pool = QuitBoundedExecutor(max_workers=1, grace=5)
    gate = threading.Event()
    first = pool.submit(gate.wait, 5)
    queued = [pool.submit(lambda i=i: i) for i in range(3)]
    threading.Timer(0.2, gate.set).start()
    pool.shutdown(wait=True)
    assert first.result(0) and [f.result(0) for f in queued] == [0, 1, 2]

    pool = QuitBoundedExecutor(max_workers=1, grace=5)
    gate = threading.Event()
    first = pool.submit(gate.wait, 5)
    queued = [pool.submit(lambda: "ran") for _ in range(3)]
    pool.shutdown(wait=False, cancel_futures=True)
    gate.set()
    assert first.result(5) is True
    assert all(f.cancelled() for f in queued)


def test_a_stuck_job_holds_the_quit_no_longer_than_the_grace(caplog: pytest.LogCaptureFixture) -> None:
    pool = QuitBoundedExecutor(grace=0.5)
    stuck = threading.Event()

    def hung_engine_ping() -> None:
        stuck.wait()

    pool.submit(hung_engine_ping)
    done = pool.submit(lambda: "saved")
    t0 = time.monotonic()
    pool.shutdown(wait=True)
    assert time.monotonic() - t0 < 3
    assert done.result(0) == "saved"
    assert "hung_engine_ping" in caplog.text and "still running" in caplog.text
    stuck.set()


def test_the_log_names_a_stuck_job_by_its_function_never_its_arguments(caplog: pytest.LogCaptureFixture) -> None:
    stuck = threading.Event()

    def store_api_key(_settings: object, _key: str) -> None:
        stuck.wait()

    pool = QuitBoundedExecutor(grace=0.2)
    pool.submit(store_api_key, {}, KEY)  # as run_in_executor(None, fn, *args) hands it over
    pool.submit(functools.partial(contextvars.copy_context().run, store_api_key, {}, KEY))  # as to_thread does
    pool.shutdown()
    stuck.set()
    assert caplog.text.count("store_api_key") == 2
    assert KEY not in caplog.text and "Q7Q7" not in caplog.text


WINDOW_QUIT = textwrap.dedent("""
    import asyncio, pathlib, sys, threading, time
    from PySide6.QtWidgets import QApplication
    from desktop_app.app import new_loop
    from desktop_app.runtime import _quit_executor

    _quit_executor.QUIT_GRACE_S = 1.0  # the grace the executor gets, shortened for the test
    app = QApplication(["agent-desk"])
    loop = new_loop(app)

    def docker_ping_on_a_hung_engine():
        threading.Event().wait()  # never answers

    def store_api_key(key):
        threading.Event().wait()  # a keyring that never answers

    def save_settings():
        time.sleep(0.3)
        pathlib.Path(sys.argv[1]).write_text("saved")

    async def run():
        loop = asyncio.get_running_loop()
        loop.run_in_executor(None, docker_ping_on_a_hung_engine)
        loop.run_in_executor(None, save_settings)
        asyncio.ensure_future(asyncio.to_thread(store_api_key, sys.argv[2]))
        await asyncio.to_thread(time.sleep, 0.05)

    loop.run_until_complete(run())
    t0 = time.monotonic()
    loop.close()
    print(f"closed in {time.monotonic() - t0:.1f} s", flush=True)
""")


def test_the_window_quits_with_a_job_stuck_on_its_loop(tmp_path: Path) -> None:
    marker = tmp_path / "settings.json"
    env_root = {"QT_QPA_PLATFORM": "offscreen", "PYTHONPATH": str(ROOT)}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", WINDOW_QUIT, str(marker), KEY], capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env_root}, check=False)
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    assert "closed in" in done.stdout
    assert float(done.stdout.split("closed in ")[1].split()[0]) < 3  # the grace (1 s), not for ever
    assert took < 30
    assert marker.read_text() == "saved"  # what finished within the grace was not cut short
    # the log names what was left running, by its function only: never the key it was given
    assert "docker_ping_on_a_hung_engine" in done.stderr and "store_api_key" in done.stderr
    assert KEY not in done.stderr + done.stdout


CLI_END = textwrap.dedent("""
    import asyncio, sys, threading, time
    from desktop_app.cli import _main
    from desktop_app.runtime import _quit_executor

    _quit_executor.QUIT_GRACE_S = 1.0  # the grace, shortened for the test

    def docker_stop_on_a_hung_engine(key):
        threading.Event().wait()  # the engine took the request and never answers

    async def dispatch(args):  # the command's own work done; one background job is stuck
        asyncio.get_running_loop().run_in_executor(None, docker_stop_on_a_hung_engine, sys.argv[1])
        await asyncio.sleep(0.05)
        return 0

    _main._dispatch = dispatch
    t0 = time.monotonic()
    code = _main.main(["sessions", "list"])  # the CLI's own path: arguments, logging, its loop and its end
    print(f"returned {code} in {time.monotonic() - t0:.1f} s", flush=True)
    sys.exit(code)
""")


def test_a_command_ends_with_a_job_stuck_on_its_loop(tmp_path: Path) -> None:
    """The CLI's loop (run_bounded): a finished command whose background job is stuck returns after the grace
    and the process exits (asyncio.run would join the thread for ever on 3.11, and the interpreter's exit again)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "AGENT_DESK_LOG_DIR": str(tmp_path / "logs")}
    t0 = time.monotonic()
    done = subprocess.run([sys.executable, "-c", CLI_END, KEY], capture_output=True, text=True, timeout=60,
                          env=env, check=False)
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    assert float(done.stdout.split("returned 0 in ")[1].split()[0]) < 3, done.stdout  # the grace (1 s)
    assert took < 30
    assert "docker_stop_on_a_hung_engine" in done.stderr  # named, by its function only
    assert KEY not in done.stderr + done.stdout + "".join(p.read_text() for p in (tmp_path / "logs").glob("*"))


def test_the_pool_is_the_type_asyncio_takes_as_a_default_executor() -> None:
    """asyncio's set_default_executor refuses anything but a ThreadPoolExecutor; none of that pool's threads (which
    the interpreter joins at exit without a bound) is ever made."""
    loop = asyncio.new_event_loop()
    pool = QuitBoundedExecutor(grace=5)
    try:
        loop.set_default_executor(pool)
        worker = loop.run_until_complete(asyncio.to_thread(threading.current_thread))
        assert worker.daemon and worker.name.startswith("agent-desk-worker")
        assert worker not in pool_threads._threads_queues  # what the interpreter's exit would join
    finally:
        loop.close()
