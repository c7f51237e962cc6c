"""The Anthropic model client against the local Anthropic-compatible server: streaming, usage,
cache marks, retries reported on the monitor channel, and the clear errors."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import pytest

from desktop_app.core import ModelRequest
from desktop_app.core._anthropic import PARTIAL_JSON_MAX, AnthropicModelClient, with_cache_control
from desktop_app.core._errors import ModelError
from desktop_app.core._events import ErrorEvent, TextChunk, ThinkingChunk, TokenUsage, ToolStart
from desktop_app.core._pricing import estimate_cost
from tests.fakes.anthropic_server import (
    AnthropicServer,
    CutStream,
    StreamError,
    bad_request,
    overloaded,
    reply,
    text,
    thinking,
    tool_use,
    unauthorized,
)

TOOLS = [
    {"name": "fs_read", "description": "read", "input_schema": {"type": "object"}},
    {"name": "bash_run", "description": "run", "input_schema": {"type": "object"}},
]


def client_for(srv: AnthropicServer, **kw) -> AnthropicModelClient:
    return AnthropicModelClient(api_key=srv.api_key, base_url=srv.url, **kw)


def request(text_: str = "hi") -> ModelRequest:
    return ModelRequest(system="You are a test.", messages=[{"role": "user", "content": text_}], tools=TOOLS)


async def test_text_and_tool_use_stream_into_events_and_a_reply(server: AnthropicServer) -> None:
    server.add(reply(text("Reading the file now."), tool_use("fs_read", {"path": "src/a.py"}, id="toolu_1")))
    events: list = []
    client = client_for(server)
    got = await client.stream(request(), emit=events.append, session_id="s1")

    chunks = [e for e in events if isinstance(e, TextChunk)]
    assert len(chunks) > 1, "text arrives in several deltas"
    assert "".join(c.text for c in chunks) == "Reading the file now."
    partial = [e for e in events if isinstance(e, ToolStart)]
    assert all(e.partial and e.tool_use_id == "toolu_1" and not e.call_id for e in partial)
    # each event carries the JSON added since the last one: together they are the whole input
    assert "".join(e.partial_json for e in partial) == '{"path": "src/a.py"}'
    assert partial[-1].input == {"path": "src/a.py"}
    assert all(e.session_id == "s1" for e in events)

    assert got.stop_reason == "tool_use"
    assert got.text == "Reading the file now."
    assert [(t.id, t.name, t.input) for t in got.tool_uses] == [("toolu_1", "fs_read", {"path": "src/a.py"})]
    assert got.content[-1] == {"type": "tool_use", "id": "toolu_1", "name": "fs_read", "input": {"path": "src/a.py"}}
    await client.close()


async def test_a_large_streamed_input_costs_linear_event_bytes(server: AnthropicServer) -> None:
    content = "x" * 200_000
    server.add(reply(tool_use("fs_write", {"path": "big.txt", "content": content}, id="toolu_big", pieces=2000)))
    events: list = []
    client = client_for(server)
    got = await client.stream(request(), emit=events.append, session_id="s1")
    partial = [e for e in events if isinstance(e, ToolStart)]
    whole, at = json.dumps({"path": "big.txt", "content": content}), 0
    for e in partial:  # each event: the head (at most PARTIAL_JSON_MAX) of the JSON new since the last one
        assert len(e.partial_json) <= PARTIAL_JSON_MAX
        found = whole.find(e.partial_json, at)
        assert found >= at, "partial JSON out of order"
        at = found + len(e.partial_json)
    published = sum(len(e.partial_json) + len(json.dumps(e.input)) for e in partial)
    assert published < 3 * len(content)  # not one copy of the input per delta
    assert all(len(e.input.get("content", "")) < 300 for e in partial)  # previews, not copies
    assert got.tool_uses[0].input["content"] == content
    await client.close()


async def test_thinking_streams_and_keeps_its_signature(server: AnthropicServer) -> None:
    server.add(reply(thinking("Let me look at the tests first."), text("Done.")))
    events: list = []
    client = client_for(server, thinking_budget=2048)
    got = await client.stream(request(), emit=events.append)
    assert "".join(e.text for e in events if isinstance(e, ThinkingChunk)) == "Let me look at the tests first."
    assert got.content[0] == {
        "type": "thinking", "thinking": "Let me look at the tests first.", "signature": "sig-fake"}
    body = server.requests[-1].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert body["max_tokens"] > 2048


async def test_usage_becomes_a_token_usage_event_with_a_cost(server: AnthropicServer) -> None:
    usage = {"input_tokens": 1200, "output_tokens": 300, "cache_creation_input_tokens": 4000,
             "cache_read_input_tokens": 9000}
    server.add(reply(text("ok"), usage=usage))
    events: list = []
    client = client_for(server, model="claude-sonnet-4-6")
    await client.stream(request(), emit=events.append)
    (ev,) = [e for e in events if isinstance(e, TokenUsage)]
    assert (ev.input_tokens, ev.output_tokens) == (1200, 300)
    assert (ev.cache_creation_input_tokens, ev.cache_read_input_tokens) == (4000, 9000)
    # sonnet: $3 in, $15 out, writes 1.25x, reads 0.1x per million
    expected = (1200 * 3 + 300 * 15 + 4000 * 3.75 + 9000 * 0.3) / 1e6
    assert ev.cost_usd == pytest.approx(expected)
    assert ev.cost_usd == pytest.approx(estimate_cost("claude-sonnet-4-6", **{k: v for k, v in usage.items()}))


async def test_malformed_tool_input_is_kept_raw_with_a_parse_error(server: AnthropicServer) -> None:
    server.add(reply(tool_use("fs_read", raw_json='{"path": "a.txt", oops}', id="toolu_bad")))
    client = client_for(server)
    got = await client.stream(request(), emit=lambda e: None)
    (use,) = got.tool_uses
    assert use.input is None
    assert use.raw_input == '{"path": "a.txt", oops}'
    assert "not valid JSON" in (use.parse_error or "")
    # the history copy must still be a valid tool_use block (input an object)
    assert got.content[0]["input"] == {}


async def test_cache_marks_on_system_last_tool_and_last_message(server: AnthropicServer) -> None:
    server.add(reply(text("ok")))
    history = [
        {"role": "user", "content": [{"type": "text", "text": "first"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "answer"}]},
        {"role": "user", "content": [{"type": "text", "text": "second"}, {"type": "text", "text": "more"}]},
    ]
    req = ModelRequest(system="sys", messages=history, tools=TOOLS)
    await client_for(server).stream(req, emit=lambda e: None)
    body = server.requests[-1].body
    eph = {"type": "ephemeral"}
    assert body["system"] == [{"type": "text", "text": "sys", "cache_control": eph}]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == eph
    assert body["messages"][-1]["content"][-1]["cache_control"] == eph
    assert "cache_control" not in body["messages"][-1]["content"][0]
    assert "cache_control" not in body["messages"][0]["content"][0]
    # the caller's history is not modified
    assert "cache_control" not in history[-1]["content"][-1]


async def test_the_body_is_the_json_the_sdk_would_send(server: AnthropicServer) -> None:
    """The step's body is encoded once by the desk (UTF-8, compact): the server receives what the SDK's own
    encoding sends, text beyond ASCII and nested blocks included; a value that is not plain JSON (a date) goes
    the SDK's way and still arrives."""
    import datetime

    server.add(reply(text("ok")), reply(text("ok")))
    history = [{"role": "user", "content": [{"type": "text", "text": "héllo \u2028 日本 \U0001F600 \"q\" \\ \x07"}]},
               {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash_run",
                                                  "input": {"command": "echo 1", "n": 3, "f": 0.5, "z": None}}]},
               {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\n"}]}]
    client = client_for(server)
    await client.stream(ModelRequest(system="sys", messages=history, tools=TOOLS), emit=lambda e: None)
    sent = server.requests[-1]
    expected = with_cache_control(ModelRequest(system="sys", messages=history, tools=TOOLS))
    assert sent.body["messages"] == expected[2] and sent.body["stream"] is True
    assert sent.body["system"] == expected[0] and sent.body["tools"] == expected[1]
    assert sent.headers.get("content-type", sent.headers.get("Content-Type")) == "application/json"
    at = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.UTC)
    dated = [{"role": "user", "content": [{"type": "text", "text": "when", "at": at}]}]
    await client.stream(ModelRequest(system="sys", messages=dated, tools=TOOLS, max_tokens=100), emit=lambda e: None)
    body = server.requests[-1].body
    assert body["messages"][0]["content"][0]["at"] == at.isoformat() and body["max_tokens"] == 100
    await client.close()


def test_cache_mark_skips_thinking_blocks() -> None:
    req = ModelRequest(
        system="s",
        messages=[{"role": "assistant", "content": [{"type": "text", "text": "t"},
                                                    {"type": "thinking", "thinking": "x", "signature": "y"}]}],
    )
    _, _, messages = with_cache_control(req)
    assert "cache_control" in messages[-1]["content"][0]
    assert "cache_control" not in messages[-1]["content"][1]


async def test_each_sdk_retry_shows_on_the_monitor_channel(server: AnthropicServer) -> None:
    server.add(overloaded(), overloaded(), reply(text("third time lucky")))
    events: list = []
    client = client_for(server, max_retries=2)
    got = await client.stream(request(), emit=events.append, session_id="s9")
    assert got.text == "third time lucky"
    retries = [e for e in events if isinstance(e, ErrorEvent)]
    assert [(e.retrying, e.attempt) for e in retries] == [(True, 1), (True, 2)]
    assert all("529" in e.message and e.session_id == "s9" for e in retries)
    assert len(server.requests) == 3


async def test_overloaded_after_the_retries_is_a_model_error(server: AnthropicServer) -> None:
    server.add(overloaded(), overloaded())
    events: list = []
    with pytest.raises(ModelError) as info:
        await client_for(server, max_retries=1).stream(request(), emit=events.append)
    assert "overloaded" in str(info.value).lower()
    assert info.value.status_code == 529
    assert [e.attempt for e in events if isinstance(e, ErrorEvent)] == [1]


async def test_401_says_to_check_the_api_key(server: AnthropicServer) -> None:
    server.add(unauthorized())
    with pytest.raises(ModelError) as info:
        await client_for(server).stream(request(), emit=lambda e: None)
    assert "Check the API key" in info.value.user_message()
    assert server.api_key not in info.value.user_message()


async def test_wrong_key_is_refused_by_the_server_like_the_real_api(server: AnthropicServer) -> None:
    client = AnthropicModelClient(api_key="sk-ant-wrong", base_url=server.url, key_source="env")
    with pytest.raises(ModelError) as info:
        await client.stream(request(), emit=lambda e: None)
    assert "401" in str(info.value)
    assert "ANTHROPIC_API_KEY" in info.value.user_message()
    assert "sk-ant-wrong" not in info.value.user_message()
    assert "sk-ant-wrong" not in repr(client)


async def test_400_shows_the_apis_own_message(server: AnthropicServer) -> None:
    server.add(bad_request("messages.1.content: tool_use ids must be unique"))
    with pytest.raises(ModelError) as info:
        await client_for(server).stream(request(), emit=lambda e: None)
    assert "tool_use ids must be unique" in str(info.value)
    assert len(server.requests) == 1, "a 400 is not retried"


async def test_error_event_mid_stream_is_a_model_error(server: AnthropicServer) -> None:
    server.add(StreamError(reply(text("a long partial answer")), after_events=4))
    events: list = []
    with pytest.raises(ModelError) as info:
        await client_for(server).stream(request(), emit=events.append)
    assert "overloaded_error" in str(info.value)
    assert any(isinstance(e, TextChunk) for e in events), "the part that streamed was shown"
    assert not any(isinstance(e, TokenUsage) for e in events)


async def test_cut_stream_is_a_model_error(server: AnthropicServer) -> None:
    server.add(CutStream(reply(text("a long partial answer")), after_events=4))
    with pytest.raises(ModelError) as info:
        await client_for(server).stream(request(), emit=lambda e: None)
    assert "broke off" in str(info.value)


async def test_missing_key_fails_before_any_request(server: AnthropicServer) -> None:
    client = AnthropicModelClient(api_key=None, base_url=server.url)
    with pytest.raises(ModelError) as info:
        await client.stream(request(), emit=lambda e: None)
    assert "No Anthropic API key" in str(info.value)
    assert server.requests == []


@pytest.fixture
def unanswered_endpoint():
    """A loopback port whose accept queue is full: a connection to it is never opened (its SYN is dropped, as a
    firewall or a dead proxy drops them). Yields its base URL."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    port = server.getsockname()[1]
    filler = socket.create_connection(("127.0.0.1", port), timeout=5)  # the one connection the queue holds
    try:
        probe = socket.socket()
        probe.settimeout(0.5)
        with pytest.raises(TimeoutError):  # the premise: a further connection hangs
            probe.connect(("127.0.0.1", port))
        probe.close()
        yield f"http://127.0.0.1:{port}"
    finally:
        filler.close()
        server.close()


@pytest.mark.parametrize("off_loop", [False, True])
async def test_an_endpoint_that_never_opens_fails_in_seconds_not_the_request_bound(unanswered_endpoint,
                                                                                  off_loop) -> None:
    """A base URL whose connection never opens is named within the SDK's connect bound (5 s an attempt), not
    after the request bound of 600 s that a long generation needs; in the model worker process too."""
    client = AnthropicModelClient(api_key="sk-ant-test", base_url=unanswered_endpoint, max_retries=0,
                                  timeout_s=600.0, off_loop=off_loop)
    t0 = time.monotonic()
    try:
        with pytest.raises(ModelError) as info:
            await asyncio.wait_for(client.stream(request(), emit=lambda e: None), 60)
    finally:
        await client.close()
    assert time.monotonic() - t0 < 30
    assert f"The model endpoint at {unanswered_endpoint}" in str(info.value)
    assert "did not answer in time" in str(info.value) and "Check the network" in info.value.hint
