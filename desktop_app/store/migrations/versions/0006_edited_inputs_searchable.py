"""A call a person edited before allowing it is found by the model's input too: the search text of the records
an earlier desk wrote gains the words of the model's own input, which their audit trail kept (the entry of the
edit holds `original_input` and `edited_input`). The text is derived, not covered by the chain: it verifies as
before.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import json
from typing import Any

from alembic import op
from sqlalchemy import text

from desktop_app.store._search import SEARCH_TEXT_MAX, index_text, strings_of

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    conn = op.get_bind()
    edits = conn.execute(text(
        "SELECT record_id, data FROM audit_entries WHERE record_id IS NOT NULL "
        "AND CAST(data AS TEXT) LIKE '%edited_input%' AND CAST(data AS TEXT) LIKE '%original_input%' ORDER BY seq"))
    originals: dict[str, Any] = {}
    for record_id, data in edits:
        data = json.loads(data) if isinstance(data, str) else data
        if isinstance(data, dict) and "edited_input" in data and record_id not in originals:
            originals[record_id] = data.get("original_input")
    for record_id, original in originals.items():
        words = index_text(strings_of(original))
        row = conn.execute(text("SELECT pk, search_text FROM tool_calls WHERE id = :id"), {"id": record_id}).first()
        if row is None or not words or words in row[1]:
            continue
        conn.execute(text("UPDATE tool_calls SET search_text = :t WHERE pk = :pk"),
                     {"t": f"{row[1]} {words}"[:SEARCH_TEXT_MAX], "pk": row[0]})


def downgrade() -> None:
    pass  # the added words are harmless to an older desk
