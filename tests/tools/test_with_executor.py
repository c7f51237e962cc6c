"""The built-in tools through the real engine: registry, policy, executor, event bus, on a real sandbox."""

from __future__ import annotations

from desktop_app.core import (
    EventBus,
    Executor,
    HookChain,
    MemoryStore,
    PermissionPolicy,
    RunContext,
    ToolCall,
    ToolCallState,
    ToolRegistry,
)
from desktop_app.tools import builtin_tools


def _engine(sandbox):
    store = MemoryStore()
    bus = EventBus(store)
    events = []
    bus.on("*", events.append)
    executor = Executor(ToolRegistry(builtin_tools()), PermissionPolicy("auto"), bus=bus, store=store,
                        hooks=HookChain())
    return executor, RunContext(session_id="s1", project_id="p1", sandbox=sandbox), events


async def test_a_batch_writes_reads_and_runs_with_streamed_updates(sandbox):
    executor, run, events = _engine(sandbox)
    records = await executor.run_batch(
        [
            ToolCall(id="t1", name="fs_write", input={"path": "app/main.py", "content": "print('hello')\n"}),
            ToolCall(id="t2", name="fs_read", input={"path": "app/main.py"}),
            ToolCall(id="t3", name="bash_run", input={"command": "cat app/main.py; echo done >&2"}),
            ToolCall(id="t4", name="fs_edit",
                     input={"path": "app/main.py", "old_string": "hello", "new_string": "bye"}),
        ],
        run,
    )
    assert [r.state for r in records] == [ToolCallState.COMPLETED] * 4, [r.error for r in records]
    assert records[0].result["details"]["created"] is True
    assert records[1].result["content"][0]["text"] == "     1\tprint('hello')"
    assert records[2].result["details"]["exit_code"] == 0
    assert "+print('bye')" in records[3].result["details"]["diff"]
    assert await sandbox.read_file("app/main.py") == b"print('bye')\n"
    streamed = [(e.payload["stream"], e.payload["text"]) for e in events
                if e.type == "tool:update" and e.payload.get("call_id") == records[2].id]
    assert "".join(t for s, t in streamed if s == "stdout") == "print('hello')\n"
    assert "".join(t for s, t in streamed if s == "stderr") == "done\n"
    # The read hashes live in the session's state, shared by every call of the session.
    assert "/workspace/app/main.py" in run.state["fs_read_hashes"]


async def test_invalid_input_and_refusals_reach_the_model_as_errors(sandbox):
    executor, run, _ = _engine(sandbox)
    await sandbox.write_file("x.txt", b"x\n")
    records = await executor.run_batch(
        [
            ToolCall(id="t1", name="bash_run", input={"command": "true", "timeout_ms": 900_000}),
            ToolCall(id="t2", name="fs_write", input={"path": "x.txt", "content": "y\n"}),
        ],
        run,
    )
    bad, unread = records
    assert bad.state is ToolCallState.FAILED and "timeout_ms" in (bad.error or "")
    assert unread.is_error and "read it again" in unread.result["content"][0]["text"]
    assert await sandbox.read_file("x.txt") == b"x\n"
