"""A trivial MCP tool call (mcp-server-time's get_current_time) through the whole pipeline: the executor, the
policy, the record's writes to a real SqlStore with the audit chain, the SDK client and the server, kept warm.

mcp_call_p50_ms: the median of one call's run_batch. mcp_start_local_s: from nothing to the first tool listed,
for a server on a LocalSandbox (the Docker figure, with the container's cold start, belongs to the mcp image).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CALLS = 200
WARMUP = 20


async def _bench(tmp: Path) -> tuple[float, float]:
    from benchmarks._util import p50
    from desktop_app.core import EventBus, Executor, PermissionPolicy, RunContext, ToolCall, ToolRegistry
    from desktop_app.mcp_client import HubPlaces, McpHub, parse_servers
    from desktop_app.sandbox import LocalSandbox
    from desktop_app.store import SqlStore
    from tests.mcp_client.servers import python_servers

    exe = python_servers() / "mcp-server-time"
    box = LocalSandbox(tmp)
    await box.start()

    async def sandbox() -> LocalSandbox:
        return box

    store = await SqlStore.open(f"sqlite:///{tmp / 'desk.db'}")
    bus = await EventBus.open(store)
    registry = ToolRegistry()
    entries = parse_servers({"time": {"command": str(exe)}}, source="user", where="bench")
    hub = McpHub(entries, HubPlaces("p", str(tmp), sandbox, lambda: {}, publish=bus.publish), registry)
    t0 = time.perf_counter()
    await hub.wait_started()
    start_s = time.perf_counter() - t0
    executor = Executor(registry, PermissionPolicy("auto"), bus=bus, store=store)
    run = RunContext(session_id="s", project_id="p", sandbox=box)
    samples: list[float] = []
    try:
        for i in range(WARMUP + CALLS):
            call = ToolCall(f"tu_{i}", "mcp__time__get_current_time", {"timezone": "UTC"})
            t = time.perf_counter()
            [record] = await executor.run_batch([call], run)
            if i >= WARMUP:
                samples.append((time.perf_counter() - t) * 1000)
            assert record.state.value == "COMPLETED", record.error
    finally:
        await hub.close()
        bus.close()
        await store.close()
        await box.close()
    return p50(samples), start_s


def main() -> None:
    from benchmarks._util import repeat, report

    def one() -> None:
        with tempfile.TemporaryDirectory() as d:
            call_ms, start_s = asyncio.run(_bench(Path(d)))
        report("mcp_call_p50_ms", call_ms, "ms")
        report("mcp_start_local_s", start_s, "s")

    repeat(one, runs=3)


if __name__ == "__main__":
    main()
