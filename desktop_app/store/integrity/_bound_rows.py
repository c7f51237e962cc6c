"""The rows the window reads back, bound into the chain: each write transaction that stores events, sessions or
projects appends one ROWS entry whose `data` holds the sha256 of each such row as stored ({"events": {seq:
digest}, "sessions": {id: digest}, "projects": {id: digest}}), and `verify` recomputes them and names the rows
that differ, have no entry, or were deleted. Rows stored before migration 0007 are listed in `unbound_rows`
and reported as not bound."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ._chain import canonical_json
from ._digests import row_digest

ROWS_STATE = "ROWS"
ROWS_ACTOR = "desk"
EVENT_FIELDS = ("seq", "channel", "type", "time", "session_id", "payload")
SESSION_FIELDS = ("id", "project_id", "title", "model", "created_at", "updated_at", "meta")
PROJECT_FIELDS = ("id", "name", "path", "image", "permission_mode", "settings", "created_at")
_FLOATS = frozenset({"time", "created_at", "updated_at"})
KINDS = (("events", "events", EVENT_FIELDS), ("sessions", "sessions", SESSION_FIELDS),
         ("projects", "projects", PROJECT_FIELDS))


def values(fields: tuple[str, ...], params: dict[str, Any]) -> tuple[Any, ...]:
    """A row's parameters (JSON columns already text) as the tuple verify reads back."""
    return tuple(float(params[f]) if f in _FLOATS and params[f] is not None else params[f] for f in fields)


@dataclass(slots=True)
class BoundRows:
    """What one write transaction binds; `entry_data()` is the ROWS entry's canonical data, or None."""

    events: dict[str, str] = field(default_factory=dict)
    sessions: dict[str, str] = field(default_factory=dict)
    projects: dict[str, str] = field(default_factory=dict)

    def event(self, params: dict[str, Any]) -> None:
        self.events[str(params["seq"])] = row_digest(values(EVENT_FIELDS, params))

    def session(self, params: dict[str, Any]) -> None:
        self.sessions[str(params["id"])] = row_digest(values(SESSION_FIELDS, params))

    def project(self, params: dict[str, Any]) -> None:
        self.projects[str(params["id"])] = row_digest(values(PROJECT_FIELDS, params))

    def entry_data(self) -> str | None:
        if not (self.events or self.sessions or self.projects):
            return None
        data = {k: v for k, v in (("events", self.events), ("sessions", self.sessions),
                                  ("projects", self.projects)) if v}
        return canonical_json(data)


# -- verify ----------------------------------------------------------------------------------------------
Report = Callable[[str, str], None]  # (problem, text): a finding
_ENTRIES = f"SELECT seq, data FROM audit_entries WHERE state = '{ROWS_STATE}' AND record_id IS NULL " \
           "AND message_id IS NULL ORDER BY seq"


@dataclass(slots=True)
class Bound:
    """Each row's digest as the newest ROWS entry holds it, and the rows stored before binding."""

    digests: dict[str, dict[str, str]] = field(default_factory=lambda: {k: {} for k, _, _ in KINDS})
    events_through: int = 0
    unbound: dict[str, set[str]] = field(default_factory=lambda: {"session": set(), "project": set()})


def _load(conn: Connection, rows: Callable[[str], Iterator[list[tuple[Any, ...]]]], report: Report) -> Bound:
    bound = Bound()
    for batch in rows(_ENTRIES):
        for seq, data in batch:
            parsed = json.loads(data) if isinstance(data, str) else data
            for kind, _, _ in KINDS:
                for key, digest in (parsed.get(kind) or {}).items():
                    if kind == "events" and key in bound.digests[kind]:
                        report("row-deleted", f"event {key} was bound twice (entry {seq}): the first event {key} "
                               "was deleted and its number used again")
                    bound.digests[kind][key] = digest
    for kind, key in conn.execute(text("SELECT kind, key FROM unbound_rows")):
        if kind == "events-through":
            bound.events_through = max(bound.events_through, int(key))
        elif kind in bound.unbound:
            bound.unbound[kind].add(key)
    return bound


def check_bound_rows(conn: Connection, rows: Callable[[str], Iterator[list[tuple[Any, ...]]]],
                     report: Report) -> tuple[int, str]:
    """Every events, sessions and projects row against its newest ROWS entry; `report` gets each finding.
    Returns the rows checked and a note on those stored before binding ("" when none)."""
    bound = _load(conn, rows, report)
    checked, old = 0, {"events": 0, "sessions": 0, "projects": 0}
    for kind, table, fields in KINDS:
        digests = dict(bound.digests[kind])
        for batch in rows(f"SELECT {', '.join(fields)} FROM {table}"):
            for row in batch:
                key = str(row[0])
                want = digests.pop(key, None)
                if want is None:
                    if _before_binding(kind, key, bound):
                        old[kind] += 1
                    else:
                        report("row-unchained", f"{_name(kind, row)} has no entry in the audit chain: it was added "
                               "outside the store")
                    continue
                checked += 1
                if row_digest(_normal(fields, row)) != want:
                    report("row-edited", f"{_name(kind, row)} was rewritten in {table} after its audit entry: "
                           "its stored row differs from the chain")
        for key in digests:
            report("row-deleted", f"{kind[:-1]} {key} is in the audit chain but its row in {table} was deleted")
    note = ", ".join(f"{n} {k}" for k, n in old.items() if n)
    return checked, (f"{note} stored before the chain bound them are not bound (not cross-checked)" if note else "")


def _before_binding(kind: str, key: str, bound: Bound) -> bool:
    if kind == "events":
        return key.isdigit() and int(key) <= bound.events_through
    return key in bound.unbound[kind[:-1]]


def _normal(fields: tuple[str, ...], row: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(float(v) if f in _FLOATS and v is not None else v for f, v in zip(fields, row, strict=True))


def _name(kind: str, row: tuple[Any, ...]) -> str:
    if kind == "events":
        return f"event {row[0]} ({row[2]}{', session ' + row[4] if row[4] else ''})"
    return f"{kind[:-1]} {row[0]}"
