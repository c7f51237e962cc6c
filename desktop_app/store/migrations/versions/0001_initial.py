"""Initial schema: projects, sessions, messages, tool_calls (+ FTS5 on SQLite), audit chain, events.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_FTS_SQLITE = [
    # External-content index over tool_calls.search_text; the triggers below keep it in step with
    # every write the writer thread makes, inside the same transaction.
    "CREATE VIRTUAL TABLE tool_calls_fts USING fts5("
    "search_text, content='tool_calls', content_rowid='pk', tokenize='unicode61 remove_diacritics 2')",
    "CREATE TRIGGER tool_calls_fts_ai AFTER INSERT ON tool_calls BEGIN "
    "INSERT INTO tool_calls_fts(rowid, search_text) VALUES (new.pk, new.search_text); END",
    "CREATE TRIGGER tool_calls_fts_ad AFTER DELETE ON tool_calls BEGIN "
    "INSERT INTO tool_calls_fts(tool_calls_fts, rowid, search_text) "
    "VALUES ('delete', old.pk, old.search_text); END",
    "CREATE TRIGGER tool_calls_fts_au AFTER UPDATE OF search_text ON tool_calls "
    "WHEN old.search_text IS NOT new.search_text BEGIN "
    "INSERT INTO tool_calls_fts(tool_calls_fts, rowid, search_text) "
    "VALUES ('delete', old.pk, old.search_text); "
    "INSERT INTO tool_calls_fts(rowid, search_text) VALUES (new.pk, new.search_text); END",
]


def upgrade() -> None:
    _create_projects_sessions_messages()
    _create_tool_calls()
    _create_audit_chain()
    _create_events()
    if op.get_bind().dialect.name == "sqlite":
        for stmt in _FTS_SQLITE:
            op.execute(stmt)


def _create_projects_sessions_messages() -> None:
    op.create_table(
        "projects",
        sa.Column("id", AutoString(), primary_key=True, nullable=False),
        sa.Column("name", AutoString(), nullable=False),
        sa.Column("path", AutoString(), nullable=False),
        sa.Column("image", AutoString(), nullable=False),
        sa.Column("permission_mode", AutoString(), nullable=False),
        sa.Column("settings", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "sessions",
        sa.Column("id", AutoString(), primary_key=True, nullable=False),
        sa.Column("project_id", AutoString(), sa.ForeignKey("projects.id"), nullable=False),
        sa.Column("title", AutoString(), nullable=False),
        sa.Column("model", AutoString(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("meta", sa.JSON(), nullable=False),
    )
    op.create_index("ix_sessions_project_updated", "sessions", ["project_id", "updated_at"])
    op.create_table(
        "messages",
        sa.Column("id", sa.Integer(), primary_key=True, nullable=False),
        sa.Column("session_id", AutoString(), sa.ForeignKey("sessions.id"), nullable=False),
        sa.Column("role", AutoString(), nullable=False),
        sa.Column("content", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_index("ix_messages_session_id", "messages", ["session_id", "id"])


def _create_tool_calls() -> None:
    op.create_table(
        "tool_calls",
        sa.Column("pk", sa.Integer(), primary_key=True, nullable=False),
        sa.Column("id", AutoString(), nullable=False, unique=True),
        sa.Column("name", AutoString(), nullable=False),
        sa.Column("input", sa.JSON(), nullable=False),
        sa.Column("session_id", AutoString(), nullable=False),
        sa.Column("project_id", AutoString(), nullable=False),
        sa.Column("batch_index", sa.Integer(), nullable=False),
        sa.Column("state", AutoString(), nullable=False),
        sa.Column("outcome", AutoString(), nullable=True),
        sa.Column("approval", sa.JSON(), nullable=False),
        sa.Column("provenance", sa.JSON(), nullable=False),
        sa.Column("result", sa.JSON(), nullable=True),
        sa.Column("error", AutoString(), nullable=True),
        sa.Column("is_error", sa.Boolean(), nullable=False),
        sa.Column("sandbox", sa.JSON(), nullable=False),
        sa.Column("read_only", sa.Boolean(), nullable=False),
        sa.Column("risk", AutoString(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=True),
        sa.Column("completed_at", sa.Float(), nullable=True),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.Column("search_text", sa.Text(), nullable=False, server_default=""),
    )
    op.create_index("ix_tool_calls_name_state_created", "tool_calls", ["name", "state", "created_at"])
    op.create_index("ix_tool_calls_state_created", "tool_calls", ["state", "created_at"])
    op.create_index("ix_tool_calls_session_created", "tool_calls", ["session_id", "created_at"])
    op.create_index("ix_tool_calls_project_created", "tool_calls", ["project_id", "created_at"])
    op.create_index("ix_tool_calls_created", "tool_calls", ["created_at"])


def _create_audit_chain() -> None:
    op.create_table(
        "audit_entries",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False, nullable=False),
        sa.Column("record_id", AutoString(), sa.ForeignKey("tool_calls.id"), nullable=False),
        sa.Column("state", AutoString(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.Column("actor", AutoString(), nullable=False),
        sa.Column("note", AutoString(), nullable=False),
        sa.Column("data", sa.JSON(), nullable=False),
        sa.Column("prev_hash", AutoString(), nullable=False),
        sa.Column("hash", AutoString(), nullable=False),
    )
    op.create_index("ix_audit_entries_record_seq", "audit_entries", ["record_id", "seq"])
    op.create_table(
        "audit_head",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False, nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("hash", AutoString(), nullable=False),
    )


def _create_events() -> None:
    op.create_table(
        "events",
        sa.Column("seq", sa.Integer(), primary_key=True, autoincrement=False, nullable=False),
        sa.Column("channel", AutoString(), nullable=False),
        sa.Column("type", AutoString(), nullable=False),
        sa.Column("time", sa.Float(), nullable=False),
        sa.Column("session_id", AutoString(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
    )
    op.create_index("ix_events_session_seq", "events", ["session_id", "seq"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        for name in ("tool_calls_fts_au", "tool_calls_fts_ad", "tool_calls_fts_ai"):
            op.execute(f"DROP TRIGGER IF EXISTS {name}")
        op.execute("DROP TABLE IF EXISTS tool_calls_fts")
    for table in ("events", "audit_head", "audit_entries", "tool_calls", "messages", "sessions", "projects"):
        op.drop_table(table)
