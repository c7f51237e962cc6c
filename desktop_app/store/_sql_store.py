"""SqlStore: the RecordStore on SQLAlchemy (SQLite by default), with one writer thread, reader
threads, an audit hash chain, queries, export and verification."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any, TypeVar

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine, make_url
from sqlmodel import SQLModel

from desktop_app.core import (
    AuditEntry,
    Channel,
    Envelope,
    ProjectInfo,
    SessionInfo,
    StoredMessage,
    StoreError,
    ToolCallRecord,
    ToolCallState,
)

from ._charts import ChartData, chart_data
from ._checkpoint import Checkpointer
from ._connections import make_engine, to_url
from ._db_errors import postgres_error, safe_url, sqlite_open_error
from ._export import FORMATS, write_records
from ._migrate import upgrade
from ._prompt_images import has_images, image_problems, insert_images, restore_images, split_images, with_image_check
from ._query import (
    ENTRY_COLUMNS,
    RECORD_COLUMNS,
    AuditQuery,
    RecordRow,
    StoreStats,
    build_sql,
    entry_from_row,
    record_from_row,
)
from ._search import search_text
from ._tables import (
    EventRow,
    MessageRow,
    ProjectRow,
    SessionRow,
    ToolCallRow,
    columns,
    decode_row,
    encode_row,
    from_json,
)
from ._writer import ErrorTranslator, Op, Waiter, Writer, blob_params
from .integrity import (
    BLOB_MIN,
    CANON_JCS,
    GENESIS,
    ChainDigests,
    HeadNotary,
    HeadSigner,
    VerifyResult,
    db_identity,
    jcs_data,
    latest_head,
    message_entries,
    record_digests,
    sha,
    split_canonical,
    to_json,
    trailer,
    verify,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_REC_COLS = ", ".join(f"t.{c}" for c in RECORD_COLUMNS)
_REC_SELECT = f"SELECT {_REC_COLS} FROM tool_calls t"
_ENTRY_SELECT = "SELECT " + ", ".join(ENTRY_COLUMNS) + " FROM audit_entries"
_TRAIL_CHUNK = 500
# The light rows a list shows: RecordRow's fields, its columns, a preview of the input and the page key.
_LIST_FIELDS = tuple(f.name for f in dataclasses.fields(RecordRow) if f.name not in ("input_preview", "page_key"))
_LIST_COLS = ", ".join(f"t.{name}" for name in _LIST_FIELDS)


def row_params(obj: Any, table: type[SQLModel], without: tuple[str, ...] = ()) -> dict[str, Any]:
    """`obj`'s attributes named like the table's columns, as the row's parameters."""
    return encode_row(table, {c: getattr(obj, c) for c in columns(table, without=without)})


def record_params(record: ToolCallRecord) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """The record's row, the blob of its input when the input is large (the row then names it), and
    the sha256 of its input's text."""
    d = record.to_dict()
    p = encode_row(ToolCallRow, {c: d.get(c) for c in RECORD_COLUMNS})
    p["search_text"] = search_text(record)
    blob = None
    input_digest = sha(p["input"])
    if len(p["input"]) > BLOB_MIN:
        blob = blob_params(p["input"], input_digest)
        p["input"], p["input_blob"] = "{}", input_digest
    return p, blob, input_digest


def message_params(message: StoredMessage) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The message's row, with each large tool_use input moved to a blob (the block keeps `input_blob`)."""
    blobs, content = [], []
    for block in message.content if isinstance(message.content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_use" and "input" in block:
            inp = to_json(block["input"])
            if len(inp) > BLOB_MIN:
                blobs.append(blob_params(inp))
                block = {**{k: v for k, v in block.items() if k != "input"}, "input_blob": blobs[-1]["digest"]}
        content.append(block)
    params = row_params(message, MessageRow, without=("id",))
    if blobs:
        params["content"] = to_json(content)
    return params, blobs


class SqlStore:
    """The durable RecordStore. Build it with `await SqlStore.open(path_or_url)`; `await close()` it."""

    def __init__(
        self,
        url: str,
        writer: Writer,
        read_engine: Engine,
        reader_threads: int,
        where: str,
    ) -> None:
        self._url = url
        self._writer = writer
        self._read_engine = read_engine
        self._readers = ThreadPoolExecutor(max_workers=reader_threads, thread_name_prefix="agent-desk-store-read")
        self._where = where
        self._dialect = read_engine.dialect.name  # which search language build_sql speaks
        self._closing = False
        self._signer: HeadSigner | None = None  # audit-keys: set by open()
        # Events published in one turn of the loop, handed to the writer in one put (each put wakes its thread,
        # which then takes the interpreter from the loop); any other write hands them over first, in order.
        self._events: list[Envelope] = []
        self._events_loop: asyncio.AbstractEventLoop | None = None  # the loop whose turn will hand them over
        self._identity = where

    # lifecycle ------------------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        url_or_path: str | os.PathLike[str],
        *,
        busy_timeout_ms: int = 5000,
        reader_threads: int = 2,
        sqlite_pragmas: dict[str, Any] | None = None,
        signer: HeadSigner | None = None,
    ) -> SqlStore:
        """Open (creating if needed) the database, migrate it to the current schema, start the writer.

        `url_or_path` is a file path (SQLite) or any SQLAlchemy URL. `sqlite_pragmas` are extra
        PRAGMAs set on every SQLite connection, after the defaults (WAL, busy_timeout, foreign_keys,
        synchronous=NORMAL). `signer` (the installation's key) signs each commit's head and writes its
        witness; without one the head is not signed.
        """
        url = to_url(url_or_path)
        return await asyncio.to_thread(cls._open_sync, url, busy_timeout_ms, reader_threads, sqlite_pragmas,
                                       signer)

    @classmethod
    def _open_sync(
        cls, url: str, busy_timeout_ms: int, reader_threads: int, pragmas: dict[str, Any] | None,
        signer: HeadSigner | None = None,
    ) -> SqlStore:
        u = make_url(url)
        dialect = u.get_backend_name()
        where = u.database if dialect == "sqlite" else safe_url(url)
        write_engine = make_engine(url, writer=True, busy_timeout_ms=busy_timeout_ms, pragmas=pragmas)
        try:
            with write_engine.connect() as conn:
                upgrade(conn, url)
                row = conn.execute(text("SELECT seq, hash FROM audit_head WHERE id = 1")).first()
                conn.rollback()
        except Exception as exc:
            write_engine.dispose()
            raise _open_error(exc, url, where, busy_timeout_ms) from exc
        head = (row[0], row[1]) if row else (0, GENESIS)
        read_engine = make_engine(url, writer=False, busy_timeout_ms=busy_timeout_ms, pragmas=pragmas,
                                  pool_size=reader_threads)
        identity = db_identity(Path(u.database) if u.get_backend_name() == "sqlite" and u.database else None,
                               u.render_as_string(hide_password=True))
        notary = HeadNotary(signer, identity) if signer is not None else None  # audit-keys
        writer = Writer(write_engine, head, ErrorTranslator(where, busy_timeout_ms, dialect, url), notary)
        if dialect == "sqlite" and u.database and u.database != ":memory:" and not u.database.startswith("file:"):
            writer.checkpointer = Checkpointer(Path(u.database), busy_timeout_ms)
            writer.checkpointer.start()
        writer.start()
        store = cls(url, writer, read_engine, reader_threads, where)
        store._signer, store._identity = signer, identity
        return store

    @property
    def path(self) -> Path | None:
        """The SQLite file, or None for another database."""
        u = make_url(self._url)
        return Path(u.database) if u.get_backend_name() == "sqlite" and u.database else None

    async def close(self) -> None:
        """Write everything queued, stop the writer and the readers. Idempotent."""
        if self._closing:
            return
        self._closing = True
        if self._writer.is_alive() and self._writer.dead is None:
            await self._submit(Op("stop"), check=False)
        await asyncio.to_thread(self._writer.join)
        await asyncio.to_thread(self._readers.shutdown, True)
        self._read_engine.dispose()
        if self._writer.checkpointer is not None:
            await asyncio.to_thread(self._writer.checkpointer.close)

    # plumbing -------------------------------------------------------------------------------------
    def _check_open(self) -> None:
        if self._closing:
            raise StoreError("the audit store is closed")
        if self._writer.dead is not None:
            raise self._writer.dead

    def _submit(self, op: Op, entry: AuditEntry | None = None, *, check: bool = True) -> asyncio.Future[Any]:
        if check:
            self._check_open()
        loop = asyncio.get_running_loop()
        op.waiter = Waiter(loop, loop.create_future(), entry)
        if loop is self._events_loop or op.kind == "stop":
            self._put_events()
        self._writer.queue.put(op)
        return op.waiter.fut

    def _put_events(self) -> None:
        if self._events:
            envs, self._events = self._events, []
            self._writer.queue.put(Op("events", envs))

    async def _read(self, fn: Callable[..., T], *args: Any) -> T:
        self._check_open()
        return await asyncio.get_running_loop().run_in_executor(self._readers, self._read_sync, fn, args)

    def _read_sync(self, fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            with self._read_engine.connect() as conn:
                return fn(conn, *args)
        except StoreError:
            raise
        except Exception as exc:
            raise StoreError(f"could not read the audit database {self._where}: {exc}") from exc

    async def _run_in_writer(self, fn: Callable[[Connection], T]) -> T:
        """Run `fn(conn)` on the writer's connection inside its transaction (maintenance, tests)."""
        return await self._submit(Op("exec", fn, describe="a maintenance statement"))

    # RecordStore: writes --------------------------------------------------------------------------
    async def save_transition(self, record: ToolCallRecord, entry: AuditEntry) -> None:
        """Upsert `record`, append `entry` to the hash chain; returns once committed.

        Sets `entry.seq` and `entry.hash`. Raises StoreError (locked, full, ...) with nothing
        committed for this call and nothing earlier lost.
        """
        await self._submit(self._transition_op(record, entry), entry)

    def _transition_op(self, record: ToolCallRecord, entry: AuditEntry) -> Op:
        if entry.record_id != record.id:
            raise StoreError(f"audit entry for {entry.record_id} cannot be saved with record {record.id}")
        state = ToolCallState(entry.state).value
        try:
            params, blob, input_digest = record_params(record)
            data_json = jcs_data(entry.data)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"tool call {record.id} cannot be saved: its data is not JSON ({exc})") from exc
        at = float(entry.at)
        digests = record_digests(params, input_digest)
        desk = self._writer.desk  # the key id of this desk, hashed into the entry ("" without a key)
        eparams = {"record_id": entry.record_id, "state": state, "at": at, "actor": entry.actor,
                   "note": entry.note, "data": data_json, "message_id": None, "digests": digests, "desk": desk,
                   "canon": CANON_JCS}
        return Op("tx", (params, eparams, blob),
                  canon=split_canonical(entry.record_id, state, at, entry.actor, entry.note, data_json, digests,
                                        desk=desk, canon=CANON_JCS),
                  describe=f"the {state} transition of tool call {record.id} ({record.name})")

    def append_event(self, env: Envelope) -> None:
        """Queue an envelope for writing, in order, without waiting. Failures surface at flush()."""
        self._check_open()
        # Serialised on the writer thread (event_params), not here on the event loop.
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None or (self._events and loop is not self._events_loop):  # another thread: at once
            self._writer.queue.put(Op("event", env))
            return
        if not self._events:
            self._events_loop = loop
            loop.call_soon(self._put_events)
        self._events.append(env)

    async def flush(self) -> None:
        """Wait until everything queued so far is written; raises StoreError if events were lost."""
        await self._submit(Op("flush"))

    async def save_project(self, project: ProjectInfo) -> None:
        await self._submit(Op("project", row_params(project, ProjectRow), describe=f"project {project.name!r}"))

    async def save_session(self, session: SessionInfo) -> None:
        await self._submit(Op("session", row_params(session, SessionRow),
                              describe=f"session {session.id} (its project {session.project_id} must be saved first)"))

    async def append_message(self, message: StoredMessage,
                             transitions: Sequence[tuple[ToolCallRecord, AuditEntry]] = (), *,
                             first: bool = False) -> int:
        """Append `message` (and, in the same transaction before it or after it with `first`, `transitions`:
        see RecordStore)."""
        stored = message
        if has_images(message):  # the bytes once in prompt_images, before the message that names them
            stored, rows = await asyncio.to_thread(split_images, message)
            await self._submit(Op("exec", insert_images(rows), describe="the images of a message"))
        describe = f"a {message.role} message of session {message.session_id} (save the session first)"
        op = Op("message", message_params(stored), describe=describe)
        if transitions:
            ops = [self._transition_op(record, entry) for record, entry in transitions]
            results = await self._submit(Op("group", [op, *ops] if first else [*ops, op], describe=describe))
            mid = results[0] if first else results[-1]
            for (_, entry), (seq, h) in zip(transitions, results[1:] if first else results, strict=False):
                entry.seq, entry.hash = seq, h
        else:
            mid = await self._submit(op)
        message.id = mid
        return mid

    # RecordStore: reads ---------------------------------------------------------------------------
    async def events_since(
        self,
        since: int,
        channels: Iterable[Channel],
        *,
        upto: int | None = None,
        session_id: str | None = None,
        types: Iterable[str] | None = None,
    ) -> list[Envelope]:
        chans = sorted({Channel(c).value for c in channels})
        return await self._read(_events_since, since, chans, upto, session_id, sorted(set(types or ())))

    async def last_event_seq(self) -> int:
        await self._submit(Op("flush", "quiet"))
        return await self._read(lambda c: c.execute(text("SELECT max(seq) FROM events")).scalar() or 0)

    async def get_record(self, record_id: str) -> ToolCallRecord | None:
        return await self._read(_get_record, record_id)

    async def session_records(
        self, session_id: str, states: Iterable[ToolCallState] | None = None, *, trails: bool = True
    ) -> list[ToolCallRecord]:
        """The session's records, oldest first (then by batch index), with their trails (or, `trails=False`,
        without: a window reopening a long session reads a call's trail when the call is opened)."""
        q = AuditQuery(session_id=session_id, states=list(states) if states else None, limit=None)
        return await self._read(_records, q, self._dialect, "ASC", trails)

    async def get_project(self, project_id: str) -> ProjectInfo | None:
        rows = await self._read(_projects, project_id)
        return rows[0] if rows else None

    async def list_projects(self) -> list[ProjectInfo]:
        """Every project, oldest first."""
        return await self._read(_projects, None)

    async def get_session(self, session_id: str) -> SessionInfo | None:
        rows = await self._read(_sessions, session_id, None)
        return rows[0] if rows else None

    async def list_sessions(self, project_id: str | None = None) -> list[SessionInfo]:
        """Sessions (of one project, or all), most recently updated first."""
        return await self._read(_sessions, None, project_id)

    async def messages(self, session_id: str) -> list[StoredMessage]:
        return await self._read(_messages, session_id)

    # queries for the UI and CLI -------------------------------------------------------------------
    async def query(self, q: AuditQuery) -> list[ToolCallRecord]:
        """Records matching `q`, newest first, each with its trail."""
        return await self._read(_records, q, self._dialect, "DESC")

    async def count(self, q: AuditQuery) -> int:
        """How many records match `q` (ignoring limit and offset)."""
        return await self._read(_count, q, self._dialect)

    async def list_records(self, q: AuditQuery) -> list[RecordRow]:
        """Light rows matching `q`, newest first, without payloads or trails."""
        return await self._read(_list_rows, q, self._dialect)

    async def chart_data(self, q: AuditQuery, tz_offset_s: int = 0) -> ChartData:
        """The history's charts over the records `q` finds, aggregated by the database (days in the time zone
        `tz_offset_s` seconds east of UTC)."""
        return await self._read(chart_data, q, self._dialect, tz_offset_s)

    async def get_trail(self, record_id: str) -> list[AuditEntry]:
        return await self._read(lambda c: _trails(c, [record_id]).get(record_id, []))

    async def pending_approvals(self, session_id: str | None = None) -> list[ToolCallRecord]:
        """Records waiting in APPROVAL_REQUIRED, across sessions (or in one), oldest first."""
        q = AuditQuery(session_id=session_id, states=ToolCallState.APPROVAL_REQUIRED, limit=None)
        return await self._read(_records, q, self._dialect, "ASC")

    async def stats(self) -> StoreStats:
        return await self._read(_stats, self.path)

    async def verify(self, trusted_keys: Iterable[str] = ()) -> VerifyResult:
        """Re-hash the whole chain; name the first entry that was altered, removed or inserted. `trusted_keys`:
        other desks' key ids accepted on purpose (see _head_verify._check_identity)."""
        result = await self._read(verify, self._signer, self._identity, frozenset(trusted_keys))
        return with_image_check(result, await self._read(image_problems))

    async def signed_head(self) -> dict[str, Any] | None:
        """The highest head any key signed (db_id, seq, hash, count, key_id, signature, signed_at) with that
        key's public key, or None when no head is signed yet: what a report quotes for checking later."""

        def run(conn: Connection) -> dict[str, Any] | None:
            found = latest_head(conn)
            return {**found[0].to_dict(), "public_key": found[1]} if found else None

        return await self._read(run)

    async def export(self, q: AuditQuery, fmt: str, out: str | os.PathLike[str] | IO[str], *,
                     signed: bool = False) -> int:
        """Write the records matching `q` (its limit applies; None for all) as "jsonl" (records with
        their trails) or "csv" (flat columns) to a path or a text stream. Returns the record count.
        `signed` (JSONL) ends it with the database's signed head and this installation's signature over it
        all, which `verify_export` checks offline."""
        fmt = fmt.lower()
        if fmt not in FORMATS:
            raise StoreError(f"unknown export format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
        signer = self._signer
        if signed and signer is None:
            raise StoreError("a signed export needs this installation's signing key; the store was opened "
                             "without one")

        def run(conn: Connection) -> int:
            if signed:  # the signature vouches for what it covers: never for a chain that does not verify
                checked = verify(conn, signer, self._identity)
                if not checked.ok:
                    raise StoreError(f"the audit chain does not verify, so it is not signed: {checked.message}",
                                     hint="run `agent-desk audit verify`; an unsigned export is still possible")
            records = _iter_records(conn, q, self._dialect)
            if not signed or signer is None:
                return write_records(records, fmt, out)
            head, chain = latest_head(conn), ChainDigests(conn)
            every = conn.execute(text("SELECT count(*) FROM tool_calls")).scalar()

            def tr(n: int, digest: str) -> dict[str, Any]:
                # Every tool call exported: add the message entries, so an auditor re-computes every link.
                complete = head is not None and n == every
                return trailer(signer, head, n, digest, message_entries(conn, head[0].seq) if complete else None)

            return write_records(chain.records(records), fmt, out, tr, chain.line)

        return await self._read(run)


def _open_error(exc: Exception, url: str, where: str, busy_timeout_ms: int) -> StoreError:
    """Why the database could not be opened or migrated, with the fix for that database."""
    if isinstance(exc, StoreError):
        return exc
    if make_url(url).get_backend_name() == "postgresql":
        known = postgres_error(exc, "cannot open the audit database", url, busy_timeout_ms)
        return known or StoreError(f"cannot open the audit database {where}: {exc}",
                                   hint="check the URL and that the user may create tables in the database")
    if "locked" in str(exc):
        return ErrorTranslator(where, busy_timeout_ms)(exc, "the schema")
    return sqlite_open_error(exc, where)


# read functions: each runs on a reader thread with its own connection -------------------------------
def _rows(conn: Connection, table: type[SQLModel], tail: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Rows of `table` (every column, JSON decoded) as dicts; `tail` is the WHERE and ORDER BY."""
    cols = columns(table)
    for r in conn.execute(text(f"SELECT {', '.join(cols)} FROM {table.__tablename__}{tail}"), params):
        yield decode_row(table, cols, r)


def _events_since(conn: Connection, since: int, chans: list[str], upto: int | None,
                  session_id: str | None, types: list[str] | None = None) -> list[Envelope]:
    if not chans:
        return []
    params: dict[str, Any] = {"since": since}
    names = []
    for i, ch in enumerate(chans):
        names.append(f":ch{i}")
        params[f"ch{i}"] = ch
    where = f" WHERE seq > :since AND channel IN ({', '.join(names)})"
    if types:  # a session's notices, say, without its text chunks
        params.update({f"ty{i}": t for i, t in enumerate(types)})
        where += f" AND type IN ({', '.join(f':ty{i}' for i in range(len(types)))})"
    if upto is not None:
        where += " AND seq <= :upto"
        params["upto"] = upto
    if session_id:
        where += " AND session_id = :sid"
        params["sid"] = session_id
    out = [Envelope(**{**d, "channel": Channel(d["channel"]), "session_id": d["session_id"] or ""})
           for d in _rows(conn, EventRow, where + " ORDER BY seq", params)]
    _with_inputs(conn, [e.payload for e in out])
    return out


def _trails(conn: Connection, ids: list[str]) -> dict[str, list[AuditEntry]]:
    out: dict[str, list[AuditEntry]] = {}
    for i in range(0, len(ids), _TRAIL_CHUNK):
        chunk = ids[i : i + _TRAIL_CHUNK]
        params = {f"r{k}": rid for k, rid in enumerate(chunk)}
        sql = f"{_ENTRY_SELECT} WHERE record_id IN ({', '.join(':' + k for k in params)}) ORDER BY seq"
        for row in conn.execute(text(sql), params):
            out.setdefault(row[1], []).append(entry_from_row(row))
    return out


_BLOB_AT = RECORD_COLUMNS.index("input_blob")


def _blobs(conn: Connection, digests: Iterable[str]) -> dict[str, Any]:
    """The decoded values of these blobs; a missing one reads as a marker that names it."""
    want = sorted(set(digests))
    out: dict[str, Any] = {d: {"_blob_missing": d} for d in want}
    for i in range(0, len(want), _TRAIL_CHUNK):
        params = {f"d{k}": d for k, d in enumerate(want[i : i + _TRAIL_CHUNK])}
        sql = f"SELECT digest, data FROM blobs WHERE digest IN ({', '.join(':' + k for k in params)})"
        for digest, data in conn.execute(text(sql), params):
            out[digest] = from_json(data)
    return out


def _records_of(conn: Connection, rows: list[Any], with_trails: bool = True) -> Iterator[ToolCallRecord]:
    trails = _trails(conn, [r[0] for r in rows]) if with_trails else {}
    blobs = _blobs(conn, [r[_BLOB_AT] for r in rows if r[_BLOB_AT]])
    for r in rows:
        rec = record_from_row(r, trails.get(r[0], []))
        if r[_BLOB_AT]:
            rec.input = blobs[r[_BLOB_AT]]
        yield rec


def _with_inputs(conn: Connection, items: list[dict[str, Any]]) -> None:
    """Put back, in place, the `input` of each item (a tool_use block, an event payload) stored as a blob."""
    refs = [it for it in items if isinstance(it, dict) and "input_blob" in it and "input" not in it]
    if refs:
        blobs = _blobs(conn, [it["input_blob"] for it in refs])
        for it in refs:
            it["input"] = blobs[it.pop("input_blob")]


def _get_record(conn: Connection, record_id: str) -> ToolCallRecord | None:
    row = conn.execute(text(f"{_REC_SELECT} WHERE t.id = :id"), {"id": record_id}).first()
    return None if row is None else next(_records_of(conn, [row]))


def _iter_records(conn: Connection, q: AuditQuery, dialect: str, order: str = "DESC",
                  chunk: int = _TRAIL_CHUNK, *, trails: bool = True) -> Iterator[ToolCallRecord]:
    p = build_sql(q, dialect=dialect)
    page = p.page(q, "t.created_at ASC, t.batch_index ASC, t.pk ASC" if order == "ASC" else None)
    result = conn.execute(text(f"SELECT {_REC_COLS} FROM {p.source}{p.where}{page}"), p.params)
    while True:
        rows = result.fetchmany(chunk)
        if not rows:
            return
        yield from _records_of(conn, rows, trails)


def _records(conn: Connection, q: AuditQuery, dialect: str, order: str,
             trails: bool = True) -> list[ToolCallRecord]:
    return list(_iter_records(conn, q, dialect, order, trails=trails))


def _count(conn: Connection, q: AuditQuery, dialect: str) -> int:
    p = build_sql(dataclasses.replace(q, after=None), dialect=dialect)
    return conn.execute(text(f"SELECT count(*) FROM {p.source}{p.where}"), p.params).scalar_one()


def _list_rows(conn: Connection, q: AuditQuery, dialect: str) -> list[RecordRow]:
    p = build_sql(q, dialect=dialect)
    preview = ("CASE WHEN t.input_blob IS NULL THEN substr(CAST(t.input AS TEXT), 1, 200) ELSE "
               "(SELECT substr(b.data, 1, 200) FROM blobs b WHERE b.digest = t.input_blob) END")
    sql = f"SELECT {_LIST_COLS}, {preview}, t.pk FROM {p.source}{p.where}{p.page(q)}"
    rows = []
    for r in conn.execute(text(sql), p.params):
        d = dict(zip(_LIST_FIELDS, r[:-2], strict=True))
        preview, pk = r[-2], r[-1]
        rows.append(RecordRow(**{
            **d, "state": ToolCallState(d["state"]), "is_error": bool(d["is_error"]),
            "read_only": bool(d["read_only"]),
            "input_preview": preview if isinstance(preview, str) else to_json(preview)[:200],
            "page_key": (float(d["created_at"]), int(pk)),
        }))
    return rows


def _projects(conn: Connection, project_id: str | None) -> list[ProjectInfo]:
    where, params = (" WHERE id = :id", {"id": project_id}) if project_id is not None else ("", {})
    return [ProjectInfo(**{**d, "settings": d["settings"] or {}})
            for d in _rows(conn, ProjectRow, where + " ORDER BY created_at, id", params)]


def _sessions(conn: Connection, session_id: str | None, project_id: str | None) -> list[SessionInfo]:
    where, params = "", {}
    if session_id is not None:
        where, params = " WHERE id = :id", {"id": session_id}
    elif project_id is not None:
        where, params = " WHERE project_id = :pid", {"pid": project_id}
    return [SessionInfo(**{**d, "meta": d["meta"] or {}})
            for d in _rows(conn, SessionRow, where + " ORDER BY updated_at DESC, id", params)]


def _messages(conn: Connection, session_id: str) -> list[StoredMessage]:
    out = [StoredMessage(**d)
           for d in _rows(conn, MessageRow, " WHERE session_id = :sid ORDER BY id", {"sid": session_id})]
    _with_inputs(conn, [b for m in out if isinstance(m.content, list) for b in m.content])
    restore_images(conn, out)
    return out


def _stats(conn: Connection, path: Path | None) -> StoreStats:
    one = lambda sql: conn.execute(text(sql)).scalar() or 0  # noqa: E731
    by_state = {r[0]: r[1] for r in conn.execute(text("SELECT state, count(*) FROM tool_calls GROUP BY state"))}
    by_tool = {r[0]: r[1] for r in conn.execute(text(
        "SELECT name, count(*) AS n FROM tool_calls GROUP BY name ORDER BY n DESC, name LIMIT 50"))}
    size = None
    if path is not None:
        size = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
    elif conn.dialect.name == "postgresql":
        size = one("SELECT pg_database_size(current_database())")
    return StoreStats(
        records=sum(by_state.values()), by_state=by_state, by_tool=by_tool,
        entries=one("SELECT count(*) FROM audit_entries"), events=one("SELECT count(*) FROM events"),
        projects=one("SELECT count(*) FROM projects"), sessions=one("SELECT count(*) FROM sessions"),
        messages=one("SELECT count(*) FROM messages"), last_entry_seq=one("SELECT max(seq) FROM audit_entries"),
        last_event_seq=one("SELECT max(seq) FROM events"), size_bytes=size,
    )
