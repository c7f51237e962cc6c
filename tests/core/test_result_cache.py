"""Tool result caching on the real executor and agent loop: a repeated identical call of a cacheable read-only
tool is answered from the first call's result and recorded as such; any call that may write, a change on the
host, another input, an error or the end of the TTL make it run again; a tool that is not read-only is never
cached, whatever it declares."""

from __future__ import annotations

import pytest

from desktop_app.core import ToolCallState, ToolResult, tool
from desktop_app.core._result_cache import ResultCache
from tests.fakes.anthropic_server import reply, text, tool_use
from tests.kit import Rig

RUNS: list[str] = []


@tool(read_only=True, group="group:fs")
async def lookup(key: str) -> str:
    """A read that counts its runs."""
    RUNS.append(key)
    if key == "bad":
        raise ValueError("no such key")
    return f"{key}#{RUNS.count(key)}"


@tool(group="group:runtime")
async def poke(key: str) -> str:
    """A write (it declares a TTL too, which must not count)."""
    RUNS.append(f"poke:{key}")
    return "poked"


lookup.cache_ttl_s = 60.0
poke.cache_ttl_s = 60.0


def cache_rig(server) -> Rig:
    RUNS.clear()
    rig = Rig(server, mode="auto")
    rig.registry.register(lookup)
    rig.registry.register(poke)
    return rig


def results(server) -> list[str]:
    return [r["content"][0]["text"] for req in server.requests for r in req.tool_results()[-1:]]


async def test_an_identical_read_comes_from_the_cache_until_something_may_have_changed(server) -> None:
    calls = [("lookup", "a", "t1"), ("lookup", "a", "t2"), ("lookup", "b", "t3"), ("poke", "a", "t4"),
             ("poke", "a", "t5"), ("lookup", "a", "t6"), ("lookup", "a", "t7"), ("lookup", "bad", "t8"),
             ("lookup", "bad", "t9")]
    server.add(*[reply(tool_use(n, {"key": k}, id=i)) for n, k, i in calls], reply(text("done")))
    rig = cache_rig(server)
    session = await rig.open()
    assert (await session.send("go")).reason == "end_turn"
    assert RUNS == ["a", "b", "poke:a", "poke:a", "a", "bad", "bad"]
    assert results(server)[:7] == ["a#1", "a#1", "b#1", "poked", "poked", "a#2", "a#2"]
    hit = rig.record("t2")
    executing = next(e for e in hit.trail if e.state is ToolCallState.EXECUTING)
    assert executing.data["from_cache"] == rig.record("t1").id
    assert executing.note == f"from cache: the result of {rig.record('t1').id}"
    assert hit.state is ToolCallState.COMPLETED and "from_cache" not in next(
        e for e in rig.record("t6").trail if e.state is ToolCallState.EXECUTING).data
    assert rig.record("t9").state is ToolCallState.FAILED  # an error is never cached: it ran again


async def test_a_change_on_the_host_makes_the_next_identical_read_run(server) -> None:
    server.add(reply(tool_use("lookup", {"key": "a"})), reply(text("one")),
               reply(tool_use("lookup", {"key": "a"})), reply(text("two")))
    rig = cache_rig(server)
    session = await rig.open()
    await session.send("first")
    session.host_changed(["notes.txt"], ["modified"])
    await session.send("second")
    assert RUNS == ["a", "a"]


def test_a_result_older_than_its_ttl_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    import desktop_app.core._result_cache as module

    clock = [100.0]
    monkeypatch.setattr(module.time, "monotonic", lambda: clock[0])
    cache = ResultCache(max_entries=2)
    cache.put("t", {"k": 1}, ToolResult.text("x"), "call_1")
    clock[0] += 59.9
    assert cache.get("t", {"k": 1}, 60.0).call_id == "call_1"
    clock[0] += 0.2
    assert cache.get("t", {"k": 1}, 60.0) is None
    for i in range(3):  # bounded: the oldest goes first
        cache.put("t", {"k": i}, ToolResult.text(str(i)), f"call_{i}")
    assert cache.get("t", {"k": 0}, 60.0) is None and cache.get("t", {"k": 2}, 60.0) is not None
