"""Engine overhead of one agent turn: 20 fast tool calls (one per step) against the local
Anthropic-compatible server, on a real SqlStore file with the audit chain on.

engine_overhead_20_calls_ms = turn time - time inside the model client's HTTP exchange - time inside
tool run(). engine_overhead_20_calls_incl_client_ms subtracts only the server's own time, so the SDK's
request building and SSE parsing count as overhead too.
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

CALLS = 20
ROUNDS = 5


async def _one_turn(tmp: Path, round_: int) -> tuple[float, float, float, float]:
    from desktop_app.core import (
        AgentSession,
        AnthropicModelClient,
        EventBus,
        Executor,
        PermissionPolicy,
        ProjectInfo,
        ToolRegistry,
        tool,
    )
    from desktop_app.store import SqlStore
    from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use

    tool_time = 0.0

    @tool(read_only=True, group="group:fs")
    async def noop(n: int) -> str:
        """Answer at once."""
        nonlocal tool_time
        t0 = time.perf_counter()
        out = f"ok {n}"
        tool_time += time.perf_counter() - t0
        return out

    class TimedClient(AnthropicModelClient):
        model_time = 0.0

        async def stream(self, request, *, emit, session_id=""):
            t0 = time.perf_counter()
            try:
                return await super().stream(request, emit=emit, session_id=session_id)
            finally:
                TimedClient.model_time += time.perf_counter() - t0

    script = [reply(text(f"step {i}"), tool_use("noop", {"n": i})) for i in range(CALLS)]
    script.append(reply(text("all done")))
    store = await SqlStore.open(f"sqlite:///{tmp / f'bench{round_}.db'}")
    with AnthropicServer(script) as server:
        bus = await EventBus.open(store)
        registry = ToolRegistry([noop])
        executor = Executor(registry, PermissionPolicy("auto"), bus=bus, store=store)
        client = TimedClient(api_key=server.api_key, base_url=server.url, model="claude-sonnet-4-6")
        project = ProjectInfo(id=f"bench{round_}", name="bench", path=str(tmp))
        session = await AgentSession.open(store=store, bus=bus, executor=executor, tools=[noop],
                                          model_client=client, project=project, sandbox=None)
        t0 = time.perf_counter()
        result = await session.send("run the no-op 20 times")
        total = time.perf_counter() - t0
        await client.close()
        server_time = server.server_time_s
    await store.close()
    if result.reason != "end_turn" or result.steps != CALLS + 1:
        raise RuntimeError(f"bench turn ended badly: {result}")
    return total, TimedClient.model_time, server_time, tool_time


def main() -> None:
    from benchmarks._util import repeat, report

    rounds = iter(range(ROUNDS))
    with tempfile.TemporaryDirectory() as d:
        asyncio.run(_one_turn(Path(d), -1))  # warm-up: imports, SDK platform probe

        def one() -> None:
            total, model_t, server_t, tool_t = asyncio.run(_one_turn(Path(d), next(rounds)))
            report("engine_overhead_20_calls_ms", (total - model_t - tool_t) * 1000, "ms")
            report("engine_overhead_20_calls_incl_client_ms", (total - server_t - tool_t) * 1000, "ms")

        repeat(one, runs=ROUNDS)


if __name__ == "__main__":
    main()
