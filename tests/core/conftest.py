"""Shared pieces for engine tests: a registry of small tools and an executor on a store."""

from __future__ import annotations

import asyncio

import pytest

from desktop_app.core import (
    EventBus,
    Executor,
    HookChain,
    MemoryStore,
    PermissionPolicy,
    RunContext,
    ToolCall,
    ToolContext,
    ToolRegistry,
    ToolResult,
    tool,
)


@tool(read_only=True, group="group:fs")
async def echo(text: str) -> str:
    """Return the text."""
    return text


@tool(read_only=True, group="group:fs")
async def nap(ms: int = 100) -> str:
    """Sleep, then answer (a read-only call that takes time)."""
    await asyncio.sleep(ms / 1000)
    return f"slept {ms}"


@tool(group="group:fs")
async def write(path: str, content: str, ctx: ToolContext) -> ToolResult:
    """Pretend to write a file (keeps it in the session state)."""
    ctx.state.setdefault("files", {})[path] = content
    ctx.state.setdefault("order", []).append(path)
    return ToolResult.text(f"wrote {path}", path=path)


@tool(read_only=True)
async def boom() -> str:
    """Always raises."""
    raise RuntimeError("kaboom")


@tool(read_only=True, timeout=0.2)
async def hang() -> str:
    """Never finishes."""
    await asyncio.Event().wait()
    return "never"


@tool(read_only=True)
async def chatty(ctx: ToolContext) -> str:
    """Streams two updates."""
    ctx.update("one\n")
    ctx.update("two\n")
    return "done"


@tool(group="group:runtime")
async def bash_run(command: str, ctx: ToolContext) -> str:
    """A stand-in for the real bash tool: records the command."""
    ctx.state.setdefault("ran", []).append(command)
    return f"ran {command}"


TOOLS = [echo, nap, write, boom, hang, chatty, bash_run]


class Harness:
    def __init__(self, store, mode="ask", hooks=None, **kw):
        self.store = store
        self.bus = EventBus(store)
        self.registry = ToolRegistry(TOOLS)
        self.policy = PermissionPolicy(mode)
        self.executor = Executor(
            self.registry, self.policy, bus=self.bus, store=store, hooks=hooks or HookChain(), **kw
        )
        self.run = RunContext(session_id="s1", project_id="p1")
        self.events = []
        self.bus.on("*", self._seen)
        self._changed = asyncio.Event()

    def _seen(self, env):
        self.events.append(env)
        self._changed.set()

    async def wait_for(self, predicate):
        """Wait, on events rather than sleeps, until predicate() is true."""
        while not predicate():
            self._changed.clear()
            await asyncio.wait_for(self._changed.wait(), 5)

    async def batch(self, *calls):
        return await self.executor.run_batch(list(calls), self.run)

    def types(self, call_id=None):
        return [e.type for e in self.events if call_id is None or e.payload.get("call_id") == call_id]

    def rid(self, call):
        """The desk's id of the newest record made for `call` (the model's tool_use id only pairs results)."""
        ids = [e.payload["call_id"] for e in self.events
               if e.type == "tool:start" and e.payload.get("tool_use_id") == call.id and e.payload["call_id"]]
        assert ids, f"no record was made for {call.id}"
        return ids[-1]

    async def wait_pending(self, n=1):
        await self.wait_for(lambda: len(self.executor.pending()) >= n)
        return self.executor.pending()


def call(name, id=None, **inp):
    call.n = getattr(call, "n", 0) + 1
    return ToolCall(id=id or f"toolu_{call.n}", name=name, input=inp)


@pytest.fixture
def harness():
    return Harness(MemoryStore())
