"""Engine overhead of one agent turn: 20 fast tool calls (one per step) against the local
Anthropic-compatible server, on a real SqlStore file with the audit chain on. And four sessions at once
(concurrent_4_sessions_*): four projects, each with its own container (agent-desk/minimal), each running a
20-call `bash_run` turn; the worst event-loop lag meanwhile, the collector's worst and total pause, the loop
thread's CPU time per step (its own work, whatever else loads the machine), and their wall time over one turn
alone. The four run as the desk runs them: streams parsed in the model worker process,
the collector frozen after start-up and collecting between turns.

engine_overhead_20_calls_ms = turn time - time inside the model client's HTTP exchange - time inside
tool run(). engine_overhead_20_calls_incl_client_ms subtracts only the server's own time, so the SDK's
request building and SSE parsing count as overhead too.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
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


SESSIONS = 4
IMAGE = "agent-desk/minimal:latest"
# As the desk runs: the streams in the model worker process (runtime.model_client_from_settings), the collector
# settled once started (runtime.settle_after_startup). BENCH_ON_LOOP=1 / BENCH_GC_DEFAULT=1 measure without.
OFF_LOOP = os.environ.get("BENCH_ON_LOOP") != "1"
SETTLE_GC = os.environ.get("BENCH_GC_DEFAULT") != "1"


def _model_server(turns: int) -> tuple[subprocess.Popen, str, str]:
    """A scripted model server in a process of its own (benchmarks/_model_server.py): (process, url, key)."""
    proc = subprocess.Popen([sys.executable, "-m", "benchmarks._model_server", str(CALLS), str(turns)], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.stdout is not None
    url, key = proc.stdout.readline().split()
    return proc, url, key


class _LoopLag:
    """The worst lateness (ms) of a 5 ms timer on the event loop while it runs."""

    def __init__(self) -> None:
        self.worst: float = 0.0
        self._task: asyncio.Task | None = None

    async def _watch(self) -> None:
        while True:
            t = time.perf_counter()
            await asyncio.sleep(0.005)
            self.worst = max(self.worst, (time.perf_counter() - t - 0.005) * 1000.0)

    def __enter__(self) -> _LoopLag:
        self._task = asyncio.ensure_future(self._watch())
        return self

    def __exit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()


async def _open_sessions(tmp: Path, client, store, bus, servers: list, sandboxes: list) -> list:
    """Per project: a scripted model server, a container, an executor and a session (one store, one bus)."""
    from desktop_app.core import (
        AgentSession,
        AnthropicModelClient,
        Executor,
        PermissionPolicy,
        ProjectInfo,
        ToolRegistry,
    )
    from desktop_app.sandbox import DockerSandbox, SandboxConfig
    from desktop_app.tools import builtin_tools
    from tests.conftest import make_workspace

    tools = [t for t in builtin_tools() if t.name == "bash_run"]
    sessions = []
    for k in range(SESSIONS):
        # the first session runs three turns (warm-up, alone, together), the others two
        servers.append(_model_server(2 if k == 0 else 1))
        folder = make_workspace(tmp / f"project{k}")
        sandboxes.append(DockerSandbox(f"bench-c{k}-{uuid.uuid4().hex[:6]}", folder, SandboxConfig(image=IMAGE),
                                       client=client))
        executor = Executor(ToolRegistry(tools), PermissionPolicy("auto"), bus=bus, store=store)
        model = AnthropicModelClient(api_key=servers[-1][2], base_url=servers[-1][1], model="claude-sonnet-4-6",
                                     off_loop=OFF_LOOP)
        project = ProjectInfo(id=f"prj_c{k}", name=f"project {k}", path=str(folder))
        sessions.append(await AgentSession.open(store=store, bus=bus, executor=executor, tools=tools,
                                                model_client=model, project=project, sandbox=sandboxes[-1]))
    return sessions


async def _concurrent(tmp: Path, client) -> tuple[float, float, float, list[float], float]:
    """(one turn alone s, all four at once s, worst loop lag ms while the four run, the GC's pauses then ms, the
    loop thread's CPU time per step then ms: the loop's own work, whatever else loads the machine).
    After the warm-up turn the collector is settled as the desk settles it after start-up."""
    from benchmarks._util import GcPauses
    from desktop_app.core import EventBus
    from desktop_app.runtime import collect_between_turns, settle_after_startup
    from desktop_app.runtime._gc import unsettle
    from desktop_app.store import SqlStore

    store = await SqlStore.open(tmp / "concurrent.db")
    bus = await EventBus.open(store)
    servers: list = []
    sandboxes: list = []
    sessions: list = []
    try:
        sessions = await _open_sessions(tmp, client, store, bus, servers, sandboxes)
        await asyncio.gather(*(sb.start() for sb in sandboxes))
        await asyncio.gather(*(s.send("warm up") for s in sessions))
        if SETTLE_GC:
            settle_after_startup()
            bus.on("done", collect_between_turns)
        t0 = time.perf_counter()
        alone = await sessions[0].send("run it")
        alone_s = time.perf_counter() - t0
        with _LoopLag() as lag, GcPauses() as pauses:
            t0, cpu0 = time.perf_counter(), time.thread_time()
            together = await asyncio.gather(*(s.send("run it") for s in sessions))
            together_s, cpu_s = time.perf_counter() - t0, time.thread_time() - cpu0
        for result in (alone, *together):
            if result.reason != "end_turn" or result.steps != CALLS + 1:
                raise RuntimeError(f"a concurrent bench turn ended badly: {result}")
        return alone_s, together_s, lag.worst, pauses.pauses, cpu_s * 1000.0 / (SESSIONS * (CALLS + 1))
    finally:
        if SETTLE_GC:
            unsettle()
        for s in sessions:
            await s.model_client.close()
        await asyncio.gather(*(sb.close() for sb in sandboxes), return_exceptions=True)
        for proc, _, _ in servers:
            proc.communicate("", timeout=30)
        await store.close()


def bench_concurrent(runs: int = 3) -> None:
    """concurrent_4_sessions_lag_ms and concurrent_4_sessions_slowdown (wall time of four turns at once
    over one turn alone); skipped (an error under CI) without the engine and its image."""
    from benchmarks._util import repeat, report
    from desktop_app.sandbox import connect

    try:
        client = connect()
        client.images.get(IMAGE)
    except Exception as exc:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            raise
        print(f"bench-skip concurrent_4_sessions: {str(exc).splitlines()[0]}", flush=True)
        return

    def one() -> None:
        with tempfile.TemporaryDirectory() as d:
            alone_s, together_s, lag_ms, pauses, loop_cpu_ms = asyncio.run(_concurrent(Path(d), client))
        print(f"# concurrent_4_sessions: one turn alone {alone_s * 1000:.0f} ms, four at once "
              f"{together_s * 1000:.0f} ms; {len(pauses)} GC passes, {sum(pauses):.1f} ms in all", file=sys.stderr)
        report("concurrent_4_sessions_lag_ms", lag_ms, "ms")
        report("concurrent_4_sessions_gc_worst_ms", max(pauses, default=0.0), "ms")
        report("concurrent_4_sessions_gc_total_ms", sum(pauses), "ms")
        report("concurrent_4_sessions_step_loop_cpu_ms", loop_cpu_ms, "ms")
        report("concurrent_4_sessions_slowdown", together_s / alone_s, "x")

    try:
        repeat(one, runs=runs)
    finally:
        client.close()


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
    bench_concurrent()


if __name__ == "__main__":
    main()
