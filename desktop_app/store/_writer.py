"""The store's one writer thread: drains its queue, writes each batch in one transaction (group
commit), then resolves every waiter's asyncio future from the loop that is awaiting it."""

from __future__ import annotations

import asyncio
import functools
import logging
import queue
import re
import sqlite3
import threading
import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import TextClause
from sqlmodel import SQLModel

from desktop_app.core import AuditEntry, Channel, Envelope, StoreError

from ._checkpoint import Checkpointer
from ._db_errors import postgres_error
from ._tables import (
    AuditEntryRow,
    BlobRow,
    ChainHeadRow,
    EventRow,
    MessageRow,
    ProjectRow,
    SessionRow,
    ToolCallRow,
    columns,
)
from .integrity import (
    BLOB_MIN,
    CANON_JCS,
    GENESIS,
    ROWS_ACTOR,
    ROWS_STATE,
    BoundRows,
    HeadNotary,
    link_hash,
    message_digests,
    sha,
    split_canonical,
    to_json,
)

log = logging.getLogger(__name__)

MAX_BATCH = 2000
_EVENTS = ("event", "events")
# How long a batch of events alone waits for a write that someone awaits, to share its commit (see _next_batch).
COMMIT_DELAY_S = 0.005

def _insert(table: type[SQLModel], cols: tuple[str, ...]) -> str:
    return (f"INSERT INTO {table.__tablename__} ({', '.join(cols)}) "
            f"VALUES ({', '.join(':' + c for c in cols)})")


def _upsert(table: type[SQLModel], *, keep: tuple[str, ...] = ()) -> TextClause:
    """Insert a row, or update every column of the row with its key except `keep`."""
    cols = columns(table, without=("pk",))
    key = "id"
    updates = ", ".join(f"{c} = excluded.{c}" for c in cols if c not in (key, *keep))
    return text(f"{_insert(table, cols)} ON CONFLICT ({key}) DO UPDATE SET {updates}")


# A call's identity (its session, project, tool and tool_use id, when it was made) is fixed by its first save:
# the executor makes a record once and only moves its state. Left out of the update, each later transition
# rewrites only the two state indexes, not the four over those columns (7% more writes a second quiet, 15% loaded).
CALL_IDENTITY = ("created_at", "name", "session_id", "project_id", "tool_use_id")
UPSERT_TOOL_CALL = _upsert(ToolCallRow, keep=CALL_IDENTITY)
INSERT_ENTRY = text(_insert(AuditEntryRow, columns(AuditEntryRow)))
UPSERT_HEAD = _upsert(ChainHeadRow)
INSERT_EVENT = text(_insert(EventRow, columns(EventRow)))
UPSERT_PROJECT = _upsert(ProjectRow)
UPSERT_SESSION = _upsert(SessionRow)
INSERT_MESSAGE = text(_insert(MessageRow, columns(MessageRow, without=("id",))) + " RETURNING id")
INSERT_BLOB = text(_insert(BlobRow, columns(BlobRow)) + " ON CONFLICT (digest) DO NOTHING")
SELECT_HEAD = "SELECT seq, hash FROM audit_head WHERE id = 1"
# Many writers, one chain (PostgreSQL): every writing transaction first takes this lock, held to its commit
# or rollback, so the head it reads next is the newest and nobody else appends until it is done. An advisory
# lock rather than FOR UPDATE on the head row: an empty database has no head row to lock.
CHAIN_LOCK_KEY = 0x6167656E74646B31  # "agentdk1"
LOCK_CHAIN = text("SELECT pg_advisory_xact_lock(:k)").bindparams(k=CHAIN_LOCK_KEY)


# The rows of one statement on SQLite (see `multi_row`): a power of two up to this, within the engine's limit on
# bound variables.
MULTI_ROW_MAX = 64
_VALUES = re.compile(r"VALUES \(([^)]*)\)")


@functools.cache
def multi_row(sql: str, n: int) -> tuple[str, tuple[str, ...]]:
    """`sql` (an INSERT of one row of `:name` values) as one statement of `n` rows with `?` placeholders, and
    the names in their order. executemany steps its statement once per row, and sqlite3 lets go of the GIL
    around each step: N rows cost N steps, each taking the GIL back from the event loop's thread. A chunk of rows
    is one step: a batch of 30 new calls' rows took about 15 µs less per row this way (CPU, one thread), and
    the store's write rate rose by about a seventh (make bench's audit_write_per_s, alternating runs)."""
    m = _VALUES.search(sql)
    if m is None:
        raise ValueError(f"not a one-row INSERT: {sql[:80]}")
    names = tuple(part.strip().removeprefix(":") for part in m.group(1).split(","))
    row = f"({', '.join('?' * len(names))})"
    return f"{sql[:m.start()]}VALUES {', '.join([row] * n)}{sql[m.end():]}", names


def chunk_sizes(count: int, most: int) -> list[int]:
    """`count` rows as chunks whose sizes are powers of two up to `most` (largest first): a few statement
    texts per table, each prepared once and kept in sqlite3's statement cache."""
    sizes = []
    size = most
    while count:
        while size > count:
            size //= 2
        sizes.append(size)
        count -= size
    return sizes


@functools.cache
def pg_sql(sql: str) -> str:
    """A statement's :name parameters in psycopg's %(name)s style (for the pipelined hot path)."""
    return re.sub(r"(?<![:\w]):(\w+)", r"%(\1)s", sql)
MAX_EVENT_SEQ = "SELECT max(seq) FROM events"


def blob_params(text_value: str, digest: str | None = None) -> dict[str, Any]:
    return {"digest": digest or sha(text_value), "size": len(text_value), "data": text_value}


def event_params(env: Envelope, blobs: list[dict[str, Any]]) -> dict[str, Any]:
    """An envelope as a row of `events`; done here on the writer thread, off the event loop. A large
    `input` in the payload is stored once in `blobs` (with the record's and the message's copy) and the
    payload keeps its digest as `input_blob`."""
    payload = to_json(env.payload)
    if len(payload) > BLOB_MIN and isinstance(env.payload, dict) and "input" in env.payload:
        inp = to_json(env.payload["input"])
        if len(inp) > BLOB_MIN:
            blobs.append(blob_params(inp))
            rest = {k: v for k, v in env.payload.items() if k != "input"}
            payload = to_json({**rest, "input_blob": blobs[-1]["digest"]})
    return {"seq": env.seq, "channel": Channel(env.channel).value, "type": env.type, "time": env.time,
            "session_id": env.session_id or "", "payload": payload}


def describe_op(op: Op) -> str:
    if op.describe:
        return op.describe
    if op.kind == "event":
        return f"event {op.params.seq} ({op.params.type})"
    return ""


@dataclass(slots=True)
class Waiter:
    loop: asyncio.AbstractEventLoop
    fut: asyncio.Future[Any]
    entry: AuditEntry | None = None  # gets seq and hash once its transition is committed


@dataclass(slots=True)
class Op:
    kind: str  # tx | event | events | project | session | message | exec | group | flush | stop
    # events: params is a list of envelopes, queued in one put (see SqlStore.append_event); each becomes an event op
    # group: params is a list of ops written in one transaction, all or none (its result: theirs, in a list)
    params: Any = None
    waiter: Waiter | None = None
    # tx only: canonical JSON of the entry split around its seq (see _chain.split_canonical)
    canon: tuple[str, str] | None = None
    describe: str = ""


# What the writer settles on a waiter's loop: the waiter, the error (or None), the result.
Outcome = tuple[Waiter, BaseException | None, Any]


class ErrorTranslator:
    def __init__(self, where: str, busy_timeout_ms: int, dialect: str = "sqlite", url: str = "") -> None:
        self.where = where
        self.busy_timeout_ms = busy_timeout_ms
        self.dialect, self.url = dialect, url  # PostgreSQL's errors get its own hints (store/_db_errors.py)

    def __call__(self, exc: BaseException, what: str) -> StoreError:
        if isinstance(exc, StoreError):
            return exc
        msg = str(getattr(exc, "orig", None) or exc)
        low = msg.lower()
        if self.dialect == "postgresql":
            known = postgres_error(exc, f"could not save {what}", self.url, self.busy_timeout_ms)
            if known is not None:
                return known
        elif "locked" in low or "busy" in low:
            return StoreError(
                f"could not save {what}: the audit database {self.where} is locked by another program "
                f"(waited {self.busy_timeout_ms} ms); earlier records are safe, this write was not saved",
                hint="close the other program that has the database open for writing, then retry",
            )
        elif "full" in low or "no space" in low:
            return StoreError(
                f"could not save {what}: the disk holding the audit database {self.where} is full; "
                "earlier records are safe, this write was not saved",
                hint="free some disk space, then retry",
            )
        elif "readonly" in low:
            return StoreError(f"could not save {what}: the audit database {self.where} is read-only; earlier "
                              "records are safe, this write was not saved",
                              hint="make the file and its folder writable, or point --db at another path")
        if isinstance(exc, (sa_exc.IntegrityError, sqlite3.IntegrityError)):
            return StoreError(f"could not save {what}: it conflicts with the stored data ({msg})")
        return StoreError(f"could not save {what} to the audit database {self.where}: {msg}")


class Writer(threading.Thread):
    """The one writer of this process. Other processes may write the same database: the chain's head is
    read inside each writing transaction (which holds the write lock), never kept from the last one."""

    def __init__(self, engine: Engine, head: tuple[int, str], translate: ErrorTranslator,
                 notary: HeadNotary | None = None) -> None:
        super().__init__(name="agent-desk-store-writer", daemon=True)
        self.queue: queue.SimpleQueue[Op] = queue.SimpleQueue()
        self._engine = engine
        # On SQLite the hot statements go straight to the driver (it takes the same :named SQL),
        # which saves SQLAlchemy's per-row parameter processing inside the transaction it began.
        self._raw = engine.dialect.name == "sqlite"
        # SQLite's BEGIN IMMEDIATE already holds the write lock; PostgreSQL takes the chain's advisory lock.
        self._lock_chain = engine.dialect.name == "postgresql"
        self._pg: Any = None  # the psycopg cursor while a pipelined PostgreSQL transaction is open
        self.head_seq, self.head_hash = head  # the last head this process committed (for stats only)
        self._translate = translate
        self.failed_events: list[str] = []  # reported by the next flush()
        self.dead: StoreError | None = None
        self.batches = 0  # transactions committed: fewer than ops when group commit works
        self._failed_lock = threading.Lock()
        self.notary = notary  # audit-keys: signs each commit's head, writes the witness (None: unsigned)
        self.desk = notary.signer.key_id if notary is not None else ""  # named in each entry it writes
        self.checkpointer: Checkpointer | None = None  # SQLite: moves the log into the file beside this thread
        self._sqlite_vars: int | None = None  # SQLite's limit on a statement's bound variables, read once

    # thread body ----------------------------------------------------------------------------------
    def run(self) -> None:
        conn: Connection | None = None
        stop = False
        try:
            conn = self._engine.connect()
            if self._lock_chain:  # each statement after the lock must see the commits made before it
                conn = conn.execution_options(isolation_level="READ COMMITTED")
            while not stop:
                ops = self._next_batch()
                stop = any(op.kind == "stop" for op in ops)
                self._process(conn, ops)
        except BaseException as exc:  # a bug here must not leave callers waiting forever
            log.exception("audit store writer stopped unexpectedly")
            err = StoreError(f"the audit store writer stopped unexpectedly: {exc}")
            self.dead = err
            self._fail_rest(err)
        finally:
            if conn is not None:
                conn.close()
            self._engine.dispose()
            if self.notary is not None:
                self.notary.close()  # the last head's witness is written before close() returns

    def _next_batch(self) -> list[Op]:
        """Everything ready, as one batch. A batch of events alone (nobody waits on them) waits up to
        COMMIT_DELAY_S for a write that someone awaits, as PostgreSQL's commit_delay does: the events of a
        call's end then ride with the next call's commit instead of holding the writer with one of their own
        when that call's EXECUTING state comes (one commit on the call's critical path, not two)."""
        ops = [self.queue.get()]
        self._drain(ops)
        if all(op.kind in _EVENTS for op in ops):
            deadline = time.monotonic() + COMMIT_DELAY_S
            while len(ops) < MAX_BATCH and (left := deadline - time.monotonic()) > 0:
                try:
                    ops.append(self.queue.get(timeout=left))
                except queue.Empty:
                    break
                if ops[-1].kind not in _EVENTS:
                    self._drain(ops)
                    break
        if any(op.kind == "events" for op in ops):
            ops = [one for op in ops for one in ([Op("event", e) for e in op.params] if op.kind == "events" else [op])]
        return ops

    def _drain(self, ops: list[Op]) -> None:
        while len(ops) < MAX_BATCH:
            try:
                ops.append(self.queue.get_nowait())
            except queue.Empty:
                return

    def _fail_rest(self, err: StoreError) -> None:
        pend: list[Outcome] = []
        while True:
            try:
                op = self.queue.get_nowait()
            except queue.Empty:
                break
            if op.waiter is not None:
                pend.append((op.waiter, err, None))
        self._resolve(pend)

    def _process(self, conn: Connection, ops: list[Op]) -> None:
        pend: list[Outcome] = []
        writes = [op for op in ops if op.kind not in ("flush", "stop")]
        if writes:
            self._write_or_split(conn, writes, pend)
            if self.checkpointer is not None:
                self.checkpointer.nudge()
        for op in ops:
            if op.kind == "flush" and op.waiter is not None:
                pend.append((op.waiter, self._flush_error(op), None))
            elif op.kind == "stop" and op.waiter is not None:
                pend.append((op.waiter, None, None))
        self._resolve(pend)

    def _write_or_split(self, conn: Connection, writes: list[Op], pend: list[Outcome]) -> None:
        """Write the batch in one transaction; when it fails for one op's sake, write them one by one."""
        try:
            results = self._write_batch(conn, writes)
        except Exception as exc:
            self._rollback(conn)
            whole_db = isinstance(exc, (sa_exc.OperationalError, sqlite3.OperationalError))
            if whole_db or len(writes) == 1:
                err = self._translate(exc, "the last batch of writes")
                for op in writes:
                    self._failed(pend, op, self._translate(exc, describe_op(op)) if describe_op(op) else err)
                return
            # One bad op must not sink the others.
            for op in writes:
                try:
                    res = self._write_batch(conn, [op])
                except Exception as one_exc:
                    self._rollback(conn)
                    self._failed(pend, op, self._translate(one_exc, describe_op(op)))
                else:
                    if op.waiter is not None:
                        pend.append((op.waiter, None, res[0]))
            return
        for op, res in zip(writes, results, strict=True):
            if op.waiter is not None:
                pend.append((op.waiter, None, res))

    def _flush_error(self, op: Op) -> StoreError | None:
        """Events lost since the last flush; a quiet flush only waits, and the next real one reports."""
        if op.params == "quiet":
            return None
        with self._failed_lock:
            failed, self.failed_events = self.failed_events, []
        if not failed:
            return None
        more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
        return StoreError(f"{len(failed)} event(s) could not be saved: {failed[0]}{more}")

    def _failed(self, pend: list[Outcome], op: Op, err: StoreError) -> None:
        if op.waiter is not None:
            pend.append((op.waiter, err, None))
        elif op.kind == "event":
            log.error("%s", err)
            with self._failed_lock:
                self.failed_events.append(str(err))

    def _rollback(self, conn: Connection) -> None:
        try:
            conn.rollback()
            if self._raw:
                dbapi = conn.connection.driver_connection
                if dbapi.in_transaction:
                    dbapi.execute("ROLLBACK")
        except Exception:
            log.exception("rollback after a failed write failed")

    def _write_batch(self, conn: Connection, ops: list[Op]) -> list[Any]:
        """Write `ops` in one transaction; returns a result per op. Raises on any failure."""
        flat = [sub for op in ops for sub in (op.params if op.kind == "group" else (op,))]
        try:
            results = self._write_batch_tx(conn, flat)
        except BaseException:
            if self.notary is not None:
                self.notary.rolled_back()
            raise
        if self.notary is not None:
            self.notary.committed()
        if len(flat) == len(ops):
            return results
        grouped, k = [], 0
        for op in ops:
            n = len(op.params) if op.kind == "group" else 1
            grouped.append(results[k:k + n] if op.kind == "group" else results[k])
            k += n
        return grouped

    def _write_batch_tx(self, conn: Connection, ops: list[Op]) -> list[Any]:
        results: list[Any] = [None] * len(ops)
        if self._raw and all(op.kind in ("tx", "event", "message") for op in ops):
            # The hot path (transitions, events and messages) talks to sqlite3 directly: SQLAlchemy's
            # transaction bookkeeping costs about as much as the commit itself.
            dbapi = conn.connection.driver_connection
            dbapi.execute("BEGIN IMMEDIATE")
            try:
                head = dbapi.execute(SELECT_HEAD).fetchone()
                seq, prev = self._write_ops(conn, ops, results, head)
                if head is None or seq != head[0]:
                    dbapi.execute(UPSERT_HEAD.text, {"id": 1, "seq": seq, "hash": prev})
                    if self.notary is not None and seq:  # a batch without entries on a new chain: no head
                        self.notary.sign_in_tx(dbapi.execute, lambda sql: dbapi.execute(sql).fetchall(),
                                               _first(head), seq, prev)
                dbapi.execute("COMMIT")
            except BaseException:
                if dbapi.in_transaction:
                    dbapi.execute("ROLLBACK")
                raise
        elif self._lock_chain and conn.dialect.driver == "psycopg" and all(op.kind in ("tx", "event") for op in ops):
            seq, prev = self._write_pipelined(conn, ops, results)
        else:
            with conn.begin():
                if self._lock_chain:
                    conn.execute(LOCK_CHAIN)
                head = conn.execute(text(SELECT_HEAD)).first()
                seq, prev = self._write_ops(conn, ops, results, head)
                if head is None or seq != head[0]:
                    conn.execute(UPSERT_HEAD, {"id": 1, "seq": seq, "hash": prev})
                    if self.notary is not None and seq:
                        self.notary.sign_in_tx(lambda sql, p: conn.execute(text(sql), p),
                                               lambda sql: list(conn.execute(text(sql))), _first(head), seq, prev)
        self.head_seq, self.head_hash = seq, prev
        self.batches += 1
        return results

    def _write_pipelined(self, conn: Connection, ops: list[Op], results: list[Any]) -> tuple[int, str]:
        """The hot path on PostgreSQL: one psycopg pipeline, so the chain's lock is held for about three round
        trips (the lock with the head, the writes, the commit) rather than one per statement."""
        pg, dbapi = conn.connection.driver_connection, conn.dialect.dbapi
        cur = self._pg = pg.cursor()
        try:
            with pg.pipeline():
                cur.execute(pg_sql(LOCK_CHAIN.text), {"k": CHAIN_LOCK_KEY})
                head = cur.execute(SELECT_HEAD).fetchone()  # runs once the lock is held: the newest head
                seq, prev = self._write_ops(conn, ops, results, head)
                if head is None or seq != head[0]:
                    cur.execute(pg_sql(UPSERT_HEAD.text), {"id": 1, "seq": seq, "hash": prev})
                    if self.notary is not None and seq:
                        self.notary.sign_in_tx(lambda sql, p: cur.execute(pg_sql(sql), p),
                                               lambda sql: cur.execute(sql).fetchall(), _first(head), seq, prev)
                pg.commit()
        except dbapi.Error as exc:
            pg.rollback()
            # As SQLAlchemy would have raised it, so the error translation and the split work alike.
            raise sa_exc.DBAPIError.instance(None, None, exc, dbapi.Error) from exc
        except BaseException:
            pg.rollback()
            raise
        finally:
            self._pg = None
        return seq, prev

    def _write_ops(self, conn: Connection, ops: list[Op], results: list[Any], head: Any) -> tuple[int, str]:
        """The statements of one batch, inside the caller's transaction, after the chain's `head` as
        read in it; returns the new head."""
        seq, prev = (int(head[0]), str(head[1])) if head is not None else (0, GENESIS)
        bound = BoundRows()
        i = 0
        while i < len(ops):
            kind = ops[i].kind
            j = i
            while j < len(ops) and ops[j].kind == kind and kind in ("tx", "event"):
                j += 1
            if kind == "tx":
                seq, prev = self._write_transitions(conn, ops, i, j, results, seq, prev)
            elif kind == "event":
                self._write_events(conn, [ops[k].params for k in range(i, j)], bound)
            else:
                j = i + 1
                op = ops[i]
                if kind == "project":
                    conn.execute(UPSERT_PROJECT, op.params)
                    bound.project(op.params)
                elif kind == "session":
                    conn.execute(UPSERT_SESSION, op.params)
                    bound.session(op.params)
                elif kind == "message":
                    results[i], seq, prev = self._write_message(conn, op, seq, prev)
                elif kind == "exec":
                    results[i] = op.params(conn)
                else:
                    raise AssertionError(f"unknown op {kind}")
            i = j
        return self._bind_rows(conn, bound, seq, prev)

    def _bind_rows(self, conn: Connection, bound: BoundRows, seq: int, prev: str) -> tuple[int, str]:
        """The ROWS entry of this transaction's events, sessions and projects (integrity/_bound_rows.py)."""
        data_json = bound.entry_data()
        if data_json is None:
            return seq, prev
        at = time.time()
        # its data (hex digests by key, no number) reads the same in both canonical forms: the new one, RFC 8785
        prefix, suffix = split_canonical(None, ROWS_STATE, at, ROWS_ACTOR, "", data_json, desk=self.desk,
                                         canon=CANON_JCS)
        seq += 1
        h = link_hash(prev, f"{prefix}{seq}{suffix}")
        self._many(conn, INSERT_ENTRY, [{"seq": seq, "record_id": None, "state": ROWS_STATE, "at": at,
                                         "actor": ROWS_ACTOR, "note": "", "data": data_json, "prev_hash": prev,
                                         "hash": h, "message_id": None, "digests": "", "desk": self.desk,
                                         "canon": CANON_JCS}])
        return seq, h

    def _write_transitions(self, conn: Connection, ops: list[Op], i: int, j: int, results: list[Any],
                           seq: int, prev: str) -> tuple[int, str]:
        """Ops i..j (transitions): their blobs, records and chain entries."""
        entries, blobs = [], {}
        for k in range(i, j):
            op = ops[k]
            seq += 1
            prefix, suffix = op.canon
            h = link_hash(prev, f"{prefix}{seq}{suffix}")
            entries.append({**op.params[1], "seq": seq, "prev_hash": prev, "hash": h})
            results[k] = (seq, h)
            prev = h
            if op.params[2] is not None:
                blobs[op.params[2]["digest"]] = op.params[2]
        if blobs:
            self._many(conn, INSERT_BLOB, list(blobs.values()))
        # A record's row once per batch, as of its last transition in it (a new call's PENDING rides with
        # its next one): the upserts in between would be overwritten in the same transaction anyway.
        rows: dict[str, dict[str, Any]] = {}
        for k in range(i, j):
            rows[ops[k].params[0]["id"]] = ops[k].params[0]
        self._many(conn, UPSERT_TOOL_CALL, list(rows.values()))
        self._many(conn, INSERT_ENTRY, entries)
        return seq, prev

    def _write_message(self, conn: Connection, op: Op, seq: int, prev: str) -> tuple[int, int, str]:
        """A message, its blobs, and its own chain entry (which knows the message's new id)."""
        params, blobs = op.params
        if blobs:
            self._many(conn, INSERT_BLOB, blobs)
        if self._raw:  # inside the hot path's own transaction (see _write_batch_tx)
            mid = conn.connection.driver_connection.execute(INSERT_MESSAGE.text, params).fetchone()[0]
        else:
            mid = conn.execute(INSERT_MESSAGE, params).scalar_one()
        digests = message_digests(params)
        at = float(params["created_at"])
        prefix, suffix = split_canonical(None, "MESSAGE", at, params["role"], "", "{}", digests, mid, self.desk,
                                         CANON_JCS)
        seq += 1
        h = link_hash(prev, f"{prefix}{seq}{suffix}")
        self._many(conn, INSERT_ENTRY, [{"seq": seq, "record_id": None, "state": "MESSAGE", "at": at,
                                         "actor": params["role"], "note": "", "data": "{}", "prev_hash": prev,
                                         "hash": h, "message_id": mid, "digests": digests, "desk": self.desk,
                                         "canon": CANON_JCS}])
        return mid, seq, h

    def _write_events(self, conn: Connection, envs: list[Envelope], bound: BoundRows) -> None:
        """Events get their stored `seq` here, inside the write transaction, after the newest one any
        process stored: two processes on one file each count their envelopes from their own start, and
        would otherwise collide on the key and lose events. With one writer the numbers are the bus's."""
        blobs: list[dict[str, Any]] = []
        rows = [event_params(env, blobs) for env in envs]
        if self._raw:
            base = conn.connection.driver_connection.execute(MAX_EVENT_SEQ).fetchone()[0]
        elif self._pg is not None:
            base = self._pg.execute(MAX_EVENT_SEQ).fetchone()[0]
        else:
            base = conn.execute(text(MAX_EVENT_SEQ)).scalar()
        for k, row in enumerate(rows, start=int(base or 0) + 1):
            row["seq"] = k
            bound.event(row)
        if blobs:
            self._many(conn, INSERT_BLOB, blobs)
        self._many(conn, INSERT_EVENT, rows)

    def _many(self, conn: Connection, stmt: TextClause, rows: list[dict[str, Any]]) -> None:
        if self._raw:
            dbapi = conn.connection.driver_connection
            if len(rows) == 1:
                dbapi.execute(stmt.text, rows[0])
                return
            if self._sqlite_vars is None:
                self._sqlite_vars = dbapi.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
            most = max(1, min(MULTI_ROW_MAX, self._sqlite_vars // len(multi_row(stmt.text, 1)[1])))
            k = 0
            for n in chunk_sizes(len(rows), 1 << (most.bit_length() - 1)):
                sql, names = multi_row(stmt.text, n)
                dbapi.execute(sql, [row[name] for row in rows[k:k + n] for name in names])
                k += n
        elif self._pg is not None:
            self._pg.executemany(pg_sql(stmt.text), rows)
        else:
            conn.execute(stmt, rows)

    # resolution on the loops ----------------------------------------------------------------------
    @staticmethod
    def _resolve(pend: list[Outcome]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[Outcome]] = {}
        for item in pend:
            by_loop.setdefault(item[0].loop, []).append(item)
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_settle, items)
            except RuntimeError:
                pass  # that loop is closed; nobody is waiting any more


def _first(head: Any) -> int:
    """The seq of a batch's first entry, after the head read in its transaction."""
    return (int(head[0]) if head is not None else 0) + 1


def _settle(items: list[Outcome]) -> None:
    for waiter, err, res in items:
        if waiter.fut.done():
            continue
        if err is not None:
            waiter.fut.set_exception(err)
            continue
        if waiter.entry is not None and res is not None:
            waiter.entry.seq, waiter.entry.hash = res
        waiter.fut.set_result(res)

