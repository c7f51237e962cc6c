"""The witness of each database's signed chain head, outside the database: one small JSON file per database
in the installation's witness folder, replaced atomically (temp file + rename) and never through a link."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

WITNESS_VERSION = 1


def witness_name(where: str, key_id: str) -> str:
    """The file name of a database's witness by one key: a digest of the database's resolved path (or URL)
    and the key. One per key, so a CLI without the keyring (a file key) never overwrites the window's."""
    digest = hashlib.sha256(where.encode("utf-8") + b"\0" + key_id.encode("utf-8")).hexdigest()
    return f"head-{digest[:32]}.json"


def db_identity(path: Path | None, url: str) -> str:
    """What names a database for its witness: the resolved SQLite file, else the URL without a password."""
    return str(path.resolve()) if path is not None else url


def _open_dir(folder: Path, create: bool) -> int | None:
    if create:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        return os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None


def write_witness(folder: Path, where: str, key_id: str, fields: dict[str, Any]) -> None:
    """Replace `where`'s witness with `fields` (the signed head and its public key), atomically."""
    body = json.dumps({"version": WITNESS_VERSION, "db": where, **fields}, sort_keys=True).encode("utf-8")
    dfd = _open_dir(folder, create=True)
    assert dfd is not None
    name = witness_name(where, key_id)
    tmp = f".{name}.{os.getpid()}.{os.urandom(6).hex()}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dfd)
        try:
            # No fsync: it would cost the writer ~5 ms per witness. A crash may leave the file empty (ext4 and
            # xfs flush data before a replacing rename); read_witness takes that as absent, as a deletion is.
            os.write(fd, body)
        finally:
            os.close(fd)
        # rename() replaces a link planted at the name, it never writes through it.
        os.replace(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dfd)
        raise
    finally:
        os.close(dfd)


def read_witness(folder: Path, where: str, key_id: str) -> tuple[dict[str, Any] | None, str]:
    """`where`'s witness as a dict, or (None, why) when there is none or it cannot be read."""
    try:
        dfd = _open_dir(folder, create=False)
    except OSError as exc:  # a link planted at the folder, or no permission
        return None, f"unreadable (its folder {folder}: {exc.strerror})"
    if dfd is None:
        return None, "absent"
    try:
        fd = os.open(witness_name(where, key_id), os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
    except FileNotFoundError:
        return None, "absent"
    except OSError as exc:
        return None, f"unreadable ({exc.strerror})"
    finally:
        os.close(dfd)
    try:
        with os.fdopen(fd, "rb") as f:
            raw = f.read(1 << 16)
    except OSError as exc:  # a folder planted at the name
        return None, f"unreadable ({exc.strerror})"
    if not raw.strip():
        return None, "absent"
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        return None, "damaged (not JSON)"
    if not isinstance(data, dict) or data.get("db") != where:
        return None, "damaged (not this database's witness)"
    return data, ""
