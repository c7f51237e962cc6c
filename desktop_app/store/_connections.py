"""Database URLs and SQLAlchemy engines for the store: SQLite connections get WAL, busy_timeout, foreign
keys and an explicit BEGIN."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, NoSuchModuleError
from sqlalchemy.pool import NullPool, QueuePool

from desktop_app.core import StoreError

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
    except ArgumentError as exc:
        raise StoreError(f"{text!r} is not a database URL: {exc}", hint=_URL_HINT) from exc
    if url.get_backend_name() == "sqlite":
        db = url.database or ""
        if db in ("", ":memory:") or db.startswith("file::memory:"):
            raise StoreError("the audit store needs a database file, not an in-memory SQLite database",
                             hint="pass a path such as ~/.local/share/agent-desk/audit.db")
        _make_folder(Path(db).expanduser())
    return text


def _make_folder(path: Path) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder for the audit database {path}: {exc}") from exc


def _as_sqlite_hands_back(dbapi_conn: Any, _rec: Any) -> None:
    """PostgreSQL's values read back as SQLite's: JSON columns as their stored text (PostgreSQL's `json`
    keeps it verbatim) and booleans as 0/1, so a row's digest and every comparison of stored values are the
    same on both databases."""
    # A stand-in for pgstore's identical function (its commit d844e98): verify on the shared chain needs it.
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
            engine = create_engine(url, poolclass=NullPool if writer else QueuePool, pool_pre_ping=True)
        except (NoSuchModuleError, ImportError) as exc:  # an unknown dialect, or its driver is missing
            raise StoreError(f"cannot use the database {parsed.render_as_string(hide_password=True)}: {exc}",
                             hint=_URL_HINT) from exc
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
        raise StoreError(f"cannot use the database {parsed.render_as_string(hide_password=True)}: {exc}",
                         hint=_URL_HINT) from exc

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
        for name, value in extra.items():
            cur.execute(f"PRAGMA {name} = {value}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writer else "BEGIN")

    return engine
