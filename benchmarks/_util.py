"""Small helpers shared by the benchmarks: each figure measured several times, its median printed as
`bench NAME VALUE UNIT` and its spread on a comment line (`# NAME spread MIN..MAX over N runs`), so that
a loaded machine shows as noise rather than as a regression.

`measure(name, unit, fn, runs)` runs a function that returns one figure; `repeat(fn, runs)` runs a function
that `report()`s several figures and collects each one's samples. A `report()` outside both prints at once
(one run, no spread line), so a benchmark that does not repeat still works."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable
from typing import Any

# name -> (unit, samples), in the order the figures were first reported; None while nothing collects
_collecting: dict[str, tuple[str, list[float]]] | None = None


def report(name: str, value: float, unit: str) -> None:
    """One sample of a figure: collected inside `repeat`/`measure`, printed at once outside them."""
    if _collecting is not None:
        _collecting.setdefault(name, (unit, []))[1].append(float(value))
        return
    print(f"bench {name} {value:.3f} {unit}", flush=True)


def emit(name: str, samples: list[float], unit: str) -> float:
    """Print a figure's median and, with more than one sample, its spread; returns the median."""
    value = statistics.median(samples)
    print(f"bench {name} {value:.3f} {unit}", flush=True)
    if len(samples) > 1:
        print(f"# {name} spread {min(samples):.3f}..{max(samples):.3f} over {len(samples)} runs", flush=True)
    return value


def repeat(fn: Callable[[], Any], runs: int = 5) -> dict[str, float]:
    """Run `fn` `runs` times; every figure it `report()`s is printed once, as its median with its spread.
    Returns each figure's median. Nested calls collect into the outermost one."""
    global _collecting
    if _collecting is not None:  # inside another repeat: its caller prints
        for _ in range(runs):
            fn()
        return {}
    _collecting = {}
    try:
        for _ in range(max(1, runs)):
            fn()
        figures = _collecting
    finally:
        _collecting = None
    return {name: emit(name, samples, unit) for name, (unit, samples) in figures.items()}


def measure(name: str, unit: str, fn: Callable[[], float], runs: int = 5) -> float:
    """Run `fn` (which returns one sample of the figure) `runs` times and print the median and spread."""
    return repeat(lambda: report(name, fn(), unit), runs).get(name, float("nan"))


def p50(samples: list[float]) -> float:
    return statistics.median(samples)


class GcPauses:
    """The collector's pauses (ms) while it is entered, from gc.callbacks."""

    def __init__(self) -> None:
        self.pauses: list[float] = []
        self._t0 = 0.0

    def _callback(self, phase: str, _info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            self.pauses.append((time.perf_counter() - self._t0) * 1000.0)

    def __enter__(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._callback)
