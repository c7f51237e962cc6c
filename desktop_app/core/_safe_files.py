"""Host-side file access beneath a project folder that never follows a link the sandbox may have planted:
every component is opened relative to its parent's fd with O_NOFOLLOW, and writes go through a random
O_EXCL temp file renamed in place (a link at the final name is replaced, never written through)."""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path

from ._errors import ConfigError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_TMP_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO planted at the name must not hang the desk's open(); it is then refused as not a file.
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
_LINK_ERRNOS = (errno.ELOOP, errno.ENOTDIR, errno.EMLINK)  # EMLINK: O_NOFOLLOW on a link, on BSDs
DEFAULT_SAFE_READ_LIMIT = 1 << 20


def _components(rel: str | os.PathLike[str]) -> list[str]:
    """The names of a relative path; absolute paths, `..`, `.` and empty names are refused."""
    text = os.fspath(rel)
    parts = text.split("/")
    if not text or text.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ConfigError(f"{text!r} is not a plain relative path beneath the project")
    return parts


def _refusal(root: Path, parts: list[str], err: OSError, what: str) -> ConfigError:
    where = root.joinpath(*parts)
    if err.errno in _LINK_ERRNOS:
        return ConfigError(
            f"refusing to {what} {where}: it, or a folder on the way, is a symbolic link or not a folder",
            hint="remove the link (the sandbox can create links in the project) and try again",
        )
    return ConfigError(f"cannot {what} {where}: {err.strerror or err}")


def _open_root(root: Path, what: str) -> int:
    # The project folder itself is the person's choice (resolved when the project was added): followed.
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except FileNotFoundError as e:
        raise ConfigError(f"cannot {what} in {root}: the project folder does not exist",
                          hint="add the project again with its current folder") from e
    except OSError as e:
        raise ConfigError(f"cannot {what} beneath {root}: {e.strerror or e}") from e


def _walk(root: Path, rootfd: int, dirs: list[str], *, create: bool, what: str) -> int | None:
    """An fd of `root/dirs...`, each component opened without following links (made when `create`);
    None when a component is missing and not created. The caller closes the fd."""
    fd = os.dup(rootfd)
    for i, name in enumerate(dirs):
        try:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    os.close(fd)
                    return None
                try:
                    os.mkdir(name, 0o755, dir_fd=fd)  # mkdirat never follows a link at `name`
                except FileExistsError:
                    pass  # made meanwhile: the open below still refuses a link
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
        except OSError as e:
            os.close(fd)
            raise _refusal(root, dirs[: i + 1], e, what) from e
        os.close(fd)
        fd = nxt
    return fd


def make_dirs_beneath(root: str | os.PathLike[str], rel: str | os.PathLike[str]) -> Path:
    """Make `root/rel` and its parents as folders, refusing a link at any component (ConfigError)."""
    base = Path(root)
    parts = _components(rel)
    rootfd = _open_root(base, "make a folder")
    try:
        fd = _walk(base, rootfd, parts, create=True, what="make the folder")
        assert fd is not None
        os.close(fd)
    finally:
        os.close(rootfd)
    return base.joinpath(*parts)


def write_beneath(root: str | os.PathLike[str], rel: str | os.PathLike[str], data: bytes | str, *,
                  mode: int = 0o644, durable: bool = True) -> Path:
    """Write `data` to `root/rel` atomically without following links: parents made with mkdirat, a random
    O_EXCL temp file beside the target, fsync, then renameat over the final name (a link there is
    replaced). ConfigError names the path when a component is a link or the write fails. `durable=False`
    leaves out the fsyncs, for a caller that writes many files and flushes them together afterwards."""
    base = Path(root)
    parts = _components(rel)
    body = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    rootfd = _open_root(base, "write")
    try:
        d = _walk(base, rootfd, parts[:-1], create=True, what="write")
        assert d is not None
        try:
            _write_in(base, parts, d, body, mode, durable)
        finally:
            os.close(d)
    finally:
        os.close(rootfd)
    return base.joinpath(*parts)


def _write_in(base: Path, parts: list[str], d: int, body: bytes, mode: int, durable: bool = True) -> None:
    name = parts[-1]
    tmp, fd = _create_temp(base, parts, d, mode)
    try:
        try:
            view = memoryview(body)
            while view:
                view = view[os.write(fd, view):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=d, dst_dir_fd=d)
    except OSError as e:
        _unlink_quietly(tmp, d)
        raise _refusal(base, parts, e, "write") from e
    except BaseException:
        _unlink_quietly(tmp, d)
        raise
    if durable:
        os.fsync(d)  # the rename itself is durable


def _create_temp(base: Path, parts: list[str], d: int, mode: int) -> tuple[str, int]:
    """A new temp file with a random name in the target's folder; O_EXCL refuses anything planted there."""
    last: OSError | None = None
    for _ in range(8):
        tmp = f".{parts[-1][:64]}.{secrets.token_hex(8)}.tmp"
        try:
            return tmp, os.open(tmp, _TMP_FLAGS, mode, dir_fd=d)
        except FileExistsError as e:  # a guessed name (or a link) is already there: draw again
            last = e
        except OSError as e:
            raise _refusal(base, parts, e, "write") from e
    raise _refusal(base, parts, last or OSError(errno.EEXIST, "no free temp name"), "write")


def _unlink_quietly(name: str, d: int) -> None:
    try:
        os.unlink(name, dir_fd=d)
    except OSError:
        pass


def read_beneath(root: str | os.PathLike[str], rel: str | os.PathLike[str], *,
                 limit: int = DEFAULT_SAFE_READ_LIMIT) -> bytes | None:
    """The bytes of the regular file `root/rel`, or None when it (or a folder on the way) does not exist.
    A link at any component, a FIFO, a device or a file over `limit` bytes is a ConfigError naming the path."""
    base = Path(root)
    parts = _components(rel)
    if not base.exists():
        return None  # no folder, no file: the sandbox reports the missing folder when it starts
    rootfd = _open_root(base, "read")
    try:
        d = _walk(base, rootfd, parts[:-1], create=False, what="read")
        if d is None:
            return None
        try:
            return _read_in(base, parts, d, limit)
        finally:
            os.close(d)
    finally:
        os.close(rootfd)


def _read_in(base: Path, parts: list[str], d: int, limit: int) -> bytes | None:
    try:
        fd = os.open(parts[-1], _READ_FLAGS, dir_fd=d)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise _refusal(base, parts, e, "read") from e
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"refusing to read {base.joinpath(*parts)}: it is not a regular file")
        chunks: list[bytes] = []
        size = 0
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:
                raise ConfigError(f"refusing to read {base.joinpath(*parts)}: it is over {limit} bytes")
        return b"".join(chunks)
    finally:
        os.close(fd)



def remove_beneath(root: str | os.PathLike[str], rel: str | os.PathLike[str]) -> bool:
    """Remove the file, link or empty folder `root/rel` (a link itself, never what it points to), its
    folders walked without following links. False when it was not there; ConfigError when a folder on the
    way is a link, or a folder to remove is not empty."""
    base = Path(root)
    parts = _components(rel)
    rootfd = _open_root(base, "remove")
    try:
        d = _walk(base, rootfd, parts[:-1], create=False, what="remove")
        if d is None:
            return False
        try:
            st = os.stat(parts[-1], dir_fd=d, follow_symlinks=False)
            if stat.S_ISDIR(st.st_mode):
                os.rmdir(parts[-1], dir_fd=d)
            else:
                os.unlink(parts[-1], dir_fd=d)
        except FileNotFoundError:
            return False
        except OSError as e:
            raise _refusal(base, parts, e, "remove") from e
        finally:
            os.close(d)
    finally:
        os.close(rootfd)
    return True


def symlink_beneath(root: str | os.PathLike[str], rel: str | os.PathLike[str], target: str) -> Path:
    """Make `root/rel` a symbolic link to `target` (the caller judged where it points): made under a random
    name beside it and renamed over the final name, its folders walked and made without following links."""
    base = Path(root)
    parts = _components(rel)
    rootfd = _open_root(base, "link")
    try:
        d = _walk(base, rootfd, parts[:-1], create=True, what="link")
        assert d is not None
        tmp = f".{parts[-1][:64]}.{secrets.token_hex(8)}.tmp"
        try:
            os.symlink(target, tmp, dir_fd=d)
            os.replace(tmp, parts[-1], src_dir_fd=d, dst_dir_fd=d)
        except OSError as e:
            _unlink_quietly(tmp, d)
            raise _refusal(base, parts, e, "link") from e
        finally:
            os.close(d)
    finally:
        os.close(rootfd)
    return base.joinpath(*parts)


def list_beneath(root: str | os.PathLike[str], rel: str | os.PathLike[str]) -> list[tuple[str, bool]] | None:
    """The entries of the folder `root/rel` as (name, is_folder), sorted; None when it does not exist. A link
    on the way is a ConfigError; a link inside is listed as neither file nor folder the caller may follow
    (is_folder False, and read_beneath refuses it)."""
    base = Path(root)
    if not base.exists():
        return None
    rootfd = _open_root(base, "list")
    try:
        d = _walk(base, rootfd, _components(rel), create=False, what="list")
        if d is None:
            return None
        try:
            entries = []
            for name in sorted(os.listdir(d)):
                st = os.stat(name, dir_fd=d, follow_symlinks=False)
                entries.append((name, stat.S_ISDIR(st.st_mode)))
            return entries
        finally:
            os.close(d)
    finally:
        os.close(rootfd)


def set_mode_beneath(root: str | os.PathLike[str], rel: str | os.PathLike[str], mode: int) -> None:
    """Set the permission bits of the regular file `root/rel` exactly (no umask), its folders walked and the
    file opened without following links (ConfigError when one is a link or the file is not regular)."""
    base = Path(root)
    parts = _components(rel)
    rootfd = _open_root(base, "change the mode of")
    try:
        d = _walk(base, rootfd, parts[:-1], create=False, what="change the mode of")
        if d is None:
            raise ConfigError(f"cannot change the mode of {base.joinpath(*parts)}: it does not exist")
        try:
            fd = os.open(parts[-1], _READ_FLAGS, dir_fd=d)
        except OSError as e:
            raise _refusal(base, parts, e, "change the mode of") from e
        finally:
            os.close(d)
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ConfigError(f"refusing to change the mode of {base.joinpath(*parts)}: not a regular file")
            os.fchmod(fd, mode)
        finally:
            os.close(fd)
    finally:
        os.close(rootfd)
