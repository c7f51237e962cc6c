"""Which database a command opens: the commands that read what was recorded (audit, sessions) refuse a SQLite
file that does not exist; those that record (run, and the project commands that store a consent or an image)
create it, and say so."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from ..core import ConfigError

if TYPE_CHECKING:
    from ..config import Settings
    from ..core import ProjectInfo
    from ..runtime import SqlStore


def db_source(args: argparse.Namespace) -> tuple[str, str]:
    """(the database URL or path, where it came from: --db, $AGENT_DESK_DB or the default)."""
    from ..config import default_db_url

    if getattr(args, "db", None):
        return args.db, "--db"
    if os.environ.get("AGENT_DESK_DB"):
        return os.environ["AGENT_DESK_DB"], "$AGENT_DESK_DB"
    return default_db_url(), "the default location"


def missing_file(args: argparse.Namespace) -> tuple[Path, str] | None:
    """The SQLite file the command would open, with its source, when that file does not exist."""
    from ..config import sqlite_file

    url, source = db_source(args)
    try:
        path = sqlite_file(url)
        return (path, source) if path is not None and not path.exists() else None
    except OSError:  # a name too long, a folder not readable: the store says what is wrong with it
        return None


async def open_existing_store(args: argparse.Namespace) -> SqlStore:
    """The store of a command that reads the record: a SQLite file that is not there is refused, never made
    (a mistyped --db would otherwise show an empty, valid-looking log)."""
    from ..runtime import open_store

    missing = missing_file(args)
    if missing is not None:
        path, source = missing
        raise ConfigError(
            f"There is no audit database at {path} (from {source}).",
            hint="Check the path given with --db or $AGENT_DESK_DB; a database is created only by "
                 "`agent-desk run` or the window, on first use.")
    return await open_store(db_source(args)[0])


async def open_or_create_store(args: argparse.Namespace) -> SqlStore:
    """The store of a command that records (run, a consent, a project's image): made when missing, and said."""
    from ..runtime import open_store

    missing = missing_file(args)
    if missing is not None:
        path, source = missing
        print(f"agent-desk: creating the audit database {path} (from {source})", file=sys.stderr)
    return await open_store(db_source(args)[0])


class OpenProject(NamedTuple):
    folder: Path
    settings: Settings
    store: SqlStore
    project: ProjectInfo


@contextlib.asynccontextmanager
async def project_of(args: argparse.Namespace) -> AsyncIterator[OpenProject]:
    """The project of `--project` for a command that records about it: its folder, the settings, the store
    (made when missing) and its row there; the store closed after."""
    from ..config import Settings
    from ..runtime import project_dir, project_for_dir

    folder = project_dir(args.project)
    settings = await asyncio.to_thread(Settings.load)
    store = await open_or_create_store(args)
    try:
        yield OpenProject(folder, settings, store, await project_for_dir(store, folder, settings=settings))
    finally:
        await store.close()
