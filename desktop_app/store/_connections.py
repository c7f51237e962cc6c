"""Database URLs and SQLAlchemy engines for the store: SQLite connections get WAL, busy_timeout, foreign
keys and an explicit BEGIN."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from sqlalchemy import create_engine, event
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import NullPool, QueuePool

from desktop_app.core import StoreError

from ._checkpoint import WRITER_AUTOCHECKPOINT_PAGES
from ._db_errors import driver_missing, safe_url

_PRAGMA_NAME = re.compile(r"^[a-z_]+$")
_URL_HINT = "pass a path to a SQLite file, or a URL such as sqlite:////abs/path/agent-desk.db"


def to_url(url_or_path: str | Path) -> str:
    """A SQLAlchemy URL for `url_or_path`; a plain path means a SQLite file. A SQLite file's folder is
    created here, so callers never normalise paths or make folders themselves."""
    text = str(url_or_path)
    if "://" not in text:
        path = Path(text).expanduser().resolve()
        _make_folder(path)
        return f"sqlite:///{path}"
    try:
        url = make_url(text)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise StoreError(f"{safe_url(text)!r} is not a database URL", hint=_URL_HINT) from None
    if url.get_backend_name() == "sqlite":
        db = url.database or ""
        if db in ("", ":memory:") or db.startswith("file::memory:"):
            raise StoreError("the audit store needs a database file, not an in-memory SQLite database",
                             hint="pass a path such as ~/.local/share/agent-desk/audit.db")
        uri = str(url.query.get("uri", "")).lower() in ("true", "1") and db.startswith("file:")
        _make_folder(Path(unquote(urlsplit(db).path) if uri else db).expanduser())  # a URI's file, not "file:/…"
    return text


def _make_folder(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder for the audit database {path}: {exc}") from exc


def _server_args(url: URL, busy_timeout_ms: int) -> dict[str, Any]:
    """PostgreSQL's connection settings, unless the URL sets them: a server that does not answer fails in
    10 s, and a lock held by another session fails the write after the busy timeout, as on SQLite."""
    if url.get_backend_name() != "postgresql":
        return {}
    args: dict[str, Any] = {}
    if "connect_timeout" not in url.query:
        args["connect_timeout"] = 10
    if "options" not in url.query:
        args["options"] = f"-c lock_timeout={int(busy_timeout_ms)}"
    return args


def _as_sqlite_hands_back(dbapi_conn: Any, _rec: Any) -> None:
    """PostgreSQL's values read back as SQLite's: JSON columns as their stored text (PostgreSQL's `json`
    keeps it verbatim) and booleans as 0/1, so a row's digest and every comparison of stored values are the
    same on both databases."""
    from psycopg.adapt import Loader
    from psycopg.types.string import TextLoader

    class BoolAsInt(Loader):
        def load(self, data: Any) -> int:
            return int(bytes(data) in (b"t", b"\x01"))

    dbapi_conn.adapters.register_loader("json", TextLoader)
    dbapi_conn.adapters.register_loader("bool", BoolAsInt)


def make_engine(
    url: str, *, writer: bool, busy_timeout_ms: int, pragmas: dict[str, Any] | None = None, pool_size: int = 4
) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        try:
            engine = create_engine(url, poolclass=NullPool if writer else QueuePool, pool_pre_ping=True,
                                   connect_args=_server_args(parsed, busy_timeout_ms))
        except (NoSuchModuleError, ImportError) as exc:  # an unknown dialect, or its driver is missing
            raise driver_missing(url, exc) from None
        if engine.dialect.name == "postgresql" and engine.dialect.driver == "psycopg":
            event.listen(engine, "connect", _as_sqlite_hands_back)
        return engine
    extra = dict(pragmas or {})
    for name, value in extra.items():
        if not _PRAGMA_NAME.match(name) or not re.match(r"^[\w.-]+$", str(value)):
            raise StoreError(f"invalid SQLite pragma {name}={value!r}")
    try:
        engine = create_engine(
            url,
            poolclass=NullPool if writer else QueuePool,
            **({} if writer else {"pool_size": pool_size, "max_overflow": 2}),
            connect_args={"timeout": busy_timeout_ms / 1000.0, "check_same_thread": False},
        )
    except (NoSuchModuleError, ImportError) as exc:  # sqlite+nosuch://: an unknown SQLite driver
        raise StoreError(f"cannot use the database {safe_url(url)}: {exc}", hint=_URL_HINT) from exc

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _rec: Any) -> None:
        # Driver autocommit: the "begin" hook below issues BEGIN itself, so SQLAlchemy's
        # transactions map 1:1 onto SQLite's and the write lock is taken up front.
        dbapi_conn.isolation_level = None
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        cur.execute("PRAGMA journal_mode = WAL")
        cur.execute("PRAGMA foreign_keys = ON")
        cur.execute("PRAGMA synchronous = NORMAL")
        if writer:  # its checkpoints are the Checkpointer's; this one only if that falls behind
            cur.execute(f"PRAGMA wal_autocheckpoint = {WRITER_AUTOCHECKPOINT_PAGES}")
        for name, value in extra.items():
            cur.execute(f"PRAGMA {name} = {value}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")

    return engine
