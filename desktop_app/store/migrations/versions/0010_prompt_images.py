"""Images in the prompt: `prompt_images` holds each image a person sent once, under the sha256 of its bytes;
a message's image block names the digest (with the media type and size), so its chain entry covers them.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op
from sqlmodel.sql.sqltypes import AutoString

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "prompt_images",
        sa.Column("digest", AutoString(), primary_key=True, nullable=False),
        sa.Column("media_type", AutoString(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("width", sa.Integer(), nullable=False),
        sa.Column("height", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("prompt_images")
