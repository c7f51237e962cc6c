"""SIGKILL the store's process mid-stream: every acknowledged transition is still there, chain intact.

About SQLite itself: the crash of a process that holds a SQLite file (on PostgreSQL the server keeps it)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from desktop_app.store import SqlStore

ROOT = Path(__file__).resolve().parents[2]


def _run_and_kill(db: Path, acks_wanted: int) -> list[tuple[int, str, str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.crash_child", str(db)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline()
        assert first == "ready\n", first + proc.stderr.read()
        acks = []
        while len(acks) < acks_wanted:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            acks.append(line)
        proc.send_signal(signal.SIGKILL)  # no close(), no atexit: the writer dies mid-batch
        rest, _ = proc.communicate(timeout=30)
        acks.extend(rest.splitlines())  # printed before the kill: acknowledged too
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    out = []
    for line in acks:
        parts = line.split()
        if len(parts) == 4:  # a line cut by the kill was never a whole acknowledgement
            out.append((int(parts[0]), parts[1], parts[2], parts[3]))
    return out


async def test_acknowledged_transitions_survive_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    acks = _run_and_kill(db, 600)
    assert len(acks) >= 600
    store = await SqlStore.open(db)
    try:
        result = await store.verify()
        assert result.ok, result.message
        assert result.count >= max(seq for seq, *_ in acks)
        for seq, record_id, state, h in acks:
            trail = await store.get_trail(record_id)
            assert (seq, state, h) in [(e.seq, e.state.value, e.hash) for e in trail]
        # The reopened store carries on the same chain.
        stats = await store.stats()
        assert stats.last_entry_seq == result.count
    finally:
        await store.close()
