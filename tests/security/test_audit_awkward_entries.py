"""Entries whose text is awkward for a canonical form (control characters, quotes and backslashes, characters
outside the BMP, line separators, keys that UTF-16 sorts apart from code points, integers past 2^53, floats of
every shape, times that RFC 8785 writes without a fraction or with an exponent) verify, here and in the chunks
the workers walk; and an edit of one such entry that an escape-blind rendering would miss (a control character
replaced by its escape's text, a quote by an escaped quote, an astral character by its surrogate escapes, a
number written another way) is found, at that entry, by both walks."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from desktop_app.core import AuditEntry, Outcome, ToolCallRecord, ToolCallState
from desktop_app.store import SqlStore
from tests.kit import raw_sql
from tests.security.test_audit_verify_worker import verify_here_and_in_chunks

CONTROL = "line\nbreak\ttab\rcr\x00nul\x08bs\x0cff\x1fus\x7fdel"
QUOTES = 'say "hi" \\ back\\slash \\" both'
ASTRAL = "emoji \U0001f600 clef \U0001d11e"
SEPARATORS = "\u2028\u2029 nbsp\u00a0 é ü 漢字 \ufeff"
DATA = {"big": 2**60, "small": -(2**60), "limit": 2**53 - 1, "tenth": 0.1, "tiny": 1e-7, "huge": 1e300,
        "neg0": -0.0, "whole": 100.0, "nan": float("nan"), "lone": "\ud800", 'key "q" \\': CONTROL,
        "\U0001f600": "astral key", "\ufb01": "BMP key past the surrogates", "ctrl\x01": [ASTRAL, None, True]}
# (the state, the entry's awkward fields): each becomes one entry of one call, in this order
ENTRIES = (
    (ToolCallState.PENDING, {"actor": CONTROL, "note": QUOTES, "data": DATA, "at": 1750000000.0}),
    (ToolCallState.APPROVAL_REQUIRED, {"actor": "policy", "note": ASTRAL, "at": 5e-05}),
    (ToolCallState.APPROVED, {"actor": SEPARATORS, "note": CONTROL, "at": 1.5e16, "data": {"n": 2**70}}),
    (ToolCallState.EXECUTING, {"actor": "executor", "note": "", "at": 1750000000.0666666}),
)
# An edit an attacker makes by hand (SQL, and its parameters if any), and the state of the entry it is made to
# (found "altered" there).
EDITS = {
    "control-as-escape-text": ("UPDATE audit_entries SET actor = replace(actor, char(10), '\\n') WHERE state = "
                               "'PENDING'", "PENDING"),
    "nul-as-escape-text": ("UPDATE audit_entries SET actor = ? WHERE state = 'PENDING'", "PENDING",
                           (CONTROL.replace("\x00", "\\u0000"),)),
    "nul-dropped": ("UPDATE audit_entries SET actor = ? WHERE state = 'PENDING'", "PENDING",
                    (CONTROL.replace("\x00", ""),)),
    "quote-escaped": ("UPDATE audit_entries SET note = replace(note, 'say \"hi\"', 'say \\\"hi\\\"') WHERE "
                      "state = 'PENDING'", "PENDING"),
    "astral-as-surrogates": ("UPDATE audit_entries SET note = replace(note, char(128512), '\\ud83d\\ude00') WHERE "
                             "state = 'APPROVAL_REQUIRED'", "APPROVAL_REQUIRED"),
    "separator-swapped": ("UPDATE audit_entries SET actor = replace(actor, char(8232), char(8233)) WHERE state = "
                          "'APPROVED'", "APPROVED"),
    "number-rewritten": ("UPDATE audit_entries SET data = replace(data, '\"tenth\":0.1', '\"tenth\":0.10') WHERE "
                         "state = 'PENDING'", "PENDING"),
    "big-integer-moved": ("UPDATE audit_entries SET data = replace(data, '1152921504606846976', "
                          "'1152921504606846977') WHERE state = 'PENDING'", "PENDING"),
    "integral-time-moved": ("UPDATE audit_entries SET at = at + 1 WHERE state = 'PENDING'", "PENDING"),
    "exponent-time-moved": ("UPDATE audit_entries SET at = 1.6e16 WHERE state = 'APPROVED'", "APPROVED"),
}


async def _fill(path: Path) -> None:
    store = await SqlStore.open(path)
    try:
        rec = ToolCallRecord(name="bash", input={"command": CONTROL + QUOTES}, tool_use_id="toolu_1",
                             session_id="ses_1", project_id="prj_1")
        rec.trail.append(AuditEntry(rec.id, ToolCallState.PENDING, **ENTRIES[0][1]))
        await store.save_transition(rec, rec.trail[-1])
        for state, fields in ENTRIES[1:]:
            await store.save_transition(rec, rec.transition(state, **fields))
        rec.result = {"content": [{"type": "text", "text": ASTRAL + SEPARATORS}], "details": {}, "is_error": False}
        await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="executor",
                                                        outcome=Outcome.OK, note=QUOTES))
    finally:
        await store.close()


@pytest.fixture(scope="module")
def awkward_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import asyncio

    path = tmp_path_factory.mktemp("awkward") / "audit.db"
    asyncio.run(_fill(path))
    return path


async def test_awkward_entries_verify_here_and_in_chunks(awkward_db: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "audit.db"
    shutil.copy(awkward_db, db)
    stored = raw_sql(db, "SELECT actor, note, at, canon FROM audit_entries ORDER BY seq")
    assert stored[0][:3] == (CONTROL, QUOTES, 1750000000.0) and stored[1][1] == ASTRAL and stored[2][2] == 1.5e16
    assert {row[3] for row in stored} == {2}  # all written in RFC 8785's form
    here, there = await verify_here_and_in_chunks(db, monkeypatch, caplog)
    assert here == there
    assert here.ok and here.count == len(ENTRIES) + 1, here.message
    assert "1 tool calls" in here.message


@pytest.mark.parametrize("edit", list(EDITS))
async def test_an_edit_of_an_awkward_entry_is_found_there(awkward_db: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          caplog: pytest.LogCaptureFixture, edit: str) -> None:
    db = tmp_path / "audit.db"
    shutil.copy(awkward_db, db)
    sql, state, *params = EDITS[edit]
    before = raw_sql(db, f"SELECT seq, actor, note, data, at FROM audit_entries WHERE state = '{state}'")
    after = raw_sql(db, sql, f"SELECT seq, actor, note, data, at FROM audit_entries WHERE state = '{state}'",
                    params=params[0] if params else ())
    assert len(before) == 1 and after != before, "the edit changed nothing"
    here, there = await verify_here_and_in_chunks(db, monkeypatch, caplog)
    assert here == there
    assert (here.ok, here.problem, here.seq) == (False, "altered", before[0][0]), here.message
