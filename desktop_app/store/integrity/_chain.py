"""The audit hash chain: canonical JSON of an entry, its link hash, and the walk that checks them. Imports only
the standard library, so that `verify` can run the walk as this file in a process of its own (`walk_file`).

Two canonical forms (an entry's `canon` column says which; docs/audit-format.md specifies both): 1, Python's
sorted compact JSON (the entries written before RFC 8785), and 2, RFC 8785 (JCS), which any language can
re-compute. They differ only in how a number is written (`es_number`) and how object keys sort (UTF-16 code
units); an entry's own keys are ASCII, and its `data` is stored as the text its form made."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
import sys
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

GENESIS = "0" * 64
CANON_LEGACY = 1  # Python's json.dumps(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
CANON_JCS = 2  # RFC 8785: what new entries are written in
_WINDOW = 256
# The columns the walk reads, in its order (a test holds this to AuditEntryRow's columns).
WALK_COLUMNS = ("seq", "record_id", "state", "at", "actor", "note", "data", "prev_hash", "hash", "message_id",
                "digests", "desk", "canon")
WALK_BATCH = 20_000
# A record's columns that its row digest covers, in this order (its key `id` is the entry's record_id; `pk` and
# the derived `search_text` are not covered): the digest is the sha256 of the repr of their tuple (_digests.py).
RECORD_FIELDS = (
    "tool_use_id", "name", "input", "input_blob", "session_id", "project_id", "batch_index", "state",
    "outcome", "approval", "provenance", "result", "error", "is_error", "sandbox", "read_only", "risk",
    "started_at", "completed_at", "duration_ms", "created_at", "updated_at",
)
# The tool_calls rows of a range of pk (on SQLite a scan of that rowid range, in pk order), each with its id and
# the digests of its record's last entry (NULL: no entry) up to the row digest (`row:` and 64 hex digits: what is
# compared; a row that differs is read again whole), found through the (record_id, seq) index inside the
# database: what `check_rows` reads.
ROWS_SQL = (f"SELECT t.pk, {', '.join('t.' + f for f in RECORD_FIELDS)}, t.id, (SELECT substr(e.digests, 1, 68) FROM "
            "audit_entries e WHERE e.record_id = t.id ORDER BY e.seq DESC LIMIT 1) FROM tool_calls t "
            "WHERE t.pk >= :lo AND t.pk <= :hi")
_BLOB_AT = RECORD_FIELDS.index("input_blob") + 1


def json_default(o: Any) -> Any:
    # Values JSON has no type for are stored as their text, so hashing and re-reading agree.
    if isinstance(o, (set, frozenset)):
        return sorted(o, key=str)
    return str(o)


def one_shot(encoder: json.JSONEncoder) -> Callable[[Any], str]:
    """`encoder.encode`, with the C encoder that it would build for each call built once: the same text, at a
    third of the cost for the small values a transition encodes (several per transition). json.dumps with any
    option builds a whole new JSONEncoder on each call as well. Without json's C module (or with an indent),
    `encoder.encode` itself."""
    make = json.encoder.c_make_encoder
    if make is None or encoder.indent is not None:
        return encoder.encode
    # No table of the containers being encoded (what check_circular keeps): it would be shared by every thread
    # that encodes. A value that contains itself then runs into the recursion limit instead, told apart below.
    strings = json.encoder.encode_basestring_ascii if encoder.ensure_ascii else json.encoder.encode_basestring
    c_encode = make(None, encoder.default, strings, None, encoder.key_separator, encoder.item_separator,
                    encoder.sort_keys, encoder.skipkeys, encoder.allow_nan)

    def encode(value: Any) -> str:
        try:
            return "".join(c_encode(value, 0))
        except RecursionError as exc:
            raise ValueError("the value is nested too deeply to store as JSON, or contains itself") from exc

    return encode


# Built once (see one_shot).
canonical_json = one_shot(json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                                           default=json_default))


def entry_fields(
    record_id: str | None, state: str, at: float, actor: str, note: str, data: Any, seq: int,
    digests: str = "", message_id: int | None = None, desk: str = "",
) -> dict[str, Any]:
    """An entry's hashed fields. Entries written before digests existed (schema 0001) have none, and
    keep their old form, so their hashes still check; so do entries written before desks were named
    (schema 0005), or by a store without a key: no `desk`."""
    fields = {"record_id": record_id, "state": state, "at": at, "actor": actor, "note": note, "data": data,
              "seq": seq}
    if digests:
        fields["digests"], fields["message_id"] = digests, message_id
    if desk:
        fields["desk"] = desk
    return fields


def es_number(f: float) -> str:
    """A float as RFC 8785 writes it (ECMAScript's Number::toString): the shortest digits that read back as
    the same double (Python's repr finds them), placed as ECMAScript places them. NaN and infinities have none."""
    if f != f or f in (float("inf"), float("-inf")):
        raise ValueError(f"{f} has no RFC 8785 form")
    if f == 0:
        return "0"
    if f < 0:
        return "-" + es_number(-f)
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
    e = n - 1
    return f"{digits[0]}{'.' + digits[1:] if k > 1 else ''}e{'+' if e >= 0 else '-'}{abs(e)}"


def number(at: float, canon: int) -> str:
    """`at` as the entry's canonical form writes it; a time of day between 1e-4 and 1e16 with a fraction is
    the same text in both (the walk's fast path)."""
    if canon != CANON_JCS or (1e-4 <= at < 1e16 and at % 1):
        return repr(float(at))
    return es_number(float(at))


def link_hash(prev_hash: str, canonical: str) -> str:
    return hashlib.sha256((prev_hash + canonical).encode("utf-8")).hexdigest()


_enc = json.encoder.encode_basestring  # what json.dumps(str, ensure_ascii=False) uses, in C


def split_canonical(record_id: str | None, state: str, at: float, actor: str, note: str, data_json: str,
                    digests: str = "", message_id: int | None = None, desk: str = "",
                    canon: int = CANON_LEGACY) -> tuple[str, str]:
    """canonical_json(entry_fields(...)) in two halves around the seq, which only the writer knows.

    Keys sort as actor, at, data, desk, digests, message_id, note, record_id, seq, state, so the halves are
    rendered on the caller's thread and the writer joins `prefix + str(seq) + suffix`. `data_json` is
    the data's canonical JSON in form `canon`, as stored. A test checks this equals canonical_json (form 1)
    and rfc8785 (form 2), and verify's fast walk (`_walk`) renders the same text from the stored columns.
    """
    extra = (f'"digests":{_enc(digests)},"message_id":{"null" if message_id is None else int(message_id)},'
             if digests else "")
    if desk:
        extra = f'"desk":{_enc(desk)},{extra}'
    rid = "null" if record_id is None else _enc(record_id)
    prefix = (f'{{"actor":{_enc(actor)},"at":{number(at, canon)},"data":{data_json},{extra}"note":{_enc(note)},'
              f'"record_id":{rid},"seq":')
    return prefix, f',"state":{_enc(state)}}}'


@dataclass(slots=True, frozen=True)
class VerifyResult:
    """Outcome of `SqlStore.verify()`.

    ok: the whole chain checks out, and so do the rows beside it. count: entries found good (before the
    first problem, if any). When not ok, `problem` is one of
    - "altered", "removed", "inserted": the chain itself; `seq` / `record_id` name the first entry
      concerned (for "removed", the first missing seq and the record of the entry that follows the gap);
    - "row-edited": a tool_calls or messages row differs from its last chain entry; `field` names what
      (input, result, approval, provenance, content, or "row" for another column), `seq` that entry;
    - "row-deleted": a chained record or message has no row; "row-unchained": a row has no entry;
    - "blob-edited", "blob-missing": a stored input does not match its digest, or is gone.
    `message_id` names a message's row. `problems` lists every cross-check finding (the first is the
    one named above).
    """

    ok: bool
    count: int
    problem: str | None = None
    seq: int | None = None
    record_id: str | None = None
    message: str = ""
    field: str | None = None
    message_id: int | None = None
    problems: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.ok


def _fail(count: int, problem: str, seq: int, record_id: str | None, message: str) -> VerifyResult:
    return VerifyResult(False, count, problem, seq, record_id, message)


def _who(row: tuple[Any, ...]) -> str:
    if row[1] is None and row[9] is None:
        return "bound rows"
    return f"record {row[1]}" if row[1] is not None else f"message {row[9]}"


class ChainWalk:
    """Walks stored entries in seq order, fed in batches of raw row tuples (WALK_COLUMNS order: seq,
    record_id, state, at, actor, note, data, prev_hash, hash, message_id, digests, desk, canon). The hot loop only
    renders each entry's canonical text and hashes it; the first bad entry is then diagnosed as altered,
    removed or inserted. It keeps the digests of each message's last entry for the cross-checks (a
    record's last entry is found by verify's join, in the same snapshot: no dict of a million records)."""

    def __init__(self, head: tuple[int, str] | None) -> None:
        self.head_seq, self.head_hash = head if head is not None else (0, GENESIS)
        self.prev_hash, self.prev_seq, self.count = GENESIS, 0, 0
        self.rows = 0  # entries read, good or not: none at all is an emptied chain
        # (hash, seq, who) of the last good entries, to name insertions by where the next link points.
        self.recent: deque[tuple[str, int, str]] = deque([(GENESIS, 0, "")], maxlen=_WINDOW)
        self.last_message: dict[int, str] = {}
        self.failure: VerifyResult | None = None
        self._held: tuple[Any, ...] | None = None  # a bad entry waiting for its successor
        # (first seq, desk) where each run of one desk's good entries starts: what _desk_verify checks.
        self.runs: list[tuple[int, str]] = []

    def feed(self, batch: list[tuple[Any, ...]]) -> bool:
        """Walk one batch; False once the walk has failed (the rest need not be read)."""
        if self.failure is not None:
            return False
        self.rows += len(batch)
        if self._held is not None:
            self.failure = self._diagnose(self._held, batch[0] if batch else None)
            return False
        prev_hash, prev_seq, head_seq = self.prev_hash, self.prev_seq, self.head_seq
        last_message, remember, runs = self.last_message, self.recent.append, self.runs
        desk = runs[-1][1] if runs else None
        fdesk, frag = None, ""  # the desk's rendered field, remade only when the desk changes
        enc, sha256 = _enc, hashlib.sha256
        for i, row in enumerate(batch):
            seq, rid, state, at, actor, note, data, ph, h, mid, dg, dk, cv = row
            try:
                ats = at.__repr__() if cv == 1 or (1e-4 <= at < 1e16 and at % 1) else number(at, cv)
                extra = f'"digests":{enc(dg)},"message_id":{"null" if mid is None else mid},' if dg else ""
                if dk != fdesk:
                    fdesk, frag = dk, f'"desk":{enc(dk)},' if dk else ""
                canon = (f'{ph}{{"actor":{enc(actor)},"at":{ats},"data":{data},{frag}{extra}"note":{enc(note)},'
                         f'"record_id":{"null" if rid is None else enc(rid)},"seq":{seq},"state":{enc(state)}}}')
                good = sha256(canon.encode()).hexdigest() == h
            except (TypeError, ValueError, UnicodeError, AttributeError):  # a column of the wrong type: not ours
                good = False
            if not good or seq != prev_seq + 1 or ph != prev_hash or seq > head_seq:
                self.prev_hash, self.prev_seq, self.count = prev_hash, prev_seq, self.count + i
                if i + 1 < len(batch):
                    self.failure = self._diagnose(row, batch[i + 1])
                    return False
                self._held = row
                return True
            if rid is None and mid is not None:  # a message's entry (a ROWS entry names neither)
                last_message[mid] = dg
            if dk != desk:
                runs.append((seq, dk))
                desk = dk
            remember((h, seq, rid))
            prev_hash, prev_seq = h, seq
        self.prev_hash, self.prev_seq, self.count = prev_hash, prev_seq, self.count + len(batch)
        return True

    def finish(self) -> VerifyResult | None:
        """The chain's verdict once every batch was fed: a failure, or None when it is whole."""
        if self.failure is None and self._held is not None:
            self.failure = self._diagnose(self._held, None)
        if self.failure is not None:
            return self.failure
        prev_seq, head_seq = self.prev_seq, self.head_seq
        if prev_seq < head_seq:
            return _fail(self.count, "removed", prev_seq + 1, None,
                         f"entries {prev_seq + 1}..{head_seq} are missing from the end of the chain")
        if self.prev_hash != self.head_hash:
            return _fail(self.count, "altered", prev_seq, None,
                         f"the last entry ({prev_seq}) does not match the recorded head hash")
        return None

    def _diagnose(self, row: tuple[Any, ...], nxt: tuple[Any, ...] | None) -> VerifyResult:
        seq, rid, count, prev_seq, prev_hash = row[0], row[1], self.count, self.prev_seq, self.prev_hash
        who = _who(row)
        if isinstance(seq, int) and seq > self.head_seq:
            return _fail(count, "inserted", seq, rid, f"entry {seq} ({who}) lies past the recorded head "
                         f"(seq {self.head_seq}): it was added outside the store")
        if seq != prev_seq + 1:
            return _fail(count, "removed", prev_seq + 1, rid, f"entries {prev_seq + 1}..{seq - 1} are missing "
                         f"(the chain jumps from {prev_seq} to {seq}, {who})")
        link_ok = row[7] == prev_hash
        if nxt is not None and nxt[7] == prev_hash and link_ok:
            return _fail(count, "inserted", seq, rid,
                         f"entry {seq} ({who}) was inserted: the entry after it links to entry {prev_seq}")
        back = next((s for h, s, _ in self.recent if h == row[7]), None)
        if not link_ok and back is not None and back < prev_seq:
            first = back + 1
            first_record = next((r for _, s, r in self.recent if s == first), None)
            return _fail(back, "inserted", first, first_record, f"entries {first}..{prev_seq} were inserted: "
                         f"entry {seq} ({who}) links to entry {first - 1}")
        if not link_ok:
            return _fail(count, "removed", seq, rid, f"the entry before {seq} ({who}) was removed or "
                         f"replaced: its link does not match entry {prev_seq}")
        return _fail(count, "altered", seq, rid,
                     f"entry {seq} ({who}) was altered: its content does not match its hash")


def check_rows(batches: Iterable[list[tuple[Any, ...]]]) -> dict[str, Any]:
    """`ROWS_SQL`'s rows, each hashed as stored against its record's last entry: how many matched, how many predate
    digests (`legacy`), the pks of the rows that differ or have no entry (`suspect`, in the order read: verify
    re-reads them to name what differs), and the stored inputs that the chained rows use (`blobs`: digest, id)."""
    checked = legacy = 0
    suspect: list[int] = []
    blobs: list[tuple[str, str]] = []
    sha256 = hashlib.sha256
    for batch in batches:
        for row in batch:
            dg = row[-1]
            if not dg:
                if dg is None:
                    suspect.append(row[0])
                    continue
                legacy += 1
            else:
                checked += 1
                try:
                    good = sha256(repr(row[1:-2]).encode("utf-8", "surrogatepass")).hexdigest() == dg[4:68]
                except TypeError:  # digests that are not text: verify's own read names them
                    good = False
                if not good:
                    suspect.append(row[0])
            if row[_BLOB_AT] is not None:
                blobs.append((row[_BLOB_AT], row[-2]))
    return {"checked": checked, "legacy": legacy, "suspect": suspect, "blobs": blobs}


def walk_file(path: str, top: int, head: tuple[int, str] | None, lo: int | None = None,
              pks: tuple[int, int] | None = None) -> dict[str, Any]:
    """The walk of the entries up to `top` (a chunk: from `lo`) of the SQLite file at `path`, and the check of its
    tool_calls rows whose pk lies in `pks` (`check_rows`), read-only in one snapshot: what `verify` runs in other
    processes, one per chunk of the chain and of the rows. Entries up to `top` never change once written, so the
    snapshots agree on them unless the file is being tampered with; a row and its entries are written in one
    transaction, so each snapshot holds them consistent. A chunk starts from the stored entry before `lo`, and
    leaves the chain's end to verify: its answer says where it started (`start`), and its state at the end, for
    verify to join them."""
    # Not mode=ro: a read-only connection to a WAL database can fail while another one sets up its index
    # (SQLITE_READONLY_CANTINIT); query_only keeps this one from writing all the same.
    con = sqlite3.connect(f"file:{quote(path)}", uri=True, timeout=30.0)
    try:
        con.execute("PRAGMA query_only = 1")
        con.execute("BEGIN")
        walk = ChainWalk(head)
        if lo is not None and lo > 1:
            before = con.execute("SELECT seq, hash FROM audit_entries WHERE seq < ? ORDER BY seq DESC LIMIT 1",
                                 (lo,)).fetchone()
            if before is not None:
                walk.prev_seq, walk.prev_hash = before
        start = (walk.prev_seq, walk.prev_hash)
        cur = con.execute(f"SELECT {', '.join(WALK_COLUMNS)} FROM audit_entries WHERE seq >= ? AND seq <= ? "
                          "ORDER BY seq", (lo or 1, top))
        while batch := cur.fetchmany(WALK_BATCH):
            if not walk.feed(batch):
                break
        rows = None
        if pks is not None:
            cur = con.execute(ROWS_SQL, {"lo": pks[0], "hi": pks[1]})
            rows = check_rows(iter(lambda: cur.fetchmany(WALK_BATCH), []))
        # A chunk's walk is whole when no entry of it failed; the chain's end is verify's to judge.
        if lo is None:
            failure = walk.finish()
        elif walk.failure is None and walk._held is not None:
            failure = walk._diagnose(walk._held, None)
        else:
            failure = walk.failure
    finally:
        con.close()
    return {"failure": dataclasses.asdict(failure) if failure is not None else None, "count": walk.count,
            "rows": walk.rows, "last_message": walk.last_message, "runs": walk.runs, "start": list(start),
            "end": [walk.prev_seq, walk.prev_hash], "recent": list(walk.recent), "rows_checked": rows}


Runs = list[tuple[int, str]]


def walk_result(out: dict[str, Any]) -> tuple[VerifyResult | None, int, int, dict[int, str], Runs]:
    """`walk_file`'s answer as read back from JSON: (failure, count, rows, last digests of each message, where
    each desk's run of entries starts)."""
    f = out["failure"]
    failure = VerifyResult(**{**f, "problems": tuple(f["problems"])}) if f is not None else None
    last = {int(k): str(v) for k, v in out["last_message"].items()}
    return failure, int(out["count"]), int(out["rows"]), last, [(int(s), str(d)) for s, d in out["runs"]]


def join_chunk(walk: ChainWalk, out: dict[str, Any]) -> bool:
    """Add a good chunk's walk (`walk_file`'s answer from JSON, the chunk after what `walk` holds) to `walk`, as
    if `walk` had walked its entries itself; False (and `walk` unchanged) when the chunk failed or does not
    start where `walk` ends: verify then walks from that chunk on itself, for the very verdict of one walk."""
    failure, count, rows, last, runs = walk_result(out)
    if failure is not None or walk.failure is not None or walk._held is not None:
        return False
    if (int(out["start"][0]), str(out["start"][1])) != (walk.prev_seq, walk.prev_hash):
        return False
    walk.count += count
    walk.rows += rows
    walk.last_message.update(last)
    if runs and walk.runs and runs[0][1] == walk.runs[-1][1]:
        runs = runs[1:]  # the same desk's run goes on across the chunks' boundary
    walk.runs.extend(runs)
    if count:
        walk.recent.extend((str(h), int(q), r) for h, q, r in out["recent"][-count:])
    walk.prev_seq, walk.prev_hash = int(out["end"][0]), str(out["end"][1])
    return True


if __name__ == "__main__":  # python _chain.py PATH TOP [HEAD_SEQ HEAD_HASH [LO [PK_LO PK_HI]]]: JSON on stdout
    _head = (int(sys.argv[3]), sys.argv[4]) if len(sys.argv) > 4 and sys.argv[3] != "-" else None
    _pks = (int(sys.argv[6]), int(sys.argv[7])) if len(sys.argv) > 7 else None
    json.dump(walk_file(sys.argv[1], int(sys.argv[2]), _head, int(sys.argv[5]) if len(sys.argv) > 5 else None,
                        _pks), sys.stdout)
