"""Small helpers shared by the benchmarks."""

from __future__ import annotations

import statistics


def report(name: str, value: float, unit: str) -> None:
    print(f"bench {name} {value:.3f} {unit}", flush=True)


def p50(samples: list[float]) -> float:
    return statistics.median(samples)
