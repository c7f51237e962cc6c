"""Checkpoints and rewinds for the front ends: a project's checkpoint store (in the desk's state folder, out
of the sandbox's reach), a rewind's plan, and the rewind itself, done off the event loop and recorded."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..config import Settings, checkpoints_dir
from ..core import (
    AgentDeskError,
    Checkpoint,
    CheckpointError,
    EventBus,
    ProjectInfo,
    RewindDone,
    RewindError,
    RewindPlan,
    ShadowStore,
    ToolCallRecord,
    apply_rewind,
    plan_rewind,
    record_rewind,
)

MB = 1024 * 1024


def checkpoint_store(settings: Settings, project: ProjectInfo) -> ShadowStore:
    """The project's checkpoint store (one per project folder); the folder is made when first used."""
    return ShadowStore(checkpoints_dir(), project.path, max_file_bytes=settings.checkpoint_max_file_mb * MB)


@dataclass(slots=True)
class Rewind:
    """A rewind asked for: its plan (shown to the person) and, once done, what it did and its record."""

    plan: RewindPlan
    shadow: ShadowStore
    done: RewindDone | None = None
    record: ToolCallRecord | None = None


async def plan(store: object, settings: Settings, session_id: str, call_id: str) -> Rewind:
    """What rewinding `session_id`'s files to before `call_id` would change (nothing changes yet)."""
    session = await store.get_session(session_id)  # type: ignore[attr-defined]
    if session is None:
        raise AgentDeskError(f"There is no session {session_id!r}.", hint="`agent-desk sessions list` shows them.")
    project = await store.get_project(session.project_id)  # type: ignore[attr-defined]
    if project is None:
        raise AgentDeskError(f"The project of session {session_id} is missing from the database.")
    records = await store.session_records(session_id)  # type: ignore[attr-defined]
    shadow = checkpoint_store(settings, project)
    return Rewind(await asyncio.to_thread(plan_rewind, shadow, records, call_id), shadow)


async def run(store: object, bus: EventBus, rewind: Rewind, *, actor: str, include_mine: bool = False) -> Rewind:
    """Do the rewind shown to the person, and record it in the chain. The files must still be as they were
    when its plan was made (else RewindError, nothing changed); a rewind that fails is recorded as failed."""
    p, shadow = rewind.plan, rewind.shadow

    def act() -> RewindDone:
        try:
            now = shadow.take()
        except CheckpointError as e:
            raise RewindError(f"Cannot rewind: {e}", hint="Nothing was changed.") from e
        if now.id != p.now.id:
            raise RewindError("The files changed since the rewind's diff was made: nothing was changed.",
                              hint="Ask for the rewind again to see the diff as it is now.")
        return apply_rewind(shadow, p, include_mine=include_mine)

    try:
        rewind.done = await asyncio.to_thread(act)
    except RewindError as e:
        rewind.record = await record_rewind(store, bus, p, None, actor=actor, error=str(e))  # type: ignore[arg-type]
        raise
    after: Checkpoint | None = None
    try:  # the files as the rewind left them: a later rewind tells its changes from the person's by it
        after = await asyncio.to_thread(shadow.take)
    except CheckpointError:
        pass
    rewind.record = await record_rewind(store, bus, p, rewind.done, actor=actor, after=after)  # type: ignore[arg-type]
    return rewind
