"""An audit anyone can verify: each chain entry records the canonical form its hash covers. The entries written
so far keep form 1 (Python's sorted JSON), so they verify as before; new ones are written in form 2, RFC 8785
(JCS), which docs/audit-format.md specifies.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("audit_entries") as b:
        b.add_column(sa.Column("canon", sa.SmallInteger(), nullable=False, server_default="1"))


def downgrade() -> None:
    with op.batch_alter_table("audit_entries") as b:
        b.drop_column("canon")
