"""Waiting on a condition by polling, for what publishes no event (a file, a process, another process's
socket). What publishes events is awaited on them instead (see Desk.wait_for)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


def wait_until(predicate: Callable[[], object], within_s: float, every_s: float = 0.05) -> bool:
    """Poll `predicate` until it is true (True) or `within_s` passed (False); blocks the thread."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(every_s)
    return False


async def wait_until_async(predicate: Callable[[], object], within_s: float, every_s: float = 0.05) -> bool:
    """`wait_until` for async tests: the predicate runs on a thread (it may block), the loop keeps running."""
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if await asyncio.to_thread(predicate):
            return True
        await asyncio.sleep(every_s)
    return False
