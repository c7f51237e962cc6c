"""One desk of a shared chain, as a process of its own: its own Ed25519 key, host and user, writing tool calls
(three entries each) and a message to the database at URL, in step with the other desks.

python -m tests.store.chain_writer URL SEED_HEX HOST USER RECORDS [TASKS]

It prints "ready" once the store is open, waits for a line on stdin, writes half of its records, prints "half",
waits for a second line, writes its message and one record, prints "more", waits for a third line, writes the
rest and prints "done SEQ..." (every acknowledged seq). The waits let the test make every desk write while the
others do, on an empty database first (the genesis race), and put every desk's middle record between any desk's
first and last in the chain, whatever order SQLite's lock hands the writers in (it is not fair: a desk that
keeps committing can write a whole step while the others sleep in their busy handlers)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from desktop_app.core import ProjectInfo, SessionInfo, StoredMessage
from desktop_app.store import HeadSigner, SqlStore
from tests.store.conftest import make_record, run_to_completion


async def _write(store: SqlStore, user: str, start: int, n: int, tasks: int, seqs: list[int]) -> None:
    todo = iter(range(start, start + n))

    async def worker() -> None:
        for i in todo:
            rec = await run_to_completion(store, make_record(command=f"echo {user} {i}", session_id=f"ses_{user}"))
            seqs.extend(e.seq for e in rec.trail)

    await asyncio.gather(*(worker() for _ in range(tasks)))


async def main(url: str, seed_hex: str, host: str, user: str, records: int, tasks: int) -> None:
    signer = HeadSigner(bytes.fromhex(seed_hex), host=host, user=user)
    store = await SqlStore.open(url, signer=signer)
    seqs: list[int] = []
    try:
        print("ready", flush=True)
        sys.stdin.readline()
        await store.save_project(ProjectInfo("prj_1", "shared", "/tmp/shared"))
        await store.save_session(SessionInfo(f"ses_{user}", "prj_1"))
        first = records // 2
        middle = 1 if records - first > 1 else 0
        await _write(store, user, 0, first, tasks, seqs)
        print("half", flush=True)
        sys.stdin.readline()
        await store.append_message(StoredMessage(session_id=f"ses_{user}", role="user", content=[
            {"type": "text", "text": f"from {user}"}]))
        await _write(store, user, first, middle, tasks, seqs)
        print("more", flush=True)
        sys.stdin.readline()
        await _write(store, user, first + middle, records - first - middle, tasks, seqs)
    finally:
        await store.close()
    print("done", *sorted(seqs), flush=True)


@dataclass(slots=True)
class Desk:
    """A writer process's identity, and what it acknowledged."""

    seed: bytes
    host: str
    user: str
    seqs: list[int]


def run_desks(url: str, desks: int, records: int, tasks: int = 8, timeout: float = 300.0) -> list[Desk]:
    """`desks` writer processes on one database, each with its own key, host and user, started together on
    it and kept writing at the same time (see the module's docstring). Returns each desk and its seqs."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = [Desk(os.urandom(32), f"host-{k}", f"user{k}", []) for k in range(desks)]
    procs = [subprocess.Popen([sys.executable, "-m", "tests.store.chain_writer", url, d.seed.hex(), d.host, d.user,
                               str(records), str(tasks)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, cwd=root, env=env) for d in out]
    try:
        for word in ("ready", "half", "more"):
            for p in procs:
                line = p.stdout.readline().strip()  # type: ignore[union-attr]
                if line != word:
                    _, err = p.communicate(timeout=timeout)
                    raise RuntimeError(f"a writer said {line!r}, not {word!r}: {err[-3000:]}")
            for p in procs:  # every desk waits here until all of them got this far
                p.stdin.write("go\n")  # type: ignore[union-attr]
                p.stdin.flush()  # type: ignore[union-attr]
        for d, p in zip(out, procs, strict=True):
            rest, err = p.communicate(timeout=timeout)
            if p.returncode != 0 or not rest.startswith("done"):
                raise RuntimeError(f"writer {d.user} failed ({p.returncode}): {err[-3000:]}")
            d.seqs = [int(x) for x in rest.split()[1:]]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return out


async def hang(url: str, seed_hex: str) -> None:
    """`hang URL SEED`: write one transition and stop inside its transaction, after its entry, key and signed
    batch were written and before the commit; print "inside" there, for the test to kill this process."""
    import time

    from desktop_app.store.integrity import _signing

    sign_in_tx = _signing.HeadNotary.sign_in_tx

    def sign_then_hang(self: _signing.HeadNotary, *args: object) -> None:
        sign_in_tx(self, *args)  # type: ignore[arg-type]
        print("inside", flush=True)
        time.sleep(3600)

    _signing.HeadNotary.sign_in_tx = sign_then_hang  # type: ignore[method-assign]
    store = await SqlStore.open(url, signer=HeadSigner(bytes.fromhex(seed_hex), host="doomed", user="doomed"))
    await run_to_completion(store, make_record(command="never committed", session_id="ses_doomed"))


async def timed(url: str, seed_hex: str, host: str, user: str, seconds: float, tasks: int) -> None:
    """`timed URL SEED HOST USER SECONDS TASKS`: after "ready" and a line on stdin, write tool calls for
    SECONDS, then print "done N CPU" (the entries acknowledged in that time, and the CPU seconds this process
    spent on them, its start and its store's opening left out): the benchmark's desk."""
    import time

    store = await SqlStore.open(url, signer=HeadSigner(bytes.fromhex(seed_hex), host=host, user=user))
    count = 0
    try:
        print("ready", flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        stop_at, cpu = time.perf_counter() + seconds, time.process_time()

        async def worker(k: int) -> None:
            nonlocal count
            i = 0
            while time.perf_counter() < stop_at:
                await run_to_completion(store, make_record(command=f"echo {user} {k} {i}", session_id=f"ses_{user}"))
                count += 3
                i += 1

        await asyncio.gather(*(worker(k) for k in range(tasks)))
        cpu = time.process_time() - cpu
    finally:
        await store.close()
    print("done", count, cpu, flush=True)


if __name__ == "__main__":
    a = sys.argv[1:]
    if a[0] == "hang":
        asyncio.run(hang(a[1], a[2]))
    elif a[0] == "timed":
        asyncio.run(timed(a[1], a[2], a[3], a[4], float(a[5]), int(a[6])))
    else:
        asyncio.run(main(a[0], a[1], a[2], a[3], int(a[4]), int(a[5]) if len(a) > 5 else 8))
