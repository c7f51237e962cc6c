"""The audit hash chain: canonical JSON of an entry, its link hash, and the walk that checks them."""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

GENESIS = "0" * 64
_WINDOW = 256


def json_default(o: Any) -> Any:
    # Values JSON has no type for are stored as their text, so hashing and re-reading agree.
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    return str(o)


def canonical_json(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=json_default)


def entry_fields(
    record_id: str, state: str, at: float, actor: str, note: str, data: Any, seq: int
) -> dict[str, Any]:
    return {"record_id": record_id, "state": state, "at": at, "actor": actor, "note": note, "data": data,
            "seq": seq}


def link_hash(prev_hash: str, canonical: str) -> str:
    return hashlib.sha256((prev_hash + canonical).encode("utf-8")).hexdigest()


def split_canonical(record_id: str, state: str, at: float, actor: str, note: str, data_json: str) -> tuple[str, str]:
    """canonical_json(entry_fields(...)) in two halves around the seq, which only the writer knows.

    Keys sort as actor, at, data, note, record_id, seq, state, so the halves are rendered on the caller's
    thread and the writer joins `prefix + str(seq) + suffix`. A test checks this equals canonical_json.
    """
    d = json.dumps
    prefix = (
        f'{{"actor":{d(actor, ensure_ascii=False)},"at":{d(at)},"data":{data_json},'
        f'"note":{d(note, ensure_ascii=False)},"record_id":{d(record_id, ensure_ascii=False)},"seq":'
    )
    suffix = f',"state":{d(state, ensure_ascii=False)}}}'
    return prefix, suffix


@dataclass(slots=True, frozen=True)
class ChainRow:
    seq: int
    record_id: str
    state: str
    at: float
    actor: str
    note: str
    data: Any
    prev_hash: str
    hash: str

    def canonical(self) -> str:
        return canonical_json(
            entry_fields(self.record_id, self.state, self.at, self.actor, self.note, self.data, self.seq)
        )


@dataclass(slots=True, frozen=True)
class VerifyResult:
    """Outcome of `SqlStore.verify()`.

    ok: the whole chain checks out. count: entries found good (before the first problem, if any).
    When not ok, `problem` is one of
    "altered", "removed", "inserted", and `seq` / `record_id` name the first entry concerned
    (for "removed", the first missing seq and the record of the entry that follows the gap, if any).
    """

    ok: bool
    count: int
    problem: str | None = None
    seq: int | None = None
    record_id: str | None = None
    message: str = ""

    def __bool__(self) -> bool:
        return self.ok


def _fail(count: int, problem: str, seq: int, record_id: str | None, message: str) -> VerifyResult:
    return VerifyResult(False, count, problem, seq, record_id, message)


def verify_chain(rows: Iterable[ChainRow], head: tuple[int, str] | None) -> VerifyResult:
    """Walk entries in seq order; stop at the first one that was altered, removed or inserted."""
    it: Iterator[ChainRow] = iter(rows)
    head_seq, head_hash = head if head is not None else (0, GENESIS)
    prev_hash, prev_seq, count = GENESIS, 0, 0
    # (hash, seq) of the last good entries, to name insertions by where the next link points.
    recent: deque[tuple[str, int, str]] = deque([(GENESIS, 0, "")], maxlen=_WINDOW)
    row = next(it, None)
    while row is not None:
        nxt = next(it, None)
        if row.seq > head_seq:
            return _fail(count, "inserted", row.seq, row.record_id,
                         f"entry {row.seq} (record {row.record_id}) lies past the recorded head "
                         f"(seq {head_seq}): it was added outside the store")
        if row.seq != prev_seq + 1:
            return _fail(count, "removed", prev_seq + 1, row.record_id,
                         f"entries {prev_seq + 1}..{row.seq - 1} are missing (the chain jumps from "
                         f"{prev_seq} to {row.seq}, record {row.record_id})")
        self_ok = link_hash(row.prev_hash, row.canonical()) == row.hash
        link_ok = row.prev_hash == prev_hash
        if not (self_ok and link_ok):
            if nxt is not None and nxt.prev_hash == prev_hash and link_ok:
                return _fail(count, "inserted", row.seq, row.record_id,
                             f"entry {row.seq} (record {row.record_id}) was inserted: the entry after "
                             f"it links to entry {prev_seq}")
            back = next((s for h, s, _ in recent if h == row.prev_hash), None)
            if not link_ok and back is not None and back < prev_seq:
                first = back + 1
                first_record = next((r for _, s, r in recent if s == first), None)
                return _fail(back, "inserted", first, first_record,
                             f"entries {first}..{prev_seq} were inserted: entry {row.seq} "
                             f"(record {row.record_id}) links to entry {first - 1}")
            if not link_ok:
                return _fail(count, "removed", row.seq, row.record_id,
                             f"the entry before {row.seq} (record {row.record_id}) was removed or "
                             f"replaced: its link does not match entry {prev_seq}")
            return _fail(count, "altered", row.seq, row.record_id,
                         f"entry {row.seq} (record {row.record_id}) was altered: its content does not "
                         f"match its hash")
        count += 1
        recent.append((row.hash, row.seq, row.record_id))
        prev_hash, prev_seq = row.hash, row.seq
        row = nxt
    if prev_seq < head_seq:
        return _fail(count, "removed", prev_seq + 1, None,
                     f"entries {prev_seq + 1}..{head_seq} are missing from the end of the chain")
    if prev_hash != head_hash:
        return _fail(count, "altered", prev_seq, None,
                     f"the last entry ({prev_seq}) does not match the recorded head hash")
    return VerifyResult(True, count, message=f"{count} entries verified")
