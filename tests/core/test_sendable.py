"""The history as sent, kept from step to step (core/_sendable.py), is the history `sendable` builds whole: on
random histories grown, cut and compacted, and byte for byte in the requests the loopback server receives."""

from __future__ import annotations

import json
import random

import pytest

from desktop_app.core import (
    AgentSession,
    AnthropicModelClient,
    EventBus,
    Executor,
    MemoryStore,
    ModelRequest,
    PermissionPolicy,
    ProjectInfo,
    StoredMessage,
    ToolRegistry,
    TurnEnd,
    tool,
)
from desktop_app.core._anthropic import with_cache_control
from desktop_app.core._compaction import COMPACTION_KEY, sendable
from desktop_app.core._sendable import SendableHistory
from tests.fakes.anthropic_server import reply, text, tool_use


def _message(rng: random.Random, i: int, history: list[StoredMessage]) -> StoredMessage:
    role = rng.choice(["user", "assistant"])
    kind = rng.random()
    if kind < 0.1:
        content: list = []  # an empty message: left out of what is sent
    elif kind < 0.2 and len(history) > 2:  # a summary keeping a message from the history (or none)
        kept = rng.choice([m.id for m in history] + [999_999])
        content = [{"type": "text", "text": f"summary {i}", COMPACTION_KEY: {"kept_from": kept}}]
        role = "user"
    elif role == "user" and kind < 0.6:
        content = [{"type": "text", "text": f"t{i}"}, {"type": "tool_result", "tool_use_id": f"u{i}", "content": "x"}]
    else:
        content = [{"type": "text", "text": f"m{i}"}]
    return StoredMessage("s1", role, content, i + 1)


@pytest.mark.parametrize("seed", range(8))
def test_kept_history_equals_the_whole_one_at_every_step(seed: int) -> None:
    rng = random.Random(seed)
    kept = SendableHistory()
    history: list[StoredMessage] = []
    for i in range(300):
        r = rng.random()
        if r < 0.03 and history:  # cut in place (a rewind), then grown again
            del history[rng.randrange(len(history)):]
        elif r < 0.05:  # a list of its own (a reopen)
            history = list(history)
        for _ in range(rng.choice([0, 1, 1, 2, 3])):
            history.append(_message(rng, i * 10 + len(history), history))
        assert json.dumps(kept.of(history)) == json.dumps(sendable(history)), (seed, i)


@tool(read_only=True)
async def echo(text: str) -> str:
    """Return the text."""
    return text


async def test_the_requests_the_server_receives_are_the_ones_built_whole(server) -> None:
    server.add(reply(text("one"), tool_use("echo", {"text": "a"})),
               reply(text("two"), tool_use("echo", {"text": "b"}), tool_use("echo", {"text": "c"})),
               reply(tool_use("echo", {"text": "d"})),
               reply(text("done")))
    store = MemoryStore()
    bus = EventBus(store)
    executor = Executor(ToolRegistry([echo]), PermissionPolicy("auto"), bus=bus, store=store)
    model = AnthropicModelClient(api_key=server.api_key, base_url=server.url, max_retries=0)
    session = await AgentSession.open(store=store, bus=bus, executor=executor, tools=[echo], model_client=model,
                                      project=ProjectInfo(id="p1", name="demo", path="/tmp/demo"), sandbox=None)
    whole: list[list] = []

    class Spy(SendableHistory):
        def of(self, history: list[StoredMessage]) -> list:
            whole.append(sendable(history))  # what the step sent before it kept the history
            return super().of(history)

    session._sendable = Spy()
    assert (await session.send("echo them")).reason is TurnEnd.END_TURN
    await model.close()
    assert len(server.requests) == len(whole) == 4
    for request, messages in zip(server.requests, whole, strict=True):
        built = ModelRequest(system=request.body["system"][0]["text"], messages=messages, tools=[])
        assert json.dumps(request.body["messages"]) == json.dumps(with_cache_control(built)[2])
