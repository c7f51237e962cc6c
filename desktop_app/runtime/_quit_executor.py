"""The loops' default executor, the window's and the CLI's: what `run_in_executor(None, ...)` and
`asyncio.to_thread` run on. Its threads are daemons, and its shutdown (the loop's close, when the window quits or
a command ends) waits for the jobs already given to it at most `grace` seconds: one stuck on a Docker engine that
accepts and never answers (the SDK waits 60 s a request) or on a hung file system must not keep a closed window's
process, or a finished command, alive. What is still running then is named in the log and ends with the process.
(qasync's own executor joins its QThreads without a bound; asyncio.run's ThreadPoolExecutor joins its threads
without one on 3.11, after 300 s on 3.12, and again at the interpreter's exit.)"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import queue
import threading
import time
from collections.abc import Callable, Coroutine
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

log = logging.getLogger(__name__)

QUIT_GRACE_S = 10.0  # a settings save or an export under way at quit has this long to finish
_STOP = None
T = TypeVar("T")


class QuitBoundedExecutor(ThreadPoolExecutor):
    """A thread pool of daemon threads (at most `max_workers`, made as jobs come and none is idle) whose
    `shutdown(wait=True)` runs what was queued and waits for it at most `grace` seconds.

    A ThreadPoolExecutor by type only, because asyncio's `set_default_executor` takes nothing else: none of its
    machinery runs (its threads would be joined at the interpreter's exit without a bound)."""

    def __init__(self, max_workers: int = 8, name: str = "agent-desk-worker", grace: float | None = None) -> None:
        super().__init__(max_workers=max(1, max_workers), thread_name_prefix=name)  # attributes only: no thread
        self._max = max(1, max_workers)
        self._name = name
        self.grace = QUIT_GRACE_S if grace is None else grace
        self._jobs: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple, dict] | None] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._running: dict[int, str] = {}  # thread ident -> what it runs (for the log at quit)
        self._shut = False

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._lock:
            if self._shut:
                raise RuntimeError("cannot schedule new futures after shutdown")
            future: Future[Any] = Future()
            self._jobs.put((future, fn, args, kwargs))
            if not self._idle.acquire(blocking=False) and len(self._threads) < self._max:
                thread = threading.Thread(target=self._work, name=f"{self._name}_{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)
            return future

    def _work(self) -> None:
        me = threading.get_ident()
        while (job := self._jobs.get()) is not _STOP:
            future, fn, args, kwargs = job
            if future.set_running_or_notify_cancel():
                self._running[me] = job_name(fn)
                try:
                    result = fn(*args, **kwargs)
                except BaseException as exc:
                    future.set_exception(exc)
                else:
                    future.set_result(result)
                finally:
                    self._running.pop(me, None)
            del job, future, fn, args, kwargs  # nothing of a finished job is kept alive by an idle thread
            self._idle.release()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        with self._lock:
            if self._shut:
                return
            self._shut = True
            if cancel_futures:
                while True:
                    try:
                        job = self._jobs.get_nowait()
                    except queue.Empty:
                        break
                    if job is not _STOP:
                        job[0].cancel()
            threads = list(self._threads)
            for _ in threads:
                self._jobs.put(_STOP)  # after what is queued: that still runs
        if not wait:
            return
        deadline = time.monotonic() + self.grace
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = self.running()
        if stuck:
            log.warning("quitting with %d background job(s) still running after %.0f s, left to end with the "
                        "process: %s", len(stuck), self.grace, ", ".join(stuck))

    def running(self) -> list[str]:
        """What the threads run now (a function's qualified name each)."""
        return sorted(self._running.copy().values())  # a copy: other threads add and drop theirs


def job_name(fn: Callable[..., Any]) -> str:
    """A job's function by its qualified name, never its arguments (an API key may be one): through the
    partials and the context's `run` that `asyncio.to_thread` wraps it in."""
    while True:
        if isinstance(fn, functools.partial):
            inner, args = fn.func, fn.args
            if isinstance(getattr(inner, "__self__", None), contextvars.Context) and args and callable(args[0]):
                fn = args[0]  # to_thread: partial(context.run, func, *args)
            else:
                fn = inner
            continue
        return getattr(fn, "__qualname__", None) or type(fn).__qualname__


def run_bounded(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` with a QuitBoundedExecutor as the loop's default executor: the CLI's loop. A command
    whose last background job is stuck (a Docker request to a hung engine) ends after the grace, not after the
    job; the job is named in the log."""
    with asyncio.Runner() as runner:
        runner.get_loop().set_default_executor(QuitBoundedExecutor())
        return runner.run(main)
