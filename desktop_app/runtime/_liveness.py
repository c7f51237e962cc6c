"""Which process has a session open, and the calls left open by a process that is gone (sealed at start-up)."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from ..core import (
    AgentStateChanged,
    EventBus,
    SessionInfo,
    SessionNotice,
    ToolCallRecord,
    ToolCallState,
    seal_calls,
    summarize_input,
)

# the process that has a session open, and the calls of a process that is gone ------------------------------
OPEN_IN = "open_in"  # SessionInfo.meta: {"host", "pid", "started"} of the process that opened it last
_OPEN_STATES = (ToolCallState.PENDING, ToolCallState.APPROVED, ToolCallState.EXECUTING)


def this_process() -> dict[str, Any]:
    import psutil

    me = psutil.Process()
    return {"host": socket.gethostname(), "pid": me.pid, "started": round(me.create_time(), 2)}


def process_alive(owner: Any) -> bool | None:
    """Whether the process named by `owner` (`this_process()` as stored) still runs: a pid alone could be
    reused, so its start time must match too. None when it cannot be told (another host, another user)."""
    import psutil

    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int):
        return False  # a session from before the mark (or a damaged one): nobody claims it
    if owner.get("host") != socket.gethostname():
        return None
    try:
        started = psutil.Process(owner["pid"]).create_time()
        claimed = float(owner.get("started") or 0)
    except (psutil.NoSuchProcess, ValueError, TypeError, OverflowError):
        return False  # gone, or a mark no process could have written: nobody claims the session
    except (psutil.AccessDenied, OSError):
        return None
    return abs(started - claimed) < 1.0


async def mark_open_here(store: Any, session: SessionInfo) -> None:
    """Say in the store that this process has `session` open (read fresh: a title renamed since is kept)."""
    fresh = await store.get_session(session.id) or session
    fresh.meta = {**(fresh.meta or {}), OPEN_IN: await asyncio.to_thread(this_process)}
    session.meta = fresh.meta
    await store.save_session(fresh)


async def mark_closed_here(store: Any, session_id: str) -> None:
    """This process no longer has the session open (it quit): what it left open is sealed at the next
    start, by whichever process opens the store, this one included."""
    fresh = await store.get_session(session_id)
    if fresh is not None and (fresh.meta or {}).get(OPEN_IN) == await asyncio.to_thread(this_process):
        fresh.meta = {k: v for k, v in fresh.meta.items() if k != OPEN_IN}
        await store.save_session(fresh)


async def seal_abandoned(store: Any, bus: EventBus) -> dict[str, list[ToolCallRecord]]:
    """At start-up: the calls left open by a process that is gone (killed, crashed, quit anyway) are sealed
    now, and each session gets a notice of what was running. A session another live process has open
    (the CLI, another desk on a shared database) is left alone. Returns the sealed calls by session."""
    from ..store import AuditQuery

    query = getattr(store, "query", None)
    if query is None:
        return {}
    by_session: dict[str, list[ToolCallRecord]] = {}
    for record in await query(AuditQuery(states=list(_OPEN_STATES), limit=None)):
        by_session.setdefault(record.session_id, []).append(record)
    sealed: dict[str, list[ToolCallRecord]] = {}
    for sid, records in by_session.items():
        session = await store.get_session(sid)
        owner = (session.meta or {}).get(OPEN_IN) if session is not None else None
        if await asyncio.to_thread(process_alive, owner) is not False:
            continue
        records.sort(key=lambda r: (r.created_at, r.batch_index))
        await seal_calls(store, bus, records)
        bus.publish(SessionNotice(session_id=sid, level="warning", text=interrupted_notice(records)))
        why = "the process that ran this session ended while calls ran: they were interrupted"
        bus.publish(AgentStateChanged(session_id=sid, state="STOPPED", previous="WORKING", reason="interrupted",
                                      why=why, note=why))
        sealed[sid] = records
    return sealed


def interrupted_notice(records: list[ToolCallRecord]) -> str:
    """What a person reads in the conversation about the calls a gone process took with it."""
    shown = [f"{r.name} {summarize_input(r.input, 60)}".strip() for r in records[:3]]
    more = f" and {len(records) - 3} more" if len(records) > 3 else ""
    n = len(records)
    return (f"The app stopped while {n} call{'s were' if n != 1 else ' was'} running: {'; '.join(shown)}{more}. "
            f"{'They were' if n != 1 else 'It was'} interrupted and may have changed files; check the workspace "
            "before running it again.")
