"""Checkpoint benchmarks: the workspace recorded before a call that may write (core/_checkpoints.py, a shadow
git store), on a 10,000-file project: unchanged since the last checkpoint, and with one file changed; and how
much the store grows for that one change.

Prints `bench NAME VALUE UNIT` lines (the issue's targets: 50 ms unchanged, 20 ms for one change)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from benchmarks._util import measure, report
from desktop_app.core import ShadowStore

FILES = 10_000
PER_DIR = 100


def _project(root: Path) -> Path:
    ws = root / "ws"
    for d in range(FILES // PER_DIR):
        folder = ws / f"pkg{d:03d}"
        folder.mkdir(parents=True)
        for f in range(PER_DIR):
            (folder / f"mod{f:03d}.py").write_text(f"# module {d}.{f}\nVALUE = {d * PER_DIR + f}\n" * 8)
    (ws / ".gitignore").write_text("build/\n")
    return ws


def _store_bytes(store: ShadowStore) -> int:
    return sum(p.stat().st_size for p in store.git_dir.rglob("*") if p.is_file())


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="bench-checkpoints-") as tmp:
        root = Path(tmp)
        ws = _project(root)
        store = ShadowStore(root / "state", ws)
        t0 = time.perf_counter()
        store.take()
        report("checkpoint_first_10k_files_ms", (time.perf_counter() - t0) * 1000, "ms")
        time.sleep(1.1)  # past the index's second: no entry is racily clean (as between a person's calls)

        def unchanged() -> float:
            t = time.perf_counter()
            store.take()
            return (time.perf_counter() - t) * 1000

        measure("checkpoint_10k_files_ms", "ms", unchanged, runs=9)
        n = [0]

        def one_change() -> float:
            n[0] += 1
            (ws / "pkg042" / "mod007.py").write_text(f"VALUE = {n[0]}\n")
            t = time.perf_counter()
            store.take()
            return (time.perf_counter() - t) * 1000

        before = _store_bytes(store)
        measure("checkpoint_one_change_ms", "ms", one_change, runs=9)
        report("checkpoint_one_change_store_growth_kb", (_store_bytes(store) - before) / 1024 / 9, "KB")
