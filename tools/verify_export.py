#!/usr/bin/env python3
"""Verify a signed Agent Desk audit export without Agent Desk: python3 verify_export.py FILE [--key KEY_ID ...].
Standard library plus `cryptography` (Ed25519); implements docs/audit-format.md. Exit 0: verified; 1: rejected."""

import argparse
import base64
import hashlib
import json
import sys

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

DOMAINS = {"head": b"agent-desk/audit-head/v1\x00", "export": b"agent-desk/audit-export/v1\x00"}
legacy = lambda v: json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False)  # noqa: E731 form 1


class Rejected(Exception):  # the export does not verify: the message says why
    pass


def es_number(f):
    """A float as RFC 8785 writes it (ECMAScript Number::toString, shortest round-trip digits)."""
    if f != f or f in (float("inf"), float("-inf")):
        raise Rejected(f"{f} has no RFC 8785 form")
    if f <= 0:
        return "0" if f == 0 else "-" + es_number(-f)
    mantissa, _, exp = repr(f).partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    n = int(exp or 0) + len(whole) - (len(whole + frac) - len(digits))  # value = 0.DIGITS x 10^n
    digits = digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        return digits + "0" * (n - k)
    if 0 < n <= 21:
        return f"{digits[:n]}.{digits[n:]}"
    if -6 < n <= 0:
        return f"0.{'0' * -n}{digits}"
    return f"{digits[0]}{'.' + digits[1:] if k > 1 else ''}e{'+' if n > 0 else '-'}{abs(n - 1)}"


def jcs(v):
    """RFC 8785 (JSON Canonicalization Scheme)."""
    if isinstance(v, float) or (isinstance(v, int) and not isinstance(v, bool) and abs(v) > 2**53 - 1):
        return es_number(float(v))  # numbers are doubles: 1e16 is written 10000000000000000, and read back
    if v is None or isinstance(v, (bool, int, str)):
        return json.dumps(v, ensure_ascii=False)  # a string's escapes are exactly RFC 8785's
    if isinstance(v, list):
        return "[" + ",".join(jcs(x) for x in v) + "]"
    items = sorted(v.items(), key=lambda kv: kv[0].encode("utf-16-be"))
    return "{" + ",".join(f"{jcs(k)}:{jcs(x)}" for k, x in items) + "}"


def check_signature(public_b64, key_id, signature, message, who):  # Ed25519, by the key whose id is key_id
    raw = base64.b64decode(str(public_b64), validate=True)
    if len(raw) != 32 or "ed25519:" + hashlib.sha256(raw).hexdigest()[:32] != key_id:
        raise Rejected(f"the {who}'s public key does not match its key id {key_id}")
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(base64.b64decode(str(signature), validate=True), message)
    except (InvalidSignature, ValueError):
        raise Rejected(f"the {who}'s signature does not match") from None


def entry_hash(prev, e):
    fields = {k: e[k] for k in ("record_id", "state", "at", "actor", "note", "data", "seq")}
    if e.get("digests"):
        fields.update(digests=e["digests"], message_id=e.get("message_id"))
    if e.get("desk"):
        fields["desk"] = e["desk"]
    text = jcs(fields) if e.get("canon", 1) == 2 else legacy(fields)  # form 2: RFC 8785; form 1: Python's
    return hashlib.sha256((prev + text).encode("utf-8")).hexdigest()


def check_chain(records, head, messages):
    entries, last = {}, {}
    for rec in records:
        for e in rec.get("trail") or []:
            if e.get("record_id") != rec.get("id") or not isinstance(e.get("seq"), int) or e["seq"] in entries:
                raise Rejected(f"a trail entry of record {rec.get('id')} is misplaced or repeated")
            entries[e["seq"]] = last[rec["id"]] = e
    for e in messages or []:
        rows = e.get("state") == "ROWS" and e.get("message_id") is None  # bound events/sessions/projects rows
        message = e.get("state") == "MESSAGE" and e.get("digests")
        if e.get("record_id") is not None or not (rows or message) or e["seq"] in entries:
            raise Rejected(f"entry {e.get('seq')} among the message entries is not a message's entry")
        entries[e["seq"]] = e
    if sorted(entries) != list(range(1, head["seq"] + 1)):
        if max(entries, default=0) > head["seq"]:
            raise Rejected(f"entry {max(entries)} lies past the signed head (entry {head['seq']})")
        if messages is not None:
            raise Rejected("entries are missing from an export that holds every tool call")
        return "partial export: records bound by the exporter's signature, links not re-computed"
    prev = "0" * 64  # the genesis
    for seq in range(1, head["seq"] + 1):
        prev = entry_hash(prev, entries[seq])
        if prev != entries[seq].get("hash"):
            raise Rejected(f"entry {seq} does not match its hash")
    if prev != head["hash"]:
        raise Rejected("the re-computed chain does not end at the signed head's hash")
    for rec in records:  # each record's fields against the digests its last entry carries (docs: digests)
        named = dict(p.split(":", 1) for p in (last.get(rec["id"], {}).get("digests") or "").split())
        for f in ("input", "result", "approval", "provenance"):
            text = "None" if rec.get(f) is None else json.dumps(rec[f], ensure_ascii=False, separators=(",", ":"))
            if f in named and f in rec and hashlib.sha256(text.encode()).hexdigest() != named[f]:
                raise Rejected(f"the {f} of record {rec['id']} differs from what its last entry says")
    return f"complete export: {head['seq']} links re-computed up to the signed head"


def verify(raw, trusted):
    body, _, last = raw.rstrip(b"\n").rpartition(b"\n")
    body = body + b"\n" if body else b""
    tr = json.loads(last)
    if not isinstance(tr, dict) or tr.get("agent_desk_signed_export") != 1:
        raise Rejected("the export has no signed trailer")
    lines = body.splitlines()
    if tr["records"] != len(lines) or hashlib.sha256(body).hexdigest() != tr["records_sha256"]:
        raise Rejected("the records do not match the export's signed digest")
    head, canonical = tr.get("head"), jcs if tr.get("canonical") == "rfc8785" else legacy
    signed = {k: tr[k] for k in ("records", "records_sha256", "exported_at")} | {"head": head}
    check_signature(tr["exporter_public_key"], tr["exporter_key_id"], tr["signature"],
                    DOMAINS["export"] + canonical(signed).encode(), "exporter")
    for key_id in (tr["exporter_key_id"], head and head["key_id"]):
        if trusted and key_id and key_id not in trusted:
            raise Rejected(f"the key {key_id} is not one of the trusted keys")
    if head is None:
        return f"{len(lines)} records signed by {tr['exporter_key_id']}; the database had no signed head"
    message = DOMAINS["head"] + jcs({k: head[k] for k in ("db_id", "seq", "hash", "count", "key_id")}).encode()
    check_signature(tr["head_public_key"], head["key_id"], head["signature"], message, "head")
    chain = check_chain([json.loads(x) for x in lines], head, tr.get("message_entries"))
    return f"{len(lines)} records signed by {tr['exporter_key_id']}; head {head['seq']} by {head['key_id']}; {chain}"


def main(argv=None):
    p = argparse.ArgumentParser(description="Verify a signed Agent Desk audit export (docs/audit-format.md).")
    p.add_argument("file")
    p.add_argument("--key", action="append", default=[], help="a key id to trust (repeatable)")
    args = p.parse_args(argv)
    try:
        with open(args.file, "rb") as fh:
            print("export OK:", verify(fh.read(), set(args.key)))
        return 0
    except (Rejected, OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        kind = "" if isinstance(e, Rejected) else f"malformed ({type(e).__name__}): "
        print(f"export REJECTED: {kind}{e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
