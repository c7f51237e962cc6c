"""Audit queries: the filter a UI or CLI builds, the light row it lists, and the SQL behind both."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from desktop_app.core import AuditEntry, StoreError, ToolCallRecord, ToolCallState

from ._tables import AuditEntryRow, ToolCallRow, columns, decode_row, from_json

SEARCH_TEXT_MAX = 200_000

# A ToolCallRecord's columns: the row key and the index's text are the store's own.
RECORD_COLUMNS = columns(ToolCallRow, without=("pk", "search_text"))
ENTRY_COLUMNS = columns(AuditEntryRow)


@dataclass(slots=True)
class AuditQuery:
    """Which tool-call records to find. Every field narrows; results come newest first.

    since/until bound `created_at` (since <= t < until, epoch seconds). `text` is free text over the
    record's name, input, result text and error: words are ANDed, a word ending in `*` is a prefix,
    and punctuation splits words into a phrase (so `src/main.py` finds that path). `limit=None`
    means no limit.
    """

    project_id: str | None = None
    session_id: str | None = None
    tool: str | None = None
    tool_use_id: str | None = None  # the model's id, which several records may carry
    states: Iterable[ToolCallState | str] | ToolCallState | str | None = None
    outcome: str | None = None
    since: float | None = None
    until: float | None = None
    text: str | None = None
    limit: int | None = 100
    offset: int = 0

    def state_values(self) -> list[str]:
        if self.states is None:
            return []
        raw = [self.states] if isinstance(self.states, str) else list(self.states)
        out = []
        for s in raw:
            try:
                out.append(ToolCallState(s).value)
            except ValueError:
                raise StoreError(
                    f"unknown tool-call state {s!r} in an audit query",
                    hint=f"use one of {', '.join(x.value for x in ToolCallState)}",
                ) from None
        return out

    def check(self) -> None:
        if self.limit is not None and self.limit < 0:
            raise StoreError(f"audit query limit must be >= 0 or None, got {self.limit}")
        if self.offset < 0:
            raise StoreError(f"audit query offset must be >= 0, got {self.offset}")


@dataclass(slots=True, frozen=True)
class RecordRow:
    """A tool-call record without its payloads: what a list or table shows."""

    id: str
    name: str
    state: ToolCallState
    outcome: str | None
    session_id: str
    project_id: str
    created_at: float
    updated_at: float
    duration_ms: float | None
    is_error: bool
    risk: str
    read_only: bool
    input_preview: str


@dataclass(slots=True, frozen=True)
class StoreStats:
    records: int
    by_state: dict[str, int]
    by_tool: dict[str, int]
    entries: int
    events: int
    projects: int
    sessions: int
    messages: int
    last_entry_seq: int
    last_event_seq: int
    size_bytes: int | None


def fts_match(text: str) -> str | None:
    """Turn free text into an FTS5 MATCH string: every whitespace-separated chunk becomes a quoted
    phrase (the tokenizer splits it further), ANDed; a trailing `*` keeps a prefix search."""
    parts = []
    for chunk in text.split():
        prefix = chunk.endswith("*")
        chunk = chunk.rstrip("*")
        if not re.search(r"[^\W_]", chunk):
            continue
        parts.append('"' + chunk.replace('"', '""') + '"' + ("*" if prefix else ""))
    return " AND ".join(parts) if parts else None


def like_terms(text: str) -> list[str]:
    """The same free text for databases without FTS5: lower-cased substrings, ANDed."""
    return [t.lower().rstrip("*") for t in text.split() if re.search(r"[^\W_]", t)]


@dataclass(slots=True)
class SqlParts:
    """FROM, WHERE and ORDER BY of a query, with its parameters."""

    source: str
    where: str
    order: str
    params: dict[str, Any]

    def page(self, q: AuditQuery, order: str | None = None) -> str:
        sql = f" ORDER BY {order or self.order}"
        if q.limit is not None:
            sql += " LIMIT :limit"
            self.params["limit"] = q.limit
        elif q.offset:
            sql += " LIMIT -1"
        if q.offset:
            sql += " OFFSET :offset"
            self.params["offset"] = q.offset
        return sql


NEWEST_FIRST = "t.created_at DESC, t.pk DESC"
# With FTS5, results come in recording order (pk), which the index walks backwards cheaply even when a
# word matches most records; records are inserted when created, so this is newest first too.
NEWEST_FIRST_TEXT = "f.rowid DESC"


def build_sql(q: AuditQuery, *, fts: bool) -> SqlParts:
    q.check()
    source, order = "tool_calls t", NEWEST_FIRST
    clauses: list[str] = []
    params: dict[str, Any] = {}
    for column, value in (("project_id", q.project_id), ("session_id", q.session_id), ("name", q.tool),
                          ("tool_use_id", q.tool_use_id)):
        if value is not None:
            clauses.append(f"t.{column} = :{column}")
            params[column] = value
    states = q.state_values()
    if len(states) == 1:
        clauses.append("t.state = :state0")
        params["state0"] = states[0]
    elif states:
        names = [f":state{i}" for i in range(len(states))]
        clauses.append(f"t.state IN ({', '.join(names)})")
        params.update({f"state{i}": s for i, s in enumerate(states)})
    if q.outcome is not None:
        clauses.append("t.outcome = :outcome")
        params["outcome"] = q.outcome
    if q.since is not None:
        clauses.append("t.created_at >= :since")
        params["since"] = q.since
    if q.until is not None:
        clauses.append("t.created_at < :until")
        params["until"] = q.until
    if q.text:
        if fts:
            match = fts_match(q.text)
            if match is not None:
                source, order = "tool_calls_fts f JOIN tool_calls t ON t.pk = f.rowid", NEWEST_FIRST_TEXT
                clauses.append("tool_calls_fts MATCH :fts")
                params["fts"] = match
        else:
            for i, term in enumerate(like_terms(q.text)):
                clauses.append(f"lower(t.search_text) LIKE :like{i}")
                params[f"like{i}"] = f"%{term}%"
    where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    return SqlParts(source, where, order, params)


def record_from_row(row: Any, trail: list[AuditEntry] | None = None) -> ToolCallRecord:
    return ToolCallRecord.from_dict(decode_row(ToolCallRow, RECORD_COLUMNS, row), trail or [])


def entry_from_row(row: Any) -> AuditEntry:
    seq, record_id, state, at, actor, note, data, _prev, h = row[:9]
    return AuditEntry(record_id=record_id, state=ToolCallState(state), at=at, actor=actor, note=note,
                      data=from_json(data) or {}, seq=seq, hash=h)


def _strings(value: Any, out: list[str], skip_keys: frozenset[str] = frozenset()) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        if value.get("type") == "image":
            return  # base64 pixels are not words
        for k, v in value.items():
            if k not in skip_keys:
                _strings(v, out, skip_keys)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _strings(v, out, skip_keys)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(str(value))


def search_text(record: ToolCallRecord) -> str:
    """What the full-text index sees for a record: its name, input and result words, error."""
    parts: list[str] = [record.name]
    _strings(record.input, parts)
    if record.result:
        _strings(record.result, parts)
    if record.error:
        parts.append(record.error)
    return "\n".join(parts)[:SEARCH_TEXT_MAX]
