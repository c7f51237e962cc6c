"""A signed JSONL export and its offline check: the records, then one trailer line holding the database's
signed head with its public key, and the exporter's signature over the records' digest and that head."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ._chain import GENESIS, VerifyResult, canonical_json, entry_fields, link_hash
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


def trailer(signer: HeadSigner, head: tuple[SignedHead, str] | None, records: int, digest: str) -> dict[str, Any]:
    """The last line of a signed export; `digest` is the SHA-256 of every byte before it."""
    h = head[0] if head else None
    at = time.time()
    return {
        TRAILER_KEY: 1,
        "head": h.to_dict() if h else None,
        "head_public_key": head[1] if head else None,
        "records": records,
        "records_sha256": digest,
        "exported_at": at,
        "exporter_key_id": signer.key_id,
        "exporter_public_key": b64(signer.public_key),
        "signature": signer.sign(export_message(h, records, digest, at)),
    }


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
    if not signature_ok(exporter, str(tr.get("signature", "")),
                        export_message(head, tr["records"], tr["records_sha256"], tr.get("exported_at"))):
        raise _Bad("bad-signature", f"the export's signature by {tr.get('exporter_key_id')} does not match")
    for who, key_id in (("exporter", tr["exporter_key_id"]), ("head", head.key_id if head else None)):
        if trusted and key_id is not None and key_id not in trusted:
            raise _Bad("untrusted-key", f"the {who} key {key_id} is not one of the trusted keys")
    notes = [f"{len(lines)} records signed by exporter key {tr['exporter_key_id']}"]
    if head is None:
        return len(lines), [*notes, "the database had no signed head"]
    if not head_signature_ok(head, _public(tr.get("head_public_key"), head.key_id, "head")):
        raise _Bad("bad-signature", f"the head's signature by {head.key_id} does not match")
    return len(lines), [*notes, *_check_entries(lines, head)]


def _public(value: Any, key_id: Any, who: str) -> bytes:
    try:
        pub = unb64(str(value))
    except ValueError:
        pub = b""
    if len(pub) != 32 or key_id_of(pub) != key_id:
        raise _Bad("bad-key", f"the {who}'s public key does not match its key id {key_id}")
    return pub


def _check_entries(lines: list[bytes], head: SignedHead) -> list[str]:
    entries: dict[int, dict[str, Any]] = {}
    for line in lines:
        rec = json.loads(line)
        for e in rec.get("trail") or []:
            if e.get("record_id") != rec.get("id") or not isinstance(e.get("seq"), int) or e["seq"] in entries:
                raise _Bad("altered", f"a trail entry of record {rec.get('id')} is misplaced or repeated")
            entries[e["seq"]] = e
    note = f"database head: entry {head.seq} ({head.count} entries), signed by {head.key_id}"
    if max(entries, default=0) > head.seq:
        raise _Bad("inserted", f"entry {max(entries)} lies past the signed head (entry {head.seq})", max(entries))
    if sorted(entries) != list(range(1, head.seq + 1)):
        return [note, f"partial export ({len(entries)} of {head.count} entries): the records are bound by the "
                "exporter's signature, the links to the head are not re-computed"]
    prev = GENESIS
    for seq in range(1, head.seq + 1):
        e = entries[seq]
        canon = canonical_json(entry_fields(e["record_id"], e["state"], e["at"], e["actor"], e["note"],
                                            e["data"], seq))
        prev = link_hash(prev, canon)
        if prev != e.get("hash"):
            raise _Bad("altered", f"entry {seq} (record {e['record_id']}) does not match its hash", seq)
    if prev != head.hash:
        raise _Bad("altered", "the re-computed chain does not end at the signed head's hash", head.seq)
    return [note, "complete export: every link re-computed up to the signed head"]
