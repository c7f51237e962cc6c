"""Audit store benchmarks: sustained transition writes from asyncio, queries over 1M records, and
`verify` of a 1M-entry chain (the chain walk and every cross-check), per million entries: the worst case (one
entry per call) and, beside it, calls of three entries each.

Prints `bench NAME VALUE UNIT` lines. The 1M-record fixture is bulk-built with sqlite3 into the
schema the store's migrations create, with the chain the store writes (digests in every entry, so
verify cross-checks each row), and cached under .bench/ keyed by the schema version.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._util import repeat, report
from desktop_app.core import AuditEntry, Outcome, ToolCallRecord, ToolCallState
from desktop_app.store import SCHEMA_VERSION, AuditQuery, HeadSigner, SqlStore
from desktop_app.store._rollup import backfill_sql, wait_backfill_sql
from desktop_app.store.integrity._chain import GENESIS, link_hash, split_canonical
from desktop_app.store.integrity._digests import record_digests, sha

FIXTURE_RECORDS = 1_000_000
FIXTURE_VERSION = 2  # bump when the generated data changes (2: digests in the entries, tool_use ids)
ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".bench"
DAY = 86_400.0
T0 = 1_750_000_000.0
TOOLS = ("bash", "fs_read", "fs_write", "fs_edit", "fs_glob", "fs_grep", "fs_list", "bash_background",
         "todo_write", "todo_read", "web_fetch", "fs_delete")
STATES = (("COMPLETED", "ok", 80), ("FAILED", "error", 8), ("DENIED", "policy", 6), ("SEALED", "sealed", 1),
          ("APPROVAL_REQUIRED", None, 1), ("EXECUTING", None, 2), ("PENDING", None, 2))


def _vocab(rng: random.Random, n: int = 4000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(4, 9))))
    return sorted(words)


def build_fixture(path: Path, n: int, *, seed: int = 7, per_record: int = 1) -> None:
    """Create `path` with the store's schema and `n` tool-call records, each with `per_record` chained entries."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for p in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        p.unlink(missing_ok=True)

    async def _create() -> None:
        await (await SqlStore.open(path)).close()

    asyncio.run(_create())
    rng = random.Random(seed)
    words = _vocab(rng)
    weights = [s[2] for s in STATES]
    con = sqlite3.connect(path, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=OFF")
    con.execute("PRAGMA cache_size=-400000")
    # Indexes and the FTS trigger are rebuilt in bulk after the rows are in: much faster than row by row.
    ddl = con.execute("SELECT type, name, sql FROM sqlite_master WHERE tbl_name IN ('tool_calls', 'audit_entries') "
                      "AND type IN ('index', 'trigger') AND sql IS NOT NULL").fetchall()
    for kind, name, _ in ddl:
        con.execute(f"DROP {kind.upper()} {name}")
    con.execute("BEGIN")
    prev, seq, chunk_rows, chunk_entries = GENESIS, 0, [], []
    span = 30 * DAY
    for i in range(n):
        created = T0 + span * i / n
        tool = TOOLS[i % len(TOOLS)] if rng.random() < 0.5 else rng.choice(TOOLS)
        state, outcome, _ = rng.choices(STATES, weights)[0]
        w = rng.sample(words, 4)
        if tool.startswith("bash"):
            inp = {"command": f"grep -rn {w[0]} src/{w[1]} | head -n {i % 50}"}
        else:
            inp = {"path": f"/workspace/{w[0]}/{w[1]}.py"}
        out = f"{w[2]} {w[3]} line {i % 997}"
        result = {"content": [{"type": "text", "text": out}], "details": {}, "is_error": state == "FAILED"}
        rid = f"call_{i:012x}{rng.getrandbits(64):016x}"
        search = "\n".join([tool, *map(str, inp.values()), out])
        row = _row(rid, i, tool, inp, state, outcome, result, created)
        chunk_rows.append((rid, *row.values(), search))
        # One entry per record (the worst ratio of rows to entries for verify's cross-checks), or a real
        # call's three or more; each carries the digests of the final row (verify compares the last one).
        digests = record_digests(row, sha(row["input"]))
        for k, st in enumerate((*("PENDING", "EXECUTING", "COMPLETED")[: per_record - 1], state)):
            seq += 1
            at = created + 0.2 * (k + 1) / per_record
            prefix, suffix = split_canonical(rid, st, at, "engine", "", "{}", digests)
            h = link_hash(prev, f"{prefix}{seq}{suffix}")
            chunk_entries.append((seq, rid, st, at, "engine", "", "{}", prev, h, None, digests))
            prev = h
        if len(chunk_rows) >= 50_000 or i == n - 1:
            con.executemany(f"INSERT INTO tool_calls (id, {', '.join(row)}, search_text) "
                            f"VALUES ({', '.join('?' * (len(row) + 2))})", chunk_rows)
            con.executemany("INSERT INTO audit_entries (seq, record_id, state, at, actor, note, data, prev_hash, "
                            "hash, message_id, digests) VALUES (?,?,?,?,?,?,?,?,?,?,?)", chunk_entries)
            chunk_rows, chunk_entries = [], []
    con.execute("INSERT INTO audit_head (id, seq, hash) VALUES (1, ?, ?)", (seq, prev))
    con.execute("INSERT INTO tool_calls_fts(tool_calls_fts) VALUES ('rebuild')")
    for sql in (backfill_sql("sqlite"), *wait_backfill_sql("sqlite")):  # the charts' rollups, as the migration
        con.execute(sql)
    for _, _, sql in ddl:
        con.execute(sql)
    con.execute("COMMIT")
    con.execute("ANALYZE")
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()


def _row(rid: str, i: int, tool: str, inp: dict, state: str, outcome: str | None, result: dict,
         created: float) -> dict:
    """A tool_calls row (without `id` and `search_text`) as the store writes it, in RECORD_FIELDS order."""
    return {
        "tool_use_id": f"toolu_{i:012x}", "name": tool, "input": json.dumps(inp), "input_blob": None,
        "session_id": f"ses_{i // 500:06d}", "project_id": f"prj_{(i // 500) % 20:02d}", "batch_index": 0,
        "state": state, "outcome": outcome, "approval": '{"required":false}', "provenance": "[]",
        "result": json.dumps(result) if state in ("COMPLETED", "FAILED") else None, "error": None,
        "is_error": int(state == "FAILED"), "sandbox": "{}",
        "read_only": int(tool in ("fs_read", "fs_glob", "fs_grep", "fs_list")), "risk": "low",
        "started_at": created + 0.01, "completed_at": created + 0.2, "duration_ms": 190.0, "created_at": created,
        "updated_at": created + 0.2,
    }


def fixture(n: int = FIXTURE_RECORDS, per_record: int = 1) -> Path:
    shape = "" if per_record == 1 else f"_x{per_record}"
    path = CACHE / f"store_{n}{shape}_s{SCHEMA_VERSION}_f{FIXTURE_VERSION}.db"
    if not path.exists():
        tmp = path.with_suffix(".building")
        t = time.perf_counter()
        build_fixture(tmp, n, per_record=per_record)
        tmp.rename(path)
        print(f"# built {n} records fixture in {time.perf_counter() - t:.1f}s: {path}", file=sys.stderr)
    return path


async def bench_writes(seconds: float = 3.0, tasks: int = 50) -> float:
    with tempfile.TemporaryDirectory() as d:
        # Signed like the desk's: each commit's head signed, the witness written after it (coalesced).
        signer = HeadSigner(os.urandom(32), witness_dir=Path(d) / "witness")
        store = await SqlStore.open(Path(d) / "w.db", signer=signer)
        count = 0
        stop_at = 0.0

        async def worker(k: int) -> None:
            nonlocal count
            i = 0
            while time.perf_counter() < stop_at:
                rec = ToolCallRecord(name="bash", input={"command": f"echo {k} {i}"}, session_id=f"ses_{k}")
                await store.save_transition(rec, AuditEntry(rec.id, ToolCallState.PENDING, rec.created_at, "bench"))
                await store.save_transition(rec, rec.transition(ToolCallState.EXECUTING, actor="bench"))
                rec.result = {"content": [{"type": "text", "text": f"{k} {i}"}], "details": {}, "is_error": False}
                await store.save_transition(rec, rec.transition(ToolCallState.COMPLETED, actor="bench",
                                                                outcome=Outcome.OK))
                count += 3
                i += 1

        stop_at = time.perf_counter() + 0.5  # warm up
        await asyncio.gather(*(worker(k) for k in range(tasks)))
        count = 0
        start = time.perf_counter()
        stop_at = start + seconds
        await asyncio.gather(*(worker(k) for k in range(tasks)))
        rate = count / (time.perf_counter() - start)
        result = await store.verify()
        await store.close()
        if not result.ok:
            raise SystemExit(f"bench_store: chain broken after the write benchmark: {result.message}")
        return rate


async def bench_queries(path: Path, runs: int = 40) -> tuple[float, float, int, int]:
    store = await SqlStore.open(path)
    rng = random.Random(11)
    words = _vocab(random.Random(7))
    filt, text = [], []
    hits_f = hits_t = 0
    try:
        for _ in range(3):  # warm the page cache
            await store.query(AuditQuery(tool="bash", states="COMPLETED", limit=100))
        for _ in range(runs):
            start = T0 + rng.uniform(0, 25) * DAY
            q = AuditQuery(tool=rng.choice(TOOLS), states=rng.choice(("COMPLETED", "FAILED")), since=start,
                           until=start + rng.uniform(1, 5) * DAY, limit=100)
            t = time.perf_counter()
            hits_f += len(await store.query(q))
            filt.append((time.perf_counter() - t) * 1000)
            q = AuditQuery(text=rng.choice(words), limit=100)
            t = time.perf_counter()
            hits_t += len(await store.query(q))
            text.append((time.perf_counter() - t) * 1000)
    finally:
        await store.close()
    return statistics.median(filt), statistics.median(text), hits_f // runs, hits_t // runs


async def bench_verify(path: Path, runs: int = 2) -> tuple[float, int]:
    """Seconds per million entries for a whole `verify` (best of `runs`, after one that warms the cache)."""
    store = await SqlStore.open(path)
    times = []
    try:
        for _ in range(runs + 1):
            t = time.perf_counter()
            result = await store.verify()
            times.append(time.perf_counter() - t)
            if not result.ok:
                raise SystemExit(f"bench_store: the fixture's chain does not verify: {result.message}")
    finally:
        await store.close()
    return min(times[1:]) * 1_000_000 / result.count, result.count


def main() -> None:
    repeat(lambda: report("audit_write_per_s", asyncio.run(bench_writes()), "1/s"), runs=3)
    path = fixture()
    realistic = fixture(FIXTURE_RECORDS // 3 + 1, per_record=3)

    def verify() -> None:
        per_m, count = asyncio.run(bench_verify(path))
        print(f"# verify checked {count} entries and as many tool_calls rows", file=sys.stderr)
        report("audit_verify_1m_s", per_m, "s")
        # Beside the worst case, never instead of it: calls of three entries each (333,334 rows per 1M entries).
        per_m_real, count = asyncio.run(bench_verify(realistic))
        print(f"# realistic verify checked {count} entries, a third as many tool_calls rows", file=sys.stderr)
        report("audit_verify_1m_realistic_s", per_m_real, "s")

    def queries() -> None:
        q_ms, t_ms, hits_f, hits_t = asyncio.run(bench_queries(path))
        print(f"# mean hits per query: filtered {hits_f}, text {hits_t}", file=sys.stderr)
        report("audit_query_ms", q_ms, "ms")
        report("audit_query_text_ms", t_ms, "ms")

    repeat(verify, runs=3)
    repeat(queries, runs=3)


if __name__ == "__main__":
    main()
