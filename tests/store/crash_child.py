"""Child process for test_crash: writes transitions forever, printing each acknowledged one."""

from __future__ import annotations

import asyncio
import sys

from desktop_app.core import ToolCallState
from desktop_app.store import SqlStore
from tests.store.conftest import make_record, pending


async def main(path: str) -> None:
    store = await SqlStore.open(path)
    print("ready", flush=True)

    async def worker(k: int) -> None:
        i = 0
        while True:
            rec = make_record(command=f"echo {k} {i}", note="x" * (i % 300))
            for entry in (pending(rec), rec.transition(ToolCallState.EXECUTING, actor="engine")):
                await store.save_transition(rec, entry)
                # Printed only after save_transition returned: the store said it is durable.
                sys.stdout.write(f"{entry.seq} {rec.id} {entry.state.value} {entry.hash}\n")
                sys.stdout.flush()
            i += 1

    await asyncio.gather(*(worker(k) for k in range(20)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
