"""The machine's own speed, measured beside the figures: a fixed piece of pure-Python work of the kinds the
engine's hot path does (JSON encoding and decoding, sha256, a regex scan, small objects and dict lookups), timed
before each benchmark module. On a shared machine the same code measured 4,783 and 8,529 audit writes a second
minutes apart; this figure moves with that, where an engine change does not, so `compare` can say how much of
a figure's change was the machine's (`machine_ref_ms`: lower is a faster machine)."""

from __future__ import annotations

import hashlib
import json
import re
import statistics
import time
from dataclasses import dataclass

_ENTRIES = 4_000
_WORD = re.compile(r"[a-z]+_[0-9]+")


@dataclass
class _Entry:
    seq: int
    state: str
    data: dict


def _work() -> int:
    """The reference work: the same operations and the same data every time. Returns a checksum, so that no
    part of it can be skipped."""
    prev, found = "0" * 64, 0
    table: dict[str, _Entry] = {}
    for i in range(_ENTRIES):
        entry = _Entry(i, ("PENDING", "EXECUTING", "COMPLETED")[i % 3],
                       {"command": f"echo step_{i}", "cwd": "/workspace", "n": i, "at": 1_750_000_000.0 + i / 7})
        text = json.dumps({"seq": entry.seq, "state": entry.state, "data": entry.data}, sort_keys=True,
                          separators=(",", ":"))
        prev = hashlib.sha256((prev + text).encode()).hexdigest()
        back = json.loads(text)
        found += len(_WORD.findall(back["data"]["command"]))
        table[f"call_{i % 512}"] = entry
    return found + len(table) + int(prev[:8], 16) % 7


def reference_ms(runs: int = 5) -> float:
    """The reference work's median time (ms) over `runs`, after one that warms the caches."""
    _work()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        _work()
        times.append((time.perf_counter() - t0) * 1000.0)
    return statistics.median(times)
