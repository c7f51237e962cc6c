"""Audit store benchmarks on PostgreSQL: the same filtered and free-text queries as bench_store's SQLite
figures (`audit_query_ms`, `audit_query_text_ms`), over 1,000,000 records, on a throwaway server this benchmark
starts (tests/postgres.py's PostgresServer). The records are bench_store's generator's, loaded with COPY into
the schema the store's migrations create, indexes built after the load, then ANALYZE.

Prints `bench audit_query_ms_pg` and `bench audit_query_text_ms_pg` (median ms of 40 queries each).
"""

from __future__ import annotations

import asyncio
import random
import shutil
import sys
import time
from collections.abc import Iterator

import psycopg
from sqlalchemy.engine import make_url

from benchmarks._util import repeat, report
from benchmarks.bench_store import CACHE, FIXTURE_RECORDS, STATES, T0, TOOLS, _row, _vocab, bench_queries
from desktop_app.store import SCHEMA_VERSION, SqlStore
from desktop_app.store._rollup import backfill_sql, wait_backfill_sql
from desktop_app.store._search import index_text
from desktop_app.store.integrity._chain import GENESIS, link_hash, split_canonical
from desktop_app.store.integrity._digests import record_digests, sha
from tests.postgres import PostgresServer

DAY = 86_400.0
_TOOL_COLS = ("id", *_row("", 0, "bash", {}, "COMPLETED", "ok", {}, 0.0), "search_text")
_ENTRY_COLS = ("seq", "record_id", "state", "at", "actor", "note", "data", "prev_hash", "hash", "message_id",
               "digests")


def generate(n: int, seed: int = 7) -> Iterator[tuple[tuple, tuple]]:
    """(tool_calls row, its one chained entry) for `n` records: bench_store's data, one entry per record."""
    rng = random.Random(seed)
    words = _vocab(rng)
    weights = [s[2] for s in STATES]
    prev = GENESIS
    for i in range(n):
        created = T0 + 30 * DAY * i / n
        tool = TOOLS[i % len(TOOLS)] if rng.random() < 0.5 else rng.choice(TOOLS)
        state, outcome, _ = rng.choices(STATES, weights)[0]
        w = rng.sample(words, 4)
        inp = ({"command": f"grep -rn {w[0]} src/{w[1]} | head -n {i % 50}"} if tool.startswith("bash")
               else {"path": f"/workspace/{w[0]}/{w[1]}.py"})
        out = f"{w[2]} {w[3]} line {i % 997}"
        result = {"content": [{"type": "text", "text": out}], "details": {}, "is_error": state == "FAILED"}
        rid = f"call_{i:012x}{rng.getrandbits(64):016x}"
        row = _row(rid, i, tool, inp, state, outcome, result, created)
        digests = record_digests(row, sha(row["input"]))
        prefix, suffix = split_canonical(rid, state, created + 0.2, "engine", "", "{}", digests)
        h = link_hash(prev, f"{prefix}{i + 1}{suffix}")
        values = {**row, "is_error": bool(row["is_error"]), "read_only": bool(row["read_only"])}
        search = index_text("\n".join([tool, *map(str, inp.values()), out]))
        yield ((rid, *values.values(), search),
               (i + 1, rid, state, created + 0.2, "engine", "", "{}", prev, h, None, digests))
        prev = h


def build(url: str, n: int) -> None:
    """Create the schema with the store, then COPY `n` records in with the indexes dropped, and rebuild them."""
    async def _create() -> None:
        await (await SqlStore.open(url)).close()

    asyncio.run(_create())
    u = make_url(url)
    with psycopg.connect(host=u.query["host"], user=u.username, dbname=u.database, autocommit=True) as conn:
        conn.execute("SET session_replication_role = replica")  # no foreign-key triggers during the load
        conn.execute("SET maintenance_work_mem = '512MB'")
        ddl = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename IN "
                           "('tool_calls', 'audit_entries') AND indexname NOT LIKE '%pkey' "
                           "AND indexname NOT LIKE '%_id_key'").fetchall()
        for name, _ in ddl:
            conn.execute(f'DROP INDEX "{name}"')
        head: tuple = (0, GENESIS)
        # Both tables stream at once, over two connections, so no million rows wait in memory.
        with psycopg.connect(host=u.query["host"], user=u.username, dbname=u.database, autocommit=True) as other:
            other.execute("SET session_replication_role = replica")
            with conn.cursor() as c1, c1.copy(f"COPY tool_calls ({', '.join(_TOOL_COLS)}) FROM STDIN") as tools, \
                    other.cursor() as c2, c2.copy(f"COPY audit_entries ({', '.join(_ENTRY_COLS)}) FROM STDIN") as out:
                for row, entry in generate(n):
                    tools.write_row(row)
                    out.write_row(entry)
                    head = (entry[0], entry[8])
        conn.execute("INSERT INTO audit_head (id, seq, hash) VALUES (1, %s, %s)", head)
        for sql in (backfill_sql("postgresql"), *wait_backfill_sql("postgresql")):  # the replica role skipped
            conn.execute(sql)  # the charts' triggers: their rollups filled as the migration fills them
        for _, sql in ddl:
            conn.execute(sql)
        conn.execute("VACUUM ANALYZE tool_calls")
        conn.execute("VACUUM ANALYZE audit_entries")


def main() -> None:
    # The 1,000,000 records take minutes to load: the server's folder is kept under .bench/, keyed by the
    # schema, and reused while the "built" mark is there.
    keep = CACHE / f"pg_{FIXTURE_RECORDS}_s{SCHEMA_VERSION}"
    fresh = not (keep / "built").exists()
    if fresh and keep.exists():
        shutil.rmtree(keep)  # a build that did not finish
    server = PostgresServer(keep=keep).start()
    try:
        if fresh:
            url = server.database(name="bench")
            t = time.perf_counter()
            build(url, FIXTURE_RECORDS)
            (keep / "built").write_text("")
            print(f"# built {FIXTURE_RECORDS} records on PostgreSQL in {time.perf_counter() - t:.1f}s", file=sys.stderr)
        url = server.url("bench")

        def queries() -> None:
            q_ms, t_ms, hits_f, hits_t = asyncio.run(bench_queries(url))
            print(f"# mean hits per query on PostgreSQL: filtered {hits_f}, text {hits_t}", file=sys.stderr)
            report("audit_query_ms_pg", q_ms, "ms")
            report("audit_query_text_ms_pg", t_ms, "ms")

        repeat(queries, runs=3)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
