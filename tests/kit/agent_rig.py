"""The agent loop's rig: a session on a MemoryStore, the real executor, four small tools (echo, flaky, slow,
write), a sandbox that only describes itself, and the fake Anthropic server as the model."""

from __future__ import annotations

import asyncio
import posixpath

from desktop_app.core import (
    AnthropicModelClient,
    EventBus,
    Executor,
    MemoryStore,
    PermissionPolicy,
    ProjectInfo,
    RuleSet,
    SandboxDescription,
    ToolCallRecord,
    ToolContext,
    ToolRegistry,
    tool,
)
from desktop_app.core._agent import AgentSession
from desktop_app.core._messages import StoredMessage
from tests.fakes.anthropic_server import AnthropicServer


@tool(read_only=True, group="group:fs")
async def echo(text: str) -> str:
    """Return the text."""
    return text


@tool(read_only=True, group="group:fs")
async def flaky(n: int) -> str:
    """Always fails."""
    raise RuntimeError(f"broken {n}")


STARTED = "slow_started"


@tool(group="group:runtime")
async def slow(ctx: ToolContext) -> str:
    """Runs until aborted."""
    ctx.state[STARTED].set()
    await asyncio.Event().wait()
    return "never"


@tool(group="group:runtime")
async def write(path: str) -> str:
    """A write (needs approval in ask mode)."""
    return f"wrote {path}"


class FakeSandbox:
    def describe(self) -> SandboxDescription:
        return SandboxDescription(kind="docker", unsandboxed=False, container_id="c0ffee",
                                  image="agent-desk/python:3.12", image_digest="sha256:abc", network="none")

    async def start(self) -> None:
        return None

    async def real_path(self, path: str) -> str:  # no symlinks here: the lexical form is the real one
        return posixpath.normpath(posixpath.join("/workspace", path))


class Rig:
    """A session on a MemoryStore, the real executor, and the fake server."""

    def __init__(self, server: AnthropicServer, store: MemoryStore | None = None, mode: str = "auto",
                 rules: RuleSet | None = None) -> None:
        self.server = server
        self.store = store or MemoryStore()
        self.bus = EventBus(self.store)
        self.registry = ToolRegistry([echo, flaky, slow, write])
        self.executor = Executor(self.registry, PermissionPolicy(mode, rules), bus=self.bus, store=self.store)
        self.model = AnthropicModelClient(api_key=server.api_key, base_url=server.url, max_retries=1)
        self.project = ProjectInfo(id="p1", name="demo", path="/tmp/demo")
        self.events: list = []
        self.bus.on("*", self.events.append)
        self.asked = asyncio.Event()
        self.bus.on("permission_required", lambda env: self.asked.set())

    async def open(self, **kw) -> AgentSession:
        session = await AgentSession.open(
            store=self.store, bus=self.bus, executor=self.executor, tools=list(self.registry),
            model_client=self.model, project=self.project, sandbox=FakeSandbox(), **kw,
        )
        session._run.state[STARTED] = asyncio.Event()
        return session

    def record(self, tool_use_id: str) -> ToolCallRecord:
        """The one record carrying the model's `tool_use_id` (records are keyed by the desk's own id)."""
        [rec] = [r for r in self.store.records.values() if r.tool_use_id == tool_use_id]
        return rec

    def types(self) -> list[str]:
        return [e.type for e in self.events]

    def dones(self) -> list[dict]:
        return [e.payload for e in self.events if e.type == "done"]


def assert_history_valid(messages: list[StoredMessage]) -> None:
    """Every tool_use is answered by exactly one tool_result in the next user message."""
    for i, m in enumerate(messages):
        uses = [b["id"] for b in m.content if b.get("type") == "tool_use"]
        if not uses:
            continue
        following = []
        for n in messages[i + 1:]:
            if n.role != "user":
                break
            following += [b["tool_use_id"] for b in n.content if b.get("type") == "tool_result"]
        assert following[: len(uses)] == uses, (uses, following)
