"""The keyed chain: the database's identity, the desks' public keys, and each key's last signed head.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "audit_db",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False, nullable=False),
        sa.Column("db_id", AutoString(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )
    op.create_table(
        "desk_keys",
        sa.Column("key_id", AutoString(), primary_key=True, nullable=False),
        sa.Column("algorithm", AutoString(), nullable=False),
        sa.Column("public_key", AutoString(), nullable=False),
        sa.Column("host", AutoString(), nullable=False),
        sa.Column("user_name", AutoString(), nullable=False),
        sa.Column("registered_at", sa.Float(), nullable=False),
        sa.Column("first_seq", sa.Integer(), nullable=False),
    )
    op.create_table(
        "audit_head_signatures",
        sa.Column("key_id", AutoString(), primary_key=True, nullable=False),
        sa.Column("db_id", AutoString(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("hash", AutoString(), nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.Column("signature", AutoString(), nullable=False),
        sa.Column("signed_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    for table in ("audit_head_signatures", "desk_keys", "audit_db"):
        op.drop_table(table)
