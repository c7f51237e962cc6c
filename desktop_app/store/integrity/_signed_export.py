"""A signed JSONL export and its offline check: the records, then one trailer line holding the database's
signed head with its public key, and the exporter's signature over the records' digest and that head."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from desktop_app.core import ToolCallRecord

from .._export import record_json
from ._canonical import jcs
from ._chain import CANON_JCS, GENESIS, VerifyResult, canonical_json, entry_fields, link_hash
from ._digests import RECORD_NAMED, field_digest, to_json, unpack
from ._signing import (
    SELECT_HEAD_SIGNATURES,
    HeadSigner,
    SignedHead,
    b64,
    export_message,
    head_signature_ok,
    key_id_of,
    signature_ok,
    unb64,
)

TRAILER_KEY = "agent_desk_signed_export"


def latest_head(conn: Connection) -> tuple[SignedHead, str] | None:
    """The highest head any key signed, with that key's registered public key (base64)."""
    rows = list(conn.execute(text(f"{SELECT_HEAD_SIGNATURES} ORDER BY seq DESC LIMIT 1")))
    if not rows:
        return None
    r = rows[0]
    head = SignedHead(r[1], r[2], r[3], r[4], r[0], r[5], r[6])
    pub = conn.execute(text("SELECT public_key FROM desk_keys WHERE key_id = :k"), {"k": head.key_id}).scalar()
    return (head, pub) if pub else None


def trailer(signer: HeadSigner, head: tuple[SignedHead, str] | None, records: int, digest: str,
            message_entries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The last line of a signed export; `digest` is the SHA-256 of every byte before it. `message_entries`
    (an export of every tool call) are the chain's message entries, so that every link can be re-computed:
    they need no signature of their own, as the re-computed chain must end at the signed head's hash."""
    h = head[0] if head else None
    at = time.time()
    return {
        TRAILER_KEY: 1,
        "canonical": "rfc8785",
        "head": h.to_dict() if h else None,
        "head_public_key": head[1] if head else None,
        "records": records,
        "records_sha256": digest,
        "exported_at": at,
        "exporter_key_id": signer.key_id,
        "exporter_public_key": b64(signer.public_key),
        "signature": signer.sign(export_message(h, records, digest, at)),
        "message_entries": message_entries,
    }


_CHUNK = 500
_MESSAGE_ENTRIES = ("SELECT seq, state, at, actor, note, data, hash, digests, message_id, desk, canon "
                    "FROM audit_entries "
                    "WHERE record_id IS NULL AND seq <= :top ORDER BY seq")


class ChainDigests:
    """What a signed export adds to each trail entry: the digests, message id and desk its hash covers (the core's
    AuditEntry does not carry them), fetched a chunk of records at a time."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self._by_seq: dict[int, tuple[str, int | None, str, int]] = {}

    def records(self, records: Iterable[ToolCallRecord]) -> Iterator[ToolCallRecord]:
        it = iter(records)
        while chunk := list(itertools.islice(it, _CHUNK)):
            params = {f"r{k}": rec.id for k, rec in enumerate(chunk)}
            sql = (f"SELECT seq, digests, message_id, desk, canon FROM audit_entries WHERE record_id IN "
                   f"({', '.join(':' + k for k in params)})")
            self._by_seq = {r[0]: (r[1] or "", r[2], r[3] or "", r[4]) for r in self._conn.execute(text(sql), params)}
            yield from chunk

    def line(self, rec: ToolCallRecord) -> dict[str, Any]:
        d = record_json(rec)
        for e in d["trail"]:
            dg, mid, desk, canon = self._by_seq.get(e["seq"], ("", None, "", 1))
            if dg:
                e["digests"], e["message_id"] = dg, mid
            if desk:
                e["desk"] = desk
            e["canon"] = canon
        return d


def message_entries(conn: Connection, top: int) -> list[dict[str, Any]]:
    """Every message entry of the chain up to entry `top` (the signed head), as a signed export carries them."""
    return [{"record_id": None, "state": r[1], "at": r[2], "actor": r[3], "note": r[4], "data": json.loads(r[5]),
             "seq": r[0], "hash": r[6], "digests": r[7] or "", "message_id": r[8], "desk": r[9] or "", "canon": r[10]}
            for r in conn.execute(text(_MESSAGE_ENTRIES), {"top": top})]


class _Bad(Exception):
    def __init__(self, problem: str, message: str, seq: int | None = None) -> None:
        super().__init__(message)
        self.problem, self.message, self.seq = problem, message, seq


def verify_export(path: str | os.PathLike[str], trusted_keys: Iterable[str] = ()) -> VerifyResult:
    """Check a signed export offline: the exporter's signature over every record, the database's signed head,
    and, when the export holds the whole chain, every link up to that head. Names the keys to compare; with
    `trusted_keys` (key ids an auditor got from the desks' owners), a key outside them is refused."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        return VerifyResult(False, 0, "unreadable", message=f"cannot read {path}: {exc.strerror}")
    try:
        count, notes = _check_export(raw, frozenset(trusted_keys))
    except _Bad as bad:
        return VerifyResult(False, 0, bad.problem, bad.seq, message=bad.message)
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return VerifyResult(False, 0, "malformed", message=f"the export is malformed ({type(exc).__name__}: {exc})")
    return VerifyResult(True, count, message="; ".join(notes))


def _check_export(raw: bytes, trusted: frozenset[str]) -> tuple[int, list[str]]:
    body, _, last = raw.rstrip(b"\n").rpartition(b"\n")
    body = body + b"\n" if body else b""
    try:
        tr = json.loads(last)
        signed = isinstance(tr, dict) and tr.get(TRAILER_KEY) == 1
    except ValueError:
        signed = False
    if not signed:
        raise _Bad("unsigned", "the export has no signed trailer (export it with --signed)")
    lines = body.splitlines()
    if tr.get("records") != len(lines) or hashlib.sha256(body).hexdigest() != tr.get("records_sha256"):
        raise _Bad("altered", "the records do not match the export's signed digest: lines were edited, added "
                   "or removed")
    head = SignedHead.from_dict(tr["head"]) if tr.get("head") else None
    exporter = _public(tr.get("exporter_public_key"), tr.get("exporter_key_id"), "exporter")
    if not signature_ok(exporter, str(tr.get("signature", "")), export_message(
            head, tr["records"], tr["records_sha256"], tr.get("exported_at"), tr.get("canonical"))):
        raise _Bad("bad-signature", f"the export's signature by {tr.get('exporter_key_id')} does not match")
    for who, key_id in (("exporter", tr["exporter_key_id"]), ("head", head.key_id if head else None)):
        if trusted and key_id is not None and key_id not in trusted:
            raise _Bad("untrusted-key", f"the {who} key {key_id} is not one of the trusted keys")
    notes = [f"{len(lines)} records signed by exporter key {tr['exporter_key_id']}"]
    if head is None:
        return len(lines), [*notes, "the database had no signed head"]
    if not head_signature_ok(head, _public(tr.get("head_public_key"), head.key_id, "head")):
        raise _Bad("bad-signature", f"the head's signature by {head.key_id} does not match")
    return len(lines), [*notes, *_check_entries(lines, head, tr.get("message_entries"))]


def _public(value: Any, key_id: Any, who: str) -> bytes:
    try:
        pub = unb64(str(value))
    except ValueError:
        pub = b""
    if len(pub) != 32 or key_id_of(pub) != key_id:
        raise _Bad("bad-key", f"the {who}'s public key does not match its key id {key_id}")
    return pub


def _check_entries(lines: list[bytes], head: SignedHead, messages: Any) -> list[str]:
    entries: dict[int, dict[str, Any]] = {}
    last: dict[int, dict[str, Any]] = {}  # each record's last entry, by its line
    for i, line in enumerate(lines):
        rec = json.loads(line)
        for e in rec.get("trail") or []:
            _take(entries, e, rec.get("id"))
            last[i] = e
    for e in messages or []:
        _take(entries, e, None)
        rows = e.get("state") == "ROWS" and e.get("message_id") is None  # the chain's bound rows (_bound_rows.py)
        if not rows and (e.get("state") != "MESSAGE" or not e.get("digests")):
            raise _Bad("altered", f"entry {e['seq']} among the message entries is not a message's entry", e["seq"])
    note = f"database head: entry {head.seq} ({head.count} entries), signed by {head.key_id}"
    if max(entries, default=0) > head.seq:
        raise _Bad("inserted", f"entry {max(entries)} lies past the signed head (entry {head.seq})", max(entries))
    if sorted(entries) != list(range(1, head.seq + 1)):
        if messages is not None:  # the exporter wrote every call and the message entries: none may be missing
            gap = next(seq for seq in range(1, head.seq + 1) if seq not in entries)
            raise _Bad("altered", f"entry {gap} is missing from an export that holds every tool call", gap)
        return [note, f"partial export ({len(entries)} of {head.count} entries): the records are bound by the "
                "exporter's signature, the links to the head are not re-computed"]
    prev = GENESIS
    for seq in range(1, head.seq + 1):
        e = entries[seq]
        fields = entry_fields(e["record_id"], e["state"], e["at"], e["actor"], e["note"], e["data"], seq,
                              e.get("digests") or "", e.get("message_id"), e.get("desk") or "")
        prev = link_hash(prev, jcs(fields) if e.get("canon", 1) == CANON_JCS else canonical_json(fields))
        if prev != e.get("hash"):
            who = f"record {e['record_id']}" if e["record_id"] is not None else f"message {e.get('message_id')}" \
                if e.get("message_id") is not None else "bound rows"
            raise _Bad("altered", f"entry {seq} ({who}) does not match its hash", seq)
    if prev != head.hash:
        raise _Bad("altered", "the re-computed chain does not end at the signed head's hash", head.seq)
    for i, e in last.items():
        _check_record(json.loads(lines[i]), e)
    return [note, "complete export: every link re-computed up to the signed head, and each record's input, "
            "result, approval and provenance match its last entry"]


def _take(entries: dict[int, dict[str, Any]], e: Any, record_id: Any) -> None:
    if not isinstance(e, dict) or e.get("record_id") != record_id or not isinstance(e.get("seq"), int) \
            or e["seq"] in entries:
        raise _Bad("altered", f"a trail entry of record {record_id} is misplaced or repeated")
    entries[e["seq"]] = e


def _check_record(rec: dict[str, Any], last: dict[str, Any]) -> None:
    """A record's exported fields against the digests its last (re-computed) entry carries: an edit of the
    record line shows even when the export was re-signed with another key."""
    if not last.get("digests"):
        return  # an entry from before digests existed
    named = unpack(last["digests"])
    for f in RECORD_NAMED:
        if f in named and f in rec and field_digest(_stored(f, rec[f])) != named[f]:
            raise _Bad("altered", f"the {f} of record {rec.get('id')} differs from what its last audit entry "
                       f"(entry {last['seq']}) says", last["seq"])


def _stored(field: str, value: Any) -> Any:
    # The text a JSON column holds (see _digests.py's to_json); NULL stays None.
    return None if value is None else to_json(value)
