"""`verify` on a shared chain: each entry names the desk that wrote it (its key id, hashed with the entry), and
each commit's batch of entries carries that desk's signed head. This checks every batch's signature with its
desk's registered key, that each entry lies in a batch of its own desk, and that no desk's key was registered
after its entries."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import text
from sqlalchemy.engine import Connection

from ._head_verify import HeadProblem
from ._signing import SELECT_DB_ID, SELECT_KEYS, batch_message, unb64

_BATCHES = ("SELECT b.last_seq, b.first_seq, b.key_id, b.hash, b.signature, e.hash FROM audit_batches b "
            "LEFT JOIN audit_entries e ON e.seq = b.last_seq ORDER BY b.last_seq")


@dataclass(slots=True, frozen=True)
class Desk:
    key_id: str
    public_key: Ed25519PublicKey | None  # None: the registered key is damaged
    host: str
    user: str
    first_seq: int

    def name(self) -> str:
        return f"desk {self.user}@{self.host} (key {self.key_id})"


@dataclass(slots=True, frozen=True)
class Batch:
    first: int
    last: int
    key_id: str


def _name(desks: dict[str, Desk], key_id: str) -> str:
    d = desks.get(key_id)
    return d.name() if d is not None else f"an unregistered desk (key {key_id})"


def check_desks(conn: Connection, runs: list[tuple[int, str]], top: int, whole: bool) -> tuple[list[str],
                                                                                              HeadProblem | None]:
    """Entries 1..`top` (walked good, in `runs`: where each desk's run starts) against the desks' signed batches.
    `whole`: the walk reached the head, so a batch past `top` means entries were cut. Returns the note that
    names each desk, or the first problem."""
    try:
        desks = _desks(conn)
        batches = _check_batches(conn, desks, top, whole)
        counts = _check_attribution(runs, batches, top, desks)
        _check_registration(runs, desks)
        _check_heads_not_behind(conn, batches, desks)
    except HeadProblem as p:
        return [], p
    except (TypeError, ValueError) as exc:  # a value of the wrong type written into the key or batch tables
        return [], HeadProblem("bad-signature", None, f"the signed batches or the registered keys are malformed "
                               f"({exc})")
    if not counts:
        return [], None
    per = ", ".join(f"{_short(desks, k)} {n}" for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
    return [f"entries by desk, each checked with its desk's key: {per}", *_shared_names(desks)], None


def _shared_names(desks: dict[str, Desk]) -> list[str]:
    """Keys that claim one user@host: a reinstalled desk, a CLI with its own key file, or a key registered by
    hand under a desk's name. Not a failure, but a person should compare the fingerprints."""
    by_name: dict[str, list[str]] = {}
    for d in desks.values():
        by_name.setdefault(f"{d.user}@{d.host}", []).append(d.key_id)
    return [f"{len(keys)} keys claim {name} ({', '.join(sorted(keys))}): compare them with that desk's own"
            for name, keys in sorted(by_name.items()) if len(keys) > 1]


def _short(desks: dict[str, Desk], key_id: str) -> str:
    d = desks[key_id]
    return f"{d.user}@{d.host} [{key_id[:20]}…]"


def _desks(conn: Connection) -> dict[str, Desk]:
    out = {}
    for key_id, pub, host, user, _at, first in conn.execute(text(SELECT_KEYS)):
        try:
            key: Ed25519PublicKey | None = Ed25519PublicKey.from_public_bytes(unb64(pub))
        except (ValueError, TypeError):
            key = None
        out[key_id] = Desk(key_id, key, host, user, int(first))
    return out


def _check_batches(conn: Connection, desks: dict[str, Desk], top: int, whole: bool) -> list[Batch]:
    """Each batch's signed head, checked with its desk's key; the batches up to `top`, in chain order."""
    db_row = conn.execute(text(SELECT_DB_ID)).first()
    db_id = db_row[0] if db_row else ""
    out: list[Batch] = []
    rows = list(conn.execute(text(_BATCHES)))
    for last, first, key_id, hash_, sig, entry_hash in rows:
        if last > top:
            if whole:
                end, end_key = rows[-1][0], rows[-1][2]
                raise HeadProblem("truncated", top + 1, f"entries {top + 1}..{end} are missing at the tail: "
                                  f"{_name(desks, end_key)} signed a batch ending at entry {end}")
            break
        desk = desks.get(key_id)
        if desk is None:
            raise HeadProblem("unknown-key", first, f"entries {first}..{last} are signed by key {key_id}, which "
                              "is not registered in this database (its key row was deleted, or never written)")
        if not _signed(desk, sig, batch_message(db_id, first, last, hash_, key_id)):
            raise HeadProblem("bad-signature", first, f"entries {first}..{last} do not match the signature of "
                              f"{desk.name()}: the batch was re-signed by another key, or rewritten by hand")
        if entry_hash != hash_:
            raise HeadProblem("rewritten", last, f"entry {last} is not the one {desk.name()} signed: the chain "
                              "was recomputed after an edit")
        if first > last or (out and first <= out[-1].last):  # first_seq is not signed: kept honest here
            raise HeadProblem("misattributed", first, f"the signed batch of {desk.name()} ending at entry {last} "
                              f"claims to start at entry {first}, inside another batch: its record was edited")
        out.append(Batch(first, last, key_id))
    return out


def _check_heads_not_behind(conn: Connection, batches: list[Batch], desks: dict[str, Desk]) -> None:
    """A desk signs its head in the same commit as each batch: a last head older than its last batch was rolled
    back to an earlier one of its real signatures (from a copy of the database), to hide what came after."""
    last_batch = {b.key_id: b.last for b in batches}
    for key_id, seq in conn.execute(text("SELECT key_id, seq FROM audit_head_signatures")):
        if key_id in last_batch and seq < last_batch[key_id]:
            raise HeadProblem("rolled-back", seq, f"the last signed head of {_name(desks, key_id)} is at entry "
                              f"{seq}, before its signed batch ending at entry {last_batch[key_id]}: it was "
                              "rolled back to an older signature")


def _signed(desk: Desk, signature: str, message: bytes) -> bool:
    if desk.public_key is None:
        return False
    try:
        desk.public_key.verify(unb64(signature), message)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def _check_attribution(runs: list[tuple[int, str]], batches: list[Batch], top: int,
                       desks: dict[str, Desk]) -> Counter[str]:
    """Each entry's desk against the batch that signed it. Entries before the first batch may name no desk:
    written before desks were named, the head signatures still cover them."""
    first_signed = batches[0].first if batches else top + 1
    counts: Counter[str] = Counter()
    for p, end, desk, signer in _segments(runs, batches, top):
        if desk and desk == signer:
            counts[desk] += end - p + 1
        elif not (signer is None and not desk and p < first_signed):
            raise HeadProblem(*_misattributed(p, end, desk, signer, desks))
    return counts


def _segments(runs: list[tuple[int, str]], batches: list[Batch], top: int) -> list[tuple[int, int, str, str | None]]:
    """(first, last, the entries' desk, the signing desk or None) over 1..top, each as long as both stay the
    same: they are compared where either changes, as both are constant in between."""
    starts = [s for s, _ in runs]
    bstarts = [b.first for b in batches]
    points = sorted({p for p in (*starts, *bstarts, *(b.last + 1 for b in batches)) if 1 <= p <= top})
    out: list[tuple[int, int, str, str | None]] = []
    for i, p in enumerate(points):
        end = (points[i + 1] - 1) if i + 1 < len(points) else top
        desk = runs[bisect.bisect_right(starts, p) - 1][1]
        k = bisect.bisect_right(bstarts, p) - 1
        signer = batches[k].key_id if k >= 0 and p <= batches[k].last else None
        if out and out[-1][2:] == (desk, signer):
            out[-1] = (out[-1][0], end, desk, signer)
        else:
            out.append((p, end, desk, signer))
    return out


def _misattributed(p: int, end: int, desk: str, signer: str | None, desks: dict[str, Desk]) -> tuple[str, int, str]:
    span = f"entries {p}..{end} name" if end > p else f"entry {p} names"
    if signer is None and not desk:
        return "unsigned", p, f"{span} no desk, and no desk signed them: written without a key, or by hand"
    if signer is None:
        return "unsigned", p, (f"{span} {_name(desks, desk)}, but no signature of that desk covers them: "
                               "its signed batch was removed, or they were added by hand")
    if not desk:
        return "misattributed", p, f"{span} no desk, yet {_name(desks, signer)} signed them"
    return "misattributed", p, (f"{span} {_name(desks, desk)}, but {_name(desks, signer)} signed them: "
                                "the desk of an entry was changed, or another desk re-signed it")


def _check_registration(runs: list[tuple[int, str]], desks: dict[str, Desk]) -> None:
    """Each desk named by an entry is registered, and was registered at or before its first entry."""
    first_of: dict[str, int] = {}
    for start, desk in runs:
        if desk:
            first_of.setdefault(desk, start)
    for desk, first in sorted(first_of.items(), key=lambda kv: kv[1]):
        d = desks.get(desk)
        if d is None:
            raise HeadProblem("unknown-key", first, f"entry {first} names desk key {desk}, which is not "
                              "registered in this database")
        if d.first_seq > first:
            raise HeadProblem("late-key", first, f"{d.name()} was registered at entry {d.first_seq}, after its "
                              f"entries (its first is entry {first})")
