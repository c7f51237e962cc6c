"""PostgreSQL's full-text index: a tsvector column generated from `search_text` (the words FTS5 indexes on
SQLite, see store/_search.py) with a GIN index. SQLite is unchanged: FTS5 already indexes that text.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

from desktop_app.store._search import TS_CONFIG, index_text

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_BATCH = 5000


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _reindex_old_text()
    op.execute(f"ALTER TABLE tool_calls ADD COLUMN search_vector tsvector "
               f"GENERATED ALWAYS AS (to_tsvector('{TS_CONFIG}'::regconfig, search_text)) STORED")
    op.execute("CREATE INDEX ix_tool_calls_search_vector ON tool_calls USING gin (search_vector)")


def _reindex_old_text() -> None:
    """Rows written before 0004 hold the raw text; PostgreSQL's own parser would read paths and hosts in it
    as single tokens. Rewrite it as the index's words (what the store writes from now on)."""
    conn = op.get_bind()
    last = 0
    while True:
        rows = conn.execute(text("SELECT pk, search_text FROM tool_calls WHERE pk > :last ORDER BY pk LIMIT :n"),
                            {"last": last, "n": _BATCH}).all()
        if not rows:
            return
        changed = [{"pk": pk, "t": index_text(t)} for pk, t in rows if index_text(t) != t]
        if changed:
            conn.execute(text("UPDATE tool_calls SET search_text = :t WHERE pk = :pk"), changed)
        last = rows[-1][0]


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("DROP INDEX IF EXISTS ix_tool_calls_search_vector")
    op.execute("ALTER TABLE tool_calls DROP COLUMN IF EXISTS search_vector")
