"""What `verify` checks beyond the hash links: each key's signed head, the registered keys, the witness outside
the database, and an empty chain in a database that holds sessions. `verify` runs it after the walk and the
cross-checks, whatever they found."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from ._signing import (
    SELECT_DB_ID,
    SELECT_HEAD_SIGNATURES,
    SELECT_KEYS,
    HeadSigner,
    SignedHead,
    head_signature_ok,
    unb64,
    witness_head,
)
from ._witness import read_witness


class HeadProblem(Exception):
    """One finding that makes the chain fail: its kind (VerifyResult.problem), the entry, and what it means."""

    def __init__(self, problem: str, seq: int | None, message: str) -> None:
        super().__init__(message)
        self.problem, self.seq, self.message = problem, seq, message


@dataclass(slots=True, frozen=True)
class _Key:
    key_id: str
    public_key: bytes
    host: str
    user: str
    first_seq: int

    def name(self) -> str:
        return f"{self.key_id} ({self.user}@{self.host})"


Witness = tuple[dict[str, Any] | None, str]  # read_witness's answer: the data, or None and why


def early_witness(signer: HeadSigner | None, where: str) -> Witness | None:
    """This installation's witness, read before verify's snapshot begins. The witness is written after its
    commit, so read first it can never be ahead of the snapshot; read after, a commit landing between the two
    reads would look like entries cut from the tail."""
    if signer is None or signer.witness_dir is None:
        return None
    return read_witness(signer.witness_dir, where, signer.key_id)


def check_head(conn: Connection, count: int, head: tuple[int, str] | None, signer: HeadSigner | None,
               where: str, trusted: frozenset[str] = frozenset(),
               witness: Witness | None = None) -> tuple[list[str], HeadProblem | None]:
    """The chain's `count` entries up to `head` checked against the signed heads and the witness: the notes
    to add to a good verdict, or the first problem found. Runs whatever the walk and the cross-checks
    found, so that a cut tail or an emptied chain is named as such. `trusted`: key ids of other desks
    accepted on purpose (`audit verify --trust-key`). `witness`: this installation's witness as read before the
    snapshot began (`early_witness`), so that a commit landing meanwhile cannot look like a cut tail."""
    head_seq = head[0] if head else 0
    try:
        return _check(conn, count, head_seq, signer, where, trusted, witness), None
    except HeadProblem as p:
        return [], p
    except (TypeError, ValueError) as exc:  # a value of the wrong type written into the key tables
        return [], HeadProblem("bad-signature", None,
                               f"the signed heads or the registered keys are malformed ({exc})")


def _check(conn: Connection, count: int, head_seq: int, signer: HeadSigner | None, where: str,
           trusted: frozenset[str], witness: Witness | None = None) -> list[str]:
    if count == 0:
        _refuse_empty(conn)
    keys = {r[0]: _Key(r[0], _decode_key(r[0], r[1]), r[2], r[3], r[5]) for r in conn.execute(text(SELECT_KEYS))}
    db_row = conn.execute(text(SELECT_DB_ID)).first()
    db_id = db_row[0] if db_row else None
    heads = [SignedHead(r[1], r[2], r[3], r[4], r[0], r[5], r[6])
             for r in conn.execute(text(SELECT_HEAD_SIGNATURES))]
    for h in heads:
        _check_signed_head(conn, h, keys, db_id, head_seq)
    # A key is registered in the transaction of its first signed head, and head rows are never deleted.
    lost = sorted(set(keys) - {h.key_id for h in heads})
    if heads and lost:
        raise HeadProblem("unsigned", None, f"the signed head of key {keys[lost[0]].name()} was removed")
    # The witness first: "N entries missing at the tail" says more than "no signed head is left".
    local = _check_local(conn, signer, keys, db_id, head_seq, where, trusted, witness) if signer is not None else []
    return _check_coverage(heads, keys, count, head_seq, signer) + local


def _decode_key(key_id: str, public_b64: str) -> bytes:
    try:
        return unb64(public_b64)
    except ValueError:
        raise HeadProblem("bad-key", None, f"the registered public key of {key_id} is damaged") from None


def _refuse_empty(conn: Connection) -> None:
    n = {t: conn.execute(text(f"SELECT count(*) FROM {t}")).scalar() or 0
         for t in ("sessions", "tool_calls", "messages", "events")}
    # A session that was opened and never used has nothing to chain: only what a session did (a message, a
    # call, an event) makes an empty chain a deletion.
    if n["tool_calls"] or n["messages"] or n["events"]:
        raise HeadProblem("empty", None, f"the audit chain is empty, yet the database holds {n['sessions']} "
                          f"session(s), {n['tool_calls']} tool call(s) and {n['messages']} message(s): "
                          "its entries were deleted")


def _hash_at(conn: Connection, seq: int) -> str | None:
    return conn.execute(text("SELECT hash FROM audit_entries WHERE seq = :s"), {"s": seq}).scalar()


def _check_signed_head(conn: Connection, h: SignedHead, keys: dict[str, _Key], db_id: str | None,
                       head_seq: int) -> None:
    key = keys.get(h.key_id)
    if key is None:
        raise HeadProblem("unknown-key", h.seq, f"the head at entry {h.seq} is signed by key {h.key_id}, "
                          "which is not registered in this database")
    if not head_signature_ok(h, key.public_key) or h.db_id != db_id or h.count != h.seq:
        raise HeadProblem("bad-signature", h.seq, f"the head at entry {h.seq} does not match its signature by "
                          f"key {key.name()}: the head or the database's identity was rewritten without the key")
    if h.seq < key.first_seq:
        raise HeadProblem("late-key", h.seq, f"key {key.name()} signed the head at entry {h.seq} but was "
                          f"registered at entry {key.first_seq}, after those entries")
    if h.seq > head_seq:
        raise HeadProblem("truncated", head_seq + 1, f"{h.seq - head_seq} entries missing at the tail: key "
                          f"{key.name()} signed the head at entry {h.seq}, the chain ends at entry {head_seq}")
    if _hash_at(conn, h.seq) != h.hash:
        raise HeadProblem("rewritten", h.seq, f"entry {h.seq} is not the one key {key.name()} signed: the chain "
                          "was recomputed after an edit")


def _check_coverage(heads: list[SignedHead], keys: dict[str, _Key], count: int, head_seq: int,
                    signer: HeadSigner | None) -> list[str]:
    if not heads:
        if keys:
            raise HeadProblem("unsigned", head_seq or None, f"{len(keys)} key(s) are registered but no signed "
                              "head is left: the signatures were removed")
        if count and signer is not None:
            raise HeadProblem("unsigned", head_seq, f"the head (entry {head_seq}) is signed by no key: written "
                              "before signed heads existed, or its signatures and keys were removed")
        return ["the head is not signed (no key has written to this database)"] if count else []
    top = max(heads, key=lambda h: h.seq)
    if top.seq < head_seq:
        raise HeadProblem("unsigned", top.seq + 1, f"entries {top.seq + 1}..{head_seq} are covered by no "
                          f"signed head (the last one is at entry {top.seq}): they were added without a key")
    names = ", ".join(keys[h.key_id].name() for h in sorted(heads, key=lambda h: -h.seq))
    return [f"head signed by {names}"]


def _check_local(conn: Connection, signer: HeadSigner, keys: dict[str, _Key], db_id: str | None,
                 head_seq: int, where: str, trusted: frozenset[str], witness: Witness | None = None) -> list[str]:
    """This installation's anchors: its key as registered, and its witness of this database's head."""
    mine = keys.get(signer.key_id)
    if mine is not None and mine.public_key != signer.public_key:
        raise HeadProblem("bad-key", None, f"the registered public key of {signer.key_id} is not this "
                          "installation's key")
    if signer.witness_dir is None:
        return []
    data, why = witness or read_witness(signer.witness_dir, where, signer.key_id)
    if data is None:
        if why != "absent":
            raise HeadProblem("witness", None, f"the witness of this database is {why}")
        return ["no witness on this installation"]
    w = witness_head(data, signer.public_key)
    if w is None:
        raise HeadProblem("witness", None, "the witness of this database is not signed by this installation's "
                          f"key {signer.key_id}")
    note = _compare_witness(conn, w, db_id, head_seq)
    if mine is None:
        raise HeadProblem("unknown-key", None, f"this installation's key {signer.key_id}, which witnessed entry "
                          f"{w.seq}, is no longer registered in this database")
    return [note, *_check_identity(conn, signer, keys, w, data, where, trusted)]


def _own_keys(signer: HeadSigner, keys: dict[str, _Key], where: str) -> set[str]:
    """The registered keys of this installation: its own, and each one whose signed witness of this database
    lies in this installation's witness folder (the window's keyring key beside the CLI's file key)."""
    own = {signer.key_id}
    assert signer.witness_dir is not None
    for k, key in keys.items():
        data, _ = read_witness(signer.witness_dir, where, k) if k != signer.key_id else (None, "")
        if data is not None and witness_head(data, key.public_key) is not None:
            own.add(k)
    return own


def _check_identity(conn: Connection, signer: HeadSigner, keys: dict[str, _Key], w: SignedHead,
                    data: dict[str, Any], where: str, trusted: frozenset[str]) -> list[str]:
    """On an installation with a witness: no key but this installation's own claims its user@host, and no
    entry after the witnessed head is signed by a key this installation never saw registered (the witness
    names the keys registered when it was written). `trusted` keys pass both, on purpose."""
    own = _own_keys(signer, keys, where)
    me = (signer.user, signer.host)
    for k in sorted(keys):
        key = keys[k]
        if k not in own and k not in trusted and (key.user, key.host) == me:
            raise HeadProblem("impersonation", key.first_seq, f"key {key.name()} claims this installation's "
                              f"name {key.user}@{key.host} but is not its key ({signer.key_id}); entries it "
                              f"signed: {_spans(conn, k, 0)}. If that desk is yours, accept it on purpose with "
                              f"`agent-desk audit verify --trust-key {k}`")
    listed = data.get("keys")
    if isinstance(listed, list):
        known = {str(k) for k in listed}
    else:  # a witness written before it named the keys: those registered by the witnessed entry
        known = {k for k, key in keys.items() if key.first_seq <= w.seq}
    strangers = sorted(k for k in keys if k not in own | known | trusted)
    for k in strangers:
        spans = _spans(conn, k, w.seq)
        if spans:
            raise HeadProblem("unknown-desk", w.seq + 1, f"entries {spans}, after the witnessed entry {w.seq}, are "
                              f"signed by key {keys[k].name()}, which this installation never registered: "
                              f"another desk, or a forged one. If you share this database with that desk, "
                              f"accept it on purpose with `agent-desk audit verify --trust-key {k}`")
    accepted = sorted(trusted & set(keys))
    return [f"accepted on purpose: {', '.join(keys[k].name() for k in accepted)}"] if accepted else []


def _spans(conn: Connection, key_id: str, after: int) -> str:
    """The entries that `key_id` signed after entry `after`, as ranges ("7..9, 12..12"), or ""."""
    rows = conn.execute(text("SELECT first_seq, last_seq FROM audit_batches WHERE key_id = :k AND last_seq > :s "
                             "ORDER BY last_seq"), {"k": key_id, "s": after}).all()
    runs: list[list[int]] = []
    for a, b in rows:
        a = max(a, after + 1)
        if runs and a <= runs[-1][1] + 1:  # one commit after another: one range
            runs[-1][1] = max(b, runs[-1][1])
        else:
            runs.append([a, b])
    more = f" and {len(runs) - 20} more ranges" if len(runs) > 20 else ""
    return ", ".join(f"{a}..{b}" for a, b in runs[:20]) + more


def _compare_witness(conn: Any, w: SignedHead, db_id: str | None, head_seq: int) -> str:
    if w.seq > head_seq:
        raise HeadProblem("truncated", head_seq + 1, f"{w.seq - head_seq} entries missing at the tail: the "
                          f"witness saw entry {w.seq}, the chain ends at entry {head_seq}")
    if w.db_id != db_id:
        raise HeadProblem("witness", None, f"the database's identity changed: the witness names {w.db_id}, "
                          f"the database {db_id}")
    if _hash_at(conn, w.seq) != w.hash:
        raise HeadProblem("rewritten", w.seq, f"entry {w.seq} is not the one the witness saw: the chain was "
                          "recomputed after an edit")
    return f"witness at entry {w.seq} matches"
