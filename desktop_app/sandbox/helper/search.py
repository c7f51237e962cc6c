"""fs_grep and fs_glob. ripgrep runs them where the machine has `rg`, in its own process group that a
deadline kills; the Python walker is the fallback. Nothing here may hold a helper thread for good: in
the container the whole search runs in a child helper (`--search`, see `ChildSearch`), on the host
LocalSandbox compiles with RE2 (linear time), and a walker checks its deadline as it goes."""

import os
import re
import selectors
import signal
import stat as _stat
import subprocess
import time

from .errors import HelperError, OutsideWorkspace
from .glob import glob_regex
from .workspace import _stat_dict

SEARCH_TIMEOUT_S = 20.0
GREP_MAX_FILE = 20 * 1024 * 1024
GREP_LINE_MAX = 500
WALK_MAX_ENTRIES = 200000
SKIP_DIRS = (".git",)
# Every file, hidden ones too, .gitignore not applied (the walker's own view), never .git, no config file.
RG_COMMON = ["--no-config", "--hidden", "--no-ignore", "--glob", "!.git", "--no-messages", "--color", "never"]
RG_DIALECT = "Rust regex (ripgrep)"


class SearchTimeout(HelperError):
    pass


def find_rg(path=None):
    """The ripgrep binary on PATH (or the usual places), or None."""
    dirs = [*(path if path is not None else os.environ.get("PATH") or "").split(":"), "/usr/bin", "/usr/local/bin"]
    for d in dirs:
        if d.startswith("/"):
            full = os.path.join(d, "rg")
            if os.access(full, os.X_OK) and not os.path.isdir(full):
                return full
    return None


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def run_killable(argv, timeout, on_record, sep=b"\n"):
    """Run `argv` in a process group of its own, handing each `sep`-ended record of its stdout to
    `on_record` (True stops early). The group is killed at the deadline, at a stop, and at the end.
    Returns (timed_out, exit code or None, the last 4 KiB of stderr)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, close_fds=True, bufsize=0,
    )  # fmt: skip
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    deadline = time.monotonic() + timeout
    buf, err, open_streams, stopped, timed_out = bytearray(), bytearray(), 2, False, False
    try:
        while open_streams and not stopped:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(left):
                data = os.read(key.fileobj.fileno(), 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    open_streams -= 1
                elif key.data == "err":
                    err += data
                    del err[:-4096]
                else:
                    buf += data
                    stopped = _records(buf, sep, on_record)
                    if stopped:
                        break
    finally:
        sel.close()
        _kill_group(proc)  # rg is done, stopped early, or late: nothing of it stays
        proc.stdout.close()
        proc.stderr.close()
    if not timed_out and not stopped and buf:
        on_record(bytes(buf))
    return timed_out, proc.returncode, bytes(err).decode("utf-8", "replace")


def _records(buf, sep, on_record):
    start = 0
    while True:
        i = buf.find(sep, start)
        if i < 0:
            break
        if on_record(bytes(buf[start:i])):
            return True
        start = i + 1
    del buf[:start]
    return False


class Search:
    """fs_grep and fs_glob in this process: rg when there is one, else the walker. `regex` compiles
    the walker's patterns and the globs (the `re` module, or RE2 on the host)."""

    def __init__(self, regex=None, rg="auto", timeout=SEARCH_TIMEOUT_S):
        self.compile = regex or re.compile
        self.rg = find_rg() if rg == "auto" else rg
        self.timeout = timeout

    def with_timeout(self, timeout):
        return Search(self.compile, self.rg, timeout)

    @property
    def dialect(self):
        return RG_DIALECT if self.rg else "Python re"

    def _deadline_check(self, deadline, what):
        if time.monotonic() > deadline:
            raise SearchTimeout(_timeout_message(what, self.timeout))

    # -- glob
    def glob(self, ws, pattern, path=".", limit=200):
        """Matches of `pattern` relative to `path`, newest first."""
        base = ws.resolve(path)
        if not os.path.isdir(base):
            raise HelperError(f"{ws.shown(base)}: not a directory")
        rx = self.compile(glob_regex(_relative_glob(ws, pattern, base)).pattern)
        deadline = time.monotonic() + self.timeout
        found = []
        for full in self._entries(base, deadline):
            if rx.match(os.path.relpath(full, base)):
                try:
                    found.append(_stat_dict(ws, full, os.lstat(full)))
                except OSError:
                    continue
            self._deadline_check(deadline, "fs_glob")
        found.sort(key=lambda d: (-d["mtime"], d["path"]))
        return found[: max(0, int(limit))]

    def _entries(self, base, deadline):
        """Every file and folder under `base` (not .git, no symlink followed), bounded."""
        if not self.rg:
            check = lambda: self._deadline_check(deadline, "fs_glob")  # noqa: E731
            return [os.path.join(d, n) for d, n, _ in _walk(base, check)]
        files = []

        def on_record(rec):
            files.append(os.fsdecode(rec))
            return len(files) >= WALK_MAX_ENTRIES

        argv = [self.rg, "--files", "--null", *RG_COMMON, "--", base]
        timed_out, _, _ = run_killable(argv, self.timeout, on_record, b"\0")
        if timed_out:
            raise SearchTimeout(_timeout_message("fs_glob", self.timeout))
        dirs = set()
        for f in files:  # rg lists files only: their folders are entries too
            d = os.path.dirname(f)
            while len(d) > len(base) and d not in dirs:
                dirs.add(d)
                d = os.path.dirname(d)
        return sorted(files) + sorted(dirs)

    # -- grep
    def grep(self, ws, pattern, path=".", glob=None, ignore_case=False, max_results=200):
        """Lines matching `pattern` in files under `path` (binary files and .git skipped)."""
        base = ws.resolve(path)
        if not os.path.exists(base):
            raise HelperError(f"{ws.shown(base)}: no such file or directory")
        grx = self.compile(glob_regex(glob).pattern) if glob else None

        def wanted(full):
            if grx is None:
                return True
            subject = os.path.relpath(full, base) if "/" in glob else os.path.basename(full)
            if os.path.isfile(base) and subject == ".":
                subject = os.path.basename(full)
            return grx.match(subject) is not None

        if self.rg:
            return self._rg_grep(ws, pattern, base, wanted, ignore_case, max_results)
        return self._walk_grep(ws, pattern, base, wanted, ignore_case, max_results)

    def _rg_grep(self, ws, pattern, base, wanted, ignore_case, max_results):
        argv = [self.rg, "--null", "--line-number", "--with-filename", "--no-heading", *RG_COMMON, "--sort", "path",
                "--max-filesize", str(GREP_MAX_FILE), "--max-columns", "4096", "--max-columns-preview"]
        if ignore_case:
            argv.append("--ignore-case")
        argv += ["--regexp", pattern, "--", base]
        out = []

        def on_record(rec):
            name, _, rest = rec.partition(b"\0")
            num, _, text = rest.partition(b":")
            full = os.fsdecode(name)
            if num.isdigit() and wanted(full):
                line = text.rstrip(b"\r").decode("utf-8", "replace")
                out.append({"path": ws.rel(full), "line": int(num), "text": line[:GREP_LINE_MAX]})
            return len(out) >= max_results

        timed_out, code, err = run_killable(argv, self.timeout, on_record)
        if timed_out:
            raise SearchTimeout(_timeout_message("fs_grep", self.timeout))
        if code == 2 and not out and ("regex" in err or "error parsing" in err):
            raise HelperError(f"invalid regular expression {pattern!r}: {err.strip()[-800:]}")
        return out

    def _walk_grep(self, ws, pattern, base, wanted, ignore_case, max_results):
        try:
            rx = self.compile(("(?i)" if ignore_case else "") + pattern)
        except Exception as exc:  # re.error, or RE2's own error
            raise HelperError(f"invalid regular expression {pattern!r}: {exc}") from None
        deadline = time.monotonic() + self.timeout
        check = lambda: self._deadline_check(deadline, "fs_grep")  # noqa: E731
        if os.path.isfile(base):
            files = [base]
        else:
            files = (os.path.join(d, n) for d, n, is_dir in _walk(base, check) if not is_dir)
        out = []
        for full in files:
            check()
            if not wanted(full):
                continue
            text = _text_of(full)
            if text is None or not rx.search(text):
                continue
            for lineno, line in enumerate(text.splitlines(), 1):
                if rx.search(line):
                    out.append({"path": ws.rel(full), "line": lineno, "text": line[:GREP_LINE_MAX]})
                    if len(out) >= max_results:
                        return out
        return out


def _timeout_message(what, timeout):
    return (
        f"{what} stopped after {timeout:g} s and was killed: the pattern is too costly for this tree;"
        " narrow the path or glob, or simplify the pattern"
    )


def _relative_glob(ws, pattern, base):
    if os.path.isabs(pattern):
        rel = os.path.relpath(ws.resolve(os.path.dirname(pattern) or "/"), base)
        if rel.startswith(".."):
            raise OutsideWorkspace(f"{pattern} is outside the search folder {ws.shown(base)}")
        pattern = os.path.join(rel, os.path.basename(pattern)) if rel != "." else os.path.basename(pattern)
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern


def _text_of(full):
    """A regular file's text for the walker; None for what is skipped (binary: a NUL byte, too big)."""
    try:
        st = os.lstat(full)
        if not _stat.S_ISREG(st.st_mode) or st.st_size > GREP_MAX_FILE:
            return None
        with open(full, "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    if b"\x00" in data[:8192]:
        return None
    return data.decode("utf-8", "replace")


def _walk(real, check=None):
    """(dirpath, name, is_dir) under `real`, sorted, never following symlinks, bounded."""
    count = 0
    for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
        if check is not None:
            check()
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for d in dirnames:
            yield dirpath, d, True
        for f in sorted(filenames):
            yield dirpath, f, False
        count += len(dirnames) + len(filenames)
        if count > WALK_MAX_ENTRIES:
            return


class ChildSearch:
    """The helper's searches, each in a child helper (`argv`, reading its request on stdin) in a process
    group of its own: a regex or glob that would run for ever (Python `re` backtracks) dies with its
    group at the deadline, and the helper's threads stay free."""

    def __init__(self, argv, timeout=SEARCH_TIMEOUT_S):
        self.argv = list(argv)
        self.timeout = timeout
        self.dialect = RG_DIALECT if find_rg() else "Python re"

    def with_timeout(self, timeout):
        return ChildSearch(self.argv, timeout)

    def glob(self, ws, pattern, path=".", limit=200):
        return self._run(ws, "glob", {"pattern": pattern, "path": path, "limit": limit})

    def grep(self, ws, pattern, path=".", glob=None, ignore_case=False, max_results=200):
        args = {"pattern": pattern, "path": path, "glob": glob, "ignore_case": ignore_case}
        return self._run(ws, "grep", {**args, "max_results": max_results})

    def _run(self, ws, op, args):
        from .wire import dumps, loads

        what = "fs_" + op
        request = dumps({"op": op, "root": ws.root, "alias": ws.alias, "args": args, "timeout": self.timeout})
        try:
            proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
        except OSError as exc:
            raise HelperError(f"{what} could not start its search process: {exc.strerror or exc}") from None
        try:
            out, err = proc.communicate(request.encode("utf-8"), timeout=self.timeout + 5.0)
        except subprocess.TimeoutExpired:
            raise SearchTimeout(_timeout_message(what, self.timeout)) from None
        finally:
            _kill_group(proc)
        try:
            msg = loads(out.decode("utf-8"))
        except Exception:
            tail = err.decode("utf-8", "replace").strip()[-300:]
            raise HelperError(f"{what}'s search process failed (exit code {proc.returncode}): {tail}") from None
        if msg.get("ok"):
            return msg["result"]
        outside = msg.get("kind") == OutsideWorkspace.kind
        raise (OutsideWorkspace if outside else HelperError)(msg["message"])


def child_main(inp, out):
    """A child helper's one search: the request on `inp`, the answer on `out` (see ChildSearch)."""
    from .wire import dumps, loads
    from .workspace import Workspace

    try:
        req = loads(inp.read().decode("utf-8"))
        ws = Workspace(req["root"], req["alias"])
        search = Search(timeout=float(req.get("timeout", SEARCH_TIMEOUT_S)))
        a = req["args"]
        if req["op"] == "glob":
            result = search.glob(ws, a["pattern"], a.get("path", "."), a.get("limit", 200))
        else:
            where, glob = a.get("path", "."), a.get("glob")
            result = search.grep(ws, a["pattern"], where, glob, a.get("ignore_case", False), a.get("max_results", 200))
        answer = {"ok": True, "result": result}
    except HelperError as exc:
        answer = {"ok": False, "kind": exc.kind, "message": str(exc)}
    except Exception as exc:
        answer = {"ok": False, "kind": "SandboxError", "message": f"{type(exc).__name__}: {exc}"}
    out.write(dumps(answer).encode("utf-8", "backslashreplace"))
    out.flush()
