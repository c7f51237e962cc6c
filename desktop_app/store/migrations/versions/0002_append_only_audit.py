"""An append-only, cross-checked audit: records keyed by the desk's id with the model's tool_use id as an
attribute, large inputs stored once in `blobs`, and chain entries that carry digests and chain messages.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("tool_calls") as b:
        b.add_column(sa.Column("tool_use_id", sa.Text(), nullable=False, server_default=""))
        b.add_column(sa.Column("input_blob", sa.Text(), nullable=True))
    # Until now the record's id was the model's id.
    op.execute("UPDATE tool_calls SET tool_use_id = id")
    op.create_index("ix_tool_calls_session_tool_use", "tool_calls", ["session_id", "tool_use_id"])
    with op.batch_alter_table("audit_entries") as b:
        b.alter_column("record_id", existing_type=sa.String(), nullable=True)
        b.add_column(sa.Column("message_id", sa.Integer(), nullable=True))
        b.add_column(sa.Column("digests", sa.Text(), nullable=False, server_default=""))
        b.create_foreign_key("fk_audit_entries_message_id", "messages", ["message_id"], ["id"])
    op.create_table(
        "blobs",
        sa.Column("digest", sa.String(), primary_key=True, nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("blobs")
    with op.batch_alter_table("audit_entries") as b:
        b.drop_constraint("fk_audit_entries_message_id", type_="foreignkey")
        b.drop_column("digests")
        b.drop_column("message_id")
        b.alter_column("record_id", existing_type=sa.String(), nullable=False)
    op.drop_index("ix_tool_calls_session_tool_use", "tool_calls")
    with op.batch_alter_table("tool_calls") as b:
        b.drop_column("input_blob")
        b.drop_column("tool_use_id")
