"""Engine figures: one no-op call through the whole pipeline with audit on, a batch of 8 slow reads, and
the policy's judgement of one realistic compound command."""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

from desktop_app.core import (
    EventBus,
    Executor,
    PermissionPolicy,
    RunContext,
    ToolCall,
    ToolFacts,
    ToolRegistry,
    builtin_hooks,
    rules_from_texts,
    tool,
)
from desktop_app.store import SqlStore

from ._util import p50, repeat, report


@tool(read_only=True)
async def noop() -> str:
    """Does nothing."""
    return "ok"


@tool(read_only=True)
async def sleep100() -> str:
    """Takes 100 ms."""
    await asyncio.sleep(0.1)
    return "ok"


async def _run(db: Path) -> None:
    store = await SqlStore.open(db)
    try:
        bus = await EventBus.open(store)
        registry = ToolRegistry([noop, sleep100])
        executor = Executor(registry, PermissionPolicy("ask"), bus=bus, store=store, hooks=builtin_hooks())
        run = RunContext(session_id="bench", project_id="bench")
        for i in range(50):  # warm up
            await executor.run_batch([ToolCall(f"w{i}", "noop", {})], run)
        samples = []
        for i in range(500):
            t0 = time.perf_counter()
            await executor.run_batch([ToolCall(f"d{i}", "noop", {})], run)
            samples.append((time.perf_counter() - t0) * 1000)
        report("dispatch_p50_ms", p50(samples), "ms")
        batches = []
        for j in range(5):
            calls = [ToolCall(f"b{j}_{i}", "sleep100", {}) for i in range(8)]
            t0 = time.perf_counter()
            await executor.run_batch(calls, run)
            batches.append((time.perf_counter() - t0) * 1000)
        report("batch_8x100ms_ms", p50(batches), "ms")
    finally:
        await store.close()


POLICY_COMMAND = "cd src && npm test -- --watch=false | tee log.txt"
POLICY_RULES = [
    ("allow", "bash_run(cd *)"), ("allow", "bash_run(npm test *)"), ("allow", "bash_run(tee *)"),
    ("allow", "bash_run(git status)"), ("allow", "fs_write(src/**)"), ("ask", "bash_run(git push *)"),
    ("deny", "bash_run(rm *)"), ("deny", "fs_write(secrets/**)"),
]


def bench_policy() -> None:
    """One evaluation of a compound command: parse, wrappers, rules, writes and risk (no cache: each sample
    judges a new command of the same shape)."""
    policy = PermissionPolicy("ask", rules_from_texts(POLICY_RULES, "bench"))
    facts = ToolFacts("bash_run", "group:runtime")
    samples = []
    for i in range(2000):
        command = f"{POLICY_COMMAND} # {i}"  # a new text each time: the analysis cache does not help
        t0 = time.perf_counter()
        decision = policy.evaluate(facts, {"command": command})
        samples.append((time.perf_counter() - t0) * 1e6)
        assert decision.allowed, decision.reason
    report("policy_eval_p50_us", p50(samples[200:]), "us")


def main() -> None:
    repeat(bench_policy, runs=5)

    def dispatch() -> None:
        with tempfile.TemporaryDirectory() as d:
            asyncio.run(_run(Path(d) / "bench.db"))

    repeat(dispatch, runs=5)


if __name__ == "__main__":
    main()
