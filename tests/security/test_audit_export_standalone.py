"""An audit anyone can verify: new chain entries are RFC 8785 (JCS, checked against the `rfc8785` package),
entries written in the old form keep verifying beside them, and tools/verify_export.py (standard library plus
cryptography, outside desktop_app/) verifies a real signed export and refuses tampered ones, as the desk's own
`verify_export` does."""

from __future__ import annotations

import ast
import asyncio
import base64
import hashlib
import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from desktop_app.core import AuditEntry, ProjectInfo, SessionInfo, StoredMessage, ToolCallState
from desktop_app.store import AuditQuery, HeadSigner, SqlStore, _sql_store, _writer, verify_export
from desktop_app.store.integrity import jcs, jcs_data
from desktop_app.store.integrity._chain import CANON_JCS, CANON_LEGACY, entry_fields, es_number, split_canonical
from desktop_app.store.integrity._signing import SignedHead, export_message, flat_jcs
from tests.store.conftest import make_record, run_to_completion

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "verify_export.py"
# Values where RFC 8785 and Python's JSON differ: integral and exponent floats, keys past the BMP (UTF-16 order).
ODD_DATA = {"ratio": 1.0, "big": 1e21, "tiny": 1e-7, "mid": 123456.789, "neg": -0.5, "\ue000": "bmp",
            "\U0001f600": "astral", "é": ["ü", 2**40, None, True], "nested": {"b": 1, "a": [0.1, 100.0]}}


@given(st.floats(allow_nan=False, allow_infinity=False))
@settings(max_examples=400, deadline=None)
def test_es_number_is_rfc8785s_number(f: float) -> None:
    assert es_number(f) == rfc8785.dumps(f).decode()


@given(st.text(max_size=8), st.floats(min_value=0, max_value=4e9, allow_nan=False), st.text(max_size=8),
       st.dictionaries(st.text(max_size=4), st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                                                      st.integers(-2**53 + 1, 2**53 - 1), st.text(max_size=4)),
                       max_size=4),
       st.integers(1, 2**40), st.sampled_from(["", "ed25519:" + "ab" * 16]))
@settings(max_examples=150, deadline=None)
def test_the_writers_form_2_is_rfc8785_of_the_entry(actor, at, note, data, seq, desk) -> None:
    data_json = jcs_data(data)
    digests = "row:" + "0" * 64
    prefix, suffix = split_canonical("call_1", "COMPLETED", at, actor, note, data_json, digests, None, desk,
                                     CANON_JCS)
    fields = entry_fields("call_1", "COMPLETED", at, actor, note, json.loads(data_json), seq, digests, None, desk)
    assert f"{prefix}{seq}{suffix}" == jcs(fields)
    if all(not isinstance(v, float) or abs(v) < 2**53 for v in data.values()):  # else read back as an integer
        assert f"{prefix}{seq}{suffix}" == rfc8785.dumps(fields).decode()


@given(st.dictionaries(st.text(max_size=6), st.one_of(st.text(max_size=8), st.integers(-2**60, 2**60), st.booleans()),
                       max_size=6))
@settings(max_examples=200, deadline=None)
def test_the_signed_messages_fast_form_is_rfc8785(body) -> None:
    """The writer renders a signed head's and batch's body by hand (flat_jcs): RFC 8785's text all the same."""
    assert flat_jcs(body) == jcs(body)
    head = {"db_id": "ab" * 16, "seq": 2**40, "hash": "f" * 64, "count": 7, "key_id": "ed25519:" + "cd" * 16}
    assert flat_jcs(head) == rfc8785.dumps(head).decode()


def test_data_rfc8785_cannot_write_is_kept_as_text() -> None:
    out = json.loads(jcs_data({"huge": 2**60, "nan": math.nan, "lone": "\ud800", "ok": 1.5}))
    assert out == {"huge": str(2**60), "nan": "nan", "lone": "\\ud800", "ok": 1.5}


async def _chain_with_both_forms(db: Path, signer: HeadSigner, monkeypatch: pytest.MonkeyPatch) -> None:
    """Entries in form 1 (as a desk before RFC 8785 wrote them), then in form 2, with odd data, an integral
    time and messages; one store, one chain."""
    store = await SqlStore.open(db, signer=signer)
    try:
        await store.save_project(ProjectInfo("prj_1", "p", "/tmp/p"))
        await store.save_session(SessionInfo("ses_1", "prj_1"))
        with monkeypatch.context() as m:  # the old writer: form 1
            m.setattr(_sql_store, "CANON_JCS", CANON_LEGACY)
            m.setattr(_writer, "CANON_JCS", CANON_LEGACY)
            await run_to_completion(store, make_record(command="echo old"))
            await store.append_message(StoredMessage("ses_1", "user", [{"type": "text", "text": "old"}]))
        await run_to_completion(store, make_record(command="echo new ünïcode"))
        await store.append_message(StoredMessage("ses_1", "assistant", [{"type": "text", "text": "n"}],
                                                 created_at=1764210001.0))
        rec2 = await run_to_completion(store, make_record(command="echo odd"))
        await store.save_transition(rec2, AuditEntry(rec2.id, ToolCallState.COMPLETED, 1764210002.0, "person",
                                                     note="an integral time", data=ODD_DATA))
    finally:
        await store.close()


@pytest.fixture
def signed_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, HeadSigner]:
    db = tmp_path / "audit.db"
    signer = HeadSigner(os.urandom(32), witness_dir=tmp_path / "witness", host="h", user="u")
    asyncio.run(_chain_with_both_forms(db, signer, monkeypatch))
    forms = {r[0] for r in sqlite3.connect(db).execute("SELECT DISTINCT canon FROM audit_entries")}
    assert forms == {CANON_LEGACY, CANON_JCS}, "the chain holds both forms"

    async def export() -> None:
        store = await SqlStore.open(db, signer=signer)
        try:
            assert (await store.verify()).ok, "the desk verifies a chain of both forms"
            await store.export(AuditQuery(limit=None), "jsonl", tmp_path / "export.jsonl", signed=True)
        finally:
            await store.close()

    asyncio.run(export())
    return tmp_path / "export.jsonl", signer


def _run_tool(path: Path, *keys: str) -> subprocess.CompletedProcess[str]:
    args = [a for k in keys for a in ("--key", k)]
    return subprocess.run([sys.executable, "-I", str(TOOL), str(path), *args], capture_output=True, text=True,
                          timeout=60, cwd=path.parent)


def test_the_standalone_verifier_is_small_and_needs_no_agent_desk() -> None:
    source = TOOL.read_text()
    assert len(source.splitlines()) <= 150
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported - set(sys.stdlib_module_names) == {"cryptography"}


def _lines(path: Path) -> tuple[list[dict], dict]:
    rows = [json.loads(x) for x in path.read_text().splitlines()]
    return rows[:-1], rows[-1]


def _write(path: Path, records: list[dict], trailer: dict) -> Path:
    out = path.with_name("tampered.jsonl")
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in [*records, trailer]))
    return out


def _resign(path: Path, records: list[dict], trailer: dict, attacker: HeadSigner) -> Path:
    """The records rewritten and the export signed again, by a key the attacker owns."""
    body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    head = SignedHead.from_dict(trailer["head"])
    trailer = {**trailer, "records": len(records), "records_sha256": hashlib.sha256(body).hexdigest(),
               "exporter_key_id": attacker.key_id,
               "exporter_public_key": base64.b64encode(attacker.public_key).decode()}
    trailer["signature"] = attacker.sign(export_message(head, trailer["records"], trailer["records_sha256"],
                                                        trailer["exported_at"]))
    return _write(path, records, trailer)


def _tampered(path: Path, how: str) -> Path:
    records, trailer = _lines(path)
    attacker = HeadSigner(os.urandom(32), host="h", user="u")
    last = next(r for r in records if r["input"]["command"] == "echo odd")  # its last entry: RFC 8785, odd data
    if how == "edit-a-line":
        text = path.read_text().replace("echo odd", "echo ODD")
        out = path.with_name("tampered.jsonl")
        out.write_text(text)
        return out
    if how == "edit-and-fix-digest":  # the records' digest made to match; the exporter's signature cannot be
        last["input"]["command"] = "rm -rf /"
        body = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
        return _write(path, records, {**trailer, "records_sha256": hashlib.sha256(body).hexdigest()})
    if how == "resigned-input":  # signed again by another key: the entry's digests still tell
        last["input"]["command"] = "rm -rf /"
        return _resign(path, records, trailer, attacker)
    if how == "resigned-entry-data":  # an entry's data edited: its hash no longer matches
        last["trail"][-1]["data"]["ratio"] = 2.0
        return _resign(path, records, trailer, attacker)
    if how == "resigned-form-flipped":  # an RFC 8785 entry claimed to be form 1: its integral time differs
        last["trail"][-1]["canon"] = CANON_LEGACY
        return _resign(path, records, trailer, attacker)
    if how == "resigned-message-dropped":
        trailer["message_entries"] = trailer["message_entries"][1:]
        return _resign(path, records, trailer, attacker)
    if how == "resigned-record-dropped":
        return _resign(path, [r for r in records if r is not last], trailer, attacker)
    if how == "head-moved":  # the signed head claims less: its signature breaks
        trailer["head"]["seq"] -= 1
        return _resign(path, records, trailer, attacker)
    raise AssertionError(how)


TAMPERS = ["edit-a-line", "edit-and-fix-digest", "resigned-input", "resigned-entry-data", "resigned-form-flipped",
           "resigned-message-dropped", "resigned-record-dropped", "head-moved"]


def test_the_standalone_verifier_accepts_a_real_signed_export_and_refuses_tampered_ones(signed_export) -> None:
    path, signer = signed_export
    ok = _run_tool(path)
    assert ok.returncode == 0, ok.stderr
    assert "complete export" in ok.stdout and signer.key_id in ok.stdout
    assert verify_export(path).ok
    trusted = _run_tool(path, signer.key_id)
    assert trusted.returncode == 0, trusted.stderr
    for how in TAMPERS:
        bad = _tampered(path, how)
        out = _run_tool(bad)
        assert out.returncode == 1 and "export REJECTED" in out.stderr, (how, out.stdout, out.stderr)
        assert "Traceback" not in out.stderr
        assert not verify_export(bad).ok, f"the desk's own check agrees: {how}"
        if how.startswith("resigned"):  # and an auditor who names the desk's key refuses it at once
            named = _run_tool(bad, signer.key_id)
            assert named.returncode == 1 and "not one of the trusted keys" in named.stderr, how
