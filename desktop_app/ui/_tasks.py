"""Coroutines started from Qt slots: kept referenced until they end, failures reported, cancelled together.

Not `qasync.asyncSlot`: it keeps no reference to its task (asyncio holds tasks weakly) and sends a
failure to sys.excepthook, where the person never sees it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

log = logging.getLogger(__name__)

ErrorReporter = Callable[[BaseException], None]


class BackgroundTasks:
    """`spawn(coro)` runs it on the loop; a failure goes to `on_error` (default: the log)."""

    def __init__(self, on_error: ErrorReporter | None = None) -> None:
        self.on_error = on_error
        self._running: set[asyncio.Task] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task:
        task = asyncio.ensure_future(coro)
        self._running.add(task)
        task.add_done_callback(self._done)
        return task

    def cancel(self) -> None:
        for task in list(self._running):
            task.cancel()

    def _done(self, task: asyncio.Task) -> None:
        self._running.discard(task)
        if task.cancelled():
            return
        exc = task.exception()
        if exc is None:
            return
        if self.on_error is None:
            log.error("background task failed", exc_info=exc)
        else:
            self.on_error(exc)
