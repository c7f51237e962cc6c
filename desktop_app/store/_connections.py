"""Engines for the store: SQLite connections get WAL, busy_timeout, foreign keys and an explicit BEGIN."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import NullPool, QueuePool

from desktop_app.core import StoreError

_PRAGMA_NAME = re.compile(r"^[a-z_]+$")


def to_url(url_or_path: str | Path) -> str:
    """A SQLAlchemy URL for `url_or_path`; a plain path means a SQLite file (parents are created)."""
    text = str(url_or_path)
    if "://" in text:
        url = make_url(text)
        if url.get_backend_name() == "sqlite":
            db = url.database or ""
            if db in ("", ":memory:") or db.startswith("file::memory:"):
                raise StoreError("the audit store needs a database file, not an in-memory SQLite database",
                                 hint="pass a path such as ~/.local/share/agent-desk/audit.db")
            Path(db).expanduser().parent.mkdir(parents=True, exist_ok=True)
        return text
    path = Path(text).expanduser().resolve()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(f"cannot create the folder for the audit database {path}: {exc}") from exc
    return f"sqlite:///{path}"


def make_engine(
    url: str, *, writer: bool, busy_timeout_ms: int, pragmas: dict[str, Any] | None = None, pool_size: int = 4
) -> Engine:
    if make_url(url).get_backend_name() != "sqlite":
        return create_engine(url, poolclass=NullPool if writer else QueuePool, pool_pre_ping=True)
    extra = dict(pragmas or {})
    for name, value in extra.items():
        if not _PRAGMA_NAME.match(name) or not re.match(r"^[\w.-]+$", str(value)):
            raise StoreError(f"invalid SQLite pragma {name}={value!r}")
    engine = create_engine(
        url,
        poolclass=NullPool if writer else QueuePool,
        **({} if writer else {"pool_size": pool_size, "max_overflow": 2}),
        connect_args={"timeout": busy_timeout_ms / 1000.0, "check_same_thread": False},
    )

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
