"""`verify`: the hash chain walked fast over raw rows in one read snapshot, then `tool_calls`, `messages`
and `blobs` cross-checked against the digests that the chain's entries carry. A long chain's walk and its
`tool_calls` rows are split in chunks, each checked by a process of its own."""

from __future__ import annotations

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
from ._chain import ROWS_SQL, WALK_BATCH, WALK_COLUMNS, ChainWalk, Runs, VerifyResult, check_rows
from ._desk_verify import check_desks
from ._digests import MESSAGE_FIELDS, RECORD_FIELDS, RECORD_NAMED, field_digest, row_of, sha, unpack
from ._head_verify import HeadProblem, check_head, early_witness
from ._signing import HeadSigner

log = logging.getLogger(__name__)

BATCH = WALK_BATCH
# Entries from which a second process walks the chain (its start costs about 50 ms).
PARALLEL_MIN = 100_000
_ENTRY_SQL = f"SELECT {', '.join(WALK_COLUMNS)} FROM audit_entries ORDER BY seq"
_ENTRY_SQL_FROM = f"SELECT {', '.join(WALK_COLUMNS)} FROM audit_entries WHERE seq >= :lo"
# How many processes walk a long chain (None: one per CPU); the tests set it to cut a short chain in chunks.
CHUNKS: int | None = None
# The rows that `check_rows` found differing from their entries (or without one), read again here to name what
# differs, each with the digests of its record's last entry (NULL: no entry).
_SUSPECT_SQL = (f"SELECT t.pk, t.id, {', '.join('t.' + f for f in RECORD_FIELDS)}, (SELECT e.digests FROM "
                "audit_entries e WHERE e.record_id = t.id ORDER BY e.seq DESC LIMIT 1) FROM tool_calls t "
                "WHERE t.pk IN ")
_SUSPECT_BATCH = 500
# Records in the chain whose row is gone.
_DELETED_SQL = ("SELECT e.record_id FROM audit_entries e WHERE e.record_id IS NOT NULL "
                "AND NOT EXISTS (SELECT 1 FROM tool_calls t WHERE t.id = e.record_id) "
                "GROUP BY e.record_id ORDER BY min(e.seq)")  # in chain order, the first named first
_MESSAGE_SQL = f"SELECT id, {', '.join(MESSAGE_FIELDS)} FROM messages"
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
    `problems`; the most telling one is named first (see `_rank`). A long chain, and the tool_calls rows beside
    it, are checked in chunks by other processes (one per CPU) while this one checks the rest."""
    witness = early_witness(signer, identity)  # before the snapshot: see early_witness
    if conn.dialect.name == "postgresql":  # one snapshot for every read below, while other desks write
        conn.execution_options(isolation_level="REPEATABLE READ")
    # This first statement begins the read transaction, so every later read sees the same snapshot.
    head_row = conn.execute(text("SELECT seq, hash FROM audit_head WHERE id = 1")).first()
    head = (head_row[0], head_row[1]) if head_row else None
    pk_row = conn.execute(text("SELECT min(pk), max(pk) FROM tool_calls")).first()
    pks = (int(pk_row[0]), int(pk_row[1])) if pk_row and pk_row[0] is not None else None
    worker = _start_walk(conn, head, pks)
    if worker is None:
        walked, checked = _walk_here(conn, head), [_rows_here(conn, pks)]
    later: list[Finding] = []  # what this process checks while the workers walk, named after their findings
    try:
        deleted = _deleted_records(conn)
        bound, unbound = check_bound_rows(conn, lambda sql: batches(conn, sql),
                                          lambda problem, what: later.append(Finding(problem, what)))
    except BaseException:
        if worker is not None:  # no walk left running after a failed read
            _stop(worker)
        raise
    if worker is not None:
        walked, checked = _finish_walk(worker, conn, head)
    findings: list[Finding] = []
    used, records, legacy = _record_findings(conn, checked, findings)
    findings += deleted
    broken, count, rows, last_message, runs = walked
    messages = 0
    if broken is None:  # a broken walk leaves the messages' last entries unknown
        messages = _check_messages(conn, last_message, findings, used)
    _check_blobs(conn, used, findings)
    findings += later
    notes, head_problem = check_head(conn, count if broken is None else rows, head, signer, identity, trusted,
                                     witness)
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
# One chunk's rows as `check_rows` found them
RowsChecked = dict[str, Any]


@dataclass(slots=True)
class _Chunk:
    """One worker: the chain from entry `lo` (to the next chunk's) and the tool_calls rows of pk `pks`."""

    lo: int
    pks: tuple[int, int] | None
    proc: subprocess.Popen[str]


def _walk_here(conn: Connection, head: tuple[int, str] | None) -> Walked:
    walk = ChainWalk(head)
    for batch in batches(conn, _ENTRY_SQL):
        if not walk.feed(batch):
            break
    return walk.finish(), walk.count, walk.rows, walk.last_message, walk.runs


def _rows_here(conn: Connection, pks: tuple[int, int] | None) -> RowsChecked:
    if pks is None:
        return {"checked": 0, "legacy": 0, "suspect": [], "blobs": []}
    return check_rows(batches(conn, ROWS_SQL, {"lo": pks[0], "hi": pks[1]}))


def _spans(first: int, last: int, n: int) -> list[tuple[int, int]]:
    starts = [first + (last - first + 1) * k // n for k in range(n)]
    return list(zip(starts, [*(s - 1 for s in starts[1:]), last], strict=True))


def _start_walk(conn: Connection, head: tuple[int, str] | None, pks: tuple[int, int] | None) -> list[_Chunk] | None:
    """The walk of a long chain and the check of its rows in other processes, one per chunk of seqs and of pks
    (_chain.py run as a script, standard library only: a worker starts in ~50 ms, where one that imports the
    desk's package takes over a second), over the entries this snapshot holds; None when they are done here."""
    if conn.dialect.name != "sqlite":
        return None
    top = conn.execute(text("SELECT max(seq) FROM audit_entries")).scalar() or 0
    path = next((r[2] for r in conn.exec_driver_sql("PRAGMA database_list") if r[1] == "main"), "")
    if top < PARALLEL_MIN or not path:
        return None
    n = max(1, min(CHUNKS or os.cpu_count() or 1, top))
    row_spans: list[tuple[int, int] | None] = list(_spans(*pks, n)) if pks is not None else [None] * n
    args = [sys.executable, "-I", "-S", str(chain_module.__file__), path]
    procs: list[_Chunk] = []
    try:
        for (lo, hi), span in zip(_spans(1, top, n), row_spans, strict=True):
            rows = (str(span[0]), str(span[1])) if span is not None and span[0] <= span[1] else ()
            procs.append(_Chunk(lo, span if rows else None, subprocess.Popen(
                [*args, str(hi), *(map(str, head) if head else ("-", "-")), str(lo), *rows],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)))
    except OSError as exc:
        log.warning("verify walks the chain in this process: %s", exc)
        _stop(procs)
        return None
    return procs


def _stop(procs: list[_Chunk]) -> None:
    for c in procs:
        c.proc.kill()
        c.proc.wait()


def _answer(c: _Chunk) -> dict[str, Any] | None:
    """A worker's answer, or None (logged) when it failed or said nothing usable."""
    out, err = c.proc.communicate()
    try:
        if c.proc.returncode != 0:
            raise ValueError(f"exit status {c.proc.returncode}: {err.strip()[-500:]}")
        answer = json.loads(out)
        if not isinstance(answer, dict):
            raise ValueError("not an object")
        return answer
    except ValueError as exc:
        log.warning("the chain walk in a second process failed (%s); walking it here", exc)
        return None


def _rows_of(answer: dict[str, Any] | None, c: _Chunk, conn: Connection) -> RowsChecked:
    """The chunk's rows as its worker checked them; checked here when its answer is unusable."""
    got = answer.get("rows_checked") if answer is not None else None
    try:
        if c.pks is None:
            return _rows_here(conn, None)
        if isinstance(got, dict):
            return {"checked": int(got["checked"]), "legacy": int(got["legacy"]),
                    "suspect": [int(pk) for pk in got["suspect"]],
                    "blobs": [(str(d), str(r)) for d, r in got["blobs"]]}
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("the rows check in a second process failed (%s); checking them here", exc)
    return _rows_here(conn, c.pks)


def _finish_walk(procs: list[_Chunk], conn: Connection, head: tuple[int, str] | None) -> tuple[Walked,
                                                                                              list[RowsChecked]]:
    """The chunks' walks joined in order, as one walk of the whole chain, and their rows. From the first chunk that
    failed (or whose answer is unusable) on, the walk is done here, seeded with the state the chunks before it
    left: the verdict, its counts and its diagnosis are then those of one walk from the start."""
    walk = ChainWalk(head)
    answers = [_answer(c) for c in procs]
    rows = [_rows_of(a, c, conn) for a, c in zip(answers, procs, strict=True)]
    for c, answer in zip(procs, answers, strict=True):
        try:
            if answer is not None and chain_module.join_chunk(walk, answer):
                continue
        except (ValueError, KeyError, TypeError, IndexError) as exc:  # walk here instead: slower, never weaker
            log.warning("the chain walk in a second process failed (%s); walking it here", exc)
        for batch in batches(conn, f"{_ENTRY_SQL_FROM} ORDER BY seq", {"lo": c.lo}):
            if not walk.feed(batch):
                break
        break
    return (walk.finish(), walk.count, walk.rows, walk.last_message, walk.runs), rows


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


def _record_findings(conn: Connection, checked: list[RowsChecked], findings: list[Finding]) -> tuple[dict[str, str],
                                                                                                 int, int]:
    """The chunks' row checks joined: the blobs the rows use, the rows checked, the rows that predate digests; each
    row they found differing (or without an entry) is read again here, to name what differs."""
    used: dict[str, str] = {}
    records = legacy = 0
    suspect: list[int] = []
    for c in checked:
        records += c["checked"]
        legacy += c["legacy"]
        suspect += c["suspect"]
        for digest, rid in c["blobs"]:
            used[digest] = f"tool call {rid}"
    for k in range(0, len(suspect), _SUSPECT_BATCH):
        part = suspect[k:k + _SUSPECT_BATCH]
        found = {r[0]: r[1:] for b in batches(conn, f"{_SUSPECT_SQL}({', '.join(map(str, part))})") for r in b}
        for row in (found[pk] for pk in part if pk in found):
            dg = row[-1]
            if dg is None:
                findings.append(Finding("row-unchained", f"tool call {row[0]} has no entry in the audit chain: "
                                        "it was added outside the store", row[0]))
            elif dg and sha(repr(row[1:-1])) != row_of(dg):
                findings.append(_edited_record(row[:-1], dg))
    return used, records, legacy


def _deleted_records(conn: Connection) -> list[Finding]:
    return [Finding("row-deleted", f"tool call {rid} is in the audit chain but its row in tool_calls was deleted",
                    rid) for batch in batches(conn, _DELETED_SQL) for (rid,) in batch]


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
