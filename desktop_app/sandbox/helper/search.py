"""fs_grep and fs_glob. ripgrep runs them where the machine has `rg` (`rg --json`, `rg --files`), in its own
process group that a deadline kills; the Python walker is the fallback. Both skip what .gitignore files
ignore unless asked to include it. Nothing here may hold a helper thread for good: in the container the
whole search runs in a child helper (`--search`, see `ChildSearch`, kept warm between searches), on the
host LocalSandbox compiles with RE2 (linear time), and a walker checks its deadline as it goes."""

import base64
import os
import re
import selectors
import signal
import socket
import stat as _stat
import subprocess
import time

from .errors import HelperError, OutsideWorkspace
from .glob import glob_regex
from .wire import Encoded, dumps, loads
from .workspace import _stat_dict

SEARCH_TIMEOUT_S = 20.0
GREP_MAX_FILE = 20 * 1024 * 1024
GREP_LINE_MAX = 500
WALK_MAX_ENTRIES = 200000
SKIP_DIRS = (".git",)
# Hidden files too, never .git, no config file; .gitignore (.ignore, .rgignore) applied in a git repository
# or not, unless ignored files are wanted.
RG_COMMON = ["--no-config", "--hidden", "--glob", "!.git", "--no-messages", "--color", "never"]
RG_DIALECT = "Rust regex (ripgrep)"
_MATCH = b'{"type":"match"'


def rg_ignore_flag(include_ignored):
    """Read the ignore files in a git repository or not, or none at all (the exec transport's too)."""
    return "--no-ignore" if include_ignored else "--no-require-git"


def rg_flags(include_ignored):
    return [*RG_COMMON, rg_ignore_flag(include_ignored)]


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


def run_killable(argv, timeout, on_records, sep=b"\n", pass_fds=()):
    """Run `argv` in a process group of its own, handing the `sep`-ended records of its stdout to
    `on_records` a batch at a time, as they come (a list of bytes; True stops early). The group is killed at
    the deadline, at a stop, and at the end. Returns (timed_out, exit code or None, the last 4 KiB of stderr)."""
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        start_new_session=True, close_fds=True, bufsize=0, pass_fds=pass_fds,
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
                    stopped = _records(buf, sep, on_records)
                    if stopped:
                        break
    finally:
        sel.close()
        _kill_group(proc)  # rg is done, stopped early, or late: nothing of it stays
        proc.stdout.close()
        proc.stderr.close()
    if not timed_out and not stopped and buf:
        on_records([bytes(buf)])
    return timed_out, proc.returncode, bytes(err).decode("utf-8", "replace")


def _records(buf, sep, on_records):
    """The whole records in `buf` to `on_records` in one list (one split, not a call per record); the
    unended rest stays in `buf`."""
    end = buf.rfind(sep)
    if end < 0:
        return False
    records = bytes(buf[:end]).split(sep)
    del buf[: end + 1]
    return on_records(records)


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
    def glob(self, ws, pattern, path=".", limit=200, include_ignored=False, newest_first=False):
        """Matches of `pattern` relative to `path`, in path order (as `rg --files` lists them, sorted), or
        newest first: that one stats every match, path order only the ones returned."""
        base = ws.resolve(path)
        if not os.path.isdir(base):
            raise HelperError(f"{ws.shown(base)}: not a directory")
        rel = _relative_glob(ws, pattern, base)
        match = self.compile(glob_regex(rel).pattern).match
        tail = _LITERAL_TAIL.search(rel).group()  # every match ends with it: a str test before the regex
        deadline = time.monotonic() + self.timeout
        cut = len(base.rstrip("/")) + 1  # entries are under base: the relative path is a slice, not relpath
        found = ending = [f for f in self._entries(ws, base, deadline, include_ignored, tail) if f.endswith(tail)]
        if not _ANY_FOLDER_THEN_END.fullmatch(rel):  # there, ending so is matching: no regex
            found = []
            for i, full in enumerate(ending):  # the regex only where the literal end matched (a str test)
                if match(full[cut:]):
                    found.append(full)
                if not i & 4095:
                    self._deadline_check(deadline, "fs_glob")
        limit = max(0, int(limit))
        if not newest_first:
            found.sort()
            return [d for d in map(_lstat_dict(ws), found[: limit + 64]) if d is not None][:limit]
        stats = []
        for full in found:
            try:
                stats.append((-os.lstat(full).st_mtime, full))
            except OSError:
                continue
        stats.sort()  # newest first, then by path; only what is returned becomes a dict
        return [d for d in map(_lstat_dict(ws), (full for _, full in stats[:limit])) if d is not None]

    def _entries(self, ws, base, deadline, include_ignored, tail=""):
        """Every file and folder under `base` (not .git, no symlink followed), bounded; with rg, only those
        that may end with `tail` (and the folders above them): see `_keep_rules`."""
        if not self.rg:
            check = lambda: self._deadline_check(deadline, "fs_glob")  # noqa: E731
            ignored = None if include_ignored else Gitignores(ws.root, base)
            return [os.path.join(d, n) for d, n, _ in _walk(base, check, ignored)]
        listed = []

        def on_records(recs):
            listed.extend(recs)
            return len(listed) >= WALK_MAX_ENTRIES

        argv = [self.rg, "--files", "--null", *rg_flags(include_ignored)]
        fd = _rules_fd(_keep_rules(tail))
        try:
            if fd is not None:
                argv += ["--ignore-file", f"/dev/fd/{fd}"]
            argv += ["--", base]
            timed_out, _, _ = run_killable(argv, self.timeout, on_records, b"\0", () if fd is None else (fd,))
        finally:
            if fd is not None:
                os.close(fd)
        if timed_out:
            raise SearchTimeout(_timeout_message("fs_glob", self.timeout))
        # decoded at once (as os.fsdecode would each: UTF-8, undecodable bytes kept as surrogates)
        files = b"\0".join(listed[:WALK_MAX_ENTRIES]).decode("utf-8", "surrogateescape").split("\0") if listed else []
        dirs = set()
        for d in {f.rpartition("/")[0] for f in files}:  # rg lists files only: their folders are entries too
            while len(d) > len(base) and d not in dirs:
                dirs.add(d)
                d = d.rpartition("/")[0]
        files.extend(dirs)
        return files

    # -- grep
    def grep(self, ws, pattern, path=".", glob=None, ignore_case=False, max_results=200, include_ignored=False):
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
            return self._rg_grep(ws, pattern, base, wanted, (ignore_case, include_ignored), max_results)
        ignored = None if include_ignored else Gitignores(ws.root, base)
        return self._walk_grep(ws, pattern, base, wanted, ignore_case, max_results, ignored)

    def _rg_grep(self, ws, pattern, base, wanted, flags, max_results):
        ignore_case, include_ignored = flags
        # No --sort: it makes rg run on one thread. The matches are sorted here; past max_results, which
        # ones were found first is not fixed (the answer says it stopped).
        argv = [self.rg, "--json", *rg_flags(include_ignored), "--max-filesize", str(GREP_MAX_FILE)]
        if ignore_case:
            argv.append("--ignore-case")
        argv += ["--regexp", pattern, "--", base]
        out = []

        def on_records(recs):
            for rec in recs:
                if not rec.startswith(_MATCH):  # begin, end, context, summary: nothing to read
                    continue
                data = loads(rec.decode("utf-8"))["data"]
                full = os.fsdecode(_rg_bytes(data["path"]))
                if wanted(full):
                    line = _rg_bytes(data["lines"]).rstrip(b"\r\n").decode("utf-8", "replace")
                    out.append({"path": ws.rel(full), "line": int(data["line_number"]),
                                "text": line[:GREP_LINE_MAX]})
                    if len(out) >= max_results:
                        return True
            return False

        timed_out, code, err = run_killable(argv, self.timeout, on_records)
        if timed_out:
            raise SearchTimeout(_timeout_message("fs_grep", self.timeout))
        if code == 2 and not out and ("regex" in err or "error parsing" in err):
            raise HelperError(f"invalid regular expression {pattern!r}: {err.strip()[-800:]}")
        out.sort(key=lambda m: (m["path"], m["line"]))
        return out

    def _walk_grep(self, ws, pattern, base, wanted, ignore_case, max_results, ignored):
        try:
            rx = self.compile(("(?i)" if ignore_case else "") + pattern)
        except Exception as exc:  # re.error, or RE2's own error
            raise HelperError(f"invalid regular expression {pattern!r}: {exc}") from None
        deadline = time.monotonic() + self.timeout
        check = lambda: self._deadline_check(deadline, "fs_grep")  # noqa: E731
        if os.path.isfile(base):
            files = [base]
        else:
            files = (os.path.join(d, n) for d, n, is_dir in _walk(base, check, ignored) if not is_dir)
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


def _rg_bytes(field):
    """One of rg --json's strings: {"text": ...}, or {"bytes": base64} where it is not UTF-8."""
    if "text" in field:
        return field["text"].encode("utf-8", "surrogateescape")
    return base64.b64decode(field["bytes"])


def _timeout_message(what, timeout):
    return (
        f"{what} stopped after {timeout:g} s and was killed: the pattern is too costly for this tree;"
        " narrow the path or glob, or simplify the pattern"
    )


_LITERAL_TAIL = re.compile(r"[^*?\[\]{}]*\Z")  # the end of a glob that only matches itself
# `**/*.py`: its regex matches exactly the paths that end with its plain end (which has no `/`, so it is in the
# last name, and that name is under the search folder)
_ANY_FOLDER_THEN_END = re.compile(r"\*\*/\*[^*?\[\]{}/\\]+")


def _keep_rules(tail):
    """rg's listing narrowed to what a glob ending in `tail` can match, the ignore files still read: an
    `--ignore-file` that ignores every file but those whose name ends with the tail's last part, and what is
    under a folder whose name does (a folder is a match when a file under it is listed). rg reads such a file
    after the project's ignore files, so they keep their say: it only drops more, and what it keeps still
    goes through the glob's regex (`rg --glob` would be simpler, but a glob there overrides the ignore files).
    None when there is nothing to narrow by. The part used is the longest end of plain characters, each
    escaped: a newline or anything odd in a pattern cannot add a rule of its own."""
    name = tail.rpartition("/")[2]
    i = len(name)
    while i and name[i - 1].isprintable() and not name[i - 1].isspace():
        i -= 1
    name = name[i:]
    if not name:
        return None
    esc = "".join(c if c.isascii() and c.isalnum() else "\\" + c for c in name)
    return f"*\n!*/\n!*{esc}\n!**/*{esc}/**\n".encode()


def _rules_fd(rules):
    """A pipe's read end holding `rules`, for rg to open as /dev/fd/N; None without rules or a pipe (rg then
    lists everything, and the regex alone decides)."""
    if rules is None or len(rules) > 4096:  # far under a pipe's buffer: the write never blocks
        return None
    try:
        r, w = os.pipe()
    except OSError:
        return None
    try:
        os.write(w, rules)
    except OSError:
        os.close(r)
        return None
    finally:
        os.close(w)
    return r


def _lstat_dict(ws):
    def one(full):
        try:
            return _stat_dict(ws, full, os.lstat(full))
        except OSError:
            return None  # gone since it was listed

    return one


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


def _walk(real, check=None, ignored=None):
    """(dirpath, name, is_dir) under `real`, sorted, never following symlinks, bounded; without what the
    .gitignore files of `ignored` (a Gitignores) ignore."""
    count = 0
    for dirpath, dirnames, filenames in os.walk(real, followlinks=False):
        if check is not None:
            check()
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        if ignored is not None:
            ignored.enter(dirpath)
            dirnames[:] = [d for d in dirnames if not ignored.ignored(dirpath, d, True)]
            filenames = [f for f in filenames if not ignored.ignored(dirpath, f, False)]
        for d in dirnames:
            yield dirpath, d, True
        for f in sorted(filenames):
            yield dirpath, f, False
        count += len(dirnames) + len(filenames)
        if count > WALK_MAX_ENTRIES:
            return


class Gitignores:
    """The walker's reading of .gitignore files (rg reads them itself): a folder's patterns apply beneath
    it, the last match wins, `!` takes a path back, a trailing `/` means folders only, any other `/`
    anchors the pattern to its folder; a folder ignored is not entered. Not read (rg reads them): .ignore,
    .rgignore, .git/info/exclude and git's global excludes file. `compile` is the search's own (RE2 on
    the host), for a pattern in a .gitignore is the project's text, written by whoever."""

    def __init__(self, root, base, compile=re.compile):
        self.compile = compile
        self.chains = {}  # folder -> [(folder, rules)] of it and the folders above it that have rules
        self.root = root.rstrip("/") or "/"
        chain, d = [], self.root
        rel = os.path.relpath(base, self.root)
        for part in [] if rel in (".", "") or rel.startswith("..") else rel.split("/"):
            chain = self._with(chain, d)
            d = os.path.join(d, part)
        self.chains[os.path.dirname(base.rstrip("/"))] = chain

    def _with(self, chain, folder):
        rules = self._read(folder)
        return [*chain, (folder, rules)] if rules else chain

    def _read(self, folder):
        try:
            fd = os.open(os.path.join(folder, ".gitignore"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return []
        try:
            if not _stat.S_ISREG(os.fstat(fd).st_mode):
                return []
            text = os.read(fd, 1 << 20).decode("utf-8", "replace")
        except OSError:
            return []
        finally:
            os.close(fd)
        return [r for r in map(self._rule, text.splitlines()) if r is not None]

    def _rule(self, line):
        """(negated, folders only, anchored, matcher) of one line, or None for a blank or a comment."""
        line = line.rstrip("\r")
        if not line.endswith("\\ "):
            line = line.rstrip(" ")
        if not line or line.startswith("#"):
            return None
        negated = line.startswith("!")
        line = line[1:] if negated else line
        if line.startswith(("\\#", "\\!")):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        anchored = "/" in line
        line = line.lstrip("/")
        if not line:
            return None
        try:
            return negated, dir_only, anchored, self.compile(glob_regex(line).pattern).match
        except Exception:  # a pattern this dialect cannot read ignores nothing
            return None

    def enter(self, folder):
        """The walker is in `folder`: its .gitignore joins those above it."""
        if folder not in self.chains:
            self.chains[folder] = self._with(self.chains.get(os.path.dirname(folder), []), folder)

    def ignored(self, folder, name, is_dir):
        verdict = False
        full = os.path.join(folder, name)
        for where, rules in self.chains.get(folder, ()):
            rel = full[len(where.rstrip("/")) + 1 :]
            for negated, dir_only, anchored, match in rules:
                if (is_dir or not dir_only) and match(rel if anchored else name):
                    verdict = not negated
        return verdict


class _Child:
    """One child helper in a session of its own, its stdin and stdout one end of a socket pair: a send to a
    child that died fails with EPIPE instead of a SIGPIPE that would end the helper."""

    def __init__(self, argv):
        mine, theirs = socket.socketpair()
        try:
            self.proc = subprocess.Popen(argv, stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=subprocess.PIPE,
                                         start_new_session=True, close_fds=True)  # fmt: skip
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        self.sock = mine
        self.buf = bytearray()

    def ask(self, request, timeout):
        """The child's one-line answer to `request`; None when it died; TimeoutError past `timeout`."""
        try:
            self.sock.sendall(request, socket.MSG_NOSIGNAL)
        except OSError:
            return None
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.sock, selectors.EVENT_READ)
            while b"\n" not in self.buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise TimeoutError
                data = self.sock.recv(1 << 20)
                if not data:
                    return None
                self.buf += data
        line, _, rest = bytes(self.buf).partition(b"\n")
        self.buf = bytearray(rest)
        return line

    def stderr_tail(self):
        os.set_blocking(self.proc.stderr.fileno(), False)
        try:
            return (self.proc.stderr.read() or b"").decode("utf-8", "replace").strip()[-300:]
        except OSError:
            return ""

    def end(self):
        _kill_group(self.proc)
        self.sock.close()
        self.proc.stderr.close()


class ChildSearch:
    """The helper's searches, each in a child helper (`argv`, reading requests as lines on stdin) in a
    process group of its own: a regex or glob that would run for ever (Python `re` backtracks) dies with
    its group at the deadline, and the helper's threads stay free. A child that answered in time is kept
    for the next search (a new one costs a Python start-up); one that did not is killed. A result comes as
    the JSON text the child wrote (`wire.Encoded`), for the server to pass on."""

    KEEP = 2  # idle children kept

    def __init__(self, argv, timeout=SEARCH_TIMEOUT_S, idle=None):
        self.argv = list(argv)
        self.timeout = timeout
        self.dialect = RG_DIALECT if find_rg() else "Python re"
        self._idle = [] if idle is None else idle  # shared with the copies with_timeout makes

    def with_timeout(self, timeout):
        return ChildSearch(self.argv, timeout, self._idle)

    def glob(self, ws, pattern, path=".", limit=200, include_ignored=False, newest_first=False):
        args = {"pattern": pattern, "path": path, "limit": limit, "include_ignored": include_ignored,
                "newest_first": newest_first}
        return self._run(ws, "glob", args)

    def grep(self, ws, pattern, path=".", glob=None, ignore_case=False, max_results=200, include_ignored=False):
        args = {"pattern": pattern, "path": path, "glob": glob, "ignore_case": ignore_case}
        return self._run(ws, "grep", {**args, "max_results": max_results, "include_ignored": include_ignored})

    def close_idle(self):
        """End the kept children (before a sweep, which would list them as killed, and at the end)."""
        while self._idle:
            try:
                self._idle.pop().end()
            except (IndexError, OSError):
                pass

    def _take(self):
        try:
            return self._idle.pop(), True  # list.pop is atomic: no lock for the few threads that search
        except IndexError:
            pass
        try:
            return _Child(self.argv), False
        except OSError as exc:
            raise HelperError(f"the search could not start its process: {exc.strerror or exc}") from None

    def _run(self, ws, op, args):
        what = "fs_" + op
        request = dumps({"op": op, "root": ws.root, "alias": ws.alias, "args": args, "timeout": self.timeout})
        request = (request + "\n").encode("utf-8", "backslashreplace")
        while True:
            child, reused = self._take()
            try:
                line = child.ask(request, self.timeout + 5.0)
            except TimeoutError:
                child.end()
                raise SearchTimeout(_timeout_message(what, self.timeout)) from None
            if line is not None:
                break
            tail = child.stderr_tail()
            child.end()
            if not reused:  # a kept child may have been swept since: then a new one, once
                raise HelperError(f"{what}'s search process failed (exit code {child.proc.poll()}): {tail}")
        if len(self._idle) < self.KEEP:
            self._idle.append(child)
        else:
            child.end()
        return _answer(what, line)


_RESULT = b'{"ok":true,"result":'


def _answer(what, line):
    """The child's result; a success as the JSON text it is (Encoded), the helper only passes it on."""
    if line.startswith(_RESULT) and line.endswith(b"}"):
        try:
            return Encoded(line[len(_RESULT) : -1].decode("utf-8"))
        except UnicodeDecodeError:
            pass
    try:
        msg = loads(line.decode("utf-8"))
    except Exception:
        raise HelperError(f"{what}'s search process sent a bad answer: {line[:200]!r}") from None
    if msg.get("ok"):
        return msg["result"]
    outside = msg.get("kind") == OutsideWorkspace.kind
    raise (OutsideWorkspace if outside else HelperError)(msg["message"])


def child_main(inp, out):
    """A child helper's searches: each request a line on `inp`, each answer a line on `out` (ChildSearch)."""
    for line in iter(inp.readline, b""):
        out.write((dumps(_child_search(line)) + "\n").encode("utf-8", "backslashreplace"))
        out.flush()


def _child_search(line):
    from .workspace import Workspace

    try:
        req = loads(line.decode("utf-8"))
        ws = Workspace(req["root"], req["alias"])
        search = Search(timeout=float(req.get("timeout", SEARCH_TIMEOUT_S)))
        a = req["args"]
        ignored = bool(a.get("include_ignored"))
        if req["op"] == "glob":
            result = search.glob(ws, a["pattern"], a.get("path", "."), a.get("limit", 200), ignored,
                                 bool(a.get("newest_first")))
        else:
            where, glob, ic = a.get("path", "."), a.get("glob"), a.get("ignore_case", False)
            result = search.grep(ws, a["pattern"], where, glob, ic, a.get("max_results", 200), ignored)
        return {"ok": True, "result": result}
    except HelperError as exc:
        return {"ok": False, "kind": exc.kind, "message": str(exc)}
    except Exception as exc:
        return {"ok": False, "kind": "SandboxError", "message": f"{type(exc).__name__}: {exc}"}
