"""The agent loop: model step -> tool calls through the executor -> tool results -> next step.

`AgentSession` keeps the Messages-API history valid at every point: each tool_use gets exactly one
tool_result, every message is in the store before the next model call, an interrupted stream is
dropped whole, and a reopened session seals what was left open.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ._anthropic import PREVIEW_PARSE_CHARS, input_preview, json_head
from ._bus import EventBus
from ._errors import AgentDeskError, ModelError, StoreError
from ._events import Done, ErrorEvent, Event, TextChunk, ThinkingChunk, ToolStart, TurnEnd
from ._executor import Executor, RunContext
from ._hooks import off_loop_when_large
from ._llm import ModelClient, ModelReply, ModelRequest
from ._messages import StoredMessage, normalize, sealed_result, text_blocks, tool_result_block
from ._project import ProjectInfo, SessionInfo, new_session
from ._record import ToolCallRecord, ToolCallState
from ._redaction import Redactor, StreamRedactor
from ._store import RecordStore
from ._subagents import SUBAGENTS_KEY, Subagents, SubagentSetup
from ._tool import Tool

if TYPE_CHECKING:
    from ._sandbox import Sandbox

log = logging.getLogger(__name__)

DEFAULT_MAX_STEPS = 50
REPEAT_LIMIT = 3
RUN_STOPPED = "the run stopped before it finished"


@dataclass(slots=True)
class TurnResult:
    """How a turn ended, after how many model steps, with the last text and a message for the person."""

    reason: TurnEnd
    steps: int
    text: str = ""
    message: str = ""
    error: AgentDeskError | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        return self.reason is TurnEnd.END_TURN


def system_prompt(project: ProjectInfo, sandbox: Sandbox | None) -> str:
    """Tell the model where it works: /workspace in a container, which image, and the network rule."""
    lines = [
        f"You are a coding agent working in the project {project.name!r} for the user of Agent Desk.",
        "Use the tools to inspect and change the project; every tool call is shown to the user, may need "
        "their approval, and is recorded.",
    ]
    desc = None
    if sandbox is not None:
        with contextlib.suppress(Exception):
            desc = sandbox.describe()
    if desc is not None and not desc.unsandboxed:
        image = desc.image or project.image
        digest = f" ({desc.image_digest[:19]})" if desc.image_digest else ""
        lines.append(
            f"The project folder is mounted at {desc.workspace} inside a {desc.kind} container running the "
            f"image {image}{digest}. Every command and file operation happens in that container; paths are "
            f"relative to {desc.workspace}, and nothing outside it is reachable."
        )
        if desc.network in ("none", "", None):
            lines.append(
                "The sandbox has no network access: package downloads and other network calls will fail. "
                "The user can relax this per project; do not try to work around it."
            )
        else:
            lines.append(f"The user relaxed the sandbox's network: {desc.network}.")
        if desc.relaxations:
            lines.append("Other relaxations the user made: " + ", ".join(desc.relaxations) + ".")
    elif desc is not None:
        lines.append(
            f"The workspace is /workspace, mapped to the host folder {desc.host_path or project.path}. "
            "WARNING: this session is UNSANDBOXED (local development mode): commands run on the user's "
            "machine. Be careful with anything destructive."
        )
    else:
        lines.append("The workspace is /workspace. No sandbox is attached: tools that need one will fail.")
    lines += [
        "If a call is denied, the user's note comes back as its result: follow it, do not retry the same call.",
        'A tool result with "_autoSealed": true belongs to a call that was cut off when the session ended; '
        "it may have had side effects, so check the workspace before retrying it.",
        "Keep answers short; say what you changed and how you checked it.",
    ]
    return "\n".join(lines)


class AgentSession:
    """One conversation: send a message, the model and the tools take steps until the turn ends."""

    def __init__(
        self,
        *,
        store: RecordStore,
        bus: EventBus,
        executor: Executor,
        tools: list[Tool],
        model_client: ModelClient,
        project: ProjectInfo,
        sandbox: Sandbox | None,
        session: SessionInfo,
        max_steps: int = DEFAULT_MAX_STEPS,
        more_tools: Callable[[], list[Tool]] | None = None,
        policy: Any = None,
        restrict_tools: bool = False,
        system_extra: str = "",
        subagents: SubagentSetup | None = None,
        depth: int = 0,
        labels: dict[str, Any] | None = None,
    ) -> None:
        self.store = store
        self.bus = bus
        self.executor = executor
        self.tools = list(tools)
        self.model_client = model_client
        self.project = project
        self.sandbox = sandbox
        self.session = session
        self.max_steps = max_steps
        self.running = False
        self.last_result: TurnResult | None = None
        # A template's or a sub-agent's run: its narrowed policy, only its tools, its approvals labelled.
        offered = self._offers if restrict_tools else None
        self._run = RunContext(session_id=session.id, project_id=project.id, sandbox=sandbox, policy=policy,
                               offered=offered, labels=dict(labels or {}))
        self.system_extra = system_extra
        self.depth = depth
        self.subagents = Subagents(self, subagents, depth) if subagents is not None else None
        if self.subagents is not None:
            self._run.state[SUBAGENTS_KEY] = self.subagents
        self._queue: list[str] = []
        self._turn: asyncio.Task[TurnResult] | None = None
        self._stream_task: asyncio.Task[ModelReply] | None = None
        self._reoffered: list[ToolCallRecord] = []
        self._stopping = False
        self._ends_with_user = False
        self._history: list[StoredMessage] | None = None  # cache of the stored messages, appended in step
        self._tool_params = [t.to_api() for t in self.tools]  # schemas are built once per session
        # Tools that come and go during a session (an MCP server's, once it is ready): asked per request.
        self.more_tools = more_tools

    # -- opening --------------------------------------------------------------------------------------
    @classmethod
    async def open(
        cls,
        *,
        store: RecordStore,
        bus: EventBus,
        executor: Executor,
        tools: list[Tool],
        model_client: ModelClient,
        project: ProjectInfo,
        sandbox: Sandbox | None,
        session_id: str | None = None,
        title: str = "",
        max_steps: int = DEFAULT_MAX_STEPS,
        more_tools: Callable[[], list[Tool]] | None = None,
        **options: Any,
    ) -> AgentSession:
        """A new session, or (with `session_id`) a stored one, sealed and ready to continue."""
        if await store.get_project(project.id) is None:
            await store.save_project(project)
        if session_id is None:
            session = new_session(project.id, title, model=model_client.model)
            await store.save_session(session)
        else:
            found = await store.get_session(session_id)
            if found is None:
                raise AgentDeskError(
                    f"There is no session {session_id!r}.", hint="`agent-desk sessions list` shows them."
                )
            session = found
        self = cls(
            store=store, bus=bus, executor=executor, tools=tools, model_client=model_client,
            project=project, sandbox=sandbox, session=session, max_steps=max_steps, more_tools=more_tools,
            **options,  # policy, restrict_tools, system_extra, subagents: see __init__
        )
        if session_id is not None:
            report = await executor.seal_open(session.id)
            self._reoffered = list(report.reoffered)
            if report.sealed:
                log.info("session %s: sealed %d open tool call(s)", session.id, len(report.sealed))
            if not self._reoffered:
                await self._answer_open_calls()
            else:
                # The model's turn was waiting on approvals: continue it once they are answered.
                self.running = True
                self._turn = asyncio.ensure_future(self._drive(None, resume=True))
        return self

    @property
    def policy(self) -> Any:
        """The policy this session's calls are judged by: its template's narrowing, else the executor's."""
        return self._run.policy if self._run.policy is not None else self.executor.policy

    def offered_tools(self) -> list[Tool]:
        """The tools offered to the model now (the session's, then those that come and go)."""
        return self.tools + self.more_tools() if self.more_tools else list(self.tools)

    def _offers(self, name: str) -> bool:
        return any(t.name == name for t in self.offered_tools())

    @property
    def needs_resume(self) -> bool:
        """The history ends with tool results (or approvals) the model has not seen yet."""
        return bool(self._reoffered) or self._ends_with_user

    # -- public API -----------------------------------------------------------------------------------
    async def send(self, text: str) -> TurnResult:
        """Start a turn with `text`; while a turn runs, queue it for that turn's next step."""
        if not text.strip():
            raise AgentDeskError("The message is empty.")
        if self.running and self._turn is not None:
            self._queue.append(text)
            return await asyncio.shield(self._turn)
        return await self._start(text)

    def stop(self) -> None:
        """Interrupt: abort the stream and the running tools. The history stays valid."""
        if not self.running:
            return
        self._stopping = True
        self._run.abort.set()
        if self.subagents is not None:  # a child waiting on a person or a model stops too
            self.subagents.stop()
        if self._stream_task is not None and not self._stream_task.done():
            self._stream_task.cancel()

    async def retry(self) -> TurnResult:
        """Re-run the last step from the persisted messages (after an error, an interrupt or a reopen)."""
        if self.running and self._turn is not None:
            return await asyncio.shield(self._turn)
        await self._answer_open_calls()
        if not self._ends_with_user and not self._queue:
            raise AgentDeskError("Nothing to retry: the last turn ended normally.", hint="Send a new message.")
        return await self._start(None)

    async def history(self) -> list[StoredMessage]:
        """The session's persisted messages, in order."""
        return await self.store.messages(self.session.id)

    async def wait(self) -> TurnResult | None:
        """Wait for the running turn (e.g. one resumed by `open`), if any."""
        if self._turn is None:
            return self.last_result
        return await asyncio.shield(self._turn)

    # -- the turn -------------------------------------------------------------------------------------
    async def _start(self, text: str | None) -> TurnResult:
        self.running = True
        self._turn = asyncio.ensure_future(self._drive(text))
        return await asyncio.shield(self._turn)

    async def _drive(self, text: str | None, *, resume: bool = False) -> TurnResult:
        self._stopping = False
        self._run.abort = asyncio.Event()
        try:
            result = await self._turn_loop(text, resume=resume)
        except AgentDeskError as e:
            result = self._end(TurnEnd.ERROR, 0, "", e.user_message(), error=e)
        except Exception as e:  # a bug must end the turn visibly, not hang the UI
            log.exception("session %s: the turn failed", self.session.id)
            err = AgentDeskError(f"The turn failed unexpectedly: {type(e).__name__}: {e}")
            result = self._end(TurnEnd.ERROR, 0, "", err.user_message(), error=err)
        finally:
            self.running = False
            self._stream_task = None
        self.last_result = result
        return result

    async def _turn_loop(self, text: str | None, *, resume: bool) -> TurnResult:
        sid = self.session.id
        if resume and self._reoffered:
            records, self._reoffered = self._reoffered, []
            await self.executor.resume_approvals(records, self._run)
            await self._answer_open_calls()
        if text:
            await self._append("user", text_blocks([text]))
        calls_seen: list[tuple[str, str, bool]] = []
        steps = 0
        last_text = ""
        while True:
            if self._stopping:
                return self._end(TurnEnd.INTERRUPTED, steps, last_text, "Stopped by the user.")
            queued = self._drain_queue()
            if queued:  # messages sent during the turn join this step's user message
                await self._append("user", text_blocks(queued))
            if steps >= self.max_steps:
                return self._end(
                    TurnEnd.MAX_STEPS, steps, last_text,
                    f"Stopped after {steps} steps (the limit per turn). Send a message to continue.",
                )
            steps += 1
            reply = await self._step()
            if reply is None:
                return self._end(TurnEnd.INTERRUPTED, steps, last_text, "Stopped by the user.")
            last_text = reply.text or last_text
            if reply.content:
                await self._append("assistant", reply.content)
            if not reply.tool_uses:
                if self._queue:  # a message arrived during the last step: it opens the next one
                    continue
                return self._end(TurnEnd.END_TURN, steps, last_text)
            calls = reply.tool_uses
            records = await self.executor.run_batch(calls, self._run)
            # Paired by position (batch_index), never by the model's id, which it may repeat.
            by_index = {r.batch_index: r for r in records}
            results = []
            for i, call in enumerate(calls):
                record = by_index.get(i)
                results.append(tool_result_block(record) if record else sealed_result(call.id, RUN_STOPPED))
            await self._append("user", results)
            if self._stopping:
                return self._end(TurnEnd.INTERRUPTED, steps, last_text, "Stopped by the user.")
            if self._run.store_error is not None:
                return self._unrecorded_end(steps, last_text)
            for r in records:
                key = await off_loop_when_large(r.input, _input_key, r.input)
                calls_seen.append((r.name, key, r.state is ToolCallState.FAILED))
            pause = _repetition(calls_seen)
            if pause:
                log.info("session %s: pausing: %s", sid, pause)
                return self._end(TurnEnd.PAUSED, steps, last_text, pause)

    async def _step(self) -> ModelReply | None:
        """One model call; None when it was interrupted (the partial answer is dropped)."""
        if self._history is None:
            self._history = await self.store.messages(self.session.id)
        request = ModelRequest(
            system=system_prompt(self.project, self.sandbox) + (f"\n{self.system_extra}" if self.system_extra else ""),
            messages=normalize(self._history),
            tools=self._tool_params + [t.to_api() for t in self.more_tools()] if self.more_tools else self._tool_params,
        )
        emit = _RedactingEmit(self.bus.publish, self.executor.redactor)
        task = asyncio.ensure_future(self.model_client.stream(request, emit=emit, session_id=self.session.id))
        self._stream_task = task
        try:
            return await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._stopping and (current is None or not current.cancelling()):
                return None
            raise
        except ModelError as e:
            self.bus.publish(ErrorEvent(session_id=self.session.id, source="model", message=e.user_message()))
            raise
        finally:
            self._stream_task = None
            emit.flush()

    # -- helpers --------------------------------------------------------------------------------------
    def _end(self, reason: TurnEnd, steps: int, text: str, message: str = "", *,
             error: AgentDeskError | None = None) -> TurnResult:
        self.bus.publish(Done(session_id=self.session.id, reason=reason, message=message))
        return TurnResult(reason=reason, steps=steps, text=text, message=message, error=error)

    def _unrecorded_end(self, steps: int, text: str) -> TurnResult:
        """A call the audit store could not record ends the turn as an error: nothing runs unrecorded."""
        cause, self._run.store_error = self._run.store_error, None
        err = StoreError(f"The audit store could not record a tool call, so the turn stopped: {cause}",
                         hint=getattr(cause, "hint", "") or "Check that the audit database is writable, then retry.")
        return self._end(TurnEnd.ERROR, steps, text, err.user_message(), error=err)

    def _drain_queue(self) -> list[str]:
        queued, self._queue = self._queue, []
        return queued

    async def _append(self, role: str, content: list[dict[str, Any]]) -> None:
        if not content:
            return
        # Stored redacted, and sent so from now on (a reopened session sees the same history).
        # A large block (a 50 MB fs_write's tool_use) is redacted on a worker thread, once: the executor
        # then finds the same input's redaction in the redactor's memo.
        redacted = await off_loop_when_large(content, _redacted_blocks, self.executor.redactor, content)
        message = StoredMessage(session_id=self.session.id, role=role, content=redacted)
        await self.store.append_message(message)
        if self._history is not None:
            self._history.append(message)
        self._ends_with_user = role == "user"

    async def _answer_open_calls(self) -> None:
        """Give every tool_use of the last assistant message a tool_result, from the stored records."""
        messages = self._history = await self.store.messages(self.session.id)
        self._ends_with_user = bool(messages) and messages[-1].role == "user"
        last_assistant = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "assistant"), None)
        if last_assistant is None:
            return
        uses = [b for b in messages[last_assistant].content if b.get("type") == "tool_use"]
        if not uses:
            return
        answered = {
            b.get("tool_use_id")
            for m in messages[last_assistant + 1 :]
            for b in (m.content if isinstance(m.content, list) else [])
            if b.get("type") == "tool_result"
        }
        missing = [u for u in uses if u["id"] not in answered]
        if not missing:
            return
        # The records of that message's calls: the newest with each (tool_use id, position in the batch).
        by_use = {(r.tool_use_id, r.batch_index): r for r in await self.store.session_records(self.session.id)}
        position = {id(u): i for i, u in enumerate(uses)}
        results = []
        for use in missing:
            record = by_use.get((use["id"], position[id(use)]))
            if record is not None and record.terminal:
                results.append(tool_result_block(record))
            else:
                results.append(sealed_result(use["id"], RUN_STOPPED))
        await self._append("user", results)


def _input_key(value: dict[str, Any]) -> str:
    """What tells two inputs apart for the repetition guard: a digest, so a turn keeps no copies. A long
    string is hashed in pieces (json.dumps of 20 MB held the GIL, and so the loop, for 60 ms)."""

    def short(v: Any) -> Any:
        if isinstance(v, str) and len(v) > _PIECE:
            h = hashlib.sha256()
            for i in range(0, len(v), _PIECE):
                h.update(v[i:i + _PIECE].encode("utf-8", "surrogatepass"))
            return f"sha256:{h.hexdigest()}:{len(v)}"
        if isinstance(v, dict):
            return {k: short(x) for k, x in v.items()}
        if isinstance(v, list | tuple):
            return [short(x) for x in v]
        return v

    return hashlib.sha256(json.dumps(short(value), sort_keys=True, default=str).encode()).hexdigest()


_PIECE = 1 << 16


def _repetition(calls: list[tuple[str, str, bool]]) -> str:
    """Why the turn should pause, or "" : the same tool failing, or the same call, three times in a row."""
    if len(calls) < REPEAT_LIMIT:
        return ""
    last = calls[-REPEAT_LIMIT:]
    name = last[0][0]
    if all(c[0] == name for c in last) and all(c[2] for c in last):
        return (
            f"{name} failed {REPEAT_LIMIT} times in a row, so the turn is paused. "
            "Tell the agent how to proceed (or fix the cause) and send a message to continue."
        )
    if all(c[:2] == last[0][:2] for c in last):
        return (
            f"The agent made the same {name} call {REPEAT_LIMIT} times in a row, so the turn is paused. "
            "Send a message to continue."
        )
    return ""


MODEL_LINE_HOLD = 1_024  # the model's lines are long (a tool's input JSON is one): shown with less delay
_SIGNED = {"thinking", "redacted_thinking"}  # the API checks these blocks' signatures: they go as received


def _redacted_blocks(redactor: Redactor, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A message's blocks with every secret redacted: text, tool_use input, tool_result content."""
    return [b if b.get("type") in _SIGNED else redactor.redact_value(b) for b in content]


class _RedactingEmit:
    """The model stream's events, redacted before they reach the bus: the text, the thinking and each
    tool's input JSON go through a StreamRedactor of their own (a secret split across deltas waits until
    it is whole). Any other event ends a block, so what the other streams hold goes out before it, in
    order; `flush()` publishes the rest once the stream ends."""

    def __init__(self, publish: Callable[[Event], Any], redactor: Redactor) -> None:
        self.publish = publish
        self.redactor = redactor
        self.streams: dict[tuple[str, str], StreamRedactor] = {}
        self.events: dict[tuple[str, str], Event] = {}  # the last event of each stream, to repeat its shape
        self.json: dict[str, str] = {}  # the head of each tool's input JSON as published, redacted

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextChunk | ThinkingChunk):
            self._chunk((event.type, event.message_id), event, event.text)
        elif isinstance(event, ToolStart) and event.partial and event.partial_json:
            self._chunk(("tool", event.call_id), event, event.partial_json)
        else:
            self.flush()
            self.publish(event)

    def _chunk(self, key: tuple[str, str], event: Event, text: str) -> None:
        sr = self.streams.get(key)
        if sr is None:
            self.flush()  # a new block: the previous one is whole
            sr = self.streams[key] = StreamRedactor(self.redactor, line_hold=MODEL_LINE_HOLD, tail_hold=256)
        self.events[key] = event
        self._send(key, sr.feed(text))

    def _send(self, key: tuple[str, str], text: str) -> None:
        if not text:
            return
        event = self.events[key]
        if isinstance(event, ToolStart):
            head = self.json.get(event.call_id, "")
            if len(head) <= PREVIEW_PARSE_CHARS:  # the preview reads the head alone: no more is kept
                head = self.json[event.call_id] = json_head([head, text])
            preview = self.redactor.redact_value(input_preview(head))
            self.publish(replace(event, partial_json=text, input=preview))
        else:
            self.publish(replace(event, text=text))

    def flush(self) -> None:
        for key, sr in self.streams.items():
            self._send(key, sr.flush())
        self.streams.clear()
