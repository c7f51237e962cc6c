"""The workspace the helper serves (paths mapped and confined to its root) and the file operations on it."""

import errno
import os
import stat as _stat

from .errors import HelperError, OutsideWorkspace


def _realpath(joined, path):
    """os.path.realpath, with a path that moves under it (a link removed between its lstat and its
    readlink, which Python 3.11 lets through as FileNotFoundError) refused clearly: nothing was done."""
    try:
        return os.path.realpath(joined)
    except OSError as exc:
        raise HelperError(f"{path}: the path changed while it was being resolved ({exc.strerror}); "
                          "nothing was done") from None

MAX_WRITE = 100 * 1024 * 1024
READ_LIMIT = 10 * 1024 * 1024


def _os_error(exc, shown):
    reasons = {
        errno.ENOENT: "no such file or directory",
        errno.EISDIR: "is a directory",
        errno.ENOTDIR: "not a directory",
        errno.EACCES: "permission denied",
        errno.EPERM: "operation not permitted",
        errno.EROFS: "the workspace is read-only",
        errno.ELOOP: "too many levels of symbolic links",
        errno.ENOSPC: "no space left on device",
        errno.EDQUOT: "disk quota exceeded",
    }
    return HelperError(f"{shown}: {reasons.get(exc.errno) or exc.strerror or str(exc)}")


class Workspace:
    """Maps workspace paths (relative, or absolute under the alias) to real paths, refusing any that
    resolve outside the root in this machine's own view, symlinks included."""

    def __init__(self, root, alias="/workspace"):
        self.root = os.path.realpath(root)
        self.alias = alias.rstrip("/") or "/"
        self.searcher = None  # what runs fs_grep and fs_glob (helper.search); set by who serves the workspace

    def _inside(self, real):
        return real == self.root or real.startswith(self.root.rstrip("/") + "/")

    def _joined(self, path):
        path = "." if path in (None, "") else str(path)
        if "\x00" in path:
            raise HelperError(f"invalid path (NUL byte): {path!r}")
        if os.path.isabs(path):
            path = "/" + path.lstrip("/")  # the kernel reads //workspace as /workspace
            for prefix in (self.alias, self.root):
                if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                    return os.path.join(self.root, path[len(prefix) :].lstrip("/"))
            raise OutsideWorkspace(f"{path} is outside the workspace ({self.alias})")
        return os.path.join(self.root, path)

    def resolve(self, path):
        real = _realpath(self._joined(path), path)
        if not self._inside(real):
            raise OutsideWorkspace(
                f"{path} resolves outside the workspace ({self.alias}); paths and symlinks must stay inside it"
            )
        return real

    def real_path(self, path):
        """The path a write of `path` would really touch, in the workspace's view (`/workspace/...`):
        `.`, `..`, `//` and symlinks resolved as the kernel would, a missing tail through its existing
        parent. An absolute path outside the alias is resolved in this machine's own view, so a symlink
        from elsewhere into the workspace is followed; a path that ends outside raises."""
        try:
            joined = self._joined(path)
        except OutsideWorkspace:
            joined = "/" + str(path).lstrip("/")
        real = _realpath(joined, path)
        if not self._inside(real):
            raise OutsideWorkspace(f"{path} resolves outside the workspace ({self.alias})")
        return self.shown(real)

    def rel(self, real):
        r = os.path.relpath(real, self.root)
        return "." if r == "." else r

    def shown(self, real):
        rel = self.rel(real)
        return self.alias if rel == "." else self.alias.rstrip("/") + "/" + rel


def _type_of(mode):
    if _stat.S_ISREG(mode):
        return "file"
    if _stat.S_ISDIR(mode):
        return "dir"
    if _stat.S_ISLNK(mode):
        return "symlink"
    return "other"


def _stat_dict(ws, real, st):
    return {
        "path": ws.rel(real),
        "type": _type_of(st.st_mode),
        "size": st.st_size,
        "mtime": st.st_mtime,
        "mode": _stat.S_IMODE(st.st_mode),
    }


def _open_regular(ws, real):
    """An fd of the regular file `real`, opened relative to its folder's fd (see `_open_dir_beneath`):
    a parent swapped for a symlink after `resolve` cannot make the read leave the workspace."""
    parts = _parts(ws, real)
    if not parts:
        raise HelperError(f"{ws.alias}: a directory")
    try:
        dfd = _open_dir_beneath(ws, parts[:-1])
        try:
            fd = os.open(parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        raise _os_error(exc, ws.shown(real)) from None
    st = os.fstat(fd)
    if not _stat.S_ISREG(st.st_mode):
        os.close(fd)
        what = "a directory" if _stat.S_ISDIR(st.st_mode) else "not a regular file"
        raise HelperError(f"{ws.shown(real)}: {what}")
    return fd, st


def fs_read(ws, path, offset=0, limit=READ_LIMIT):
    """Bytes [offset, offset+limit) of a regular file."""
    real = ws.resolve(path)
    fd, st = _open_regular(ws, real)
    try:
        if offset:
            os.lseek(fd, int(offset), os.SEEK_SET)
        parts, left = [], max(0, int(limit))
        while left > 0:
            b = os.read(fd, min(left, 1 << 20))
            if not b:
                break
            parts.append(b)
            left -= len(b)
        return b"".join(parts), st.st_size
    finally:
        os.close(fd)


def fs_read_text(ws, path, limit=READ_LIMIT):
    real = ws.resolve(path)
    fd, st = _open_regular(ws, real)
    try:
        if st.st_size > limit:
            raise HelperError(
                f"{ws.shown(real)} is {st.st_size} bytes, over the {limit}-byte limit for reading as text;"
                " read a range instead"
            )
        parts = []
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            parts.append(b)
            if sum(len(p) for p in parts) > limit:
                raise HelperError(f"{ws.shown(real)} grew over the {limit}-byte limit while reading")
        return b"".join(parts).decode("utf-8", "replace")
    finally:
        os.close(fd)


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _parts(ws, real):
    """The components of `real` below the root (which `ws.resolve` made sure it is under)."""
    rel = ws.rel(real)
    return [] if rel == "." else [p for p in rel.split("/") if p not in ("", ".")]


def _open_dir_beneath(ws, parts, make_dirs=False):
    """An fd of the folder `parts` below the root, walked one component at a time with O_NOFOLLOW
    relative to the fd before it: a component that is (or is swapped for) a symlink fails the walk
    instead of leading it anywhere, so what is opened is always inside the root."""
    fd = os.open(ws.root, _DIR_FLAGS)
    depth = 0  # components opened so far: the error names the one that failed
    try:
        for name in parts:
            if name == "..":
                raise OutsideWorkspace(f"{ws.alias}/{'/'.join(parts)}: '..' in a resolved path")
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not make_dirs:
                    raise
                try:
                    os.mkdir(name, 0o777, dir_fd=fd)
                except FileExistsError:
                    pass  # made by someone else in the meantime: the open below judges what it is
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
            depth += 1
        return fd
    except BaseException as exc:
        os.close(fd)
        if isinstance(exc, OSError) and exc.errno in (errno.ELOOP, errno.ENOTDIR):
            shown = ws.alias.rstrip("/") + "/" + "/".join(parts[: depth + 1])
            raise HelperError(
                f"{shown}: not a folder, or it became a symlink while the path was used; nothing was done"
            ) from None
        raise


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _write_in(dfd, name, data):
    """Replace `name` in the folder `dfd` atomically: an O_EXCL temp file of a random name in the same
    folder, renamed over it (a symlink at `name` is replaced, never followed). Keeps an existing mode."""
    mode = 0o644
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        if _stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a directory")
        if _stat.S_ISREG(st.st_mode):
            mode = _stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        pass
    tmp = f".{name[:100]}.agent-desk-{os.urandom(8).hex()}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dfd)
    try:
        try:
            _write_all(fd, data)
            os.fchmod(fd, mode)  # the umask may have narrowed it
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise
    return os.stat(name, dir_fd=dfd, follow_symlinks=False)


def fs_write(ws, path, data, make_dirs=True):
    """Write atomically (temp file + rename in the same folder), keeping an existing file's mode. No
    resolve-then-write-by-name: the folder is opened by an O_NOFOLLOW walk from the root, and the file
    made relative to that folder's fd, so a parent swapped for a symlink cannot send the write outside."""
    if len(data) > MAX_WRITE:
        raise HelperError(f"refusing to write {len(data)} bytes (limit {MAX_WRITE})")
    real = ws.resolve(path)
    if real == ws.root:
        raise HelperError(f"{ws.alias}: is a directory")
    parts = _parts(ws, real)
    try:
        dfd = _open_dir_beneath(ws, parts[:-1], make_dirs)
    except OSError as exc:
        raise _os_error(exc, ws.shown(os.path.dirname(real))) from None
    try:
        st = _write_in(dfd, parts[-1], data)
    except OSError as exc:
        raise _os_error(exc, ws.shown(real)) from None
    finally:
        os.close(dfd)
    return _stat_dict(ws, real, st)


def fs_stat(ws, path):
    real = ws.resolve(path)
    try:
        return _stat_dict(ws, real, os.lstat(real))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _os_error(exc, ws.shown(real)) from None


def fs_list(ws, path="."):
    real = ws.resolve(path)
    out = []
    try:
        with os.scandir(real) as it:
            for entry in it:
                try:
                    out.append(_stat_dict(ws, entry.path, entry.stat(follow_symlinks=False)))
                except OSError:
                    continue
    except OSError as exc:
        raise _os_error(exc, ws.shown(real)) from None
    out.sort(key=lambda d: d["path"])
    return out
