"""PATH lookups for the helper's commands, remembered like a shell's hash table but never stale."""

import os
import threading
import time


def which(name, path):
    if "/" in name:  # a relative path is relative to the command's cwd: leave it to the shell
        return name if name.startswith("/") and os.access(name, os.X_OK) and not os.path.isdir(name) else None
    return _path_cache.find(name, path or "/usr/local/bin:/usr/bin:/bin")


class PathCache:
    """PATH lookups remembered like a shell's hash table, but never stale: an entry is for one PATH value,
    and holds while the folders searched up to its hit are unchanged (a program added to an earlier folder
    shadows it, one removed takes its entry along). A folder changed within the last second is not trusted
    (its time stamp is coarse), so that lookup is not remembered. A folder that cannot change is not looked
    at again: one on a read-only filesystem, as is every folder above it, with no symlink on the way (the
    sandbox's read-only root: /usr/bin and the like; the helper cannot remount, it has no capability)."""

    SETTLE_S = 1.0

    def __init__(self):
        self.entries = {}  # (name, PATH) -> (full path, [(folder, (inode, mtime_ns)), ...] of folders that can change)
        self.fixed = {}  # folder -> True when it cannot change
        self.lock = threading.Lock()

    def _can_change(self, d):
        fixed = self.fixed.get(d)
        if fixed is None:
            fixed = os.path.realpath(d) == d and all(_read_only(p) for p in _folders_up(d))
            if len(self.fixed) < 4096:
                self.fixed[d] = fixed
        return not fixed

    @staticmethod
    def _state(d):
        try:
            st = os.stat(d)
        except OSError:
            return None
        return st.st_ino, st.st_mtime_ns

    def find(self, name, path):
        key = (name, path)
        hit = self.entries.get(key)
        if hit is not None and all(self._state(d) == state for d, state in hit[1]):
            return hit[0]
        searched, now_ns = [], time.time_ns()
        for d in path.split(":"):
            if not d.startswith("/"):
                continue
            state = self._state(d)
            searched.append((d, state))
            full = os.path.join(d, name)
            if state is not None and os.access(full, os.X_OK) and not os.path.isdir(full):
                settled = all(st is None or now_ns - st[1] > self.SETTLE_S * 1e9 for _, st in searched)
                with self.lock:
                    if settled and len(self.entries) < 4096:
                        self.entries[key] = (full, [(f, st) for f, st in searched if self._can_change(f)])
                    else:
                        self.entries.pop(key, None)
                return full
        self.entries.pop(key, None)
        return None


def _read_only(path):
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):
        return False


def _folders_up(d):
    """`d` and every folder above it, up to /."""
    while True:
        yield d
        if d == "/":
            return
        d = os.path.dirname(d)


_path_cache = PathCache()
