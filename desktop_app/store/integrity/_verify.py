"""`verify`: the hash chain walked fast over raw rows in one read snapshot, then `tool_calls`, `messages`
and `blobs` cross-checked against the digests that the chain's entries carry."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from . import _chain as chain_module
from ._bound_rows import check_bound_rows
from ._chain import WALK_BATCH, WALK_COLUMNS, ChainWalk, Runs, VerifyResult
from ._desk_verify import check_desks
from ._digests import MESSAGE_FIELDS, RECORD_FIELDS, RECORD_NAMED, field_digest, row_of, sha, unpack
from ._head_verify import HeadProblem, check_head
from ._signing import HeadSigner

log = logging.getLogger(__name__)

BATCH = WALK_BATCH
# Entries from which a second process walks the chain (its start costs about 50 ms).
PARALLEL_MIN = 100_000
_ENTRY_SQL = f"SELECT {', '.join(WALK_COLUMNS)} FROM audit_entries ORDER BY seq"
_ENTRY_SQL_FROM = f"SELECT {', '.join(WALK_COLUMNS)} FROM audit_entries WHERE seq >= :lo"
# How many processes walk a long chain (None: one per CPU); the tests set it to cut a short chain in chunks.
CHUNKS: int | None = None
# Each row with the digests of its record's last entry (NULL: no entry), found through the
# (record_id, seq) index inside SQLite; the walk has checked every entry of this same snapshot.
_RECORD_SQL = (f"SELECT t.id, {', '.join('t.' + f for f in RECORD_FIELDS)}, (SELECT e.digests FROM audit_entries e "
               "WHERE e.record_id = t.id ORDER BY e.seq DESC LIMIT 1) FROM tool_calls t")
# Records in the chain whose row is gone.
_DELETED_SQL = ("SELECT e.record_id FROM audit_entries e WHERE e.record_id IS NOT NULL "
                "AND NOT EXISTS (SELECT 1 FROM tool_calls t WHERE t.id = e.record_id) "
                "GROUP BY e.record_id ORDER BY min(e.seq)")  # in chain order, the first named first
_MESSAGE_SQL = f"SELECT id, {', '.join(MESSAGE_FIELDS)} FROM messages"
_BLOB_AT = RECORD_FIELDS.index("input_blob") + 1
_OTHER = "another column (state, outcome, error, timestamps, session, name or tool_use id)"


@dataclass(slots=True)
class Finding:
    problem: str
    text: str
    record_id: str | None = None
    message_id: int | None = None
    field: str | None = None


def batches(conn: Connection, sql: str, params: dict[str, Any] | None = None) -> Iterator[list[tuple[Any, ...]]]:
    """Rows as plain tuples, in big batches: on SQLite straight from the driver, inside the snapshot
    that the connection's transaction holds."""
    if conn.dialect.name == "sqlite":
        cur: Any = conn.connection.driver_connection.execute(sql, params or {})
        while batch := cur.fetchmany(BATCH):
            yield batch
    else:
        result = conn.execute(text(sql), params or {})
        while rows := result.fetchmany(BATCH):
            yield [tuple(r) for r in rows]


def verify(conn: Connection, signer: HeadSigner | None = None, identity: str = "",
           trusted: frozenset[str] = frozenset()) -> VerifyResult:
    """The links, then the rows beside them, then (in the same read transaction) the signed heads and the
    witness of this installation (`signer`, `identity`: _head_verify.py). Every finding is kept in
    `problems`; the most telling one is named first (see `_rank`). A long chain is walked by a second process
    while this one cross-checks the rows."""
    if conn.dialect.name == "postgresql":  # one snapshot for every read below, while other desks write
        conn.execution_options(isolation_level="REPEATABLE READ")
    # This first statement begins the read transaction, so every later read sees the same snapshot.
    head_row = conn.execute(text("SELECT seq, hash FROM audit_head WHERE id = 1")).first()
    head = (head_row[0], head_row[1]) if head_row else None
    worker = _start_walk(conn, head)
    if worker is None:
        walked = _walk_here(conn, head)
    findings: list[Finding] = []
    try:
        used, records, legacy = _check_records(conn, findings)
    except BaseException:
        if worker is not None:  # no walk left running after a failed read
            _stop(worker)
        raise
    if worker is not None:
        walked = _finish_walk(worker, conn, head)
    broken, count, rows, last_message, runs = walked
    messages = 0
    if broken is None:  # a broken walk leaves the messages' last entries unknown
        messages = _check_messages(conn, last_message, findings, used)
    _check_blobs(conn, used, findings)
    bound, unbound = check_bound_rows(conn, lambda sql: batches(conn, sql),
                                      lambda problem, what: findings.append(Finding(problem, what)))
    notes, head_problem = check_head(conn, count if broken is None else rows, head, signer, identity, trusted)
    desk_notes, desk_problem = check_desks(conn, runs, count, broken is None)
    notes += desk_notes
    if broken is None and not findings and head_problem is None and desk_problem is None:
        note = f"; {legacy} older tool calls carry no digests and were not cross-checked" if legacy else ""
        text_ = (f"{count} entries verified; {records} tool calls and {messages} messages match the chain{note}; "
                 f"so do {bound} events, sessions and projects")
        return VerifyResult(True, count, message="; ".join([text_, *([unbound] if unbound else []), *notes]))
    return _rank(count, broken, [p for p in (head_problem, desk_problem) if p is not None], findings)


# failure, good entries, entries read, messages, where each desk's entries start
Walked = tuple[VerifyResult | None, int, int, dict[int, str], Runs]


def _walk_here(conn: Connection, head: tuple[int, str] | None) -> Walked:
    walk = ChainWalk(head)
    for batch in batches(conn, _ENTRY_SQL):
        if not walk.feed(batch):
            break
    return walk.finish(), walk.count, walk.rows, walk.last_message, walk.runs


def _start_walk(conn: Connection, head: tuple[int, str] | None) -> list[tuple[int, subprocess.Popen[str]]] | None:
    """The walk of a long chain in other processes, one per chunk of seqs (_chain.py run as a script, standard
    library only: a worker starts in ~50 ms, where one that imports the desk's package takes over a second),
    over the entries this snapshot holds; None when it is walked here. Returns (first seq, process) by chunk."""
    if conn.dialect.name != "sqlite":
        return None
    top = conn.execute(text("SELECT max(seq) FROM audit_entries")).scalar() or 0
    path = next((r[2] for r in conn.exec_driver_sql("PRAGMA database_list") if r[1] == "main"), "")
    if top < PARALLEL_MIN or not path:
        return None
    n = max(1, min(CHUNKS or os.cpu_count() or 1, top))
    starts = [1 + top * k // n for k in range(n)]
    ends = [*(s - 1 for s in starts[1:]), top]
    args = [sys.executable, "-I", "-S", str(chain_module.__file__), path]
    procs: list[tuple[int, subprocess.Popen[str]]] = []
    try:
        for lo, hi in zip(starts, ends, strict=True):
            procs.append((lo, subprocess.Popen([*args, str(hi), *(map(str, head) if head else ("-", "-")), str(lo)],
                                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                               stdin=subprocess.DEVNULL, text=True)))
    except OSError as exc:
        log.warning("verify walks the chain in this process: %s", exc)
        _stop(procs)
        return None
    return procs


def _stop(procs: list[tuple[int, subprocess.Popen[str]]]) -> None:
    for _, proc in procs:
        proc.kill()
        proc.wait()


def _finish_walk(procs: list[tuple[int, subprocess.Popen[str]]], conn: Connection,
                 head: tuple[int, str] | None) -> Walked:
    """The chunks' walks joined in order, as one walk of the whole chain. From the first chunk that failed (or
    whose answer is unusable) on, the walk is done here, seeded with the state the chunks before it left: the
    verdict, its counts and its diagnosis are then those of one walk from the start."""
    walk = ChainWalk(head)
    outs = []
    for _, proc in procs:
        out, err = proc.communicate()
        outs.append((proc.returncode, out, err))
    for (lo, _), (code, out, err) in zip(procs, outs, strict=True):
        try:
            if code != 0:
                raise ValueError(f"exit status {code}: {err.strip()[-500:]}")
            if chain_module.join_chunk(walk, json.loads(out)):
                continue
        except (ValueError, KeyError, TypeError, IndexError) as exc:  # walk here instead: slower, never weaker
            log.warning("the chain walk in a second process failed (%s); walking it here", exc)
        for batch in batches(conn, f"{_ENTRY_SQL_FROM} ORDER BY seq", {"lo": lo}):
            if not walk.feed(batch):
                break
        break
    return walk.finish(), walk.count, walk.rows, walk.last_message, walk.runs


# A cut tail or an emptied chain explains the row findings it causes (rows whose entries are gone).
_FIRST = ("empty", "truncated")


def _rank(count: int, broken: VerifyResult | None, heads: list[HeadProblem],
          findings: list[Finding]) -> VerifyResult:
    """One failed verdict from every finding: a cut tail or an emptied chain first, then a broken link, then
    a head or a desk's batch that the keys or the witness refuse, then the rows beside the chain."""
    ranked: list[VerifyResult] = [_head_result(count, h) for h in heads if h.problem in _FIRST]
    if broken is not None:
        ranked.append(broken)
    ranked += [_head_result(count, h) for h in heads if h.problem not in _FIRST]
    ranked += [VerifyResult(False, count, f.problem, None, f.record_id, f.text, f.field, f.message_id)
               for f in findings]
    first = ranked[0]
    more = f" (and {len(ranked) - 1} more problem(s))" if len(ranked) > 1 else ""
    return VerifyResult(False, first.count, first.problem, first.seq, first.record_id, first.message + more,
                        first.field, first.message_id, tuple(r.message for r in ranked))


def _head_result(count: int, p: HeadProblem) -> VerifyResult:
    return VerifyResult(False, count, p.problem, p.seq, None, p.message)


def _check_records(conn: Connection, findings: list[Finding]) -> tuple[dict[str, str], int, int]:
    """Each tool_calls row against its record's last entry; returns the blobs the rows use, the rows
    checked and the rows that predate digests."""
    used: dict[str, str] = {}
    checked = legacy = 0
    sha256 = hashlib.sha256
    for batch in batches(conn, _RECORD_SQL):
        for row in batch:
            dg = row[-1]
            if not dg:
                rid = row[0]
                if dg is None:
                    findings.append(Finding("row-unchained", f"tool call {rid} has no entry in the audit chain: "
                                            "it was added outside the store", rid))
                    continue
                legacy += 1
            else:
                checked += 1
                if sha256(repr(row[1:-1]).encode("utf-8", "surrogatepass")).hexdigest() != row_of(dg):
                    findings.append(_edited_record(row[:-1], dg))
            if row[_BLOB_AT] is not None:
                used[row[_BLOB_AT]] = f"tool call {row[0]}"
    for batch in batches(conn, _DELETED_SQL):
        for (rid,) in batch:
            findings.append(Finding("row-deleted", f"tool call {rid} is in the audit chain but its row in "
                                    "tool_calls was deleted", rid))
    return used, checked, legacy


def _edited_record(row: tuple[Any, ...], dg: str) -> Finding:
    named = unpack(dg)
    values = dict(zip(RECORD_FIELDS, row[1:], strict=True))
    now = {f: field_digest(values[f]) for f in RECORD_NAMED}
    if values["input_blob"] is not None:
        now["input"] = values["input_blob"]
    changed = [f for f in RECORD_NAMED if now[f] != named.get(f)] or [_OTHER]
    tool_use = f" (tool_use {values['tool_use_id']})" if values["tool_use_id"] else ""
    return Finding("row-edited", f"tool call {row[0]}{tool_use} was edited in tool_calls after its last "
                   f"audit entry: its stored {', '.join(changed)} differ(s) from the chain", row[0],
                   field=changed[0] if changed[0] != _OTHER else "row")


def _check_messages(conn: Connection, last: dict[int, str], findings: list[Finding],
                    used: dict[str, str]) -> int:
    """Each messages row against its entry. Messages stored before messages were chained come before
    the first chained one; any later row without an entry was added outside the store."""
    last = dict(last)
    first_chained = min(last, default=None)
    checked = 0
    for batch in batches(conn, _MESSAGE_SQL):
        for row in batch:
            mid = row[0]
            dg = last.pop(mid, None)
            if '"input_blob":' in (row[3] or ""):
                for block in json.loads(row[3]):
                    if isinstance(block, dict) and "input_blob" in block:
                        used.setdefault(block["input_blob"], f"message {mid}")
            if dg is None:
                if first_chained is not None and mid > first_chained:
                    findings.append(Finding("row-unchained", f"message {mid} has no entry in the audit chain: "
                                            "it was added outside the store", message_id=mid))
                continue
            checked += 1
            if sha(repr(row[1:])) != row_of(dg):
                content_ok = field_digest(row[3]) == unpack(dg).get("content")
                what = "role, session or time" if content_ok else "content"
                findings.append(Finding("row-edited", f"message {mid} of session {row[1]} was rewritten: its "
                                        f"stored {what} differ(s) from the chain", message_id=mid,
                                        field="row" if content_ok else "content"))
    for mid in last:
        findings.append(Finding("row-deleted", f"message {mid} is in the audit chain but its row in messages "
                                "was deleted", message_id=mid))
    return checked


def _check_blobs(conn: Connection, used: dict[str, str], findings: list[Finding]) -> None:
    seen = set()
    for batch in batches(conn, "SELECT digest, data FROM blobs"):
        for digest, data in batch:
            seen.add(digest)
            if not isinstance(data, str) or sha(data) != digest:
                who = used.get(digest, "no record")
                findings.append(Finding("blob-edited", f"the stored input {digest[:12]}… (used by {who}) was "
                                        "edited: it does not match its sha256", field="input"))
    for digest, who in used.items():
        if digest not in seen:
            findings.append(Finding("blob-missing", f"the stored input {digest[:12]}… of {who} was deleted",
                                    field="input"))
