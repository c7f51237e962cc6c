"""Large inputs are redacted once and off the event loop: a 20 MB fs_write through the real executor, the
real fs_write tool and a real sandbox, with and without the agent over the local model server, keeps the
window responsive and still stores its input redacted. Also the redactor's memo (identity, bounds, no
second pass), text RE2 cannot encode (lone surrogates), and the CLI's lines about surviving processes."""

from __future__ import annotations

import json
import secrets
import string
import threading
from pathlib import Path
from typing import Any

import pytest

from desktop_app.core import (
    AnthropicModelClient,
    EventBus,
    Executor,
    MemoryStore,
    PermissionPolicy,
    ProjectInfo,
    RunContext,
    ToolCallState,
    ToolRegistry,
    builtin_hooks,
)
from desktop_app.core._agent import AgentSession
from desktop_app.core._messages import ToolCall
from desktop_app.core._redaction import INLINE_REDACT_CHARS, REDACTED, Redactor, _LargeMemo
from desktop_app.sandbox import LocalSandbox
from desktop_app.tools import builtin_tools
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.security.loop_lag import LagMeter

MB = 1_000_000


def _r(n: int) -> str:
    return "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(n))


def big_source(size: int, secret: str) -> str:
    """`size` characters of code-like text with a `DB_PASS=` line near the end (the worst place: every
    pattern scans all of it first), and non-ASCII text, so offsets in bytes and in characters differ."""
    line = "def f(x):  # naïve — ünïcode\n    return x * 2\n"
    body = (line * (size // len(line) + 1))[:size]
    return body + f"\nDB_PASS={secret}\n" + line


class Desk:
    """The real executor on a MemoryStore (the store's own costs are the audit work's), the real
    builtin tools and hooks, and a LocalSandbox over a temporary workspace; every redaction counted."""

    def __init__(self, workspace: Path) -> None:
        self.workspace = workspace
        self.store = MemoryStore()
        self.bus = EventBus(self.store)
        self.executor = Executor(ToolRegistry(builtin_tools()), PermissionPolicy("auto"), bus=self.bus,
                                 store=self.store, hooks=builtin_hooks(artifacts_dir=workspace / ".artifacts"))
        self.bus.redactor = self.executor.redactor  # as the runtime wires it
        self.sandbox = LocalSandbox(workspace)
        self.run = RunContext(session_id="s1", project_id="p1", sandbox=self.sandbox)
        self.scans: list[int] = []  # the length of every large text redacted from scratch
        self.scan_threads: list[tuple[int, int]] = []  # (length, thread) of each
        redactor = self.executor.redactor
        inner = redactor._redact

        def counted(text: str) -> str:
            if len(text) > INLINE_REDACT_CHARS:
                self.scans.append(len(text))
                self.scan_threads.append((len(text), threading.get_ident()))
            return inner(text)

        redactor._redact = counted  # type: ignore[method-assign]
        self.events: list[Any] = []
        self.bus.on("*", self.events.append)

    def redacted_off_loop(self, size: int) -> bool:
        """Every redaction of a text of `size` or more ran on a thread other than the caller's (the loop's),
        and there was one; only pieces under 256 KB ran on the loop."""
        loop = threading.get_ident()
        big = [t for n, t in self.scan_threads if n >= size]
        on_loop = [n for n, t in self.scan_threads if t == loop]
        return bool(big) and loop not in big and all(n < 256 * 1024 for n in on_loop)


def stored_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


@pytest.fixture
def desk(tmp_path: Path) -> Desk:
    ws = tmp_path / "ws"
    ws.mkdir()
    return Desk(ws)


async def test_a_20_mb_fs_write_is_redacted_once_off_the_loop(desk: Desk) -> None:
    secret = _r(24)
    content = big_source(20 * MB, secret)
    call = ToolCall("toolu_big", "fs_write", {"path": "big.py", "content": content},
                    json.dumps({"path": "big.py", "content": content}))
    async with LagMeter() as lag:
        [record] = await desk.executor.run_batch([call], desk.run)
    assert record.state is ToolCallState.COMPLETED, record.error
    # The property, exactly: the input was redacted off the loop's thread. The lag bound is the gross check
    # (redacting 20 MB on the loop held it for about a second).
    assert desk.redacted_off_loop(len(content))
    assert lag.worst < 0.1, lag
    # The file holds what the model sent; the record and every event hold it redacted.
    assert (desk.workspace / "big.py").read_text(encoding="utf-8") == content
    assert record.input["content"].endswith(f"DB_PASS={REDACTED}\n" + content.rsplit("\n", 2)[-2] + "\n") or \
        f"DB_PASS={REDACTED}" in record.input["content"][-200:]
    assert secret not in stored_text(record.input)
    assert all(secret not in stored_text(env.payload) for env in desk.events)
    [saved] = await desk.store.session_records("s1", [ToolCallState.COMPLETED])
    assert secret not in stored_text(saved.input) and secret not in stored_text(saved.trail)
    # Once: the input was scanned a single time, although the record, the ToolStart and every payload
    # that carries it were redacted again (each found it in the memo).
    assert desk.scans.count(len(content)) == 1, desk.scans


async def test_a_large_fs_write_through_the_agent_is_stored_redacted_and_the_loop_stays_free(
        desk: Desk) -> None:
    """The agent's part: the stored assistant message (redacted first, before the executor sees the call),
    the streamed preview and the repetition guard. 2 MB, not 20: the model SDK itself serializes each
    request body and parses each stream event on the loop (~10 ms per MB), and a model cannot send 20 MB
    in one answer anyway (its output is capped far below). The SDK's first use (imports) is warmed up."""
    secret = _r(24)
    content = big_source(2 * MB, secret)
    with AnthropicServer() as server:
        server.add(reply(text("Ready.")))
        server.add(reply(tool_use("fs_write", {"path": "big.py", "content": content}, id="toolu_big",
                                  pieces=40)))
        server.add(reply(text("Written.")))
        model = AnthropicModelClient(api_key=server.api_key, base_url=server.url, max_retries=1)
        session = await AgentSession.open(
            store=desk.store, bus=desk.bus, executor=desk.executor, tools=list(desk.executor.registry),
            model_client=model, project=ProjectInfo(id="p1", name="demo", path=str(desk.workspace)),
            sandbox=desk.sandbox,
        )
        assert (await session.send("warm up")).text == "Ready."
        async with LagMeter() as lag:
            result = await session.send("write it")
    assert result.text == "Written."
    # The whole input was redacted off the loop's thread (the streamed pieces, 50 KB each, are redacted as
    # they come); the lag bound is gross, since the SDK itself parses the 2 MB stream on the loop
    # (redacting on the loop as well measured about 80 ms here).
    assert desk.redacted_off_loop(len(content)), desk.scan_threads
    assert lag.worst < 0.15, lag
    assert (desk.workspace / "big.py").read_text(encoding="utf-8") == content
    messages = await desk.store.messages(session.session.id)
    [use] = [b for m in messages for b in m.content if b.get("type") == "tool_use"]
    assert f"DB_PASS={REDACTED}" in use["input"]["content"] and secret not in stored_text(messages)
    assert all(secret not in stored_text(env.payload) for env in desk.events)
    [record] = await desk.store.session_records(session.session.id, [ToolCallState.COMPLETED])
    assert record.input == use["input"]  # the record and the message hold the same redaction
    assert desk.scans.count(len(content)) == 1, desk.scans


# -- the memo ---------------------------------------------------------------------------------------


def test_the_memo_is_by_identity_and_bounded() -> None:
    redactor = Redactor()
    scans: list[int] = []
    inner = redactor._redact
    redactor._redact = lambda t: (scans.append(len(t)), inner(t))[1]  # type: ignore[method-assign]
    secret = _r(24)
    text = "x" * INLINE_REDACT_CHARS + f"\nexport API_TOKEN={secret}\n"
    out = redactor.redact(text)
    assert secret not in out and redactor.redact(text) is out and redactor.redact(out) is out
    assert scans == [len(text)]
    # An equal text that is another object is scanned again: identity, never a hash of the text that a
    # crafted collision could fool.
    twin = "".join([text[:10], text[10:]])
    assert twin is not text and redactor.redact(twin) == out and scans == [len(text)] * 2
    # Bounded in values and in characters; the newest stays even when it alone is past the bound.
    memo = _LargeMemo(values=3, chars=10 * INLINE_REDACT_CHARS)
    texts = [f"{i}" + "y" * 2 * INLINE_REDACT_CHARS for i in range(6)]
    for t in texts:
        memo.put(t, t)
    assert [memo.get(t) is t for t in texts] == [False, False, False, True, True, True]
    huge = "z" * 20 * INLINE_REDACT_CHARS
    memo.put(huge, huge)
    assert memo.get(huge) is huge and all(memo.get(t) is None for t in texts)


def test_a_redaction_that_is_also_an_input_outlives_its_group() -> None:
    memo = _LargeMemo(values=1)
    raw, red = "a" * 20_000 + "1", "a" * 20_000 + "2"
    memo.put(raw, red)
    other = "b" * 20_000
    memo.put(red, red)  # already known as a redaction: no new group
    memo.put(other, other)
    assert memo.get(other) is other and memo.get(raw) is None and memo.get(red) is None


@pytest.mark.parametrize("text", [
    "password=\ud800abcdefgh",  # a JSON `\ud800` escape, as the model may send it
    "x" * 300 + "\udcff token=abcdefgh123",  # a file name's undecodable byte (surrogateescape)
    "\udcff" * (INLINE_REDACT_CHARS + 10) + " DB_PASS=hunter2hunter2",
    "é" * 70_000 + "\ud800" + "é" * (1 << 20) + " aws_secret_access_key = Ab1/" + "k" * 36,
])
def test_text_re2_cannot_encode_is_still_redacted(text: str) -> None:
    out = Redactor().redact(text)
    assert REDACTED in out and "hunter2" not in out and "abcdefgh" not in out and "k" * 36 not in out
    if not text.startswith("password="):  # elsewhere the surrogates are kept as they were
        assert out.count("\ud800") == text.count("\ud800") and out.count("\udcff") == text.count("\udcff")


async def test_a_result_naming_a_file_that_is_not_utf8_is_redacted_not_crashed() -> None:
    """A name with an undecodable byte reaches the host as a lone surrogate (surrogateescape); the hook
    raised UnicodeEncodeError on it, which failed the whole call."""
    from desktop_app.core import HookCall, SecretRedactionHook, ToolResult

    names = ["d/password=\udcff\udcfesecretvalue1.txt", "d/plain.txt"] + [f"d/f{i}.txt" for i in range(50)]
    result = ToolResult.text("\n".join(names), files=names)
    answer = await SecretRedactionHook()(HookCall("c", "s", "fs_glob", {}, True), result)
    assert answer is not None and answer.result is not None
    assert "secretvalue1" not in stored_text(answer.result.to_dict()) and "d/plain.txt" in answer.result.text_content


# -- the CLI's lines about surviving processes ---------------------------------------------------------


def test_the_cli_prints_survivors_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from desktop_app.cli import RunPrinter
    from desktop_app.core import SandboxSurvivors

    key = "sk-ant-api03-" + _r(40)
    bus = EventBus(redactor=Redactor([key]))
    session = type("S", (), {"session": type("I", (), {"id": "s1"})()})()
    printer = RunPrinter(runtime=None, session=session, args=argparse.Namespace(json=False, on_ask="deny"))
    bus.on("*", printer.on_event)
    pw, token = _r(16), _r(30)
    bus.publish(SandboxSurvivors(session_id="s1", keep_running=True, killed=[
        {"pid": 7, "command": f"curl -u admin:{pw} https://x", "started_by": "toolu_1"}], alive=[
        {"pid": 9, "command": f"env ANTHROPIC_API_KEY={key} GITHUB_TOKEN={token} ./daemon"}]))
    err = capsys.readouterr().err
    assert "pid 7" in err and "pid 9" in err and "STILL RUNNING" in err
    assert pw not in err and key not in err and token not in err and err.count(REDACTED) >= 3
