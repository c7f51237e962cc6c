"""What the checkpoint's one `git status` (git's untracked cache on, the index dated back, the desk's own look at
files git saw changing in its own second) could miss, tried on real folders with the host's git: every
checkpoint equals the one a new store takes from nothing, and holds the bytes on disk."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from desktop_app.core import CheckpointError, ShadowStore
from desktop_app.core._checkpoints import _fs_type, _parse_status


def _write(path: Path, body: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)


def _same_size_put_back(path: Path, body: bytes) -> None:
    """Rewrite with bytes of the same size and put its times back (as `cp -p`, `tar x`, `rsync -t` do)."""
    st = path.stat()
    path.write_bytes(body)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_what_a_faster_walk_could_miss_is_seen(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for name in ("src/a.py", "src/b.py", "docs/readme.md", "keep.txt", "target.txt"):
        _write(ws / name, name.encode() * 4)
    store = ShadowStore(tmp_path / "cps", ws)
    assert store.untracked_cache, f"the tests' folder is on {_fs_type(ws)!r}: git's untracked cache is not tried"
    blind = ShadowStore(tmp_path / "blind", ws)
    blind.untracked_cache = False  # every folder read each time: what any file system gets
    store.take()
    assert b"UNTR" in (store.git_dir / "index").read_bytes()  # git's untracked cache is in the index
    old = time.time() - 3600
    steps: list[tuple[str, Callable[[], object], Callable[[dict[str, bytes]], bool]]] = [
        ("a file made", lambda: _write(ws / "src" / "new.py", b"new"), lambda f: f.get("src/new.py") == b"new"),
        ("that file gone in the same second", lambda: (ws / "src" / "new.py").unlink(),
         lambda f: "src/new.py" not in f),
        ("made and gone between two checkpoints",
         lambda: (_write(ws / "src" / "flash.py", b"x"), (ws / "src" / "flash.py").unlink()),
         lambda f: "src/flash.py" not in f),
        ("a new empty folder", lambda: (ws / "empty").mkdir(), lambda f: not any(p.startswith("empty") for p in f)),
        ("then a file in it", lambda: _write(ws / "empty" / "now.txt", b"in"),
         lambda f: f.get("empty/now.txt") == b"in"),
        ("a file made in a folder whose mtime is put back",
         lambda: (_write(ws / "docs" / "hidden.md", b"h"), os.utime(ws / "docs", (old, old))),
         lambda f: f.get("docs/hidden.md") == b"h"),
        ("a same-size rewrite with its mtime put back", lambda: _same_size_put_back(ws / "keep.txt", b"K" * 32),
         lambda f: f["keep.txt"] == b"K" * 32),
        ("and again, in the same second", lambda: _same_size_put_back(ws / "keep.txt", b"L" * 32),
         lambda f: f["keep.txt"] == b"L" * 32),
        ("a .gitignore, and a file it ignores",
         lambda: (_write(ws / ".gitignore", b"*.log\n"), _write(ws / "docs" / "run.log", b"noise")),
         lambda f: "docs/run.log" not in f and ".gitignore" in f),
        ("the .gitignore emptied", lambda: _write(ws / ".gitignore", b""), lambda f: f.get("docs/run.log") == b"noise"),
        ("a file replaced by a link", lambda: ((ws / "keep.txt").unlink(), (ws / "keep.txt").symlink_to("target.txt")),
         lambda f: f["keep.txt"] == b"target.txt"),
        ("a folder renamed", lambda: (ws / "src").rename(ws / "lib"),
         lambda f: f.get("lib/a.py") == b"src/a.py" * 4 and not any(p.startswith("src/") for p in f)),
    ]
    for what, step, holds in steps:
        step()
        cp = store.take()
        files = store.files(cp.id)
        body = store.blobs({e.blob for e in files.values()})
        assert holds({p: body[e.blob] for p, e in files.items()}), what
        assert cp.id == ShadowStore(tmp_path / f"fresh-{len(what)}-{what[:8]}", ws).take().id, what
        assert blind.take().id == cp.id, what
    assert store.take().id == cp.id and store._cache is not None
    assert files["keep.txt"].mode == "120000"


def test_rewrites_faster_than_the_clock_are_each_seen(tmp_path: Path) -> None:
    """Same-size rewrites checkpointed one after the other (git may compare whole seconds; the kernel's clock
    ticks coarser than a write): each checkpoint holds the bytes written just before it."""
    ws = tmp_path / "ws"
    for d in range(5):
        for f in range(20):
            _write(ws / f"d{d}" / f"f{f}.txt", b"%04d" % f)
    store = ShadowStore(tmp_path / "cps", ws)
    store.take()
    for i in range(12):
        body = b"%04d" % (1000 + i)
        (ws / "d2" / "f3.txt").write_bytes(body)
        if i % 3 == 0:
            _write(ws / "d4" / f"n{i}.txt", body)  # a new file too, now and then
        files = store.files(store.take().id)
        assert store.blobs({files["d2/f3.txt"].blob}) == {files["d2/f3.txt"].blob: body}, i
        assert all(f"d4/n{j}.txt" in files for j in range(0, i + 1, 3)), i


def test_a_rewrite_while_git_records_the_file_is_seen(tmp_path: Path) -> None:
    """git here compares whole seconds: a file rewritten (same size, an old mtime put back, as `tar x` does)
    after git's index recorded it and within the second of its last change looks unchanged to git; another
    process does it while a checkpoint goes through git's index. The next checkpoint holds the new bytes."""
    ws = tmp_path / "ws"
    _write(ws / "other.txt", b"o")
    store = ShadowStore(tmp_path / "cps", ws)
    store.take()
    old = time.time_ns() - 3600 * 1_000_000_000
    run, hit = store._run, 0

    def racing_run(*args: str, **kw: object) -> object:
        done = run(*args, **kw)
        if args[:2] == ("update-index", "--add"):  # git has just read the file: the other process writes
            _same_size_put_back(ws / "f.txt", b"B%07d" % attempt)
        return done

    store._run = racing_run  # type: ignore[method-assign]
    for attempt in range(20):  # until one rewrite shares the second (mostly the first: it is ms apart)
        _write(ws / "f.txt", b"A%07d" % attempt)
        os.utime(ws / "f.txt", ns=(old, old))
        _write(ws / ".gitignore", b"# %d\n" % attempt)  # a changed .gitignore: this one goes through git's index
        written = (ws / "f.txt").stat().st_ctime_ns // 1_000_000_000
        store.take()
        files = store.files(store.take().id)
        assert store.blobs({files["f.txt"].blob})[files["f.txt"].blob] == b"B%07d" % attempt, attempt
        hit += (ws / "f.txt").stat().st_ctime_ns // 1_000_000_000 == written
        if hit:
            break
    assert hit  # the second was shared: git saw no change, the desk did


@pytest.mark.parametrize("untracked_cache", [True, False])
@pytest.mark.parametrize("then", ["a .gitignore changed", "the second settled"])
def test_a_rewrite_git_cannot_see_stays_seen_when_git_records_again(tmp_path: Path, untracked_cache: bool,
                                                                     then: str) -> None:
    """A same-size rewrite with its mtime put back, in the second git recorded the file, is seen by the desk
    (git sees nothing); the next checkpoint through git's index (a .gitignore changed, or the second past) keeps
    those bytes, not the index's older ones (one CI run in ten lost them before)."""
    ws = tmp_path / "ws"
    old = time.time_ns() - 3600 * 1_000_000_000
    for attempt in range(20):  # until the steps share one second (mostly the first: they are ms apart)
        _write(ws / "keep.txt", b"A%07d" % attempt)
        os.utime(ws / "keep.txt", ns=(old, old))  # an old mtime (as `tar x` leaves): git's entry is not racy
        store = ShadowStore(tmp_path / f"cps{attempt}", ws)
        store.untracked_cache = untracked_cache
        second = time.time_ns() // 1_000_000_000
        store.take()  # through git's index: keep.txt recorded with this second's ctime
        _same_size_put_back(ws / "keep.txt", b"B%07d" % attempt)
        seen = store.files(store.take().id)  # the desk's own look
        if then == "a .gitignore changed":
            _write(ws / ".gitignore", b"*.log\n")
        else:
            assert store._settle_at is not None
            time.sleep(max(0, store._settle_at - time.time_ns()) / 1e9)
        files = store.files(store.take().id)
        if (ws / "keep.txt").stat().st_ctime_ns // 1_000_000_000 != second:
            continue  # a second boundary fell between the steps: git saw the change on its own
        assert store.blobs({seen["keep.txt"].blob})[seen["keep.txt"].blob] == b"B%07d" % attempt
        assert store.blobs({files["keep.txt"].blob})[files["keep.txt"].blob] == b"B%07d" % attempt
        assert store.take().id == ShadowStore(tmp_path / f"fresh{attempt}", ws).take().id
        return
    pytest.fail("20 tries and never two steps in one second")


def test_a_store_written_before_the_untracked_cache_is_read(tmp_path: Path) -> None:
    """The layout main wrote (HEAD unborn, no untracked cache in the index) is read, and goes on."""
    ws = tmp_path / "ws"
    _write(ws / "a" / "one.txt", b"1")
    _write(ws / "two.txt", b"2")
    first = ShadowStore(tmp_path / "cps", ws).take()
    old = ShadowStore(tmp_path / "cps", ws)
    old.untracked_cache = False
    old._run("update-index", "--no-untracked-cache")
    (old.git_dir / "HEAD").write_text("ref: refs/heads/master\n")
    assert b"UNTR" not in (old.git_dir / "index").read_bytes()
    store = ShadowStore(tmp_path / "cps", ws)
    assert store.take().id == first.id and set(store.files(first.id)) == {"a/one.txt", "two.txt"}
    _write(ws / "a" / "three.txt", b"3")
    assert "a/three.txt" in store.files(store.take().id)
    assert (store.git_dir / "HEAD").read_text().strip() != "ref: refs/heads/master"


def test_what_git_status_says_is_read_or_refused() -> None:
    out = (b"1 .M N... 100644 100644 100644 " + b"a" * 40 + b" " + b"a" * 40 + b" dir/with space.txt\0"
           b"1 M. N... 100644 100644 100644 " + b"b" * 40 + b" " + b"c" * 40 + b" staged-only.txt\0"
           b"1 .D N... 100644 100644 000000 " + b"d" * 40 + b" " + b"d" * 40 + b" gone.txt\0"
           b"? new/\xff.bin\0? nested/\0")
    changed, others = _parse_status(out)
    assert changed == {"dir/with space.txt", "gone.txt"}
    assert others == {"new/\udcff.bin", "nested/"}
    for bad in (b"2 R. N... 100644 100644 100644 x y R100 a\0b\0", b"u UU N... 1 2 3 4 a b c d\0", b"1 .M short\0"):
        with pytest.raises(CheckpointError, match="git status gave an entry this desk cannot read"):
            _parse_status(bad)


def test_the_file_system_is_known_or_the_cache_stays_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _fs_type(Path("/proc/self")) == "proc"
    assert _fs_type(tmp_path) not in ("", "proc")
    monkeypatch.setattr("sys.platform", "darwin")
    assert _fs_type(tmp_path) == "" and not ShadowStore(tmp_path / "cps", tmp_path / "ws").untracked_cache
