"""Audit queries: the filter a UI or CLI builds, the light row it lists, and the SQL behind both."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from desktop_app.core import AuditEntry, StoreError, ToolCallRecord, ToolCallState

from ._search import TS_CONFIG, fts_match, like_patterns, tsquery
from ._tables import AuditEntryRow, ToolCallRow, columns, decode_row, from_json

# A ToolCallRecord's columns: the row key and the index's text are the store's own.
RECORD_COLUMNS = columns(ToolCallRow, without=("pk", "search_text"))
ENTRY_COLUMNS = columns(AuditEntryRow)


@dataclass(slots=True)
class AuditQuery:
    """Which tool-call records to find. Every field narrows; results come newest first.

    since/until bound `created_at` (since <= t < until, epoch seconds). `text` is free text over the
    record's name, input, result text and error: words are ANDed, a word ending in `*` is a prefix,
    and punctuation splits words into a phrase (so `src/main.py` finds that path). `limit=None`
    means no limit. `after` is a page key (`RecordRow.page_key` of the last row shown): the next page
    starts after it, at any depth, without counting the rows before it as `offset` does.
    """

    project_id: str | None = None
    session_id: str | None = None
    tool: str | None = None
    tool_use_id: str | None = None  # the model's id, which several records may carry
    states: Iterable[ToolCallState | str] | ToolCallState | str | None = None
    outcome: str | None = None
    risk: str | None = None  # "low", "medium" or "high", as the call was judged
    decider: str | None = None  # "person" answered its approval; "desk" (any of:) "rule", "mode", "hook", "expiry"
    mcp_server: str | None = None  # the calls of one MCP server's tools (mcp__SERVER__tool)
    domain: str | None = None  # calls that connected (or tried to) through the network proxy to it or a subdomain
    since: float | None = None
    until: float | None = None
    text: str | None = None
    limit: int | None = 100
    offset: int = 0
    after: tuple[float, int] | None = None

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
        if self.after is not None:
            try:
                at, pk = self.after
                self.after = (float(at), int(pk))
            except (TypeError, ValueError):
                raise StoreError(f"audit query page key must be (created_at, key), got {self.after!r}",
                                 hint="pass the page_key of the last row of the previous page") from None


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
    page_key: tuple[float, int] | None = None  # AuditQuery.after for the page after this row


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


@dataclass(slots=True)
class SqlParts:
    """FROM, WHERE and ORDER BY of a query, with its parameters, for one database (`dialect`)."""

    source: str
    where: str
    order: str
    params: dict[str, Any]
    dialect: str = "sqlite"

    def page(self, q: AuditQuery, order: str | None = None) -> str:
        sql = f" ORDER BY {order or self.order}"
        if q.limit is not None:
            sql += " LIMIT :limit"
            self.params["limit"] = q.limit
        elif q.offset and self.dialect == "sqlite":
            sql += " LIMIT -1"  # SQLite needs a LIMIT before OFFSET; PostgreSQL refuses a negative one
        if q.offset:
            sql += " OFFSET :offset"
            self.params["offset"] = q.offset
        return sql


NEWEST_FIRST = "t.created_at DESC, t.pk DESC"
# With a text filter, results come in recording order (pk), newest first too (records are inserted when
# created): FTS5 walks its index backwards cheaply even when a word matches most records, and PostgreSQL
# gives the same order, so both databases list the same hits in the same order.
NEWEST_FIRST_TEXT = "f.rowid DESC"
NEWEST_FIRST_PK = "t.pk DESC"


def build_sql(q: AuditQuery, *, dialect: str) -> SqlParts:
    """The SQL parts of `q` on `dialect` ("sqlite", "postgresql", or another: LIKE over the index's text)."""
    q.check()
    p = SqlParts("tool_calls t", "", NEWEST_FIRST, {}, dialect)
    clauses: list[str] = []
    for column, value in (("project_id", q.project_id), ("session_id", q.session_id), ("name", q.tool),
                          ("tool_use_id", q.tool_use_id)):
        if value is not None:
            clauses.append(f"t.{column} = :{column}")
            p.params[column] = value
    states = q.state_values()
    if len(states) == 1:
        clauses.append("t.state = :state0")
        p.params["state0"] = states[0]
    elif states:
        names = [f":state{i}" for i in range(len(states))]
        clauses.append(f"t.state IN ({', '.join(names)})")
        p.params.update({f"state{i}": s for i, s in enumerate(states)})
    for column, op, value in (("outcome", "=", q.outcome), ("risk", "=", q.risk), ("created_at", ">=", q.since),
                              ("created_at", "<", q.until)):
        if value is not None:
            name = {">=": "since", "<": "until"}.get(op, column)
            clauses.append(f"t.{column} {op} :{name}")
            p.params[name] = value
    if q.decider is not None:
        clauses.append(_decider_clause(p, q.decider))
    if q.mcp_server is not None:  # the desk's MCP names are mcp__SERVER__TOOL; '_' is LIKE's wildcard
        clauses.append("t.name LIKE :mcp_prefix ESCAPE '!'")
        p.params["mcp_prefix"] = "mcp!_!_" + q.mcp_server.replace("!", "!!").replace("_", "!_").replace(
            "%", "!%") + "!_!_%"
    if q.domain:
        clauses.append(_domain_clause(p, q.domain))
    if q.text:
        clauses += _text_clauses(p, q.text)
    if q.after is not None:
        clauses.append(_after_clause(p, q.after))
    p.where = (" WHERE " + " AND ".join(clauses)) if clauses else ""
    return p


DECIDERS = ("person", "desk", "rule", "mode", "hook", "expiry")
_LAST_KIND = {"rule": ("rule", "session-rule"), "mode": ("mode",), "hook": ("hook",)}


def _decider_clause(p: SqlParts, decider: str) -> str:
    """Who decided, on p's database: a person answered the call's approval (its `decided_by`); else the desk
    did, and its last provenance says how (a rule, the mode, a hook); or the approval expired."""
    if decider not in DECIDERS:
        raise StoreError(f"unknown decider {decider!r} in an audit query", hint=f"use one of {', '.join(DECIDERS)}")
    if decider == "expiry":
        return "t.outcome = 'expired'"
    if p.dialect == "postgresql":
        by, last = "(t.approval::jsonb ->> 'decided_by')", "(t.provenance::jsonb -> -1 ->> 'kind')"
    else:  # SQLite's JSON1, built in
        by, last = "json_extract(t.approval, '$.decided_by')", "json_extract(t.provenance, '$[#-1].kind')"
    if decider == "person":
        return f"{by} IS NOT NULL"
    if decider == "desk":
        return f"{by} IS NULL"
    kinds = _LAST_KIND[decider]
    p.params.update({f"kind{i}": k for i, k in enumerate(kinds)})
    return f"{by} IS NULL AND {last} IN ({', '.join(f':kind{i}' for i in range(len(kinds)))})"


def _domain_clause(p: SqlParts, domain: str) -> str:
    """The call has a network entry in its trail for `domain` or one of its subdomains (the proxy's evidence)."""
    p.params["domain"] = domain.strip().lower().rstrip(".")
    p.params["subdomain"] = "%." + p.params["domain"].replace("!", "!!").replace("%", "!%").replace("_", "!_")
    if p.dialect == "postgresql":
        field = "(e.data::jsonb -> 'network' ->> 'domain')"
    else:
        field = "json_extract(e.data, '$.network.domain')"
    return (f"EXISTS (SELECT 1 FROM audit_entries e WHERE e.record_id = t.id AND e.actor = 'network' "
            f"AND ({field} = :domain OR {field} LIKE :subdomain ESCAPE '!'))")


def _text_clauses(p: SqlParts, text: str) -> list[str]:
    """The free-text filter on p's database; sets its source and order when an index answers it."""
    if p.dialect == "sqlite":
        match = fts_match(text)
        if match is None:
            return []
        p.source, p.order = "tool_calls_fts f JOIN tool_calls t ON t.pk = f.rowid", NEWEST_FIRST_TEXT
        p.params["fts"] = match
        return ["tool_calls_fts MATCH :fts"]
    if p.dialect == "postgresql":
        query = tsquery(text)
        if query is None:
            return []
        p.order = NEWEST_FIRST_PK
        p.params["tsq"] = query
        return [f"t.search_vector @@ to_tsquery('{TS_CONFIG}', :tsq)"]
    patterns = like_patterns(text)
    p.params.update({f"like{i}": pattern for i, pattern in enumerate(patterns)})
    return [f"lower(t.search_text) LIKE :like{i} ESCAPE '!'" for i in range(len(patterns))]


def _after_clause(p: SqlParts, after: tuple[float, int]) -> str:
    """Keyset paging: the rows after `after` in p's order (written so an index bounds the range)."""
    p.params["after_at"], p.params["after_pk"] = after
    if p.order == NEWEST_FIRST_TEXT:
        return "f.rowid < :after_pk"
    if p.order == NEWEST_FIRST_PK:
        return "t.pk < :after_pk"
    return "t.created_at <= :after_at AND (t.created_at < :after_at OR t.pk < :after_pk)"


def record_from_row(row: Any, trail: list[AuditEntry] | None = None) -> ToolCallRecord:
    return ToolCallRecord.from_dict(decode_row(ToolCallRow, RECORD_COLUMNS, row), trail or [])


def entry_from_row(row: Any) -> AuditEntry:
    seq, record_id, state, at, actor, note, data, _prev, h = row[:9]
    return AuditEntry(record_id=record_id, state=ToolCallState(state), at=at, actor=actor, note=note,
                      data=from_json(data) or {}, seq=seq, hash=h)
