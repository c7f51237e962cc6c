"""`agent-desk sessions`: list, status, resume and compact of stored sessions."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core import (
    STATUS_CHANNELS,
    AgentDeskError,
    AgentStatus,
    ConfigError,
    image_of_block,
    visible,
)
from ._common import EXIT_OK, open_project_runtime, read_prompt, when
from ._db import open_existing_store
from ._run import drive, note_project, prompt_images

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ..core import ProjectInfo, SessionInfo
    from ..runtime import ProjectRuntime, SqlStore


# sessions ---------------------------------------------------------------------------------------------
async def sessions_command(args: argparse.Namespace) -> int:

    store = await open_existing_store(args)
    if args.action == "resume":
        return await _resume(args, store)
    if args.action == "compact":
        return await _compact(args, store)
    try:
        if args.action == "rewind":
            from ._rewind import rewind_command

            return await rewind_command(args, store)
        if args.action == "list":
            await _list_sessions(args, store)
        elif args.action == "status":
            await _session_status(args, store)
        else:
            for m in await store.messages((await _stored_session(store, args.id)).id):
                for b in m.content:
                    print(f"{m.role:9} {_block(b)}")
        return EXIT_OK
    finally:
        await store.close()


async def _list_sessions(args: argparse.Namespace, store: SqlStore) -> None:
    projects = {p.id: p for p in await store.list_projects()}
    project_id = project_id_for(projects.values(), args.project) if args.project else None
    for s in sorted(await store.list_sessions(project_id), key=lambda s: s.updated_at, reverse=True):
        proj = projects.get(s.project_id)
        print(f"{s.id}  {when(s.updated_at)}  {proj.name if proj else s.project_id}  {s.title!r}")


async def _session_status(args: argparse.Namespace, store: SqlStore) -> None:
    """The agent's state as this session's events last recorded it (the session may run in another process)."""
    from ..core import status_from_events

    session = await _stored_session(store, args.id)
    events = await store.events_since(0, STATUS_CHANNELS, session_id=session.id)
    status = status_from_events(session.id, events, await store.session_records(session.id))
    if args.json:
        print(json.dumps({"title": session.title, **status.to_dict()}, default=str))
        return
    for line in status_lines(status, session.title):
        print(line)


def status_lines(status: AgentStatus, title: str = "") -> list[str]:
    state = status.state.value + (f" ({status.reason})" if status.reason else "")
    lines = [f"session   {status.session_id}" + (f"  {title!r}" if title else ""),
             f"state     {state}" + (f": {status.why}" if status.why else "")
             + ("" if status.live else "  (as last recorded)"),
             f"steps     {status.steps} in the last turn, {status.total_steps} in all",
             f"cursor    {status.cursor}"]
    for a in status.pending_approvals:
        lines.append(f"waiting   approval {a['call_id']} {a['name']} (risk {a['risk']}): {visible(a['reason'])}")
    for q in status.pending_questions:
        choices = f" [{' | '.join(q['choices'])}]" if q["choices"] else ""
        lines.append(f"waiting   {q['kind']} {q['question_id']}: {visible(q['text'][:200])}{choices}")
    if status.last_error:
        e = status.last_error
        lines.append(f"error     {e['phase']}/{e['severity']}: {visible(e['message'])}")
    return lines


async def _stored_session(store: SqlStore, session_id: str) -> SessionInfo:
    session = await store.get_session(session_id)
    if session is None:
        raise AgentDeskError(f"There is no session {session_id!r}.", hint="`agent-desk sessions list` shows them.")
    return session


async def _session_runtime(args: argparse.Namespace, store: SqlStore) -> tuple[SessionInfo, ProjectRuntime]:
    """A stored session (`args.id`) and its project's runtime, which owns `store` from then on (closed here
    when the runtime cannot be opened)."""
    try:
        session = await _stored_session(store, args.id)
        project = await store.get_project(session.project_id)
        if project is None:
            raise AgentDeskError(f"The project of session {session.id} is missing from the database.")
        args.image = None
        return session, await open_project_runtime(args, project, store)
    except BaseException:
        await store.close()
        raise


async def _resume(args: argparse.Namespace, store: SqlStore) -> int:
    """Reopen a stored session in its project's runtime, which owns `store` from then on."""
    try:
        args.prompt = read_prompt(args.prompt, required=False)
        if args.image_files and not args.prompt:
            raise ConfigError("--image-file goes with a new message: give the prompt too.",
                              hint='agent-desk sessions resume ID "what is in this picture?" --image-file PATH')
        images = prompt_images(args.image_files)  # every file checked before the session is opened
    except BaseException:
        await store.close()
        raise
    session, runtime = await _session_runtime(args, store)
    try:
        await note_project(runtime.project)
        opened = await runtime.open_session(session.id)
        opened.set_breakpoints(args.break_on or [])
        return await drive(runtime, opened, args, args.prompt, images)
    finally:
        await runtime.close()


async def _compact(args: argparse.Namespace, store: SqlStore) -> int:
    """Compact a stored session by hand in its project's runtime, which owns `store` from then on."""
    session, runtime = await _session_runtime(args, store)
    try:
        agent = await runtime.open_session(session.id)
        if not await agent.compact():
            print("nothing to compact: the session has a single turn", file=sys.stderr)
            return EXIT_OK
        from ..core import compaction_facts

        summary = (await agent.history())[-1]
        facts = compaction_facts(summary)
        print(f"compacted: {facts.get('summarised', 0)} messages summarised; the audit keeps them", file=sys.stderr)
        print(summary.content[0].get("text", ""))
        return EXIT_OK
    finally:
        await runtime.close()


def project_id_for(projects: Iterable[ProjectInfo], folder: str) -> str:

    want = Path(folder).resolve()
    return next((p.id for p in projects if Path(p.path) == want), "-")


def _block(b: dict[str, Any]) -> str:
    kind = b.get("type")
    if kind == "text":
        return b["text"].replace("\n", "\n          ")
    if kind == "tool_use":
        return f"[tool_use {b['name']} {json.dumps(b.get('input'))[:200]}]"
    if kind == "tool_result":
        content = b.get("content")
        text = content if isinstance(content, str) else " ".join(
            c.get("text", "[image]") for c in content or [])
        return f"[tool_result{' error' if b.get('is_error') else ''} {text[:200]!r}]"
    if kind == "thinking":
        return f"[thinking {b.get('thinking', '')[:120]!r}]"
    if kind == "image" and (img := image_of_block(b)) is not None:  # named by digest, as the store keeps it
        return f"[image sha256:{img.sha256} {img.media_type} {img.size} bytes {img.width}×{img.height}]"
    return f"[{kind}]"
