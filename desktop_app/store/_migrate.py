"""Run the store's Alembic migrations from code, with a Config built here (no alembic.ini needed)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

try:
    import fcntl
except ImportError:  # Windows has no flock: there SQLite's own lock is all there is
    fcntl = None  # type: ignore[assignment]

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import text
from sqlalchemy.engine import Connection

MIGRATIONS = Path(__file__).resolve().parent / "migrations"


def include_name(name: str | None, type_: str, parent_names: object) -> bool:
    """False for what the migrations make by raw DDL for one database's full-text search, which the models
    do not declare: SQLite's FTS5 table and its shadow tables, PostgreSQL's tsvector column and its index."""
    if type_ == "table" and name and name.startswith("tool_calls_fts"):
        return False
    return not (type_ in ("column", "index") and name in ("search_vector", "ix_tool_calls_search_vector"))


def alembic_config(url: str, connection: Connection | None = None) -> Config:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    cfg.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


# Desks that open one PostgreSQL database at the same moment migrate it one at a time: the second
# waits here, then finds the schema current. SQLite serialises them with its own write lock.
MIGRATE_LOCK_KEY = 0x6167656E74646D31  # "agentdm1"


def upgrade(connection: Connection, url: str, revision: str = "head") -> None:
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": MIGRATE_LOCK_KEY})
    with _sqlite_migration_lock(connection):
        command.upgrade(alembic_config(url, connection), revision)
        if connection.in_transaction():
            connection.commit()  # releases the lock with the migration's transaction


@contextlib.contextmanager
def _sqlite_migration_lock(connection: Connection) -> Iterator[None]:
    """Desks that open one new SQLite file at the same moment migrate it one at a time. SQLite's own lock is
    not enough: the driver starts no transaction for a read or for DDL, so two desks can both read revision
    N and both run N+1. An flock on the database file (independent of SQLite's fcntl locks) serialises them:
    the second then finds the schema current."""
    path = connection.engine.url.database if connection.dialect.name == "sqlite" else None
    if fcntl is None or not path or path == ":memory:" or not os.path.isfile(path):
        yield
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # and with it the flock
