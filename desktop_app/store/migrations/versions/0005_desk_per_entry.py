"""Many desks, one chain: each entry names the desk that wrote it, and each commit's batch of entries keeps
that desk's signed head.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_entries") as b:
        b.add_column(sa.Column("desk", sa.Text(), nullable=False, server_default=""))
    op.create_table(
        "audit_batches",
        sa.Column("last_seq", sa.Integer(), primary_key=True, autoincrement=False, nullable=False),
        sa.Column("first_seq", sa.Integer(), nullable=False),
        sa.Column("key_id", AutoString(), nullable=False),
        sa.Column("hash", AutoString(), nullable=False),
        sa.Column("signature", AutoString(), nullable=False),
        sa.Column("signed_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("audit_batches")
    with op.batch_alter_table("audit_entries") as b:
        b.drop_column("desk")
