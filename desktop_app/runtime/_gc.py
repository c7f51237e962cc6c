"""The garbage collector tuned for a desk that runs for hours: what start-up made (modules, the window, the
settings) is frozen, so a full collection walks only what the sessions made since; the young generation is
collected less often; and the old one between turns, when the turn's objects are garbage."""

from __future__ import annotations

import gc
import time

from ..core import Envelope

# Young collections every 10,000 net allocations rather than 700: each still takes about a millisecond.
YOUNG_THRESHOLD = 10_000
_settled = False


def settle_after_startup() -> None:
    """Call once start-up is done (the app's window and desk, the CLI's runtime): collect, then freeze what
    is left and raise the young generation's threshold."""
    global _settled
    gc.collect()
    gc.freeze()
    young, middle, old = gc.get_threshold()
    gc.set_threshold(max(young, YOUNG_THRESHOLD), middle, old)
    _settled = True


def collect_between_turns(_env: Envelope | None = None) -> float:
    """A turn ended (a bus handler for "done"): collect every generation now, on the loop's thread, rather
    than in the middle of a later stream. Only once start-up was frozen: before that a full pass walks every
    module. Returns the pause in ms (0 when nothing ran)."""
    if not _settled:
        return 0.0
    t0 = time.perf_counter()
    gc.collect()
    return (time.perf_counter() - t0) * 1000.0


def is_settled() -> bool:
    return _settled


def unsettle(threshold: tuple[int, int, int] = (700, 10, 10)) -> None:
    """Undo `settle_after_startup` (a benchmark that measures the desk, then other things, in one process)."""
    global _settled
    gc.unfreeze()
    gc.set_threshold(*threshold)
    _settled = False
