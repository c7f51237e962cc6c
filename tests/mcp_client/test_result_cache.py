"""Result caching of MCP tools through the whole agent loop, against a real MCP server (tests/mcp_client/
cache_server.py, the mcp SDK over stdio): a tool that declares readOnlyHint and idempotentHint answers a repeated
identical call from the first call's result (recorded as "from cache" with that call's id; the server saw one
call); a write to the workspace or the end of the TTL makes it run again; a tool without both hints is never
cached. The same live server labels its tools' cards (its title, else a label from the name)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

import desktop_app.core._result_cache as result_cache
from desktop_app.core import ToolCallState
from desktop_app.runtime import tool_labels
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use

SERVER = Path(__file__).with_name("cache_server.py")
TOOL = "mcp__cachetest__lookup"


def later(clock: list[float], seconds: float, turn):
    """A model turn that first moves the cache's clock on (the TTL ends without a sleep)."""
    def answer(req):
        clock[0] += seconds
        return turn
    return answer


async def test_an_idempotent_read_only_mcp_tool_is_cached_until_a_write_or_its_ttl(
        desk_for, server: AnthropicServer, monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [0.0]
    real = result_cache.time.monotonic
    monkeypatch.setattr(result_cache, "time", SimpleNamespace(monotonic=lambda: real() + clock[0]))
    desk = await desk_for({"cachetest": {"command": sys.executable, "args": [str(SERVER)]}})
    tools = {n: desk.rt.registry.get(f"mcp__cachetest__{n}") for n in ("lookup", "clock", "tally")}
    assert tools["lookup"].cache_ttl_s == 60.0
    assert tools["clock"].cache_ttl_s is None and tools["tally"].cache_ttl_s is None
    # labels (issue 28 item 7): the server's title, else one from the name, each with the server's name; the
    # desk's catalogue finds the live tool
    assert tools["lookup"].display_label == "Look up a key (cachetest)"
    assert tools["tally"].display_label == "Tally (cachetest)"
    card = tool_labels().summary(TOOL, {"key": "a"})
    assert card.title == "Look up a key (cachetest): a"
    assert [(f.name, f.value) for f in card.fields] == [("Server", "cachetest"), ("Tool", "lookup"), ("Key", "a")]
    calls = [(TOOL, {"key": "a"}, "t1"), (TOOL, {"key": "a"}, "t2"), ("mcp__cachetest__clock", {"key": "a"}, "c1"),
             ("mcp__cachetest__clock", {"key": "a"}, "c2"), ("mcp__cachetest__tally", {}, "n1"),
             ("mcp__cachetest__tally", {}, "n2"), ("fs_write", {"path": "notes.txt", "content": "x\n"}, "w1"),
             (TOOL, {"key": "a"}, "t3"), (TOOL, {"key": "a"}, "t4")]
    server.add(*[reply(tool_use(n, i, id=c)) for n, i, c in calls],
               later(clock, 60.5, reply(tool_use("mcp__cachetest__tally", {}, id="n3"))),
               reply(tool_use(TOOL, {"key": "a"}, id="t5")), reply(tool_use("mcp__cachetest__tally", {}, id="n4")),
               reply(text("done")))
    session = await desk.rt.open_session()
    assert (await session.send("look things up")).reason == "end_turn"
    said = {r["tool_use_id"]: r["content"][0]["text"] for req in server.requests for r in req.tool_results()}
    assert [said[c] for c in ("t1", "t2", "t3", "t4", "t5")] == ["a#1", "a#1", "a#2", "a#2", "a#3"]
    assert [said["c1"], said["c2"]] == ["tick 1", "tick 2"]  # read-only but not idempotent: never cached
    # the server's own count: lookup ran 3 times for 5 calls; tally (no hints) ran every time it was asked
    assert json.loads(said["n1"]) == {"clock": 2, "lookup": 1, "tally": 1}
    assert json.loads(said["n2"]) == {"clock": 2, "lookup": 1, "tally": 2}
    assert json.loads(said["n3"]) == {"clock": 2, "lookup": 2, "tally": 3}
    assert json.loads(said["n4"]) == {"clock": 2, "lookup": 3, "tally": 4}
    records = {r.tool_use_id: r for r in await desk.records(session.session.id)}
    assert all(r.state is ToolCallState.COMPLETED for r in records.values())

    def cached_from(tool_use_id: str) -> str | None:
        executing = next(e for e in records[tool_use_id].trail if e.state is ToolCallState.EXECUTING)
        return (executing.data or {}).get("from_cache")

    assert cached_from("t2") == records["t1"].id and cached_from("t4") == records["t3"].id
    note = next(e.note for e in records["t2"].trail if e.state is ToolCallState.EXECUTING)
    assert note == f"from cache: the result of {records['t1'].id}"
    assert [cached_from(c) for c in ("t1", "t3", "t5", "c1", "c2", "n1", "n2", "n3", "n4")] == [None] * 9
