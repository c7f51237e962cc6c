"""The model streams in the worker process (`off_loop=True`, as the desk runs them) against the local
Anthropic-compatible server: the same events in the same order as on the loop, a stop mid-stream, the clear
errors, a worker that dies mid-stream, and the fallback to the loop where no worker can run."""

from __future__ import annotations

import asyncio
import threading

import pytest

from desktop_app.core import ModelRequest, _model_worker
from desktop_app.core._anthropic import AnthropicModelClient
from desktop_app.core._errors import ModelError
from desktop_app.core._events import ErrorEvent, TextChunk, TokenUsage, ToolStart
from tests.fakes.anthropic_server import AnthropicServer, overloaded, reply, text, tool_use, unauthorized

TOOLS = [{"name": "fs_read", "description": "read", "input_schema": {"type": "object"}}]


def client_for(srv: AnthropicServer, *, off_loop: bool = True) -> AnthropicModelClient:
    return AnthropicModelClient(api_key=srv.api_key, base_url=srv.url, off_loop=off_loop)


def request(text_: str = "hi") -> ModelRequest:
    return ModelRequest(system="You are a test.", messages=[{"role": "user", "content": text_}], tools=TOOLS)


def answer() -> object:
    return reply(text("Reading the file now, then more."), tool_use("fs_read", {"path": "src/a.py"}, id="toolu_1"),
                 text("And a last word."))


def shape(events: list) -> list[tuple]:
    return [(type(e).__name__, getattr(e, "text", None), getattr(e, "partial_json", None), e.session_id)
            for e in events]


async def test_the_worker_streams_the_same_events_in_order_as_the_loop(server: AnthropicServer) -> None:
    server.add(answer(), overloaded(), answer())
    here: list = []
    there: list = []
    local, worker = client_for(server, off_loop=False), client_for(server)
    want = await local.stream(request(), emit=here.append, session_id="s1")
    got = await worker.stream(request(), emit=there.append, session_id="s1")  # after one retry
    assert worker._link is not None and not worker._link.broken, "it streamed in the worker"
    retries = [e for e in there if isinstance(e, ErrorEvent)]
    assert [(e.retrying, e.attempt) for e in retries] == [(True, 1)] and "529" in retries[0].message
    assert shape([e for e in there if not isinstance(e, ErrorEvent)]) == shape(here)
    assert [type(e) for e in there][-1] is TokenUsage and any(isinstance(e, ToolStart) for e in there)
    assert (got.content, got.stop_reason, [t.input for t in got.tool_uses]) == (
        want.content, want.stop_reason, [t.input for t in want.tool_uses])
    assert server.requests[-1].body["messages"] == server.requests[0].body["messages"]  # cache marks too
    await local.close()
    await worker.close()
    assert worker._link is None


async def test_a_stop_mid_stream_ends_it_at_once_and_the_next_step_runs(server: AnthropicServer) -> None:
    hold = threading.Event()
    server.add(reply(text("a long answer that is cut short"), hold=hold), reply(text("the next step")))
    events: list = []
    client = client_for(server)
    try:
        task = asyncio.ensure_future(client.stream(request(), emit=events.append, session_id="s1"))
        assert await asyncio.to_thread(server.wait_for_requests, 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(task, 5)
        seen = len(events)
        hold.set()  # the server would go on: nothing more of the stopped stream may arrive
        got = await client.stream(request("again"), emit=events.append, session_id="s2")
        assert got.text == "the next step"
        assert all(e.session_id == "s2" for e in events[seen:])
        assert not any(isinstance(e, TextChunk) and "cut short" in e.text for e in events)
    finally:
        hold.set()
        await client.close()


async def test_errors_come_back_as_the_same_clear_model_errors(server: AnthropicServer) -> None:
    server.add(unauthorized())
    client = client_for(server)
    with pytest.raises(ModelError) as info:
        await client.stream(request(), emit=lambda e: None)
    assert info.value.status_code == 401 and "API key" in str(info.value) and info.value.hint
    missing = AnthropicModelClient(api_key=None, base_url=server.url, off_loop=True)
    with pytest.raises(ModelError, match="No Anthropic API key"):
        await missing.stream(request(), emit=lambda e: None)
    assert len(server.requests) == 1
    await client.close()


async def test_a_worker_that_dies_mid_stream_is_a_clear_error_and_the_next_step_restarts_it(
        server: AnthropicServer) -> None:
    hold = threading.Event()
    server.add(reply(text("never finished"), hold=hold), reply(text("after the restart")))
    client = client_for(server)
    try:
        task = asyncio.ensure_future(client.stream(request(), emit=lambda e: None))
        assert await asyncio.to_thread(server.wait_for_requests, 1)
        proc = _model_worker._PROCESS.proc
        assert proc is not None
        proc.kill()
        with pytest.raises(ModelError, match="model worker process stopped") as info:
            await asyncio.wait_for(task, 10)
        assert info.value.hint == "Retry the step."
        hold.set()
        got = await client.stream(request("again"), emit=lambda e: None)
        assert got.text == "after the restart"
        assert _model_worker._PROCESS.proc is not None and _model_worker._PROCESS.proc.pid != proc.pid
    finally:
        hold.set()
        await client.close()


async def test_where_no_worker_can_run_it_streams_on_the_loop(server: AnthropicServer, monkeypatch) -> None:
    monkeypatch.setattr(_model_worker, "worker_available", lambda: False)
    server.add(reply(text("here")))
    client = client_for(server)
    got = await client.stream(request(), emit=lambda e: None)
    assert got.text == "here" and client._link is None
    await client.close()
