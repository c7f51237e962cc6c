"""The audit store's tables as sqlmodel models (migrations/versions holds the same schema as DDL), and what
the rest of the store derives from them: column names in schema order and JSON-typed columns."""

from __future__ import annotations

import functools
import json
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, LargeBinary, SmallInteger, Text, text
from sqlmodel import Field, SQLModel

from .integrity import to_json

# The Alembic head this code expects; benchmarks key their cached fixtures on it.
SCHEMA_VERSION = "0010"


class ProjectRow(SQLModel, table=True):
    __tablename__ = "projects"

    id: str = Field(primary_key=True)
    name: str
    path: str
    image: str
    permission_mode: str
    settings: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    created_at: float


class SessionRow(SQLModel, table=True):
    __tablename__ = "sessions"
    __table_args__ = (Index("ix_sessions_project_updated", "project_id", "updated_at"),)

    id: str = Field(primary_key=True)
    project_id: str = Field(foreign_key="projects.id")
    title: str = ""
    model: str = ""
    created_at: float
    updated_at: float
    meta: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))


class MessageRow(SQLModel, table=True):
    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_session_id", "session_id", "id"),)

    id: int | None = Field(default=None, primary_key=True)
    session_id: str = Field(foreign_key="sessions.id")
    role: str
    content: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    created_at: float


class ToolCallRow(SQLModel, table=True):
    """One ToolCallRecord. `pk` is an integer key so the FTS index can point at rows by rowid."""

    __tablename__ = "tool_calls"
    __table_args__ = (
        Index("ix_tool_calls_name_state_created", "name", "state", "created_at"),
        Index("ix_tool_calls_state_created", "state", "created_at"),
        Index("ix_tool_calls_session_created", "session_id", "created_at"),
        Index("ix_tool_calls_project_created", "project_id", "created_at"),
        Index("ix_tool_calls_created", "created_at"),
        Index("ix_tool_calls_session_tool_use", "session_id", "tool_use_id"),
    )

    pk: int | None = Field(default=None, primary_key=True)
    id: str = Field(unique=True)  # the desk's own key
    # The model's id for the tool_use block: an attribute, which the model may repeat.
    tool_use_id: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    name: str
    input: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    # A large input lives once in `blobs` under this sha256; `input` then holds {}.
    input_blob: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    session_id: str = ""
    project_id: str = ""
    batch_index: int = 0
    state: str
    outcome: str | None = None
    approval: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    provenance: list[Any] = Field(default_factory=list, sa_column=Column(JSON, nullable=False))
    result: dict[str, Any] | None = Field(default=None, sa_column=Column(JSON, nullable=True))
    error: str | None = None
    is_error: bool = False
    sandbox: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    read_only: bool = False
    risk: str = "low"
    started_at: float | None = None
    completed_at: float | None = None
    duration_ms: float | None = None
    created_at: float
    updated_at: float
    # Flattened words of the name, input, result text and error: what the full-text index covers.
    search_text: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))


class AuditEntryRow(SQLModel, table=True):
    """One link of the global hash chain: hash = sha256(prev_hash + canonical(entry)).

    A tool call's entry names its record; a message's entry names its message (record_id NULL, state
    MESSAGE). `digests` holds, at that transition, the sha256 of the stored row and of its fields
    (see _digests.py), so verify can cross-check `tool_calls` and `messages` against the chain.
    """

    __tablename__ = "audit_entries"
    __table_args__ = (
        Index("ix_audit_entries_record_seq", "record_id", "seq"),
        # the ROWS entries (_bound_rows.py), found by verify without reading the whole chain
        Index("ix_audit_entries_rows", "state", "seq", sqlite_where=text("record_id IS NULL AND message_id IS NULL"),
              postgresql_where=text("record_id IS NULL AND message_id IS NULL")),
        # the calls that asked a person: the charts' approval waits start from them
        Index("ix_audit_entries_asked", "record_id", sqlite_where=text("state = 'APPROVAL_REQUIRED'"),
              postgresql_where=text("state = 'APPROVAL_REQUIRED'")),
    )

    seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    record_id: str | None = Field(default=None, foreign_key="tool_calls.id", nullable=True)
    state: str
    at: float
    actor: str
    note: str = ""
    data: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))
    prev_hash: str
    hash: str
    message_id: int | None = Field(default=None, foreign_key="messages.id", nullable=True)
    digests: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    # The key id of the desk that wrote it, hashed with the entry; "" before desks were named.
    desk: str = Field(default="", sa_column=Column(Text, nullable=False, server_default=""))
    # The canonical form its hash covers: 1, Python's sorted JSON (entries before RFC 8785); 2, RFC 8785.
    canon: int = Field(default=1, sa_column=Column(SmallInteger, nullable=False, server_default="1"))


class BlobRow(SQLModel, table=True):
    """A large value stored once, keyed by the sha256 of its text (today: tool inputs)."""

    __tablename__ = "blobs"

    digest: str = Field(primary_key=True)
    size: int
    data: str = Field(sa_column=Column(Text, nullable=False))


class ChainHeadRow(SQLModel, table=True):
    """The last seq and hash the writer committed, so removing or adding entries at the tail shows."""

    __tablename__ = "audit_head"

    id: int = Field(default=1, primary_key=True, sa_column_kwargs={"autoincrement": False})
    seq: int
    hash: str


class EventRow(SQLModel, table=True):
    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_session_seq", "session_id", "seq"),
        # the model's cost, per day and project (the charts)
        Index("ix_events_token_usage", "time", sqlite_where=text("type = 'token_usage'"),
              postgresql_where=text("type = 'token_usage'")),
    )

    seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    channel: str
    type: str
    time: float
    session_id: str = ""
    payload: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON, nullable=False))



# audit-keys (issue 10): the keys that sign the chain's head, and the signed heads -----------------------
class AuditDbRow(SQLModel, table=True):
    """The database's own identity, which every signed head names (one row)."""

    __tablename__ = "audit_db"

    id: int = Field(default=1, primary_key=True, sa_column_kwargs={"autoincrement": False})
    db_id: str
    created_at: float


class DeskKeyRow(SQLModel, table=True):
    """A desk's public Ed25519 key, registered by its first write (first_seq: the head it first signed)."""

    __tablename__ = "desk_keys"

    key_id: str = Field(primary_key=True)
    algorithm: str
    public_key: str  # base64 of the raw 32-byte key
    host: str
    user_name: str
    registered_at: float
    first_seq: int


class HeadSignatureRow(SQLModel, table=True):
    """The last head each key signed: (seq, hash, count) of the chain, signed with the database's id."""

    __tablename__ = "audit_head_signatures"

    key_id: str = Field(primary_key=True)
    db_id: str
    seq: int
    hash: str
    count: int
    signature: str
    signed_at: float


class EntryBatchRow(SQLModel, table=True):
    """One commit's entries first_seq..last_seq, written by one desk: its signed head at last_seq (the same
    signature as HeadSignatureRow's at that commit), which covers every entry of the batch through the chain."""

    __tablename__ = "audit_batches"

    last_seq: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    first_seq: int
    key_id: str
    hash: str
    signature: str
    signed_at: float


class UnboundRow(SQLModel, table=True):
    """Rows stored before the chain bound events, sessions and projects (migration 0007): verify names them
    as not bound. kind "events-through" (key: the newest event seq then), "session" or "project" (key: id)."""

    __tablename__ = "unbound_rows"

    kind: str = Field(primary_key=True)
    key: str = Field(primary_key=True)


# charts (issue 28): the daily rollup the history's charts read (store/_rollup.py keeps it by triggers) ------------
class ToolCallDayRow(SQLModel, table=True):
    """The records of one UTC day, state, outcome ('' for none), risk, tool, refusal decider ('' unless DENIED)
    and project: how many, and their durations. Derived, never chained: the triggers rebuild what it holds."""

    __tablename__ = "tool_call_days"
    __table_args__ = {"sqlite_with_rowid": False}  # the rows are their key: a chart's GROUP BY reads it in order

    day: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    state: str = Field(primary_key=True)
    outcome: str = Field(primary_key=True)
    risk: str = Field(primary_key=True)
    name: str = Field(primary_key=True)
    decider: str = Field(primary_key=True)
    project_id: str = Field(primary_key=True)
    calls: int = Field(sa_column=Column(BigInteger, nullable=False))
    dur_n: int = Field(sa_column=Column(BigInteger, nullable=False))
    dur_sum: float
    dur_max: float | None = None


class ApprovalWaitRow(SQLModel, table=True):
    """A call a person answered: how long it waited (seconds), and what the history filters it by."""

    __tablename__ = "approval_waits"
    __table_args__ = (Index("ix_approval_waits_created", "created_at"),)

    record_id: str = Field(primary_key=True)
    created_at: float
    project_id: str
    session_id: str
    name: str
    state: str
    outcome: str
    risk: str
    wait: float


class CostDayRow(SQLModel, table=True):
    """The model's cost (USD) of one session on one UTC day, from its token_usage events."""

    __tablename__ = "cost_days"
    __table_args__ = {"sqlite_with_rowid": False}

    day: int = Field(sa_column=Column(BigInteger, primary_key=True, autoincrement=False))
    project_id: str = Field(primary_key=True)
    session_id: str = Field(primary_key=True)
    cost: float


# images in the prompt (issue 26 item 4) -----------------------------------------------------------------
class PromptImageRow(SQLModel, table=True):
    """An image a person sent, stored once under the sha256 of its bytes; the message's image block names
    that digest, its media type and size (so the message's chain entry covers them)."""

    __tablename__ = "prompt_images"

    digest: str = Field(primary_key=True)
    media_type: str
    size: int
    width: int
    height: int
    data: bytes = Field(sa_column=Column(LargeBinary, nullable=False))
    created_at: float


TABLES: tuple[type[SQLModel], ...] = (
    ProjectRow, SessionRow, MessageRow, ToolCallRow, AuditEntryRow, ChainHeadRow, EventRow, BlobRow,
    AuditDbRow, DeskKeyRow, HeadSignatureRow, EntryBatchRow, UnboundRow, ToolCallDayRow,
    ApprovalWaitRow, CostDayRow, PromptImageRow,
)
STORE_TABLES = tuple(str(t.__tablename__) for t in TABLES)


@functools.cache
def columns(table: type[SQLModel], *, without: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The table's column names in schema order: what INSERTs name and SELECTed row tuples follow."""
    return tuple(c.name for c in table.__table__.columns if c.name not in without)  # type: ignore[attr-defined]


@functools.cache
def json_columns(table: type[SQLModel]) -> tuple[tuple[str, bool], ...]:
    """(name, nullable) of each column stored as JSON text."""
    cols = table.__table__.columns  # type: ignore[attr-defined]
    return tuple((c.name, bool(c.nullable)) for c in cols if isinstance(c.type, JSON))


def encode_row(table: type[SQLModel], values: dict[str, Any]) -> dict[str, Any]:
    """`values` as parameters for a row of `table`: JSON columns become text, and None stays NULL only
    where the column allows it (elsewhere it is stored as JSON null)."""
    for name, nullable in json_columns(table):
        if name in values and (values[name] is not None or not nullable):
            values[name] = to_json(values[name])
    return values


def decode_row(table: type[SQLModel], cols: tuple[str, ...], row: Any) -> dict[str, Any]:
    """A SELECTed row of `cols` as a dict, JSON columns decoded."""
    values = dict(zip(cols, row, strict=True))
    for name, _ in json_columns(table):
        if name in values:
            values[name] = from_json(values[name])
    return values


def from_json(value: Any) -> Any:
    # SQLite hands JSON columns back as text; other databases may decode them already.
    return json.loads(value) if isinstance(value, str) else value
