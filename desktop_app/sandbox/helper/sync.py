"""A synced workspace's side in the engine (run by the helper of the sync container, which alone mounts the
control folders read-write): the manifest of the volume by digest, batched reads, and writes, links and
deletions applied only when the path still holds what the desk last saw (compare and swap)."""

import base64
import errno
import hashlib
import os
import stat as _stat

from .errors import HelperError
from .workspace import _open_dir_beneath, _write_all

_CHUNK = 1 << 20
_RFLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK


def _digest_fd(fd):
    h = hashlib.sha256()
    while True:
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return h.hexdigest()
        h.update(chunk)


def entry_of(dfd, name, st, cache, rel):
    """[type, mode, size, digest or link target] of one name in the folder `dfd`; a file is hashed only when
    its (inode, size, mtime, ctime) moved since the last manifest."""
    mode = _stat.S_IMODE(st.st_mode)
    if _stat.S_ISLNK(st.st_mode):
        return ["l", 0, 0, os.readlink(name, dir_fd=dfd)]
    if _stat.S_ISDIR(st.st_mode):
        return ["d", mode, 0, ""]
    if not _stat.S_ISREG(st.st_mode):
        return ["o", mode, st.st_size, ""]
    key = (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    hit = cache.get(rel)
    if hit is not None and hit[0] == key:
        return ["f", mode, st.st_size, hit[1]]
    fd = os.open(name, _RFLAGS, dir_fd=dfd)
    try:
        digest = _digest_fd(fd)
    finally:
        os.close(fd)
    cache[rel] = (key, digest)
    return ["f", mode, st.st_size, digest]


def manifest(ws):
    """The workspace's manifest (see `walk_manifest`), its digests cached on the workspace between calls."""
    return walk_manifest(ws.root, ws.__dict__.setdefault("sync_cache", {}))


def walk_manifest(root, cache):
    """{relative path: [type, mode, size, digest or target]} of everything under `root`; folders are
    walked from fds with O_NOFOLLOW, so a folder swapped for a link while walking is skipped, never followed.
    The host's side of a sync walks its folder with this same function."""
    out, seen = {}, set()
    stack = [("", os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC))]
    while stack:
        prefix, dfd = stack.pop()
        try:
            for name in os.listdir(dfd):
                rel = prefix + name
                try:
                    st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
                    out[rel] = entry_of(dfd, name, st, cache, rel)
                    if out[rel][0] == "d":
                        stack.append((rel + "/", os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
                                                         | os.O_CLOEXEC, dir_fd=dfd)))
                except OSError:
                    out.pop(rel, None)  # gone or swapped meanwhile: the next manifest sees what is there
                seen.add(rel)
        finally:
            os.close(dfd)
    for rel in [r for r in cache if r not in seen]:
        del cache[rel]
    return out


def _parts(rel):
    parts = str(rel).split("/")
    if not rel or str(rel).startswith("/") or any(p in ("", ".", "..") for p in parts) or "\x00" in str(rel):
        raise HelperError(f"{rel!r}: not a plain path beneath the workspace")
    return parts


def _current(dfd, name, cache_rel=None):
    """What `name` in `dfd` holds now, in the manifest's shape (None when absent)."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    return entry_of(dfd, name, st, {}, cache_rel)


def read(ws, items):
    """[{path, offset, limit}] -> [{path, data (base64), eof}] of regular files, opened without following
    links; a path that is no longer a regular file reads as {path, gone: true}."""
    out = []
    for it in items:
        parts = _parts(it["path"])
        try:
            dfd = _open_dir_beneath(ws, parts[:-1])
            try:
                fd = os.open(parts[-1], _RFLAGS, dir_fd=dfd)
            finally:
                os.close(dfd)
        except OSError:
            out.append({"path": it["path"], "gone": True})
            continue
        try:
            if not _stat.S_ISREG(os.fstat(fd).st_mode):
                out.append({"path": it["path"], "gone": True})
                continue
            os.lseek(fd, int(it.get("offset", 0)), os.SEEK_SET)
            limit = int(it.get("limit", 8 * _CHUNK))
            data = b""
            while len(data) < limit:
                chunk = os.read(fd, limit - len(data))
                if not chunk:
                    break
                data += chunk
            out.append({"path": it["path"], "data": base64.b64encode(data).decode("ascii"),
                        "eof": len(data) < limit})
        finally:
            os.close(fd)
    return out


def _apply_one(ws, it):
    parts = _parts(it["path"])
    try:
        dfd = _open_dir_beneath(ws, parts[:-1], make_dirs=it["op"] != "delete")
    except FileNotFoundError:  # only a delete does not make the folders: what it would remove is gone already
        return "ok"
    except (OSError, HelperError) as exc:
        return f"a folder on the way is a link or not a folder ({exc})"
    try:
        now = _current(dfd, parts[-1])
        if now != it.get("expect") and not (now and it.get("expect") and now[0] == "d" == it["expect"][0]):
            return "changed"  # the sandbox changed it since the desk looked: a conflict, nothing done
        _do(dfd, parts[-1], it, now)
        return "ok"
    except OSError as exc:
        return f"{exc.strerror or exc}"
    finally:
        os.close(dfd)


def _do(dfd, name, it, now):
    op = it["op"]
    if op == "delete":
        if now is None:
            return
        if now[0] == "d":
            os.rmdir(name, dir_fd=dfd)
        else:
            os.unlink(name, dir_fd=dfd)
        return
    if op == "mkdir":
        if now is None:
            os.mkdir(name, int(it.get("mode", 0o755)) & 0o777, dir_fd=dfd)
        return
    tmp = f".{name[:64]}.agent-desk-sync-{os.urandom(8).hex()}.tmp"
    if op == "link":
        os.symlink(it["target"], tmp, dir_fd=dfd)
    else:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dfd)
        try:
            _write_all(fd, base64.b64decode(it["data"]))
            os.fchmod(fd, int(it.get("mode", 0o644)) & 0o777)
        finally:
            os.close(fd)
    try:
        if now is not None and now[0] == "d":
            raise OSError(errno.EISDIR, "a folder is in the way")
        os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dfd)
        except OSError:
            pass
        raise


def apply(ws, items):
    """[{op: put|link|mkdir|delete, path, expect, data|target, mode}] -> {path: "ok" | why not}. Each is
    done only when the path holds `expect` (the manifest entry the desk saw; None: absent)."""
    cache = ws.__dict__.setdefault("sync_cache", {})
    out = {}
    for it in items:
        out[it["path"]] = _apply_one(ws, it)
        cache.pop(it["path"], None)
    return out


def sync_op(ws, op, a):
    if op == "sync_manifest":
        return manifest(ws)
    if op == "sync_read":
        return read(ws, a["items"])
    return apply(ws, a["items"])
