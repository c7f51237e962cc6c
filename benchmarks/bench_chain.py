"""Benchmarks of the shared chain: 4 desk processes (each its own key) appending to one PostgreSQL chain
(a throwaway server started here with tests/postgres.py), in entries per second all together; and what an
Ed25519 signature per entry would cost instead of one per commit.

Prints `bench NAME VALUE UNIT` lines."""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from desktop_app.store import HeadSigner, SqlStore

ROOT = Path(__file__).resolve().parents[1]
WRITERS = 4
SECONDS = 5.0
TASKS = 50  # concurrent tool calls per desk, as in audit_write_per_s


def _desks(url: str, seconds: float, tasks: int) -> int:
    """Entries the WRITERS desks acknowledged in `seconds`, all writing at once."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-m", "tests.store.chain_writer", "timed", url, os.urandom(32).hex(),
                               f"bench-host-{k}", f"bench{k}", str(seconds), str(tasks)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, cwd=ROOT, env=env) for k in range(WRITERS)]
    try:
        for p in procs:
            if p.stdout.readline().strip() != "ready":  # type: ignore[union-attr]
                raise SystemExit("bench_chain: a desk did not start")
        for p in procs:
            p.stdin.write("go\n")  # type: ignore[union-attr]
            p.stdin.flush()  # type: ignore[union-attr]
        total = 0
        for p in procs:
            out, _ = p.communicate(timeout=seconds + 120)
            if p.returncode != 0 or not out.startswith("done"):
                raise SystemExit(f"bench_chain: a desk failed ({p.returncode})")
            total += int(out.split()[1])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return total


async def _verified(url: str) -> int:
    store = await SqlStore.open(url)
    try:
        result = await store.verify()
    finally:
        await store.close()
    if not result.ok:
        raise SystemExit(f"bench_chain: the shared chain does not verify: {result.message}")
    return result.count


def bench_pg_writers(seconds: float = SECONDS) -> float:
    sys.path.insert(0, str(ROOT))
    from tests.postgres import PostgresServer

    server = PostgresServer().start()
    try:
        url = server.database("bench")
        _desks(url, 0.5, TASKS)  # warm up: schema, keys registered, connections
        total = _desks(url, seconds, TASKS)
        entries = asyncio.run(_verified(url))
        print(f"# {WRITERS} desks wrote {total} entries in {seconds:.0f} s; the chain of {entries} verifies",
              file=sys.stderr)
        return total / seconds
    finally:
        server.stop()


def bench_entry_signature(n: int = 5000) -> tuple[float, float]:
    """Microseconds to sign and to check one Ed25519 signature: the cost a signature per entry would add to
    each write and to verify, where one per commit covers all of its entries through the chain."""
    signer = HeadSigner(os.urandom(32))
    msg = [os.urandom(64) for _ in range(n)]
    t = time.perf_counter()
    sigs = [signer._key.sign(m) for m in msg]
    sign_us = (time.perf_counter() - t) / n * 1e6
    pub = signer._key.public_key()
    t = time.perf_counter()
    for m, s in zip(msg, sigs, strict=True):
        pub.verify(s, m)
    return sign_us, (time.perf_counter() - t) / n * 1e6


def main() -> None:
    rates = [bench_pg_writers() for _ in range(1)]
    print(f"bench audit_write_per_s_pg_{WRITERS}_writers {statistics.median(rates):.0f} 1/s")
    sign_us, verify_us = bench_entry_signature()
    print(f"bench audit_entry_sign_us {sign_us:.1f} us")
    print(f"bench audit_entry_verify_us {verify_us:.1f} us")


if __name__ == "__main__":
    main()
