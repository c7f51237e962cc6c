"""`agent-desk run` and a resumed turn: driving a session, printing its events, asking at the terminal."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from typing import TYPE_CHECKING

from ..core import (
    AgentDeskError,
    Answer,
    Channel,
    Envelope,
    ErrorEvent,
    Event,
    FileChanged,
    PermissionMode,
    PermissionRequired,
    PromptImage,
    Question,
    QuestionAsked,
    SandboxSurvivors,
    SubagentStarted,
    TextChunk,
    TokenUsage,
    ToolEnd,
    ToolStart,
    asked_by,
    check_prompt_images,
    status_word,
    visible,
)
from ._common import EXIT_CODES, EXIT_FAILED, EXIT_OK, command_settings, open_project_runtime, read_prompt
from ._db import open_or_create_store

if TYPE_CHECKING:
    from ..core import AgentSession, ProjectInfo
    from ..runtime import ProjectRuntime, SqlStore


async def run_command(args: argparse.Namespace) -> int:
    from ..runtime import project_for_dir, resolve_image

    args.prompt = read_prompt(args.prompt, required=True)
    images = prompt_images(args.image_files)  # every file checked before anything is stored or sent
    if args.image is not None:  # a catalog name or a valid tag, checked before anything is stored
        args.image = resolve_image(args.image)
    settings = command_settings(args)
    store = await open_or_create_store(args)
    try:
        project = await project_for_dir(store, args.project, image=args.image, settings=settings)
    except BaseException:
        await store.close()
        raise
    await note_project(project)
    runtime = await open_project_runtime(args, project, store, settings)
    _settle_gc(runtime)
    try:
        session = await runtime.open_session(args.session, title=args.prompt)  # redacted, then cut, by the session
        session.set_breakpoints(args.break_on or [])
        return await drive(runtime, session, args, args.prompt, images)
    finally:
        await runtime.close()


def _settle_gc(runtime: ProjectRuntime) -> None:
    """Start-up is done: freeze what it made, and collect the old generation between turns (issue 29)."""
    from ..runtime import collect_between_turns, settle_after_startup

    settle_after_startup()
    runtime.bus.on("done", collect_between_turns)


def prompt_images(paths: list[str]) -> list[PromptImage]:
    """The --image-file files as prompt images; the first one refused ends the command (a usage error)."""
    from ..runtime import read_image_file

    images = [read_image_file(p) for p in paths]
    check_prompt_images(images)
    return images


async def note_project(project: ProjectInfo) -> None:
    """Before a turn, what would make its tools fail or its sandbox less safe, said on stderr (the turn still
    runs: a task that only reads can do without what is missing): a folder the sandbox's user cannot write (a
    root-owned one; files left by an earlier `docker run`), the project's own image changed since its build
    (`run` never builds it), an unencrypted link to a remote engine."""
    from ..doctor import GREEN, engine_link_note, project_folder_status, project_image_note

    folder = await asyncio.to_thread(project_folder_status, project.path, project.image, project.settings)
    if folder.level != GREEN:
        print(f"agent-desk: warning: {folder.text} ({folder.detail}); file tools and commands that write there "
              f"will fail." + (f" Fix: {folder.fix}." if folder.fix else ""), file=sys.stderr)
    note = await asyncio.to_thread(project_image_note, project.path, project.image, project.settings)
    if note:
        print(f"agent-desk: note: {note}. Build it again with `agent-desk images build --project "
              f"{project.path}`.", file=sys.stderr)
    if (project.settings or {}).get("sandbox", "docker") != "local" and (link := engine_link_note()):
        print(f"agent-desk: warning: {link}", file=sys.stderr)


async def drive(runtime: ProjectRuntime, session: AgentSession, args: argparse.Namespace, prompt: str | None,
                images: list[PromptImage] | None = None) -> int:
    printer = RunPrinter(runtime, session, args)
    off = runtime.bus.on("*", printer.on_event)
    questions = runtime.executor.questions
    questions.no_person = args.on_ask != "prompt"  # allow and deny answer approvals; nobody answers questions
    questions.on_ask = printer.answer_question if args.on_ask == "prompt" else None
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, session.stop)
    started = time.monotonic()
    if args.json:
        printer.emit("session_started", session_facts(runtime, session))
    else:
        print(f"session {session.session.id}  ({runtime.project.name}, {runtime.model_client.model})",
              file=sys.stderr)
    try:
        if prompt:
            result = await session.send(prompt, images or ())
        elif session.needs_resume:
            result = await (session.wait() if session.running else session.retry())
        else:
            print("agent-desk: nothing to resume: the session's last turn ended normally.", file=sys.stderr)
            return EXIT_OK
    finally:
        session.stop()  # a turn cut short (an error, Ctrl-C) stops its tools too
        with contextlib.suppress(Exception):  # the processes the turn left: killed, and printed below
            await runtime.end_processes(session.session.id)
        off()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    if printer.reader_gone:
        print(f"agent-desk: the output was closed before the turn ended, so the turn was stopped; `agent-desk "
              f"sessions resume {session.session.id}` goes on with it.", file=sys.stderr)
    printer.finish()
    if result.reason != "end_turn" and not args.json:
        print(f"agent-desk: turn ended: {result.reason}" + (f": {result.message}" if result.message else ""),
              file=sys.stderr)
    code = EXIT_CODES.get(result.reason, 1)
    try:
        await runtime.store.flush()  # raises when events of this run could not be saved
    except AgentDeskError as e:
        print(f"agent-desk: {e.user_message()}", file=sys.stderr)
        return code or EXIT_FAILED
    total = await session_usage(runtime.store, session.session.id)
    if args.json:
        printer.emit("totals", printer.totals(result.reason, code, time.monotonic() - started, total))
    else:
        print(usage_line(printer.usage, total), file=sys.stderr)
    return code


def session_facts(runtime: ProjectRuntime, session: AgentSession) -> dict[str, object]:
    """What `--json` opens with: the session, the model, the project, the permission mode and the image."""
    sid = session.session.id
    return {"session_id": sid, "model": runtime.model_client.model, "project": runtime.project.path,
            "project_name": runtime.project.name, "mode": str(runtime.policy.mode_for(sid).value),
            "image": runtime.project.image, "sandbox": runtime.project.settings.get("sandbox", "docker"),
            "template": runtime.template.name}


async def session_usage(store: SqlStore, session_id: str) -> list[float]:
    """[tokens in, tokens out, cost] of every model request of the session, from its stored events."""
    total = [0, 0, 0.0]
    for env in await store.events_since(0, [Channel.MONITOR], session_id=session_id):
        if env.type == TokenUsage.type:
            add_usage(total, env.event)
    return total


def add_usage(into: list[float], ev: TokenUsage) -> None:
    into[0] += ev.input_tokens + ev.cache_creation_input_tokens + ev.cache_read_input_tokens
    into[1] += ev.output_tokens
    into[2] += ev.cost_usd


def usage_line(turn: list[float], session: list[float]) -> str:
    """The last line of a turn: its tokens and cost, and the session's cost so far."""
    return (f"tokens: {int(turn[0]):,} in, {int(turn[1]):,} out; cost ${turn[2]:.4f} this turn, "
            f"${session[2]:.4f} this session")


_CHILD_SHOWN = frozenset({ToolStart.type, ToolEnd.type, PermissionRequired.type})


class RunPrinter:
    """Streams a turn to the terminal: text as it comes, one line per tool call, or JSON envelopes."""

    def __init__(self, runtime: ProjectRuntime | None, session: AgentSession, args: argparse.Namespace) -> None:
        self.runtime = runtime
        self.session = session
        self.args = args
        self.sid = session.session.id
        self.mid_line = False
        self._answers: set[asyncio.Future[None]] = set()
        self.usage: list[float] = [0, 0, 0.0]  # this turn's tokens in, out and cost
        self.children: set[str] = set()  # the sub-agents' sessions: their calls and approvals are this run's
        self.calls: dict[str, int] = {}  # this turn's calls (a sub-agent's too) by the word of their end
        self.reader_gone = False  # standard output was closed: the turn was stopped (_stop_unread)

    def emit(self, kind: str, payload: dict[str, object]) -> None:
        """One line of `--json` that the CLI adds to the session's events (no seq: it is not stored)."""
        print(json.dumps({"seq": None, "channel": "cli", "type": kind, "payload": payload}, default=str), flush=True)

    def totals(self, reason: str, code: int, seconds: float, session: list[float]) -> dict[str, object]:
        """What `--json` ends with: this turn's tokens, cost, calls by how they ended, and duration."""
        return {"session_id": self.sid, "reason": str(reason), "exit_code": code, "input_tokens": int(self.usage[0]),
                "output_tokens": int(self.usage[1]), "cost_usd": round(self.usage[2], 6),
                "session_cost_usd": round(session[2], 6), "calls": dict(sorted(self.calls.items())),
                "duration_s": round(seconds, 3)}

    def on_event(self, env: Envelope) -> None:
        sid = env.session_id
        if sid and sid != self.sid and sid not in self.children:
            return
        if env.type == SubagentStarted.type:
            self.children.add(str(env.payload.get("child_session_id") or ""))
        if env.type == TokenUsage.type:  # a sub-agent's model calls are this turn's cost too
            add_usage(self.usage, env.event)
        elif env.type == ToolEnd.type:
            word = status_word(env.payload.get("state") or "COMPLETED", env.payload.get("outcome"))
            self.calls[word] = self.calls.get(word, 0) + 1
        if env.type == PermissionRequired.type:  # answered whether or not its line can be printed
            fut = asyncio.ensure_future(self._answer(env.event))
            self._answers.add(fut)
            fut.add_done_callback(self._answers.discard)
        if self.reader_gone or (sid in self.children and not self.args.json and env.type not in _CHILD_SHOWN):
            return  # a sub-agent's text is its parent's tool result; its calls and approvals are shown
        try:
            if self.args.json:
                print(json.dumps({"seq": env.seq, "channel": env.channel.value, "type": env.type,
                                  "payload": env.payload}, default=str), flush=True)
            else:
                self._show(env.event)
        except BrokenPipeError:
            self._stop_unread()

    def _stop_unread(self) -> None:
        """Standard output was closed (`agent-desk run … | head`): as a pipe's writer would on SIGPIPE, the turn
        stops (with nobody reading, an agent going on with `--on-ask allow` would act unseen); what it prints is
        thrown away from then on, and stderr says so once the turn has ended."""
        self.reader_gone = True
        with contextlib.suppress(OSError, ValueError):  # no more writes to the closed pipe, nor a complaint at exit
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, sys.stdout.fileno())
            os.close(null)
        self.session.stop()

    def _line(self, s: str, *, err: bool = False) -> None:
        if self.mid_line:
            print(file=sys.stdout, flush=True)
            self.mid_line = False
        print(s, file=sys.stderr if err else sys.stdout, flush=True)

    def _show(self, event: Event) -> None:
        match event:
            case TextChunk(text=text):
                sys.stdout.write(text)
                sys.stdout.flush()
                self.mid_line = not text.endswith("\n")
            case ToolStart(partial=False):
                self._line(self._started(event))
            case ToolEnd():
                self._line(end_line(event))
            case ErrorEvent(message=message):
                self._line(f"! {message}", err=True)
            case SandboxSurvivors():
                for what, procs in (("killed at the session's end", event.killed), ("STILL RUNNING", event.alive)):
                    for p in procs:
                        by = f" (started by {p.get('started_by')})" if p.get("started_by") else ""
                        self._line(f"! sandbox process {what}: pid {p.get('pid')}: {p.get('command')}{by}", err=True)
            case PermissionRequired():
                self._line(f"? {event.name} needs approval: {event.reason or ''} (risk {event.risk})")
            case FileChanged():
                self._line(f"! changed on the host: {', '.join(event.paths[:10])}"
                           + (f" and {len(event.paths) - 10} more" if len(event.paths) > 10 else ""), err=True)
            case QuestionAsked() if self.args.on_ask != "prompt":
                self._line(f"? the agent asks ({event.kind}); nobody will answer (--on-ask {self.args.on_ask})",
                           err=True)

    def _started(self, event: ToolStart) -> str:
        tool = self.runtime.registry.find(event.name)
        summary = tool.summarize(event.input or {}) if tool else json.dumps(event.input)[:120]
        return f"→ {summary}" if summary.startswith(event.name) else f"→ {event.name} {summary}"

    async def _answer(self, event: PermissionRequired) -> None:
        from ..core import Allow, Deny

        mode = "prompt" if event.meta.get("breakpoint") else self.args.on_ask  # a breakpoint waits for the person
        if mode == "allow":
            decision = Allow(by="cli:--on-ask allow")
        elif mode == "deny":
            decision = Deny(by="cli:--on-ask deny", note="Denied: the CLI runs with --on-ask deny.")
        else:
            question = approval_question(event)
            answer = (await asyncio.to_thread(ask, question)).strip()
            if answer.lower() in ("y", "yes"):
                decision = Allow(by="cli:prompt")
            else:
                note = answer[1:].strip() if answer[:1].lower() == "n" else answer
                decision = Deny(by="cli:prompt", note=note or "Denied at the terminal.")
        with contextlib.suppress(AgentDeskError):  # already answered or expired
            self.runtime.executor.decide(event.call_id, decision)

    async def answer_question(self, question: Question) -> Answer:
        """--on-ask prompt: the model's question (or plan) at the terminal; the answer goes back to it."""
        self.finish()
        line = (await asyncio.to_thread(ask, question_text(question))).strip()
        if question.kind == "question":
            choices = question.choices
            picked = choices[int(line) - 1] if line.isdigit() and 0 < int(line) <= len(choices) else line
            return Answer(text=picked, by="cli:prompt")
        word, _, rest = line.partition(" ")
        if word.lower() in ("a", "y", "yes", "approve"):
            mode = rest.strip() or PermissionMode.ASK.value
            if mode in question.modes:
                return Answer(approved=True, mode=mode, by="cli:prompt")
            return Answer(approved=False, note=f"(the person typed an unknown mode {mode!r})", by="cli:prompt")
        note = rest.strip() if word.lower() in ("n", "no", "r", "reject") else line
        return Answer(approved=False, note=note or "Rejected at the terminal.", by="cli:prompt")

    def finish(self) -> None:
        if self.mid_line:
            print(flush=True)
            self.mid_line = False


def end_line(event: ToolEnd) -> str:
    """A call's last line, as true as the window's card: a command's exit status (exit 1 is no success, though the
    call itself completed), else the window's word (done, failed, denied, skipped, interrupted, timed out), and
    why a call failed or was refused, in its first line."""
    ms = f" {event.duration_ms:.0f} ms" if event.duration_ms is not None else ""
    word = status_word(event.state or "COMPLETED", event.outcome)
    failed = event.is_error or bool(event.exit_code)
    if event.exit_code is not None and event.state == "COMPLETED":
        word = f"exit {event.exit_code}"
    why = next((s.strip() for s in event.reason.splitlines() if s.strip()), "") if event.is_error else ""
    return f"  {'✗' if failed else '✓'} {event.name} {word}{ms}" + (f": {visible(why)}" if why else "")


def approval_question(event: PermissionRequired) -> str:
    """The whole call, as it will run, with its risk and why it asks; characters a terminal would not
    show as themselves (a carriage return, an escape sequence) are written as escapes. Nothing is cut."""
    lines = [f"Allow {event.name}? risk {event.risk}: {visible(event.reason or 'the permission mode asks')}"]
    if who := asked_by(event.meta or {}):
        lines.append(f"  asked by {who}")
    rest = dict(event.input)
    command = rest.pop("command", None)
    if isinstance(command, str):
        shown = visible(command).split("\n")
        lines += [f"  {'$' if i == 0 else '>'} {line}" for i, line in enumerate(shown)]
        lines.append(f"  (the whole command: {len(command)} characters, {len(shown)} line(s))")
    elif command is not None:
        rest["command"] = command
    if rest:
        lines += [f"  {line}" for line in visible(json.dumps(rest, indent=2, ensure_ascii=False)).split("\n")]
    lines.append("[y]es / [n]o (then a note): ")
    return "\n".join(lines)


def question_text(question: Question) -> str:
    """A question with its numbered choices, or a plan with how to approve or reject it; escaped as
    approval_question does, so the terminal shows what the model wrote."""
    who = asked_by(question.meta)
    if question.kind == "question":
        lines = [f"{'The agent' if not who else who[0].upper() + who[1:]} asks: {visible(question.text)}"]
        lines += [f"  {i}. {visible(c)}" for i, c in enumerate(question.choices, 1)]
        lines.append("Your answer (a number, or your own words): ")
        return "\n".join(lines)
    return "\n".join([
        "The agent's plan:", *(f"  {line}" for line in visible(question.text).split("\n")),
        f"[a]pprove MODE (one of {', '.join(question.modes)}; default ask) / [r]eject NOTE: ",
    ])


def ask(question: str) -> str:
    """Ask on the terminal (or stdin when there is none); the question goes to stderr, never stdout."""
    sys.stderr.write(question)
    sys.stderr.flush()
    try:
        with open("/dev/tty") as tty:
            return tty.readline()
    except OSError:
        return sys.stdin.readline()
