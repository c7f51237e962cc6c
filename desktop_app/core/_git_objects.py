"""Git objects written by the desk itself into a checkpoint store: blobs and trees hashed in Python (git's own
object format, zlib) and kept as loose objects, and the workspace's tree held in memory folder by folder, so a
checkpoint after a few changes rewrites only the trees on their way to the root, with no git process."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

TREE_MODE = "40000"
LINK_MODE = "120000"
RACY_NS = 50_000_000  # a file changed this close to its hashing may change again with the same mtime


def object_id(kind: str, body: bytes) -> tuple[str, bytes]:
    """Git's id of an object (SHA-1 over its header and body: git's name, not a security claim) and its bytes."""
    raw = b"%s %d\0" % (kind.encode(), len(body)) + body
    return hashlib.sha1(raw, usedforsecurity=False).hexdigest(), raw


def write_object(git_dir: Path, kind: str, body: bytes) -> str:
    """Store `body` as a loose object unless it is there already; its id. Written whole, then renamed."""
    oid, raw = object_id(kind, body)
    folder = git_dir / "objects" / oid[:2]
    path = folder / oid[2:]
    if path.exists():
        return oid
    folder.mkdir(exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="tmp_obj_")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(zlib.compress(raw, 1))
        os.chmod(tmp, 0o444)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return oid


def git_mode(st: os.stat_result) -> str:
    if stat.S_ISLNK(st.st_mode):
        return LINK_MODE
    return "100755" if st.st_mode & stat.S_IXUSR else "100644"


@dataclass(frozen=True, slots=True)
class StatKey:
    """What a file looked like when its blob was hashed: unchanged key, unchanged bytes (unless racy)."""

    size: int
    mtime_ns: int
    ctime_ns: int
    ino: int
    mode: int

    @classmethod
    def of(cls, st: os.stat_result) -> StatKey:
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)


class TreeCache:
    """The workspace's tree as the last checkpoint left it: folder -> name -> (mode, id), with each folder's
    tree id. `put`/`drop` change files; `write` stores the changed trees and gives the root's id."""

    def __init__(self, git_dir: Path) -> None:
        self.git_dir = git_dir
        self.folders: dict[str, dict[bytes, tuple[str, str]]] = {"": {}}
        self.dirty: set[str] = {""}
        self.seen: dict[str, tuple[StatKey, str, str]] = {}  # path -> (its stat, mode, blob) when hashed
        self.root = ""

    @classmethod
    def from_index(cls, git_dir: Path, listing: bytes) -> TreeCache:
        """From `git ls-files -s -z` (mode, blob, stage, path), as the index holds the files."""
        cache = cls(git_dir)
        for line in listing.split(b"\0"):
            if line:
                meta, path = line.split(b"\t", 1)
                mode, blob, _stage = meta.decode().split(" ")
                cache.put(os.fsdecode(path), mode, blob)
        return cache

    def entry(self, path: str) -> tuple[str, str] | None:
        folder, _, name = path.rpartition("/")
        return self.folders.get(folder, {}).get(os.fsencode(name))

    def put(self, path: str, mode: str, blob: str) -> None:
        folder, _, name = path.rpartition("/")
        self._folder(folder)[os.fsencode(name)] = (mode, blob)
        self._touch(folder)

    def drop(self, path: str) -> None:
        folder, _, name = path.rpartition("/")
        entries, key = self.folders.get(folder, {}), os.fsencode(name)
        if key in entries and entries[key][0] != TREE_MODE:  # a file made a folder since stays a folder
            del entries[key]
            self._touch(folder)
        self.seen.pop(path, None)

    def _folder(self, folder: str) -> dict[bytes, tuple[str, str]]:
        if folder not in self.folders:
            self.folders[folder] = {}
            if folder:
                parent, _, name = folder.rpartition("/")
                self._folder(parent)[os.fsencode(name)] = (TREE_MODE, "")
        return self.folders[folder]

    def _touch(self, folder: str) -> None:
        while True:
            self.dirty.add(folder)
            if not folder:
                return
            folder = folder.rpartition("/")[0]

    def write(self) -> str:
        """Store every changed tree (deepest first; an emptied folder leaves its parent); the root tree's id."""
        for folder in sorted(self.dirty, key=lambda f: -f.count("/") - (1 if f else 0)):
            entries = self.folders.get(folder)
            if entries is None:
                continue
            parent, _, name = folder.rpartition("/")
            if not entries and folder:
                del self.folders[folder]
                siblings = self.folders.get(parent, {})
                if siblings.get(os.fsencode(name), ("",))[0] == TREE_MODE:  # not a file put in its place
                    del siblings[os.fsencode(name)]
                continue
            oid = write_object(self.git_dir, "tree", _tree_body(entries))
            if folder:
                self.folders[parent][os.fsencode(name)] = (TREE_MODE, oid)
            else:
                self.root = oid
        self.dirty.clear()
        return self.root


def _tree_body(entries: dict[bytes, tuple[str, str]]) -> bytes:
    order = sorted(entries, key=lambda n: n + b"/" if entries[n][0] == TREE_MODE else n)  # git's own order
    return b"".join(entries[n][0].encode() + b" " + n + b"\0" + bytes.fromhex(entries[n][1]) for n in order)
