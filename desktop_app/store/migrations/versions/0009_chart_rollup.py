"""The history's charts: `tool_call_days`, a daily rollup of the records, `approval_waits` (a person's answers) and
`cost_days` (the model's cost per day and session), kept by triggers (store/_rollup.py) and filled from what is
already there; a partial index on the entries of calls that asked a person (approval waits) and
one on the token_usage events (cost per day and project).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import text
from sqlmodel.sql.sqltypes import AutoString

from desktop_app.store._rollup import (
    backfill_sql,
    drop_ddl,
    trigger_ddl,
    wait_backfill_sql,
    wait_ddl,
    wait_drop_ddl,
)

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    dialect = op.get_bind().dialect.name
    op.create_table(
        "tool_call_days",
        sa.Column("day", sa.BigInteger(), primary_key=True, autoincrement=False, nullable=False),
        *(sa.Column(name, AutoString(), primary_key=True, nullable=False)
          for name in ("state", "outcome", "risk", "name", "decider", "project_id")),
        sa.Column("calls", sa.BigInteger(), nullable=False),
        sa.Column("dur_n", sa.BigInteger(), nullable=False),
        sa.Column("dur_sum", sa.Float(), nullable=False),
        sa.Column("dur_max", sa.Float(), nullable=True),
        sqlite_with_rowid=False,
    )
    op.create_table(
        "approval_waits",
        sa.Column("record_id", AutoString(), primary_key=True, nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        *(sa.Column(name, AutoString(), nullable=False)
          for name in ("project_id", "session_id", "name", "state", "outcome", "risk")),
        sa.Column("wait", sa.Float(), nullable=False),
    )
    op.create_index("ix_approval_waits_created", "approval_waits", ["created_at"])
    op.create_table(
        "cost_days",
        sa.Column("day", sa.BigInteger(), primary_key=True, autoincrement=False, nullable=False),
        sa.Column("project_id", AutoString(), primary_key=True, nullable=False),
        sa.Column("session_id", AutoString(), primary_key=True, nullable=False),
        sa.Column("cost", sa.Float(), nullable=False),
        sqlite_with_rowid=False,
    )
    conn = op.get_bind()
    for statement in [backfill_sql(dialect), *wait_backfill_sql(dialect), *trigger_ddl(dialect), *wait_ddl(dialect)]:
        conn.execute(text(statement))
    asked, usage = sa.text("state = 'APPROVAL_REQUIRED'"), sa.text("type = 'token_usage'")
    op.create_index("ix_audit_entries_asked", "audit_entries", ["record_id"], sqlite_where=asked,
                    postgresql_where=asked)
    op.create_index("ix_events_token_usage", "events", ["time"], sqlite_where=usage, postgresql_where=usage)


def downgrade() -> None:
    dialect = op.get_bind().dialect.name
    for statement in [*drop_ddl(dialect), *wait_drop_ddl(dialect)]:
        op.execute(statement)
    op.drop_table("cost_days")
    op.drop_index("ix_approval_waits_created", "approval_waits")
    op.drop_table("approval_waits")
    op.drop_index("ix_events_token_usage", "events")
    op.drop_index("ix_audit_entries_asked", "audit_entries")
    op.drop_table("tool_call_days")
