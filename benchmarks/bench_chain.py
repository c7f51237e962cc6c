"""Benchmarks of the shared chain: 4 desk processes (each its own key) appending to one PostgreSQL chain
(a throwaway server started here with tests/postgres.py), in entries per second all together; and what an
Ed25519 signature per entry would cost instead of one per commit.

Prints `bench NAME VALUE UNIT` lines."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

from benchmarks._util import repeat, report
from desktop_app.store import HeadSigner, SqlStore

ROOT = Path(__file__).resolve().parents[1]
WRITERS = 4
SECONDS = 5.0
TASKS = 50  # concurrent tool calls per desk, as in audit_write_per_s


def _desks(url: str, seconds: float, tasks: int) -> tuple[int, float]:
    """Entries the WRITERS desks acknowledged in `seconds`, all writing at once, and the CPU seconds they spent."""
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
        total, cpu = 0, 0.0
        for p in procs:
            out, _ = p.communicate(timeout=seconds + 120)
            if p.returncode != 0 or not out.startswith("done"):
                raise SystemExit(f"bench_chain: a desk failed ({p.returncode})")
            total += int(out.split()[1])
            cpu += float(out.split()[2])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return total, cpu


async def _verified(url: str) -> tuple[int, float]:
    """The chain's entries, and the seconds a whole verify took (every desk's batches checked with its key)."""
    store = await SqlStore.open(url)
    try:
        t = time.perf_counter()
        result = await store.verify()
        took = time.perf_counter() - t
    finally:
        await store.close()
    if not result.ok:
        raise SystemExit(f"bench_chain: the shared chain does not verify: {result.message}")
    return result.count, took


def _server_cpu_s(data: Path) -> float:
    """CPU seconds of the server so far: the postmaster and the backends it has reaped (each desk's session)."""
    pid = int((data / "postmaster.pid").read_text().split()[0])
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime


def bench_pg_writers(seconds: float = SECONDS) -> tuple[float, float, float]:
    """Entries per second of WRITERS desks on one chain, the CPU microseconds each entry cost (desks and server
    together: this does not depend on what else the machine runs), and verify's microseconds per entry."""
    sys.path.insert(0, str(ROOT))
    from tests.postgres import PostgresServer

    server = PostgresServer().start()
    try:
        url = server.database("bench")
        _desks(url, 0.5, TASKS)  # warm up: schema, keys registered, connections
        server0 = _server_cpu_s(server.data)
        total, desks_cpu = _desks(url, seconds, TASKS)
        # The server's backends are counted when they end, with their sessions' short start: a little over.
        cpu_us = (desks_cpu + _server_cpu_s(server.data) - server0) / total * 1e6
        entries, took = asyncio.run(_verified(url))
        batches = _batches(server, url)
        print(f"# {WRITERS} desks wrote {total} entries in {seconds:.0f} s; the chain of {entries} entries in "
              f"{batches} signed batches verifies in {took:.2f} s; load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} cores", file=sys.stderr)
        return total / seconds, cpu_us, took / entries * 1e6
    finally:
        server.stop()


def _batches(server: object, url: str) -> int:
    import psycopg

    name = url.split("@/")[1].split("?")[0]
    with psycopg.connect(host=str(server.socket_dir), user="agentdesk", dbname=name) as conn:  # type: ignore[attr-defined]
        return conn.execute("SELECT count(*) FROM audit_batches").fetchone()[0]  # type: ignore[index]


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
    repeat(_writers_run, runs=3)
    repeat(_signature_run, runs=3)


def _writers_run() -> None:
    rate, cpu_us, verify_us = bench_pg_writers()
    report(f"audit_write_per_s_pg_{WRITERS}_writers", rate, "1/s")
    # What the same writes cost in CPU, whatever else runs: N idle cores could take about N / this per second.
    report(f"audit_write_cpu_us_pg_{WRITERS}_writers", cpu_us, "us")
    report(f"audit_verify_us_pg_{WRITERS}_writers", verify_us, "us")


def _signature_run() -> None:
    sign_us, verify_us = bench_entry_signature()
    report("audit_entry_sign_us", sign_us, "us")
    report("audit_entry_verify_us", verify_us, "us")


if __name__ == "__main__":
    main()
