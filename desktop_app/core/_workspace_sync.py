"""The executor's step for a synced workspace (a remote engine's volume, see sandbox/sync/): the host's
changes go in before each call, and the sandbox's come back after each call that may write. A sandbox
without `sync_workspace` (bind mount, local) is left alone."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ._errors import AgentDeskError


@dataclass(slots=True)
class SyncOutcome:
    """What a sync step found: `text` to tell the model and the person ("" when nothing went wrong), and
    `failed` when the sync itself did not happen (the call must not run on a stale workspace)."""

    text: str = ""
    failed: bool = False


async def sync_step(sandbox: Any, direction: str) -> SyncOutcome:
    """`direction` is "in" (before a call: the host's changes into the volume) or "both" (after it)."""
    sync = getattr(sandbox, "sync_workspace", None)
    if sync is None:
        return SyncOutcome()
    try:
        report = await sync(direction)
    except AgentDeskError as e:
        when = "before the call" if direction == "in" else "after the call"
        hint = f" ({e.hint})" if e.hint else ""
        return SyncOutcome(f"the synced workspace could not be brought up to date {when}: {e}{hint}", True)
    return SyncOutcome(report.problems() if report is not None else "")
