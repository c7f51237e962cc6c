"""Checkpoints of a workspace: its files recorded before each call that may write, in a shadow git object
store outside the workspace (the desk's state folder), so any call's changes can be undone (`_rewind.py`).

Git runs on the host with a hardened environment: no system or global config, no hooks, GIT_DIR and
GIT_WORK_TREE explicit (the project's own `.git` and its config never run), attributes and filters off (the
bytes kept are the bytes on disk). The project's `.gitignore` is honoured; `.git` and `.agent-desk` are left
out; files over the size limit, ignored folders and nested repositories are named as "not kept".
A checkpoint's id is its git tree: content-addressed, so a corrupt or missing one is detected.

What changed since the last checkpoint is asked of one `git status` (index refresh in threads, untracked files
through git's untracked cache on a local file system known to change a folder's mtime and ctime with each
entry); the index's mtime is set back after each write, so a file or folder changed around that moment is
looked at again rather than trusted (`_age_index`)."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._errors import AgentDeskError
from ._git_objects import LINK_MODE, RACY_NS, StatKey, TreeCache, git_mode, write_object
from ._safe_files import read_beneath

DEFAULT_MAX_FILE_BYTES = 50 * 1024 * 1024
CONTROL_DIRS = (".git", ".agent-desk")
MAX_NOT_KEPT_NAMED = 50  # a checkpoint's record names this many, then counts the rest
GIT_TIMEOUT_S = 60.0
_S = 1_000_000_000  # ns
MAX_PENDING = 256  # files ahead of git's index before a checkpoint goes through it again
_EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
_CONFIG = {
    "core.bare": "false", "core.autocrlf": "false", "core.safecrlf": "false", "core.symlinks": "true",
    "core.filemode": "true", "core.ignorecase": "false", "core.precomposeunicode": "false",
    "core.hooksPath": "/dev/null", "core.excludesFile": "", "core.attributesFile": "",
    "core.fsmonitor": "false", "core.untrackedCache": "false", "core.quotePath": "false",
    "core.splitIndex": "false", "core.bigFileThreshold": "1m", "index.version": "4",
    "gc.auto": "0", "gc.pruneExpire": "never", "maintenance.auto": "false", "protocol.allow": "never",
}
# Stronger than any .gitattributes in the project: the bytes kept are the bytes on disk, nothing runs.
_ATTRIBUTES = "* -text -eol -ident -filter -diff -merge -working-tree-encoding\n"
_EXCLUDE = "/.agent-desk/\n/.agent-desk\n"
# One walk for both: the files that differ from git's index, and the files it does not have
_STATUS = ("status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames", "--ignore-submodules=all")
# Linux file systems where making, removing or renaming an entry changes its folder's mtime and ctime, as git's
# untracked cache needs; on any other (network, FUSE, unknown) every folder is read at each checkpoint
_UNTRACKED_CACHE_FS = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", "f2fs"})
# The commit HEAD names (the index's tree): `git status` compares the index with it, cheaply when they agree
_HEAD_COMMIT = ("tree %s\nauthor agent-desk <agent-desk> 0 +0000\ncommitter agent-desk <agent-desk> 0 +0000\n\n"
                "checkpoint\n")


class CheckpointError(AgentDeskError):
    """A checkpoint could not be taken or read: the reason in words."""


@dataclass(slots=True)
class Checkpoint:
    """The workspace's files at one moment: `id` (a git tree) and what was not kept, and why."""

    id: str
    not_kept: dict[str, str] = field(default_factory=dict)  # path -> why (over the limit, ignored, a repository)

    def to_dict(self) -> dict[str, Any]:
        names = sorted(self.not_kept)
        out: dict[str, Any] = {"id": self.id}
        if names:
            out["not_kept"] = {n: self.not_kept[n] for n in names[:MAX_NOT_KEPT_NAMED]}
            if len(names) > MAX_NOT_KEPT_NAMED:
                out["not_kept_more"] = len(names) - MAX_NOT_KEPT_NAMED
        return out


@dataclass(frozen=True, slots=True)
class Entry:
    """A file of a checkpoint: its git mode ("100644", "100755", "120000") and blob."""

    mode: str
    blob: str


def _is_control(path: str) -> bool:
    first = path.split("/", 1)[0]
    return first.lower() in CONTROL_DIRS


def git_env(git_dir: Path, work_tree: Path | None) -> dict[str, str]:
    """The environment git runs in: nothing of the person's or the project's git setup, no prompts."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_DIR=str(git_dir), GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull,
               GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_NO_REPLACE_OBJECTS="1",
               GIT_ATTR_NOSYSTEM="1", LC_ALL="C", HOME=str(git_dir))
    if work_tree is not None:
        env["GIT_WORK_TREE"] = str(work_tree)
    return env


class ShadowStore:
    """One workspace's checkpoints: a git object store under `root`, never inside the workspace."""

    def __init__(self, root: str | os.PathLike[str], workspace: str | os.PathLike[str], *,
                 max_file_bytes: int = DEFAULT_MAX_FILE_BYTES, git: str | None = None) -> None:
        self.workspace = Path(os.path.realpath(workspace))
        key = hashlib.sha256(str(self.workspace).encode()).hexdigest()[:20]
        self.git_dir = Path(root) / f"{key}.git"
        self.max_file_bytes = max_file_bytes
        self.git = git or shutil.which("git") or ""
        self._lock = threading.Lock()
        self._ignored: dict[str, str] | None = None  # the ignored folders, found again when a .gitignore changes
        self._last: Checkpoint | None = None
        self._stamp: tuple[int, int, int] | None = None  # the index as this store last left it
        self._cache: TreeCache | None = None  # the last checkpoint's tree, folder by folder
        self._pending: set[str] = set()  # files whose checkpointed state is ahead of git's index
        self.untracked_cache = _fs_type(self.workspace) in _UNTRACKED_CACHE_FS
        self._settle_at: int | None = None  # when to go through git's index again: files it has are too fresh
        self._recent: set[str] = set()  # files git's index saw changing in its own second: the desk looks itself
        if _inside(self.git_dir, self.workspace):
            raise CheckpointError(f"the checkpoint store {self.git_dir} would be inside the workspace")

    # -- git ----------------------------------------------------------------------------------------
    def _run(self, *args: str, stdin: bytes | None = None, work_tree: bool = True, check: bool = True,
             locks: bool = False) -> subprocess.CompletedProcess[bytes]:
        if not self.git:
            raise CheckpointError("git is not installed on this computer, and checkpoints need it",
                                  hint="install git (the desk runs it on its own store, never on the project's)")
        try:
            done = subprocess.run([self.git, *args], input=stdin, capture_output=True, timeout=GIT_TIMEOUT_S,
                                  env=self._env(work_tree, locks),
                                  cwd=self.workspace if work_tree else self.git_dir.parent, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CheckpointError(f"git could not run: {e}") from e
        if check and done.returncode != 0:
            err = done.stderr.decode("utf-8", "replace").strip().splitlines()
            raise CheckpointError(f"git {args[0]} failed: {err[-1] if err else f'exit {done.returncode}'}")
        return done

    def _env(self, work_tree: bool, locks: bool) -> dict[str, str]:
        """git's environment for this store: its untracked cache on or off for every command alike (one
        without it would drop the cache from the index); `locks`: a `git status` may write the index."""
        env = git_env(self.git_dir, self.workspace if work_tree else None)
        env.update(GIT_CONFIG_COUNT="2", GIT_CONFIG_KEY_0="core.untrackedCache",
                   GIT_CONFIG_VALUE_0="true" if self.untracked_cache else "false",
                   GIT_CONFIG_KEY_1="status.showUntrackedFiles", GIT_CONFIG_VALUE_1="all")
        if locks:
            env["GIT_OPTIONAL_LOCKS"] = "1"
        return env

    def _ensure(self) -> None:
        if (self.git_dir / "HEAD").is_file():
            return
        self.git_dir.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._run("init", "-q", "--bare", str(self.git_dir), work_tree=False)
        with open(self.git_dir / "config", "a", encoding="utf-8") as f:  # one write, not a `git config` each
            f.write(_config_text(_CONFIG))
        info = self.git_dir / "info"
        info.mkdir(exist_ok=True)
        (info / "attributes").write_text(_ATTRIBUTES)
        (info / "exclude").write_text(_EXCLUDE)
        hooks = self.git_dir / "hooks"
        if hooks.is_dir():
            shutil.rmtree(hooks, ignore_errors=True)

    # -- taking -------------------------------------------------------------------------------------
    def take(self) -> Checkpoint:
        """The workspace as it is now (CheckpointError when it cannot be recorded)."""
        if not self.workspace.is_dir():
            raise CheckpointError(f"the workspace {self.workspace} is not a folder on this computer")
        with self._lock:
            try:
                return self._take()
            except OSError as e:  # the store's folder cannot be made or written (permissions, disk full)
                raise CheckpointError(f"the checkpoint store {self.git_dir} cannot be written: {e.strerror or e}"
                                      ) from e

    def _take(self) -> Checkpoint:
        self._ensure()
        changed, others = self._changes()
        stamp = self._index_stamp()
        settle = self._settle_at is not None and time.time_ns() >= self._settle_at
        looks = changed | others | self._pending | self._recent
        if self._last is not None and not (looks or settle) and stamp == self._stamp:
            return self._last  # nothing changed, and no other process moved the index since
        ignores = any(p.rsplit("/", 1)[-1] == ".gitignore" for p in changed | others)
        if self._cache is None or stamp != self._stamp or ignores or settle or len(looks) > MAX_PENDING:
            return self._take_by_git(changed, others)
        return self._take_in_memory(changed, others)

    def _take_by_git(self, changed: set[str], others: set[str]) -> Checkpoint:
        """Through git's index (the first checkpoint, a changed .gitignore, many changes): the index is made
        to match the files, its tree written by git, and the in-memory tree built again from it."""
        started = time.time_ns()
        # What the desk looked at itself (git may see those unchanged: a rewrite in the second git recorded it,
        # its mtime put back), and what is ahead of the index: hashed here, their entries set whole.
        looked = (self._pending | self._recent) - changed - others
        not_kept, add = self._sizes(changed | others | looked)
        not_kept.update(_nested(others))
        gone = sorted((changed | looked) - set(add))  # deleted, beyond a link, or not kept any more: out of the index
        if gone:
            self._run("update-index", "--force-remove", "-z", "--stdin", stdin=_nul(gone))
        if fresh := sorted(p for p in add if p not in looked):
            self._run("update-index", "--add", "--replace", "-z", "--stdin", stdin=_nul(fresh))
        if entries := self._entries({p: st for p, st in add.items() if p in looked}):
            self._run("update-index", "--add", "--replace", "-z", "--index-info", stdin=entries)
        if self._ignored is None or any(p.rsplit("/", 1)[-1] == ".gitignore" for p in changed | others):
            self._ignored = self._ignored_dirs()
        tree = self._run("write-tree").stdout.decode().strip()
        self._set_head(tree)
        self._run(*_STATUS, locks=True)  # the index refreshed and written, with git's untracked cache filled
        self._pending = set()
        listing = self._run("ls-files", "-s", "-z").stdout
        cache = TreeCache.from_index(self.git_dir, listing)
        self._cache = cache if cache.write() == tree else None  # else: git's way every time (never seen)
        self._age_index(started)
        self._recent = self._recent_files(listing, (started - RACY_NS) // _S)
        self._settle_at = (time.time_ns() // _S + 1) * _S + RACY_NS if self._recent else None
        return self._taken(tree, not_kept)

    def _entries(self, files: dict[str, os.stat_result]) -> bytes:
        """`update-index --index-info` lines for `files`, hashed here: git would keep an entry whose stat it
        trusts (a gone one is removed). Their stat is filled by the `git status` that follows."""
        lines = []
        for p, st in sorted(files.items()):
            mode, blob = self._hash(p, st)
            lines.append(f"{mode or '0'} {blob or '0' * 40}\t{p}\0")  # mode 0: gone since, out of the index
        return "".join(lines).encode("utf-8", "surrogateescape")

    def _recent_files(self, listing: bytes, since_s: int) -> set[str]:
        """git may compare whole seconds: a file changed in the index's second is read by every `git status`
        (its mtime), or may change again unseen by git (its ctime, its mtime put back). The desk looks at those
        itself (their stat to the nanosecond) until the index is written again, once that second is past."""
        out: set[str] = set()
        fd = os.open(self.workspace, os.O_RDONLY | os.O_DIRECTORY)
        try:
            for line in listing.split(b"\0"):
                rel = line.partition(b"\t")[2]
                try:
                    st = os.lstat(rel, dir_fd=fd) if rel else None
                except OSError:
                    continue  # gone: git names it
                if st is not None and max(st.st_mtime_ns, st.st_ctime_ns) // _S >= since_s:
                    out.add(rel.decode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)
        return out

    def _set_head(self, tree: str) -> None:
        """HEAD names a commit of the index's tree, so `git status` finds index and HEAD equal at once."""
        commit = write_object(self.git_dir, "commit", (_HEAD_COMMIT % tree).encode())
        head = self.git_dir / "HEAD"
        if head.read_text().strip() != commit:  # written whole, then renamed: another process may read it
            fd, tmp = tempfile.mkstemp(dir=self.git_dir, prefix="tmp_head_")
            with os.fdopen(fd, "w") as f:
                f.write(commit + "\n")
            os.replace(tmp, head)

    def _age_index(self, started: int) -> None:
        """git trusts a file's or folder's stat only when it is older than the index: the index is dated to
        before this checkpoint began (by more than a file-system clock tick), so whatever changed while git
        read it is looked at again by the next `git status`, never taken as unchanged."""
        index = self.git_dir / "index"
        try:
            st = os.stat(index)
        except FileNotFoundError:  # nothing was ever added
            return
        os.utime(index, ns=(st.st_atime_ns, min(st.st_mtime_ns, started - RACY_NS)))

    def _take_in_memory(self, changed: set[str], others: set[str]) -> Checkpoint:
        """The files git named as differing from its index (and those that did last time), hashed in Python
        unless their stat is as when last hashed; only the trees on their way to the root are written again.
        The index stays behind until too many files differ from it (then `_take_by_git`)."""
        cache, started = self._cache, time.time_ns()
        assert cache is not None
        not_kept, add = self._sizes(changed | others | self._pending | self._recent)
        not_kept.update(_nested(others))
        for p in sorted((changed | self._pending | self._recent) - set(add)):
            cache.drop(p)
        for p, st in sorted(add.items()):
            key, seen = StatKey.of(st), cache.seen.get(p)
            if seen is not None and seen[0] == key:
                mode, blob = seen[1], seen[2]
            else:
                mode, blob = self._hash(p, st)
                if not blob:  # gone since git named it
                    cache.drop(p)
                    continue
                if key.mtime_ns + RACY_NS < started and key.ctime_ns + RACY_NS < started:
                    cache.seen[p] = (key, mode, blob)
            if cache.entry(p) != (mode, blob):
                cache.put(p, mode, blob)
        self._pending = changed | others
        return self._taken(cache.write(), not_kept)

    def _hash(self, rel: str, st: os.stat_result) -> tuple[str, str]:
        """Store the file or link at `rel` as a blob: (mode, id); ("", "") when it is gone. Read beneath the
        workspace without following a link on the way (one swapped in meanwhile is refused, not followed)."""
        try:
            if stat.S_ISLNK(st.st_mode):
                return LINK_MODE, write_object(self.git_dir, "blob", os.fsencode(os.readlink(self.workspace / rel)))
            body = read_beneath(self.workspace, rel, limit=self.max_file_bytes)
        except FileNotFoundError:
            return "", ""
        except (OSError, AgentDeskError) as e:
            raise CheckpointError(f"cannot read {rel}: {getattr(e, 'strerror', None) or e}") from e
        if body is None:
            return "", ""
        return git_mode(st), write_object(self.git_dir, "blob", body)

    def _taken(self, tree: str, not_kept: dict[str, str]) -> Checkpoint:
        self._keep(tree)
        if self._ignored is None:
            self._ignored = self._ignored_dirs()
        self._last, self._stamp = Checkpoint(tree, {**self._ignored, **self._big_known(not_kept)}), self._index_stamp()
        return self._last

    def _index_stamp(self) -> tuple[int, int, int] | None:
        try:
            st = os.stat(self.git_dir / "index")
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def _changes(self) -> tuple[set[str], set[str]]:
        """(paths changed or deleted against git's index, paths new to it): one `git status`."""
        changed, others = _parse_status(self._run(*_STATUS).stdout)
        return {p for p in changed if not _is_control(p)}, {p for p in others if not _is_control(p)}

    def _sizes(self, paths: set[str]) -> tuple[dict[str, str], dict[str, os.stat_result]]:
        """Of new or changed `paths`: those not kept (over the size limit, not a file), and the files and links
        to add. A path that is gone, or lies beyond a link now, is in neither: it leaves the index."""
        too_big: dict[str, str] = {}
        add: dict[str, os.stat_result] = {}
        real_dirs: dict[str, bool] = {"": True}
        for p in paths:
            if p.endswith("/"):
                continue
            st = self._lstat(p, real_dirs)
            if st is None or stat.S_ISDIR(st.st_mode):
                continue  # gone, beyond a link, or a folder now (git names the files in it on their own)
            if stat.S_ISREG(st.st_mode) and st.st_size > self.max_file_bytes:
                too_big[p] = f"over the {_size(self.max_file_bytes)} limit"
            elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                if stat.S_ISREG(st.st_mode) and not os.access(self.workspace / p, os.R_OK):
                    raise CheckpointError(f"cannot read {p}: permission denied")
                add[p] = st
            else:
                too_big[p] = "not a file nor a link"
        return too_big, add

    def _lstat(self, rel: str, real_dirs: dict[str, bool]) -> os.stat_result | None:
        """`rel`'s own lstat when every folder on its way is a real folder (no link); else None."""
        parts = rel.split("/")
        for i in range(1, len(parts)):
            folder = "/".join(parts[:i])
            if folder not in real_dirs:
                try:
                    real_dirs[folder] = stat.S_ISDIR(os.lstat(self.workspace / folder).st_mode)
                except OSError:
                    real_dirs[folder] = False
            if not real_dirs[folder]:
                return None
        try:
            return os.lstat(self.workspace / rel)
        except FileNotFoundError:
            return None
        except OSError as e:
            raise CheckpointError(f"cannot read {rel}: {e.strerror or e}") from e

    def _big_known(self, new: dict[str, str]) -> dict[str, str]:
        """The files over the limit: those found now, and those found before that are still there."""
        old = {p: why for p, why in (self._last.not_kept if self._last else {}).items()
               if why.startswith("over the") and (self.workspace / p).exists()}
        return {**old, **new}

    def _ignored_dirs(self) -> dict[str, str]:
        out = self._run("ls-files", "-z", "-o", "-i", "--exclude-standard", "--directory").stdout
        names = [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p and not _is_control(p)]
        return {p.rstrip("/"): "ignored (.gitignore)" for p in names}

    def _keep(self, tree: str) -> None:
        """A ref per checkpoint: its objects stay reachable, whatever git may prune."""
        ref = self.git_dir / "refs" / "checkpoints" / tree
        if not ref.exists():
            ref.parent.mkdir(parents=True, exist_ok=True)
            ref.write_text(tree + "\n")  # a ref may name a tree: no commit needed

    # -- reading ------------------------------------------------------------------------------------
    def files(self, cid: str) -> dict[str, Entry]:
        """Every file of checkpoint `cid` (CheckpointError: missing or corrupt)."""
        _check_id(cid)
        if cid == _EMPTY_TREE:
            return {}
        self._ensure()
        done = self._run("ls-tree", "-r", "-z", "--full-tree", cid, work_tree=False, check=False)
        if done.returncode != 0:
            raise CheckpointError(f"the checkpoint {cid[:12]} is missing or corrupt: git cannot read it")
        out: dict[str, Entry] = {}
        for line in done.stdout.decode("utf-8", "surrogateescape").split("\0"):
            if not line:
                continue
            meta, path = line.split("\t", 1)
            mode, _kind, blob = meta.split(" ")
            if not _is_control(path):
                out[path] = Entry(mode, blob)
        return out

    def blobs(self, ids: set[str]) -> dict[str, bytes]:
        """The bytes of `ids`, each checked against its id (CheckpointError: missing or corrupt)."""
        if not ids:
            return {}
        order = sorted(ids)
        done = self._run("cat-file", "--batch", stdin="".join(f"{i}\n" for i in order).encode(), work_tree=False)
        out, pos, data = {}, 0, done.stdout
        for want in order:
            nl = data.index(b"\n", pos)
            head = data[pos:nl].decode().split(" ")
            if len(head) != 3 or head[1] != "blob":
                raise CheckpointError(f"the checkpoint's file {want[:12]} is missing or corrupt")
            size = int(head[2])
            body = data[nl + 1:nl + 1 + size]
            pos = nl + 1 + size + 1
            if hashlib.sha1(b"blob %d\0" % len(body) + body).hexdigest() != want:  # git's own id (not for security)
                raise CheckpointError(f"the checkpoint's file {want[:12]} is missing or corrupt: "
                                      "its bytes do not match its id")
            out[want] = body
        return out


def _config_text(settings: dict[str, str]) -> str:
    """`settings` ("section.key": value) as git's config file has them, a section each, values quoted."""
    sections: dict[str, list[str]] = {}
    for name, value in settings.items():
        section, _, key = name.partition(".")
        quoted = value.replace("\\", "\\\\").replace('"', '\\"')
        sections.setdefault(section, []).append(f'\t{key} = "{quoted}"\n')
    return "".join(f"[{section}]\n" + "".join(lines) for section, lines in sections.items())


def _parse_status(out: bytes) -> tuple[set[str], set[str]]:
    """`git status --porcelain=v2 -z`: the files whose worktree differs from the index (the second letter of
    an ordinary entry; the first compares the index with HEAD, which says nothing of the files), and the
    untracked ones. Anything else (a rename, a conflict) was not asked for: an error, not a guess."""
    changed: set[str] = set()
    others: set[str] = set()
    for rec in out.split(b"\0"):
        if rec.startswith(b"1 "):
            fields = rec.split(b" ", 8)
            if len(fields) == 9 and fields[1][1:2] != b".":
                changed.add(fields[8].decode("utf-8", "surrogateescape"))
            elif len(fields) != 9:
                raise CheckpointError(f"git status gave an entry this desk cannot read: {rec[:80]!r}")
        elif rec.startswith(b"? "):
            others.add(rec[2:].decode("utf-8", "surrogateescape"))
        elif rec:
            raise CheckpointError(f"git status gave an entry this desk cannot read: {rec[:80]!r}")
    return changed, others


def _fs_type(path: Path) -> str:
    """The type of the file system `path` lies on (its longest mount point in /proc/self/mountinfo); "" where
    that cannot be known (not Linux)."""
    if not sys.platform.startswith("linux"):
        return ""
    try:
        lines = Path("/proc/self/mountinfo").read_bytes().split(b"\n")
    except OSError:
        return ""
    where, best, kind = os.fsencode(path), -1, ""
    for line in lines:
        left, sep, right = line.partition(b" - ")
        fields = left.split(b" ")
        if not sep or len(fields) < 5 or not right:
            continue
        point = re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), fields[4])  # "\040" is a space
        inside = where == point or where.startswith(point.rstrip(b"/") + b"/")
        if inside and len(point) >= best:  # the longest, and of equals the last mounted
            best, kind = len(point), right.split(b" ", 1)[0].decode("utf-8", "replace")
    return kind


def _nested(others: set[str]) -> dict[str, str]:
    return {p.rstrip("/"): "a repository of its own" for p in others if p.endswith("/")}


def _nul(paths: list[str]) -> bytes:
    return b"".join(os.fsencode(p) + b"\0" for p in paths)


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MB" if n >= 1024 * 1024 else f"{n:,} bytes"


def _check_id(cid: str) -> None:
    if not (isinstance(cid, str) and len(cid) == 40 and all(c in "0123456789abcdef" for c in cid)):
        raise CheckpointError(f"{cid!r} is not a checkpoint id")


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(os.path.realpath(path)).relative_to(folder)
    except ValueError:
        return False
    return True


def changed_between(store: ShadowStore, a: str, b: str) -> set[str]:
    """The paths whose file differs between checkpoints `a` and `b` (CheckpointError: one is missing)."""
    _check_id(a)
    _check_id(b)
    if a == b:
        return set()
    store._ensure()
    done = store._run("diff-tree", "-r", "-z", "--no-renames", "--name-only", a, b, work_tree=False, check=False)
    if done.returncode != 0:
        bad = a if store._run("cat-file", "-e", a, work_tree=False, check=False).returncode else b
        raise CheckpointError(f"the checkpoint {bad[:12]} is missing or corrupt: git cannot read it")
    return {p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p and not _is_control(p)}
