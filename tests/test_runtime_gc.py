"""The collector as the app and the CLI tune it once started (issue 29): what start-up made is frozen, the young
generation collects less often, and a turn's end collects every generation on the loop's thread."""

from __future__ import annotations

import gc
import threading

from desktop_app.core import Done, EventBus, MemoryStore
from desktop_app.runtime import collect_between_turns, settle_after_startup
from desktop_app.runtime._gc import YOUNG_THRESHOLD, is_settled, unsettle


async def test_settled_after_startup_a_turns_end_collects_on_the_loops_thread() -> None:
    before = gc.get_threshold()
    passes: list[tuple[int, str]] = []

    def seen(phase: str, info: dict) -> None:
        if phase == "start":
            passes.append((info["generation"], threading.current_thread().name))

    bus = EventBus(MemoryStore())
    bus.on("done", collect_between_turns)
    gc.callbacks.append(seen)
    try:
        assert collect_between_turns() == 0.0 and passes == [], "not before start-up is done"
        settle_after_startup()
        assert is_settled() and gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)
        passes.clear()
        bus.publish(Done(session_id="s1"))
        assert passes == [(2, threading.current_thread().name)]  # one full pass, here
    finally:
        gc.callbacks.remove(seen)
        unsettle(before)
    assert not is_settled() and gc.get_freeze_count() == 0 and gc.get_threshold() == before
