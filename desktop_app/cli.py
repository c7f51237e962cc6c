"""The `agent-desk` command: the desktop app with no subcommand; run, sessions, audit, images and rules
headless."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import time
from typing import Any

from .core import (
    DEFAULT_MAX_STEPS,
    AgentDeskError,
    Envelope,
    ErrorEvent,
    Event,
    ModelError,
    PermissionMode,
    PermissionRequired,
    SandboxSurvivors,
    TextChunk,
    ToolEnd,
    ToolStart,
    TurnEnd,
    visible,
)

SUBCOMMANDS = ("run", "sessions", "audit", "images", "rules")
EXIT_CODES = {TurnEnd.END_TURN: 0, TurnEnd.ERROR: 1, TurnEnd.PAUSED: 3, TurnEnd.MAX_STEPS: 4, TurnEnd.INTERRUPTED: 130}
MODES = tuple(m.value for m in PermissionMode)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="agent-desk",
        description="Agent Desk. With no subcommand, opens the desktop window.",
    )
    sub = p.add_subparsers(dest="command")
    _add_run(sub)
    _add_sessions(sub)
    _add_audit(sub)
    _add_images(sub)
    _add_rules(sub)
    return p


def _run_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--model", help="model id (default: from the settings)")
    sp.add_argument("--permission-mode", choices=MODES, help="how tool calls are allowed")
    sp.add_argument("--on-ask", choices=("allow", "deny", "prompt"), default="deny",
                    help="what to answer when a call needs approval (default: deny)")
    sp.add_argument("--json", action="store_true", help="one JSON envelope per line instead of text")
    sp.add_argument("--sandbox", choices=("docker", "local"), help="where tools run (default: docker)")
    sp.add_argument("--max-steps", type=int, help=f"steps per turn (default {DEFAULT_MAX_STEPS})")


def _add_run(sub: Any) -> None:
    run = sub.add_parser("run", help="run one turn in a project and print it")
    run.add_argument("--project", required=True, help="the project folder")
    run.add_argument("--image", help="sandbox image (e.g. agent-desk/python:latest)")
    run.add_argument("--session", help="continue this session instead of starting one")
    run.add_argument("--db", help="database URL or path (default: $AGENT_DESK_DB or the user data folder)")
    _run_options(run)
    run.add_argument("prompt", help="what to ask")


def _add_sessions(sub: Any) -> None:
    ses = sub.add_parser("sessions", help="list, show or resume sessions")
    ses.add_argument("--db", help="database URL or path")
    ssub = ses.add_subparsers(dest="action", required=True)
    sl = ssub.add_parser("list", help="list sessions")
    sl.add_argument("--project", help="only this project folder")
    ssub.add_parser("show", help="print a session's messages").add_argument("id")
    sr = ssub.add_parser("resume", help="reopen a session (seals unfinished calls) and continue it")
    sr.add_argument("id")
    sr.add_argument("prompt", nargs="?", help="a new message; without one, the interrupted turn continues")
    _run_options(sr)


def _add_audit(sub: Any) -> None:
    aud = sub.add_parser("audit", help="the tool-call audit log")
    aud.add_argument("--db", help="database URL or path")
    asub = aud.add_subparsers(dest="action", required=True)
    al = asub.add_parser("list", help="list tool calls, newest first")
    for flag in ("--session", "--tool", "--state", "--outcome", "--text", "--project"):
        al.add_argument(flag)
    al.add_argument("--tool-use-id", help="the model's tool_use id (several calls may carry one)")
    al.add_argument("--limit", type=int, default=50)
    asub.add_parser("show", help="one call with its audit trail").add_argument(
        "id", help="the desk's call id, or a model's tool_use id that only one call carries")
    ae = asub.add_parser("export", help="export the log")
    ae.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    ae.add_argument("--out", help="file (default: stdout)")
    ae.add_argument("--session")
    ae.add_argument("--signed", action="store_true",
                    help="end the export with the database's signed head and this installation's signature")
    asub.add_parser("verify", help="check the audit hash chain, its signed heads and its witness")
    ve = asub.add_parser("verify-export", help="check a signed export offline (no database needed)")
    ve.add_argument("file")
    ve.add_argument("--key", action="append", default=[], metavar="KEY_ID",
                    help="a key id to trust (repeatable); any other signing key is refused")


def _add_images(sub: Any) -> None:
    img = sub.add_parser("images", help="sandbox images")
    isub = img.add_subparsers(dest="action", required=True)
    isub.add_parser("list", help="the catalog and what is built")
    ib = isub.add_parser("build", help="build a catalog image")
    ib.add_argument("name")
    ib.add_argument("--no-cache", action="store_true")


def _add_rules(sub: Any) -> None:
    rul = sub.add_parser("rules", help="review and trust a project's .agent-desk/rules.toml")
    rsub = rul.add_subparsers(dest="action", required=True)
    rd = rsub.add_parser("diff", help="what changed since the rules were last trusted (exit 1: untrusted)")
    rt = rsub.add_parser("trust", help="show the change and trust the rules as they are now")
    for sp in (rd, rt):
        sp.add_argument("path", nargs="?", default=".", help="the project folder (default: here)")
    rt.add_argument("--yes", action="store_true", help="trust without asking")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if not argv or argv[0] not in (*SUBCOMMANDS, "-h", "--help"):
        return _launch_app(argv)
    args = _parser().parse_args(argv)
    try:
        return asyncio.run(_dispatch(args))
    except AgentDeskError as e:
        print(f"agent-desk: {e.user_message()}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, and keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def _launch_app(argv: list[str]) -> int:
    try:
        from . import app
    except ImportError as e:
        print(
            f"agent-desk: the desktop app cannot start ({e}).\n"
            "  hint: install the GUI dependencies (PySide6-Essentials, qasync), or use a subcommand: "
            "agent-desk run --project DIR 'PROMPT'",
            file=sys.stderr,
        )
        return 2
    return int(app.main(argv) or 0)


async def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "run":
        return await _run(args)
    if args.command == "sessions":
        return await _sessions(args)
    if args.command == "audit":
        return await _audit(args)
    if args.command == "rules":
        return await asyncio.to_thread(_rules, args)
    return await _images(args)


# run / resume ---------------------------------------------------------------------------------------
def _settings(args: argparse.Namespace) -> Any:
    """The user's settings with this command's overrides; a turn needs an API key, so say so up front."""
    from .config import Settings, resolve_api_key
    from .core import MISSING_KEY_HINT

    settings = Settings.load()
    if resolve_api_key(settings) is None:
        raise ModelError("No Anthropic API key is set.", hint=MISSING_KEY_HINT)
    if getattr(args, "model", None):
        settings.model = args.model
    if getattr(args, "max_steps", None):
        settings.max_steps = args.max_steps
    if getattr(args, "sandbox", None):
        settings.sandbox = args.sandbox
    return settings


async def _open_runtime(args: argparse.Namespace, project: Any, store: Any, settings: Any = None) -> Any:
    """The project's runtime on `store` (which it then owns), with this command's sandbox and image."""
    from .runtime import open_runtime

    if getattr(args, "sandbox", None):
        project.settings["sandbox"] = args.sandbox
    if getattr(args, "image", None):
        project.image = args.image
    runtime = await open_runtime(settings or _settings(args), project, store=store,
                                 permission_mode=args.permission_mode)
    trust = runtime.rules_trust
    if trust is not None and not trust.ok:
        print(f"agent-desk: warning: {trust.warning()}", file=sys.stderr)
    return runtime


async def _run(args: argparse.Namespace) -> int:
    from .runtime import open_store, project_for_dir

    settings = _settings(args)
    store = await open_store(args.db)
    try:
        project = await project_for_dir(store, args.project, image=args.image, settings=settings)
    except BaseException:
        await store.close()
        raise
    runtime = await _open_runtime(args, project, store, settings)
    try:
        session = await runtime.open_session(args.session, title=args.prompt[:60])
        return await _drive(runtime, session, args, args.prompt)
    finally:
        await runtime.close()


async def _drive(runtime: Any, session: Any, args: argparse.Namespace, prompt: str | None) -> int:
    printer = _Printer(runtime, session, args)
    off = runtime.bus.on("*", printer.on_event)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, session.stop)
    if not args.json:
        print(f"session {session.session.id}  ({runtime.project.name}, {runtime.model_client.model})",
              file=sys.stderr)
    try:
        if prompt:
            result = await session.send(prompt)
        elif session.needs_resume:
            result = await (session.wait() if session.running else session.retry())
        else:
            print("agent-desk: nothing to resume: the session's last turn ended normally.", file=sys.stderr)
            return 0
    finally:
        session.stop()  # a turn cut short (an error, Ctrl-C) stops its tools too
        with contextlib.suppress(Exception):  # the processes the turn left: killed, and printed below
            await runtime.end_processes(session.session.id)
        off()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
    printer.finish()
    if result.reason != "end_turn" and not args.json:
        print(f"agent-desk: turn ended: {result.reason}" + (f": {result.message}" if result.message else ""),
              file=sys.stderr)
    code = EXIT_CODES.get(result.reason, 1)
    try:
        await runtime.store.flush()  # raises when events of this run could not be saved
    except AgentDeskError as e:
        print(f"agent-desk: {e.user_message()}", file=sys.stderr)
        return code or 1
    return code


class _Printer:
    """Streams a turn to the terminal: text as it comes, one line per tool call, or JSON envelopes."""

    def __init__(self, runtime: Any, session: Any, args: argparse.Namespace) -> None:
        self.runtime = runtime
        self.session = session
        self.args = args
        self.sid = session.session.id
        self.mid_line = False
        self._answers: set[asyncio.Future[None]] = set()

    def on_event(self, env: Envelope) -> None:
        if env.session_id and env.session_id != self.sid:
            return
        if self.args.json:
            print(json.dumps({"seq": env.seq, "channel": env.channel.value, "type": env.type,
                              "payload": env.payload}, default=str), flush=True)
        event = env.event
        if not self.args.json:
            self._show(event)
        if isinstance(event, PermissionRequired):
            fut = asyncio.ensure_future(self._answer(event))
            self._answers.add(fut)
            fut.add_done_callback(self._answers.discard)

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
                mark = "✗" if event.is_error else "✓"
                ms = f" {event.duration_ms:.0f} ms" if event.duration_ms is not None else ""
                outcome = f"/{event.outcome}" if event.outcome and event.outcome != "ok" else ""
                self._line(f"  {mark} {event.name} {event.state.lower()}{outcome}{ms}")
            case ErrorEvent(message=message):
                self._line(f"! {message}", err=True)
            case SandboxSurvivors():
                for what, procs in (("killed at the session's end", event.killed), ("STILL RUNNING", event.alive)):
                    for p in procs:
                        by = f" (started by {p.get('started_by')})" if p.get("started_by") else ""
                        self._line(f"! sandbox process {what}: pid {p.get('pid')}: {p.get('command')}{by}", err=True)
            case PermissionRequired():
                self._line(f"? {event.name} needs approval: {event.reason or ''} (risk {event.risk})")

    def _started(self, event: ToolStart) -> str:
        tool = self.runtime.registry.find(event.name)
        summary = tool.summarize(event.input or {}) if tool else json.dumps(event.input)[:120]
        return f"→ {summary}" if summary.startswith(event.name) else f"→ {event.name} {summary}"

    async def _answer(self, event: PermissionRequired) -> None:
        from .core import Allow, Deny

        mode = self.args.on_ask
        if mode == "allow":
            decision = Allow(by="cli:--on-ask allow")
        elif mode == "deny":
            decision = Deny(by="cli:--on-ask deny", note="Denied: the CLI runs with --on-ask deny.")
        else:
            question = approval_question(event)
            answer = (await asyncio.to_thread(_ask, question)).strip()
            if answer.lower() in ("y", "yes"):
                decision = Allow(by="cli:prompt")
            else:
                note = answer[1:].strip() if answer[:1].lower() == "n" else answer
                decision = Deny(by="cli:prompt", note=note or "Denied at the terminal.")
        with contextlib.suppress(AgentDeskError):  # already answered or expired
            self.runtime.executor.decide(event.call_id, decision)

    def finish(self) -> None:
        if self.mid_line:
            print(flush=True)
            self.mid_line = False


def approval_question(event: PermissionRequired) -> str:
    """The whole call, as it will run, with its risk and why it asks; characters a terminal would not
    show as themselves (a carriage return, an escape sequence) are written as escapes. Nothing is cut."""
    lines = [f"Allow {event.name}? risk {event.risk}: {visible(event.reason or 'the permission mode asks')}"]
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


def _ask(question: str) -> str:
    """Ask on the terminal (or stdin when there is none); the question goes to stderr, never stdout."""
    sys.stderr.write(question)
    sys.stderr.flush()
    try:
        with open("/dev/tty") as tty:
            return tty.readline()
    except OSError:
        return sys.stdin.readline()


# sessions ---------------------------------------------------------------------------------------------
async def _sessions(args: argparse.Namespace) -> int:
    from .runtime import open_store

    store = await open_store(args.db)
    if args.action == "resume":
        return await _resume(args, store)
    try:
        if args.action == "list":
            await _list_sessions(args, store)
        else:
            for m in await store.messages((await _stored_session(store, args.id)).id):
                for b in m.content:
                    print(f"{m.role:9} {_block(b)}")
        return 0
    finally:
        await store.close()


async def _list_sessions(args: argparse.Namespace, store: Any) -> None:
    projects = {p.id: p for p in await store.list_projects()}
    project_id = _project_id(projects.values(), args.project) if args.project else None
    for s in sorted(await store.list_sessions(project_id), key=lambda s: s.updated_at, reverse=True):
        proj = projects.get(s.project_id)
        print(f"{s.id}  {_when(s.updated_at)}  {proj.name if proj else s.project_id}  {s.title!r}")


async def _stored_session(store: Any, session_id: str) -> Any:
    session = await store.get_session(session_id)
    if session is None:
        raise AgentDeskError(f"There is no session {session_id!r}.", hint="`agent-desk sessions list` shows them.")
    return session


async def _resume(args: argparse.Namespace, store: Any) -> int:
    """Reopen a stored session in its project's runtime, which owns `store` from then on."""
    try:
        session = await _stored_session(store, args.id)
        project = await store.get_project(session.project_id)
        if project is None:
            raise AgentDeskError(f"The project of session {session.id} is missing from the database.")
        args.image = None
        runtime = await _open_runtime(args, project, store)
    except BaseException:
        await store.close()
        raise
    try:
        opened = await runtime.open_session(session.id)
        return await _drive(runtime, opened, args, args.prompt)
    finally:
        await runtime.close()


def _project_id(projects: Any, folder: str) -> str:
    from pathlib import Path

    want = Path(folder).resolve()
    return next((p.id for p in projects if Path(p.path) == want), "-")


def _when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))


def _block(b: dict[str, Any]) -> str:
    kind = b.get("type")
    if kind == "text":
        return b["text"].replace("\n", "\n          ")
    if kind == "tool_use":
        return f"[tool_use {b['name']} {json.dumps(b.get('input'))[:200]}]"
    if kind == "tool_result":
        content = b.get("content")
        text = content if isinstance(content, str) else " ".join(
            c.get("text", "[image]") for c in content or [])
        return f"[tool_result{' error' if b.get('is_error') else ''} {text[:200]!r}]"
    if kind == "thinking":
        return f"[thinking {b.get('thinking', '')[:120]!r}]"
    return f"[{kind}]"


# audit ------------------------------------------------------------------------------------------------
async def _audit(args: argparse.Namespace) -> int:
    from .runtime import open_store

    if args.action == "verify-export":
        return _audit_verify_export(args)
    action = {"list": _audit_list, "show": _audit_show, "export": _audit_export}.get(args.action, _audit_verify)
    store = await open_store(args.db)
    try:
        return await action(args, store)
    finally:
        await store.close()


async def _audit_list(args: argparse.Namespace, store: Any) -> int:
    from .store import AuditQuery

    projects = await store.list_projects()
    project_id = _project_id(projects, args.project) if args.project else None
    q = AuditQuery(project_id=project_id, session_id=args.session, tool=args.tool, states=args.state,
                   outcome=args.outcome, text=args.text, limit=args.limit, tool_use_id=args.tool_use_id)
    for r in await store.list_records(q):
        ms = f"{r.duration_ms:.0f}ms" if r.duration_ms is not None else "-"
        print(f"{r.id}  {_when(r.created_at)}  {r.name:14} {r.state.value:17} "
              f"{(r.outcome or '-'):10} {ms:>8}  {r.input_preview[:80]}")
    return 0


async def _audit_show(args: argparse.Namespace, store: Any) -> int:
    from .store import AuditQuery

    record = await store.get_record(args.id)
    if record is None:
        # The model's id is only an attribute, which it may repeat: show it only when it names one call.
        found = await store.list_records(AuditQuery(tool_use_id=args.id, limit=10))
        if len(found) > 1:
            raise AgentDeskError(f"{len(found)} tool calls carry the tool_use id {args.id!r}: "
                                 + ", ".join(r.id for r in found) + ".",
                                 hint="Name one by its call id, or list them with `audit list --tool-use-id`.")
        if not found:
            raise AgentDeskError(f"There is no tool call {args.id!r}.")
        record = await store.get_record(found[0].id)
    print(json.dumps(record.to_dict(), indent=2, default=str))
    for e in await store.get_trail(record.id):
        print(f"  {e.seq:>6}  {_when(e.at)}  {e.state.value:17} {e.actor:14} {e.note}")
    return 0


async def _audit_export(args: argparse.Namespace, store: Any) -> int:
    from .store import AuditQuery

    n = await store.export(AuditQuery(session_id=args.session, limit=None), args.format, args.out or sys.stdout,
                           signed=args.signed)
    if args.out:
        print(f"exported {n} tool calls to {args.out}{' (signed)' if args.signed else ''}", file=sys.stderr)
    return 0


async def _audit_verify(args: argparse.Namespace, store: Any) -> int:
    result = await store.verify()
    if result.ok:
        print(f"audit chain OK: {result.message or f'{result.count} entries verified'}")
        return 0
    print(f"audit chain BROKEN ({result.problem}): {result.message}; {result.count} entries checked",
          file=sys.stderr)
    return 1


def _audit_verify_export(args: argparse.Namespace) -> int:
    from .store import verify_export

    result = verify_export(args.file, args.key)
    if result.ok:
        print(f"export OK: {result.message}")
        return 0
    print(f"export REJECTED: {result.problem}: {result.message}", file=sys.stderr)
    return 1


# images -----------------------------------------------------------------------------------------------
async def _images(args: argparse.Namespace) -> int:
    from .sandbox import build_image, list_images, load_catalog

    if args.action == "list":
        try:
            statuses = await asyncio.to_thread(list_images)
        except AgentDeskError as e:
            print(f"(engine not reachable: {e})", file=sys.stderr)
            for spec in load_catalog().values():
                print(f"{spec.name:10} {spec.tag:32} ?      {spec.description}")
            return 0
        for st in statuses:
            mark = "built" if st.present else "-"
            size = f"{st.size / 1e6:.0f} MB" if st.present else ""
            print(f"{st.spec.name:10} {st.spec.tag:32} {mark:6} {size:>7}  {st.spec.description}")
        return 0
    status = await asyncio.to_thread(
        build_image, args.name, lambda line: print(f"  {line}", file=sys.stderr, flush=True),
        nocache=args.no_cache,
    )
    print(f"built {status.spec.tag} ({status.image_id[:19]})")
    return 0


# rules ------------------------------------------------------------------------------------------------
def _rules(args: argparse.Namespace) -> int:
    """`rules diff`: the change since the rules were trusted (exit 1 when untrusted); `rules trust`: the same,
    then trust exactly the text shown (after y, or with --yes)."""
    from .runtime import project_dir, project_rules_trust, trust_project_rules

    trust = project_rules_trust(project_dir(args.path))
    if trust.ok:
        state = "no rules file" if trust.status == "none" else "the rules are trusted"
        print(f"{trust.project_dir}: {state}; nothing to review.", file=sys.stderr)
        return 0
    print(f"{trust.project_dir}: the rules are {trust.status} (not trusted yet):", file=sys.stderr)
    diff = trust.diff()
    sys.stdout.write(diff if diff.endswith("\n") or not diff else diff + "\n")
    sys.stdout.flush()
    if args.action == "diff":
        return 1
    if not args.yes and _ask("Trust these rules? [y/N] ").strip().lower() not in ("y", "yes"):
        print("not trusted: sessions keep using your own rules only.", file=sys.stderr)
        return 1
    trust_project_rules(trust)
    print("trusted: sessions of this project use these rules from now on.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
