"""The store seam: what the core needs to persist, as a protocol, plus a small in-memory fake."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from ._events import Channel, Envelope
from ._messages import StoredMessage
from ._project import ProjectInfo, SessionInfo
from ._record import AuditEntry, ToolCallRecord, ToolCallState


@runtime_checkable
class RecordStore(Protocol):
    """Durable home of records, their audit trail, sessions, messages and event envelopes."""

    async def save_transition(self, record: ToolCallRecord, entry: AuditEntry) -> None:
        """Upsert `record` and append `entry` to the hash chain; returns once it is durable."""

    def append_event(self, env: Envelope) -> None:
        """Queue an envelope for writing, in order, without waiting."""

    async def flush(self) -> None:
        """Wait until everything queued so far is written."""

    async def events_since(
        self,
        since: int,
        channels: Iterable[Channel],
        *,
        upto: int | None = None,
        session_id: str | None = None,
        types: Iterable[str] | None = None,  # only these event types (None: all)
    ) -> list[Envelope]: ...

    async def last_event_seq(self) -> int: ...

    async def get_record(self, record_id: str) -> ToolCallRecord | None: ...

    async def session_records(
        self, session_id: str, states: Iterable[ToolCallState] | None = None, *, trails: bool = True
    ) -> list[ToolCallRecord]: ...

    async def save_project(self, project: ProjectInfo) -> None: ...

    async def get_project(self, project_id: str) -> ProjectInfo | None: ...

    async def list_projects(self) -> list[ProjectInfo]: ...

    async def save_session(self, session: SessionInfo) -> None: ...

    async def get_session(self, session_id: str) -> SessionInfo | None: ...

    async def list_sessions(self, project_id: str | None = None) -> list[SessionInfo]: ...

    async def append_message(self, message: StoredMessage,
                             transitions: Sequence[tuple[ToolCallRecord, AuditEntry]] = (), *,
                             first: bool = False) -> int:
        """Append `message`; with `transitions` (records and entries, as save_transition takes them), all of
        them in the same commit, before it in the chain (after it with `first`): durable together or not at
        all."""

    async def messages(self, session_id: str) -> list[StoredMessage]: ...

    async def close(self) -> None: ...


class MemoryStore:
    """The in-memory fake of RecordStore: for unit tests of the core that need no file."""

    def __init__(self) -> None:
        self.records: dict[str, ToolCallRecord] = {}
        self.entries: list[AuditEntry] = []
        self.events: list[Envelope] = []
        self.projects: dict[str, ProjectInfo] = {}
        self.sessions: dict[str, SessionInfo] = {}
        self._messages: list[StoredMessage] = []
        self.fail_next: Exception | None = None

    async def save_transition(self, record: ToolCallRecord, entry: AuditEntry) -> None:
        await asyncio.sleep(0)
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        entry.seq = len(self.entries) + 1
        self.entries.append(entry)
        self.records[record.id] = ToolCallRecord.from_dict(record.to_dict(), list(record.trail))

    def append_event(self, env: Envelope) -> None:
        self.events.append(env)

    async def flush(self) -> None:
        await asyncio.sleep(0)

    async def events_since(self, since, channels, *, upto=None, session_id=None, types=None) -> list[Envelope]:
        chans = set(channels)
        kinds = set(types) if types else None
        return [
            e
            for e in self.events
            if e.seq > since
            and (upto is None or e.seq <= upto)
            and e.channel in chans
            and (not session_id or e.session_id == session_id)
            and (kinds is None or e.type in kinds)
        ]

    async def last_event_seq(self) -> int:
        return self.events[-1].seq if self.events else 0

    async def get_record(self, record_id: str) -> ToolCallRecord | None:
        return self.records.get(record_id)

    async def session_records(self, session_id, states=None, *, trails=True) -> list[ToolCallRecord]:
        wanted = set(states) if states else None
        return [
            r
            for r in self.records.values()
            if r.session_id == session_id and (wanted is None or r.state in wanted)
        ]

    async def save_project(self, project: ProjectInfo) -> None:
        self.projects[project.id] = project

    async def get_project(self, project_id: str) -> ProjectInfo | None:
        return self.projects.get(project_id)

    async def list_projects(self) -> list[ProjectInfo]:
        return list(self.projects.values())

    async def save_session(self, session: SessionInfo) -> None:
        self.sessions[session.id] = session

    async def get_session(self, session_id: str) -> SessionInfo | None:
        return self.sessions.get(session_id)

    async def list_sessions(self, project_id: str | None = None) -> list[SessionInfo]:
        return [s for s in self.sessions.values() if project_id is None or s.project_id == project_id]

    async def append_message(self, message: StoredMessage,
                             transitions: Sequence[tuple[ToolCallRecord, AuditEntry]] = (), *,
                             first: bool = False) -> int:
        if self.fail_next is not None and first:  # all or nothing: refused before the message is kept
            exc, self.fail_next = self.fail_next, None
            raise exc
        before, after = ((), transitions) if first else (transitions, ())
        for record, entry in before:
            await self.save_transition(record, entry)
        message.id = len(self._messages) + 1
        self._messages.append(message)
        for record, entry in after:
            await self.save_transition(record, entry)
        return message.id

    async def messages(self, session_id: str) -> list[StoredMessage]:
        return [m for m in self._messages if m.session_id == session_id]

    async def close(self) -> None:
        return None

