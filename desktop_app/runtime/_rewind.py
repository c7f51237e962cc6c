"""Checkpoints and rewinds for the front ends: a project's checkpoint store (in the desk's state folder, out
of the sandbox's reach), a rewind's plan, and the rewind itself, done off the event loop and recorded."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from ..config import Settings, checkpoints_dir
from ..core import (
    BRANCH_OF,
    AgentDeskError,
    BranchPoint,
    Checkpoint,
    CheckpointError,
    EventBus,
    ProjectInfo,
    RewindDone,
    RewindError,
    RewindPlan,
    SessionInfo,
    ShadowStore,
    ToolCallRecord,
    apply_rewind,
    branch_session,
    first_call_from,
    plan_rewind,
    point_before_call,
    point_before_turn,
    record_rewind,
)

MB = 1024 * 1024
MAX_BRANCH_DEPTH = 50  # branches of branches followed back this far


def checkpoint_store(settings: Settings, project: ProjectInfo) -> ShadowStore:
    """The project's checkpoint store (one per project folder); the folder is made when first used."""
    return ShadowStore(checkpoints_dir(), project.path, max_file_bytes=settings.checkpoint_max_file_mb * MB)


@dataclass(slots=True)
class Rewind:
    """A rewind asked for: its plan (shown to the person) and, once done, what it did and its record. `point`:
    where the conversation can be rewound to (None, and `no_conversation` says why, when it cannot be);
    `branch`: the new session the conversation went on in, once rewound."""

    plan: RewindPlan
    shadow: ShadowStore
    done: RewindDone | None = None
    record: ToolCallRecord | None = None
    point: BranchPoint | None = None
    no_conversation: str = ""
    branch: SessionInfo | None = None
    branch_record: ToolCallRecord | None = None
    after: Checkpoint | None = None  # the files as the rewind left them


async def _session_parts(store: object, session_id: str) -> tuple[SessionInfo, ProjectInfo, list[ToolCallRecord]]:
    session = await store.get_session(session_id)  # type: ignore[attr-defined]
    if session is None:
        raise AgentDeskError(f"There is no session {session_id!r}.", hint="`agent-desk sessions list` shows them.")
    project = await store.get_project(session.project_id)  # type: ignore[attr-defined]
    if project is None:
        raise AgentDeskError(f"The project of session {session_id} is missing from the database.")
    return session, project, await store.session_records(session_id)  # type: ignore[attr-defined]


async def _ancestors_records(store: object, session: SessionInfo) -> list[ToolCallRecord]:
    """The calls of the sessions a branch was rewound from (its turns before the branch point were theirs):
    the files' rewind then sees every call the desk made on the project, in the order they ran."""
    out: list[ToolCallRecord] = []
    seen = {session.id}
    parent_id = session.meta.get(BRANCH_OF)
    while isinstance(parent_id, str) and parent_id not in seen and len(seen) < MAX_BRANCH_DEPTH:
        seen.add(parent_id)
        parent = await store.get_session(parent_id)  # type: ignore[attr-defined]
        if parent is None:
            break
        out += await store.session_records(parent_id)  # type: ignore[attr-defined]
        parent_id = parent.meta.get(BRANCH_OF)
    return out


async def plan(store: object, settings: Settings, session_id: str, call_id: str) -> Rewind:
    """What rewinding `session_id`'s files to before `call_id` would change (nothing changes yet), and where
    its conversation would be rewound to: before the turn that asked for the call."""
    session, project, records = await _session_parts(store, session_id)
    shadow = checkpoint_store(settings, project)
    rewind = Rewind(await asyncio.to_thread(plan_rewind, shadow, records, call_id), shadow)
    record = next(r for r in records if r.id == call_id)  # plan_rewind said so
    try:
        rewind.point = point_before_call(session, await store.messages(session_id), record)  # type: ignore[attr-defined]
    except AgentDeskError as e:
        rewind.no_conversation = str(e)
    return rewind


async def plan_turn(store: object, settings: Settings, session_id: str, turn: int) -> Rewind:
    """Rewinding to before the `turn`-th prompt of a session (0 the first): the files to before the first call
    asked from that turn on (nothing when none may have written), and the conversation to before the prompt."""
    session, project, records = await _session_parts(store, session_id)
    point = point_before_turn(session, await store.messages(session_id), turn)  # type: ignore[attr-defined]
    records += await _ancestors_records(store, session)  # a branch's first turns were asked in the session before
    shadow = checkpoint_store(settings, project)
    call_id = first_call_from(point, records)
    try:
        if call_id is None:
            raise RewindError("No call was asked from this turn on.")
        files = await asyncio.to_thread(plan_rewind, shadow, records, call_id)
    except RewindError as e:
        if "nothing to rewind" not in str(e) and call_id is not None:
            raise
        files = RewindPlan(session.id, session.project_id, "", "", Checkpoint(""),
                           note="files: none to rewind (no call from this turn on may have changed a file)")
    return Rewind(files, shadow, point=point)


async def run(store: object, bus: EventBus, rewind: Rewind, *, actor: str, include_mine: bool = False,
              conversation: bool = False) -> Rewind:
    """Do the rewind shown to the person, and record it in the chain. The files must still be as they were
    when its plan was made (else RewindError, nothing changed); a rewind that fails is recorded as failed.
    `conversation`: the conversation goes on in a new session from before the turn (`rewind.branch`), where
    the files' rewind is recorded; the original session is left as it is."""
    p = rewind.plan
    if conversation and rewind.point is None:
        raise RewindError(f"The conversation cannot be rewound: {rewind.no_conversation}", hint="Nothing was changed.")
    if not p.empty:
        await _files(store, bus, rewind, actor=actor, include_mine=include_mine)
    if conversation and rewind.point is not None and not (rewind.done and rewind.done.failed):
        rewind.branch, rewind.branch_record = await branch_session(
            store, bus, rewind.point, actor=actor)  # type: ignore[arg-type]
    if not p.empty:
        rewind.record = await record_rewind(
            store, bus, p, rewind.done, actor=actor, after=rewind.after,  # type: ignore[arg-type]
            session_id=rewind.branch.id if rewind.branch else "")
    return rewind


async def _files(store: object, bus: EventBus, rewind: Rewind, *, actor: str, include_mine: bool) -> None:
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
    try:  # the files as the rewind left them: a later rewind tells its changes from the person's by it
        rewind.after = await asyncio.to_thread(shadow.take)
    except CheckpointError:
        rewind.after = None
