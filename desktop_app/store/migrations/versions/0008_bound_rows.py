"""The rows the window reads back are bound into the chain: each write transaction that stores events,
sessions or projects appends one ROWS entry with the digest of each such row, and verify recomputes them.
What is here before this revision has no such entry: `unbound_rows` names it (the events up to the newest
seq, each session and project by id), so verify reports those rows as "not bound" instead of failing.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlalchemy import text
from sqlmodel.sql.sqltypes import AutoString

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "unbound_rows",
        sa.Column("kind", AutoString(), primary_key=True, nullable=False),
        sa.Column("key", AutoString(), primary_key=True, nullable=False),
    )
    conn = op.get_bind()
    top = conn.execute(text("SELECT max(seq) FROM events")).scalar() or 0
    conn.execute(text("INSERT INTO unbound_rows (kind, key) VALUES ('events-through', :k)"), {"k": str(top)})
    conn.execute(text("INSERT INTO unbound_rows (kind, key) SELECT 'session', id FROM sessions"))
    conn.execute(text("INSERT INTO unbound_rows (kind, key) SELECT 'project', id FROM projects"))
    where = sa.text("record_id IS NULL AND message_id IS NULL")
    op.create_index("ix_audit_entries_rows", "audit_entries", ["state", "seq"], sqlite_where=where,
                    postgresql_where=where)


def downgrade() -> None:
    op.drop_index("ix_audit_entries_rows", "audit_entries")
    op.drop_table("unbound_rows")
