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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._agent_send import Outbox
from ._agent_state import AgentStatus, approval_summary, error_summary
from ._breakpoints import Breakpoint, parse_breakpoint
from ._bus import EventBus
from ._compaction import (
    compaction_facts,
    estimate_tokens,
    history_view,
    plan,
    summarise,
    summary_message,
    summary_request,
)
from ._errors import AgentDeskError, ModelError, StoreError
from ._events import (
    AgentState,
    AgentStateChanged,
    Compacted,
    Done,
    ErrorEvent,
    FileChanged,
    PauseReason,
    TurnEnd,
)
from ._executor import Executor
from ._hooks import off_loop_when_large, redact_off_loop
from ._llm import ModelClient, ModelReply, ModelRequest, ModelUsage
from ._messages import StoredMessage, sealed_result, text_blocks, tool_result_block
from ._project import ProjectInfo, SessionInfo, new_session, title_from
from ._prompt_images import PromptImage
from ._record import ToolCallRecord, ToolCallState
from ._recorder import HeldFinal, LeadMessage
from ._run import RunContext
from ._sandbox import WORKSPACE
from ._sendable import SendableHistory
from ._session_setup import SessionSetup
from ._store import RecordStore
from ._stream_redaction import RedactingEmit, redacted_blocks
from ._subagents import Subagents
from ._system_prompt import system_prompt
from ._tool import Tool

if TYPE_CHECKING:
    from ._sandbox import Sandbox
    from .policy import Policy

log = logging.getLogger(__name__)

REPEAT_LIMIT = 3
MISTAKE_LIMIT = 5  # failed calls in a row, of any tools, before the turn pauses (Roo's consecutiveMistakeCount)
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
        setup: SessionSetup | None = None,
    ) -> None:
        setup = setup if setup is not None else SessionSetup()
        self.setup = setup
        self.store = store
        self.bus = bus
        self.executor = executor
        self.tools = list(tools)
        self.model_client = model_client
        self.project = project
        self.sandbox = sandbox
        self.session = session
        self.max_steps = setup.max_steps
        self.running = False
        self.last_result: TurnResult | None = None
        # A template's or a sub-agent's run: its narrowed policy, only its tools, its approvals labelled.
        offered = self._offers if setup.restrict_tools else None
        self._run = RunContext(session_id=session.id, project_id=project.id, sandbox=sandbox, policy=setup.policy,
                               offered=offered, labels=dict(setup.labels))
        self.system_extra = setup.system_extra
        self.depth = setup.depth
        self.subagents = Subagents(self, setup.subagents, setup.depth) if setup.subagents is not None else None
        self._run.subagents = self.subagents
        self._outbox = Outbox()  # what the person sent while a turn runs
        self._turn: asyncio.Task[TurnResult] | None = None
        self._stream_task: asyncio.Task[ModelReply] | None = None
        self._reoffered: list[ToolCallRecord] = []
        self._stopping = False
        self._ends_with_user = False
        self._history: list[StoredMessage] | None = None  # cache of the stored messages, appended in step
        self._sendable = SendableHistory()  # the history as sent, kept as it grows
        self._tool_params = [t.to_api() for t in self.tools]  # schemas are built once per session
        # Tools that come and go during a session (an MCP server's, once it is ready): asked per request.
        self.more_tools = setup.more_tools
        self.compaction = setup.compaction
        self._context_tokens: int | None = None  # the context the last step used, from its usage
        self._init_state()

    def _init_state(self) -> None:
        """READY, and following what waits for the person (approvals, questions) and the session's errors."""
        self.state = AgentState.READY
        self.pause_reason = ""
        self.state_why = "the session is open"
        self.steps = 0  # model steps of the current (or last) turn
        self.total_steps = 0
        self.last_error: ErrorEvent | None = None
        sid = self.session.id
        self._unwatch = [self.executor.approvals.watch(sid, self._waiting_changed),
                         self.executor.questions.watch(sid, self._waiting_changed)]
        self._unlisten = self.bus.on(ErrorEvent.type, self._on_error)

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
        setup: SessionSetup | None = None,
    ) -> AgentSession:
        """A new session, or (with `session_id`) a stored one, sealed and ready to continue."""
        if await store.get_project(project.id) is None:
            await store.save_project(project)
        if session_id is None:  # a title is shown and stored everywhere: never a secret a prompt carried
            session = new_session(project.id, title_from(await redact_off_loop(executor.redactor, title)),
                                  model=model_client.model)
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
            project=project, sandbox=sandbox, session=session, setup=setup,
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
    def policy(self) -> Policy:
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
    async def send(self, text: str, images: Sequence[PromptImage] = ()) -> TurnResult:
        """Start a turn with `text` (and `images`, checked against the API's limits with the session's
        earlier ones); while a turn runs, queue it for that turn's next step."""
        return await self._outbox.send(text, images, self.session.id, self._history, self.history,
                                       lambda: self._turn if self.running else None, self._start)

    def status(self) -> AgentStatus:
        """The state now, the step counts, the event cursor, what waits for the person, the last error."""
        sid = self.session.id
        return AgentStatus(
            session_id=sid, state=self.state, reason=self.pause_reason, why=self.state_why, steps=self.steps,
            total_steps=self.total_steps, cursor=self.bus.seq,
            pending_approvals=[approval_summary(r) for r in self.executor.approvals.pending_for(sid)],
            pending_questions=[{"question_id": q.id, "kind": q.kind, "text": q.text, "choices": list(q.choices)}
                               for q in self.executor.questions.pending(sid)],
            last_error=error_summary(self.last_error) if self.last_error is not None else None,
        )

    def host_changed(self, paths: list[str], kinds: list[str]) -> None:
        """Files of the workspace (relative paths) changed on the host by no tool call: the read-before-edit
        guard asks for a fresh read of each, and `file_changed` tells the timeline."""
        self._run.host_changed.update(f"{WORKSPACE}/{p}" for p in paths)
        self.executor.runner.cache.changed()  # no cached result outlives a change on the host
        self.bus.publish(FileChanged(session_id=self.session.id, project_id=self.project.id, paths=list(paths),
                                     kinds=list(kinds)))

    def close(self) -> None:
        """The session is closed: stop its turn, stop following the executor, and say STOPPED."""
        self.stop()
        for unwatch in self._unwatch:
            with contextlib.suppress(ValueError):
                unwatch()
        self._unwatch = []
        with contextlib.suppress(ValueError):
            self._unlisten()
        self._set_state(AgentState.STOPPED, "the session was closed")

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

    async def abandon(self) -> None:
        """The app quits without stopping the turn: it is cancelled where it stands and the model is not
        asked again. Nothing more is recorded: a running call is sealed as interrupted at the next start,
        a call waiting for approval is offered again when the session reopens."""
        turn = self._turn
        if turn is None or turn.done():
            return
        self._run.abandoned = True
        turn.cancel()
        await asyncio.gather(turn, return_exceptions=True)

    async def retry(self) -> TurnResult:
        """Re-run the last step from the persisted messages (after an error, an interrupt or a reopen)."""
        if self.running and self._turn is not None:
            return await asyncio.shield(self._turn)
        await self._answer_open_calls()
        if not self._ends_with_user and not self._outbox:
            raise AgentDeskError("Nothing to retry: the last turn ended normally.", hint="Send a new message.")
        return await self._start(None)

    async def compact(self) -> bool:
        """Compact by hand: the older turns summarised by the model, the last one kept whole. False when
        there is nothing older to summarise. Raises AgentDeskError while a turn runs."""
        if self.running:
            raise AgentDeskError("The session is working: compact it once the turn has ended.",
                                 hint="Wait for the turn, or stop it, then compact.")
        return await self._compact(manual=True)

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
        self.steps = 0
        self._set_state(AgentState.WORKING, "a message was sent" if text is not None else
                        "resuming calls that wait for approval" if resume else "retrying the last step")
        self._waiting_changed(self.session.id)  # re-offered approvals pause it at once
        try:
            result = await self._turn_loop(text, resume=resume)
        except AgentDeskError as e:
            result = self._end(TurnEnd.ERROR, 0, "", e.user_message(), error=e)
        except Exception as e:  # a bug must end the turn visibly, not hang the UI
            log.exception("session %s: the turn failed", self.session.id)
            err = AgentDeskError(f"The turn failed unexpectedly: {type(e).__name__}: {e}")
            self.bus.publish(ErrorEvent(session_id=self.session.id, source="agent", message=err.user_message(),
                                        phase="system", severity="error"))
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
        if text is not None:  # the images sent with it first: the API's advice is image, then text
            await self._append("user", self._outbox.take_images() + text_blocks([text]))
        calls_seen: list[tuple[str, str, bool]] = []
        steps = 0
        last_text = ""
        while True:
            if self._stopping:
                return self._end(TurnEnd.INTERRUPTED, steps, last_text, "Stopped by the user.")
            queued = self._outbox.drain()
            if queued:  # messages sent during the turn join this step's user message
                await self._append("user", self._outbox.take_images() + text_blocks(queued))
            if steps >= self.max_steps:
                return self._end(
                    TurnEnd.MAX_STEPS, steps, last_text,
                    f"Stopped after {steps} steps (the limit per turn). Send a message to continue.",
                )
            steps += 1
            self.steps, self.total_steps = steps, self.total_steps + 1
            reply = await self._step()
            if reply is None:
                return self._end(TurnEnd.INTERRUPTED, steps, last_text, "Stopped by the user.")
            last_text = reply.text or last_text
            if not reply.tool_uses:
                await self._append("assistant", reply.content)
                if self._outbox:  # a message arrived during the last step: it opens the next one
                    continue
                return self._end(TurnEnd.END_TURN, steps, last_text)
            calls, held = reply.tool_uses, []
            # The model's message rides with the batch's first write (one commit less a step, and no call runs
            # before the message that asked for it is durable): see LeadMessage.
            lead = self.executor.recorder.lead(await self._message("assistant", reply.content))
            try:
                records = await self.executor.run_batch(calls, self._run, held)
            except BaseException:
                self._drop(lead)
                raise
            if not await self._settle(lead):
                return self._unrecorded_end(steps, last_text)
            # Paired by position (batch_index), never by the model's id, which it may repeat.
            by_index = {r.batch_index: r for r in records}
            results = []
            for i, call in enumerate(calls):
                record = by_index.get(i)
                results.append(tool_result_block(record) if record else sealed_result(call.id, RUN_STOPPED))
            await self._append("user", results, held)  # one commit: the last call's final state and its result
            if self._stopping:
                return self._end(TurnEnd.INTERRUPTED, steps, last_text, "Stopped by the user.")
            if self._run.store_error is not None:
                return self._unrecorded_end(steps, last_text)
            for r in records:
                key = await off_loop_when_large(r.input, _input_key, r.input)
                calls_seen.append((r.name, key, r.state is ToolCallState.FAILED))
            pause = _repetition(calls_seen) or _mistakes(calls_seen, self.setup.mistake_limit)
            if pause:
                log.info("session %s: pausing: %s", sid, pause)
                return self._end(TurnEnd.PAUSED, steps, last_text, pause)

    async def _step(self) -> ModelReply | None:
        """One model call; None when it was interrupted (the partial answer is dropped)."""
        if self._history is None:
            self._history = await self.store.messages(self.session.id)
        if self._near_limit() and not await self._compact_near_limit():
            return None  # stopped while the summary was written
        request = ModelRequest(
            system=system_prompt(self.project, self.sandbox) + (f"\n{self.system_extra}" if self.system_extra else ""),
            messages=self._sendable.of(self._history), tools=self._tools(),
        )
        emit = RedactingEmit(self.bus.publish, self.executor.redactor)
        task = asyncio.ensure_future(self.model_client.stream(request, emit=emit, session_id=self.session.id))
        self._stream_task = task
        try:
            reply = await task
            self._context_tokens = _context_size(reply.usage)
            return reply
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._stopping and (current is None or not current.cancelling()):
                return None
            raise
        except ModelError as e:
            self.bus.publish(ErrorEvent(session_id=self.session.id, source="model", message=e.user_message(),
                                        phase="model", severity="error"))
            raise
        finally:
            self._stream_task = None
            emit.flush()

    # -- compaction -----------------------------------------------------------------------------------
    def _tools(self) -> list[dict[str, Any]]:
        return self._tool_params + [t.to_api() for t in self.more_tools()] if self.more_tools else self._tool_params

    def _near_limit(self) -> bool:
        """Whether the next step would go past the compaction limit: the last step's usage says how large
        the context was; without one (a reopened session), an estimate of the history as sent."""
        limit = self.compaction.limit
        if limit <= 0 or self._history is None:
            return False
        used = self._context_tokens
        return (used if used is not None else estimate_tokens(history_view(self._history))) >= limit

    async def _compact_near_limit(self) -> bool:
        """Compact before the next step; False only when a stop cut it short. A failed summary is reported and
        the step goes on with the whole history (the model then says whether it fits)."""
        task = asyncio.ensure_future(self._compact(manual=False))
        self._stream_task = task
        try:
            await task
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if self._stopping and (current is None or not current.cancelling()):
                return False
            raise
        except AgentDeskError as e:
            self.bus.publish(ErrorEvent(session_id=self.session.id, source="compaction",
                                        message=f"The conversation could not be compacted: {e.user_message()}"))
        finally:
            self._stream_task = None
        return True

    async def _compact(self, *, manual: bool) -> bool:
        if self._history is None:
            self._history = await self.store.messages(self.session.id)
        view = history_view(self._history)
        cut = plan(view)
        if cut is None or (not manual and not self.compaction.worth_it(cut.older)):
            return False
        tokens = self._context_tokens if self._context_tokens is not None else estimate_tokens(view)
        request = summary_request(system_prompt(self.project, self.sandbox), cut.older, self._tools())
        summary = await summarise(self.model_client, request, emit=self.bus.publish, session_id=self.session.id)
        if not summary.strip():
            raise AgentDeskError("The model answered the summary request with no text.")
        message = summary_message(self.session.id, summary, cut, tokens_before=tokens, manual=manual)
        ends_with_user = self._ends_with_user  # the summary is no message of the person's to answer
        await self._append("user", message.content)
        self._ends_with_user = ends_with_user
        self._context_tokens = None
        stored = self._history[-1]
        facts = compaction_facts(stored)
        self.bus.publish(Compacted(session_id=self.session.id, summarised=facts.get("summarised", 0),
                                   kept=len(cut.kept), tokens_before=tokens, manual=manual,
                                   summary=stored.content[0].get("text", "")))
        log.info("session %s: compacted %d messages (%d tokens)", self.session.id, len(cut.older), tokens)
        return True

    # -- helpers --------------------------------------------------------------------------------------
    def _end(self, reason: TurnEnd, steps: int, text: str, message: str = "", *,
             error: AgentDeskError | None = None) -> TurnResult:
        if error is not None and not isinstance(error, ModelError):  # a model error was published already
            self.bus.publish(ErrorEvent(session_id=self.session.id, source="agent", message=error.user_message(),
                                        phase="system", severity="error"))
        stopped = reason in (TurnEnd.INTERRUPTED, TurnEnd.ERROR)
        self._set_state(AgentState.STOPPED if stopped else AgentState.READY,
                        message or ("the turn ended" if reason is TurnEnd.END_TURN else str(reason)))
        self.bus.publish(Done(session_id=self.session.id, reason=reason, message=message))
        return TurnResult(reason=reason, steps=steps, text=text, message=message, error=error)

    def _unrecorded_end(self, steps: int, text: str) -> TurnResult:
        """A call the audit store could not record ends the turn as an error: nothing runs unrecorded."""
        cause, self._run.store_error = self._run.store_error, None
        err = StoreError(f"The audit store could not record a tool call, so the turn stopped: {cause}",
                         hint=getattr(cause, "hint", "") or "Check that the audit database is writable, then retry.")
        return self._end(TurnEnd.ERROR, steps, text, err.user_message(), error=err)

    # -- state ----------------------------------------------------------------------------------------
    def _set_state(self, state: AgentState, why: str, reason: str = "") -> None:
        """Move to `state` and publish it (nothing when neither the state nor what it waits for changed)."""
        if state is self.state and reason == self.pause_reason:
            return
        previous, self.state, self.pause_reason, self.state_why = self.state, state, reason, why
        self.bus.publish(AgentStateChanged(session_id=self.session.id, state=state.value, previous=previous.value,
                                           why=why, note=why, reason=reason, steps=self.steps,
                                           total_steps=self.total_steps))

    def set_breakpoints(self, specs: list[str]) -> list[Breakpoint]:
        """Stop this session before each of `specs` (tool names, groups, "@write", "@approval"), replacing the ones set;
        a ConfigError names a spec that is not one."""
        self._run.breakpoints[:] = [parse_breakpoint(s) for s in specs]
        return list(self._run.breakpoints)

    def breakpoints(self) -> list[Breakpoint]:
        """The breakpoints set now (a one-shot is gone once met)."""
        return list(self._run.breakpoints)

    def _waiting_changed(self, session_id: str) -> None:
        """A call, question or plan of this session started or stopped waiting for the person."""
        if not self.running:
            return
        questions = self.executor.questions.pending(session_id)
        if questions:
            q = questions[0]
            plan = q.kind == "plan"
            self._set_state(AgentState.PAUSED, "a plan waits for review" if plan else "a question waits for the person",
                            PauseReason.PLAN if plan else PauseReason.QUESTION)
        elif waiting := self.executor.approvals.pending_for(session_id):
            at = next((r for r in waiting if r.approval.meta.get("breakpoint")), None)
            if at is not None:
                self._set_state(AgentState.PAUSED, f"at a breakpoint before {at.name}", PauseReason.BREAKPOINT)
            else:
                self._set_state(AgentState.PAUSED, f"{len(waiting)} tool call(s) wait for approval",
                                PauseReason.APPROVAL)
        elif self.state is AgentState.PAUSED:
            self._set_state(AgentState.WORKING, "the person answered")

    def _on_error(self, env: Any) -> None:
        if env.session_id == self.session.id and not env.payload.get("retrying"):
            ev = env.event
            if isinstance(ev, ErrorEvent):
                self.last_error = ev

    async def _message(self, role: str, content: list[dict[str, Any]]) -> StoredMessage:
        """`content` as stored: redacted, and sent so from now on (a reopened session sees the same history).
        A large block (a 50 MB fs_write's tool_use) is redacted on a worker thread, once: the executor then
        finds the same input's redaction in the redactor's memo."""
        redacted = await off_loop_when_large(content, redacted_blocks, self.executor.redactor, content)
        return StoredMessage(session_id=self.session.id, role=role, content=redacted)

    async def _settle(self, lead: LeadMessage) -> bool:
        """The batch's lead message durable (see LeadMessage) and in the history; False when the store refused
        it, which ends the turn as for any call it refused."""
        try:
            await self.executor.recorder.settle(lead)
        except StoreError as e:
            self._run.store_error = self._run.store_error or e
            return False
        self._stored(lead.message)
        return True

    def _drop(self, lead: LeadMessage) -> None:
        """The batch stopped early (cancelled): the lead carried by no write is not written now (none of its
        calls was recorded, so none ran); one a write carried is in the history."""
        self.executor.recorder.drop(lead)
        if lead.written is not None and lead.written.done() and lead.written.exception() is None:
            self._stored(lead.message)

    def _stored(self, message: StoredMessage) -> None:
        if self._history is not None:
            self._history.append(message)
        self._ends_with_user = message.role == "user"

    async def _append(self, role: str, content: list[dict[str, Any]], held: list[HeldFinal] | None = None) -> None:
        if not content:
            return
        message = await self._message(role, content)
        if held:  # durable with the message, then published: no result reaches anyone before its state
            try:
                await self.store.append_message(message, [(h.record, e) for h in held for e in h.entries])
            except StoreError as e:  # neither is stored: the turn ends as for any call the store refused
                for h in held:
                    self.executor.recorder.unrecorded(h.record, e)
                self._run.store_error = self._run.store_error or e
                return
            self.executor.recorder.release(held)
        else:
            await self.store.append_message(message)
        self._stored(message)

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


def _context_size(usage: ModelUsage) -> int:
    """The tokens a step's context held: its input (cached or not) and the answer, which the next step sends."""
    return (usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
            + usage.output_tokens)


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


def _mistakes(calls: list[tuple[str, str, bool]], limit: int) -> str:
    """Why the turn should pause, or "": the last `limit` calls all failed, whichever tools they were (0: off)."""
    if limit <= 0 or len(calls) < limit or not all(c[2] for c in calls[-limit:]):
        return ""
    names = ", ".join(dict.fromkeys(c[0] for c in calls[-limit:]))
    return (f"{limit} tool calls failed in a row ({names}), so the turn is paused: "
            "tell the agent how to proceed (or fix the cause) and send a message to continue.")
