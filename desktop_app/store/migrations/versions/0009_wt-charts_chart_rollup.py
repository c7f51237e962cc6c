"""The history's charts: `tool_call_days`, a daily rollup of the records kept by triggers (store/_rollup.py), filled
from the records already there; a partial index on the entries of calls that asked a person (approval waits) and
one on the token_usage events (cost per day and project).

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import text
from sqlmodel.sql.sqltypes import AutoString

from desktop_app.store._rollup import backfill_sql, drop_ddl, trigger_ddl

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
    )
    conn = op.get_bind()
    conn.execute(text(backfill_sql(dialect)))
    for statement in trigger_ddl(dialect):
        conn.execute(text(statement))
    asked, usage = sa.text("state = 'APPROVAL_REQUIRED'"), sa.text("type = 'token_usage'")
    op.create_index("ix_audit_entries_asked", "audit_entries", ["record_id"], sqlite_where=asked,
                    postgresql_where=asked)
    op.create_index("ix_events_token_usage", "events", ["time"], sqlite_where=usage, postgresql_where=usage)


def downgrade() -> None:
    for statement in drop_ddl(op.get_bind().dialect.name):
        op.execute(statement)
    op.drop_index("ix_events_token_usage", "events")
    op.drop_index("ix_audit_entries_asked", "audit_entries")
    op.drop_table("tool_call_days")
