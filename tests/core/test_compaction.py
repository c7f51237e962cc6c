"""Compaction against the local fake Anthropic server: near the limit the older turns are summarised by the same
model, the summary is stored and starts the history sent from then on (and after a reopen), by hand too; the
store keeps every original message (a real SQLite file and its hash chain)."""

from __future__ import annotations

import json

import pytest

from desktop_app.core import (
    AgentDeskError,
    AgentSession,
    AnthropicModelClient,
    CompactionSettings,
    EventBus,
    Executor,
    PermissionPolicy,
    ProjectInfo,
    SessionSetup,
    ToolRegistry,
    is_summary,
    tool,
)
from desktop_app.core._compaction import COMPACTION_KEY, SUMMARY_HEADER, SUMMARY_INSTRUCTIONS
from tests.fakes.anthropic_server import AnthropicServer, overloaded, reply, text, tool_use


@tool(read_only=True)
async def echo(text: str) -> str:
    """Return the text."""
    return text


SMALL = CompactionSettings(context_tokens=1_000, compact_at=0.5)  # compacts past 500 tokens
BIG = {"input_tokens": 700}  # a step's usage past that limit


class Rig:
    def __init__(self, server: AnthropicServer, store) -> None:
        self.server, self.store = server, store
        self.bus = EventBus(store)
        self.registry = ToolRegistry([echo])
        self.executor = Executor(self.registry, PermissionPolicy("auto"), bus=self.bus, store=store)
        self.model = AnthropicModelClient(api_key=server.api_key, base_url=server.url, max_retries=0)
        self.project = ProjectInfo(id="p1", name="demo", path="/tmp/demo")
        self.events: list = []
        self.bus.on("*", self.events.append)

    async def open(self, compaction=SMALL, **kw) -> AgentSession:
        return await AgentSession.open(store=self.store, bus=self.bus, executor=self.executor,
                                       tools=list(self.registry), model_client=self.model, project=self.project,
                                       sandbox=None, setup=SessionSetup(compaction=compaction), **kw)

    def of_type(self, kind: str) -> list[dict]:
        return [e.payload for e in self.events if e.type == kind]


@pytest.fixture
async def store(tmp_path):
    from desktop_app.store import SqlStore

    s = await SqlStore.open(tmp_path / "audit.db")
    yield s
    await s.close()


def _texts(message: dict) -> list[str]:
    return [b.get("text", "") for b in message["content"] if b.get("type") == "text"]


def _no_marker(body: dict) -> None:
    assert COMPACTION_KEY not in json.dumps(body)  # the API would refuse the unknown field


async def test_near_the_limit_older_turns_are_summarised_and_the_summary_starts_the_history(server, store):
    server.add(
        reply(text("Reading."), tool_use("echo", {"text": "prices.py says 1,299"}, id="toolu_1")),
        reply(text("The bug is the separator."), usage=BIG),
        reply(text("Goal: fix price parsing. Found: the separator bug in prices.py.")),  # the summary
        reply(text("Fixed it.")),
    )
    rig = Rig(server, store)
    session = await rig.open()
    assert (await session.send("find the price bug")).ok
    assert not rig.of_type("compacted")
    assert (await session.send("now fix it")).ok
    summary_req, after = server.requests[2], server.requests[3]
    # the summary request: the older turns (tool pairs included, with the tools declared), then the ask
    assert "find the price bug" in json.dumps(summary_req.messages) and summary_req.body.get("tools")
    assert _texts(summary_req.messages[-1])[-1] == SUMMARY_INSTRUCTIONS
    assert "now fix it" not in json.dumps(summary_req.messages)
    # the next step starts from the summary, then the turn kept whole
    first = after.messages[0]
    assert first["role"] == "user" and _texts(first)[0].startswith(SUMMARY_HEADER)
    assert "the separator bug in prices.py" in _texts(first)[0] and _texts(first)[1] == "now fix it"
    assert "find the price bug" not in json.dumps(after.messages)
    for r in server.requests:
        _no_marker(r.body)
    (event,) = rig.of_type("compacted")
    assert event["summarised"] == 4 and event["kept"] == 1 and event["tokens_before"] >= 700 and not event["manual"]
    assert len(rig.of_type("token_usage")) == 4  # the summary's cost counts too
    assert not any("Goal: fix price parsing" in p["text"] for p in rig.of_type("text_chunk"))
    # the audit keeps every original message, and the summary as one more, in the hash chain
    stored = await store.messages(session.session.id)
    assert [m.role for m in stored] == ["user", "assistant", "user", "assistant", "user", "user", "assistant"]
    assert is_summary(stored[5]) and stored[0].content[0]["text"] == "find the price bug"
    assert (await store.verify()).ok


async def test_a_reopened_session_sends_the_summary_not_the_originals(server, store):
    server.add(reply(text("one"), usage=BIG), reply(text("SUMMARY one")), reply(text("two")), reply(text("three")))
    rig = Rig(server, store)
    session = await rig.open()
    await session.send("first")
    await session.send("second")
    again = await rig.open(session_id=session.session.id)
    await again.send("third")
    sent = server.requests[-1].messages
    assert _texts(sent[0])[0].startswith(SUMMARY_HEADER) and "first" not in json.dumps(sent)
    assert [t for m in sent for t in _texts(m)][1:] == ["second", "two", "third"]


async def test_compacting_by_hand_and_again_keeps_one_summary_in_front(server, store):
    server.add(reply(text("a1")), reply(text("a2")), reply(text("SUMMARY A")), reply(text("a3")),
               reply(text("SUMMARY B")), reply(text("a4")))
    rig = Rig(server, store)
    session = await rig.open(compaction=CompactionSettings(compact_at=0))  # never on its own
    assert await session.compact() is False  # nothing older than the last turn yet
    await session.send("q1")
    await session.send("q2")
    assert await session.compact() is True
    await session.send("q3")
    assert await session.compact() is True
    second = server.requests[4].messages  # the second summary request starts from the first summary
    assert _texts(second[0])[0].startswith(SUMMARY_HEADER) and "SUMMARY A" in _texts(second[0])[0]
    assert "q1" not in json.dumps(second)
    await session.send("q4")
    sent = server.requests[-1].messages
    assert "SUMMARY B" in _texts(sent[0])[0] and "SUMMARY A" not in json.dumps(sent)
    assert [t for m in sent for t in _texts(m)][1:] == ["q3", "a3", "q4"]
    assert [e["manual"] for e in rig.of_type("compacted")] == [True, True]
    assert len(await store.messages(session.session.id)) == 10  # 8 originals and 2 summaries


async def test_compacting_by_hand_while_a_turn_runs_is_refused(server, store):
    rig = Rig(server, store)
    session = await rig.open()
    session.running = True
    with pytest.raises(AgentDeskError, match="once the turn has ended"):
        await session.compact()


async def test_a_context_full_of_the_turn_in_progress_does_not_compact(server, store):
    """The older turns are a few words and the context is full of the last one (a large tool input, kept whole
    anyway): no summary request is spent on it."""
    big = "x" * 300_000
    server.add(reply(text("one")),
               reply(tool_use("echo", {"text": big}, id="toolu_big"), usage={"input_tokens": 90_000}),
               reply(text("echoed")))
    rig = Rig(server, store)
    session = await rig.open(compaction=CompactionSettings(context_tokens=100_000))
    await session.send("first")
    assert (await session.send("echo this")).text == "echoed"
    assert len(server.requests) == 3 and not rig.of_type("compacted")


async def test_a_failed_summary_is_reported_and_the_step_goes_on_with_the_whole_history(server, store):
    server.add(reply(text("one"), usage=BIG), overloaded(), reply(text("two")))
    rig = Rig(server, store)
    session = await rig.open()
    await session.send("first")
    assert (await session.send("second")).ok
    assert any(e["source"] == "compaction" for e in rig.of_type("error"))
    assert "first" in json.dumps(server.requests[-1].messages)
    assert not any(is_summary(m) for m in await store.messages(session.session.id))
