"""How long the desk's event loop was held up by the process itself, with what the machine's load adds
taken out: the timing tests measure the code under test, not the other jobs on a busy CI runner.

A coroutine asks to wake every 5 ms. Each late wake-up is a gap. Part of a gap is time that some thread
of this process waited in the kernel's run queue (runnable, but the CPUs were busy with other work):
Linux counts it per thread in /proc/self/task/<tid>/schedstat, and it is subtracted. What remains is
the loop running something else (a policy judged inline), or waiting for the GIL while another thread of
the process held it and ran: what a frozen window is made of. Where schedstat is missing, the gap is
capped by the CPU time the process used meanwhile (a process that did not run froze nothing).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

TICK_S = 0.005
_TASKS = Path(f"/proc/{os.getpid()}/task")


def _queued_ns() -> dict[str, int] | None:
    """Nanoseconds each thread of this process has waited in the run queue, by thread id; None without
    schedstat."""
    try:
        tids = os.listdir(_TASKS)
    except OSError:
        return None
    found: dict[str, int] = {}
    for tid in tids:
        try:
            with open(_TASKS / tid / "schedstat", "rb") as f:
                found[tid] = int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return found or None


def _queued_between(before: dict[str, int] | None, after: dict[str, int] | None) -> float | None:
    """Seconds the threads waited in the run queue between two readings. A thread born meanwhile counts
    whole; one that ended meanwhile does not count at all (its wait is unknown), which can only leave
    more of a gap: a test stays strict."""
    if before is None or after is None:
        return None
    return sum(ns - before.get(tid, 0) for tid, ns in after.items() if ns >= before.get(tid, 0)) / 1e9


class LagMeter:
    """`worst`: the longest the loop was held up by this process (seconds), load taken out; `worst_raw`:
    the longest late wake-up as the wall clock saw it; `ticks`: how many times the loop served it."""

    def __init__(self) -> None:
        self.worst = 0.0
        self.worst_raw = 0.0
        self.ticks = 0
        self.schedstat = _queued_ns() is not None
        self._task: asyncio.Task[None] | None = None

    def held_up(self, gap: float, queued: float | None, cpu: float) -> float:
        if queued is not None:
            return max(0.0, gap - queued)
        return max(0.0, min(gap, cpu))

    async def _tick(self) -> None:
        while True:
            q0, c0 = _queued_ns(), time.process_time()
            t0 = time.perf_counter()
            await asyncio.sleep(TICK_S)
            gap = time.perf_counter() - t0 - TICK_S
            queued = _queued_between(q0, _queued_ns())
            c1 = time.process_time()
            self.ticks += 1
            self.worst_raw = max(self.worst_raw, gap)
            self.worst = max(self.worst, self.held_up(gap, queued, c1 - c0))

    async def __aenter__(self) -> LagMeter:
        self._task = asyncio.ensure_future(self._tick())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass

    def __repr__(self) -> str:
        return (f"LagMeter(worst={self.worst * 1000:.1f} ms, raw={self.worst_raw * 1000:.1f} ms, "
                f"ticks={self.ticks}, schedstat={self.schedstat})")


def cpu_s() -> float:
    """CPU seconds this process has used, in every thread: what "linear" is measured in (a busy machine
    stretches wall time, not the work done)."""
    return time.process_time()
