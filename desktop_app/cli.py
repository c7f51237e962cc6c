"""The `agent-desk` command: the desktop app with no subcommand; run, sessions, audit, images and rules
headless."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from .core import (
    DEFAULT_MAX_STEPS,
    STATUS_CHANNELS,
    TOOL_PROFILES,
    AgentDeskError,
    AgentStatus,
    Answer,
    Channel,
    ConfigError,
    Envelope,
    ErrorEvent,
    Event,
    FileChanged,
    ModelError,
    PermissionMode,
    PermissionRequired,
    Question,
    QuestionAsked,
    SandboxSurvivors,
    SubagentStarted,
    TextChunk,
    TokenUsage,
    ToolEnd,
    ToolStart,
    TurnEnd,
    visible,
)

log = logging.getLogger("desktop_app.cli")

SUBCOMMANDS = ("run", "sessions", "audit", "images", "rules", "mcp", "doctor", "completion", "hooks")
# The exit codes, one meaning each (README "Exit codes" and the --help epilog say the same).
EXIT_OK = 0  # done; a turn that ended normally
EXIT_FAILED = 1  # done, and the answer is "no": a turn that failed, a broken chain, a failed doctor check
EXIT_USAGE = 2  # could not run as asked: bad arguments, a bad --db URL or image name, no API key, no engine
EXIT_PAUSED = 3  # the turn waits for an approval
EXIT_MAX_STEPS = 4  # the turn used all its steps
EXIT_INTERNAL = 70  # a bug in agent-desk (EX_SOFTWARE): the traceback is in the log file
EXIT_INTERRUPTED = 130  # Ctrl-C
EXIT_CODES = {TurnEnd.END_TURN: EXIT_OK, TurnEnd.ERROR: EXIT_FAILED, TurnEnd.PAUSED: EXIT_PAUSED,
              TurnEnd.MAX_STEPS: EXIT_MAX_STEPS, TurnEnd.INTERRUPTED: EXIT_INTERRUPTED}
MODES = tuple(m.value for m in PermissionMode)
GLOBAL_FLAGS = ("-v", "--debug")
GLOBAL_VALUED = ("--db",)

EPILOG = f"""\
With no subcommand, opens the window: agent-desk [PATH] [--db URL] [-v] [--screenshot FILE ...]
(PATH: a project folder, made a project on first use; a running window receives it instead).

exit codes:
  {EXIT_OK}    done (a turn that ended normally)
  {EXIT_FAILED}    done, with a "no": a turn that failed, `audit verify` found the chain broken, an
       export rejected, a `doctor` check failed, `rules diff` found untrusted rules
  {EXIT_USAGE}    could not run as asked: bad arguments, a bad --db URL or image name, no API key,
       the Docker engine unreachable (the message says which, and the fix)
  {EXIT_PAUSED}    the turn waits for an approval (answer it, then `sessions resume`)
  {EXIT_MAX_STEPS}    the turn used all its steps (--max-steps)
  {EXIT_INTERNAL}   a bug in agent-desk: the traceback is in the log file (--debug prints it)
  {EXIT_INTERRUPTED}  interrupted (Ctrl-C)

environment: ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL override the stored key and endpoint;
AGENT_DESK_DB is the default --db."""


def version() -> str:
    from . import __version__

    return __version__


def _globals() -> argparse.ArgumentParser:
    """The options every command takes, before or after its subcommand (`audit list --db X`). Their default
    is SUPPRESS so that a subcommand's parser never overwrites a value given before it."""
    g = argparse.ArgumentParser(add_help=False)
    db = g.add_argument("--db", default=argparse.SUPPRESS, metavar="URL",
                        help="database URL or path (default: $AGENT_DESK_DB or the user data folder)")
    db.complete = {"bash": "_shtab_compgen_files", "zsh": "_files"}  # type: ignore[attr-defined]
    g.add_argument("-v", "--debug", action="store_true", default=argparse.SUPPRESS,
                   help="log debug messages to stderr (the log file always has INFO and above)")
    return g


class _Sub:
    """Adds subcommand parsers that all take the global options."""

    def __init__(self, sub: Any, common: argparse.ArgumentParser) -> None:
        self.sub, self.common = sub, common

    def add(self, name: str, **kw: Any) -> argparse.ArgumentParser:
        return self.sub.add_parser(name, parents=[self.common], **kw)


def _parser() -> argparse.ArgumentParser:
    common = _globals()
    p = argparse.ArgumentParser(
        prog="agent-desk", parents=[common], epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Agent Desk: an LLM agent whose every tool call is visible, governed and recorded.",
    )
    p.add_argument("--version", action="version", version=f"agent-desk {version()}")
    sub = _Sub(p.add_subparsers(dest="command", metavar="COMMAND"), common)
    _add_run(sub)
    _add_sessions(sub)
    _add_audit(sub)
    _add_images(sub)
    _add_rules(sub)
    _add_mcp(sub)
    _add_hooks(sub)
    sub.add("doctor", help="check what Agent Desk needs (Docker, images, key, endpoint, Qt, database)")
    comp = sub.add("completion", help="print a shell completion script (bash or zsh)",
                   description="Print a completion script. bash: agent-desk completion bash > "
                   "~/.local/share/bash-completion/completions/agent-desk; zsh: agent-desk completion zsh > "
                   "~/.zfunc/_agent-desk (with ~/.zfunc in $fpath).")
    comp.add_argument("shell", choices=("bash", "zsh"))
    return p


def _dir_arg(action: argparse.Action) -> argparse.Action:
    action.complete = {"bash": "_shtab_compgen_dirs", "zsh": "_files -/"}  # type: ignore[attr-defined]
    return action


def _run_options(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("--model", help="model id (default: from the settings)")
    sp.add_argument("--permission-mode", choices=MODES, help="how tool calls are allowed")
    sp.add_argument("--on-ask", choices=("allow", "deny", "prompt"), default="deny",
                    help="what to answer when a call needs approval (default: deny); the model's questions and "
                         "plans are asked at the terminal with prompt, and told no answer will come otherwise")
    sp.add_argument("--json", action="store_true", help="one JSON envelope per line instead of text")
    sp.add_argument("--sandbox", choices=("docker", "local"), help="where tools run (default: docker)")
    sp.add_argument("--max-steps", type=int, help=f"steps per turn (default {DEFAULT_MAX_STEPS})")
    sp.add_argument("--profile", choices=TOOL_PROFILES,
                    help="the tools offered to the model (default: the project's, else coding)")
    sp.add_argument("--template", help="the agent template: coding, explore, read-only review, or the user's or "
                    "project's own (default: the project's pick, else coding); it only narrows the permissions")


def _add_run(sub: _Sub) -> None:
    run = sub.add("run", help="run one turn in a project and print it")
    _dir_arg(run.add_argument("--project", required=True, help="the project folder"))
    run.add_argument("--image", help="sandbox image: a catalog name (python, node, minimal) or a tag")
    run.add_argument("--session", help="continue this session instead of starting one")
    _run_options(run)
    run.add_argument("prompt", help="what to ask")


def _add_sessions(sub: _Sub) -> None:
    ses = sub.add("sessions", help="list, show or resume sessions")
    ssub = _Sub(ses.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    sl = ssub.add("list", help="list sessions")
    _dir_arg(sl.add_argument("--project", help="only this project folder"))
    ssub.add("show", help="print a session's messages").add_argument("id")
    st = ssub.add("status", help="a session's agent state, steps, what waits for a person, the last error")
    st.add_argument("id")
    st.add_argument("--json", action="store_true", help="the status as one JSON object")
    sr = ssub.add("resume", help="reopen a session (seals unfinished calls) and continue it")
    sr.add_argument("id")
    sr.add_argument("prompt", nargs="?", help="a new message; without one, the interrupted turn continues")
    _run_options(sr)
    sc = ssub.add("compact", help="summarise a session's older turns with the model (the audit keeps them)")
    sc.add_argument("id")
    sc.add_argument("--model", help="model id (default: from the settings)")
    sc.add_argument("--sandbox", choices=("docker", "local"), help="where tools run (default: docker)")
    sc.set_defaults(permission_mode=None)


def _add_audit(sub: _Sub) -> None:
    aud = sub.add("audit", help="the tool-call audit log")
    asub = _Sub(aud.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    al = asub.add("list", help="list tool calls, newest first")
    for flag in ("--session", "--tool", "--state", "--outcome", "--text", "--project"):
        al.add_argument(flag)
    al.add_argument("--tool-use-id", help="the model's tool_use id (several calls may carry one)")
    al.add_argument("--limit", type=int, default=50)
    asub.add("show", help="one call with its audit trail").add_argument(
        "id", help="the desk's call id, or a model's tool_use id that only one call carries")
    ae = asub.add("export", help="export the log")
    ae.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    ae.add_argument("--out", help="file (default: stdout)")
    ae.add_argument("--session")
    ae.add_argument("--signed", action="store_true",
                    help="end the export with the database's signed head and this installation's signature")
    asub.add("verify", help="check the audit hash chain, its signed heads and its witness")
    ve = asub.add("verify-export", help="check a signed export offline (no database needed)")
    ve.add_argument("file")
    ve.add_argument("--key", action="append", default=[], metavar="KEY_ID",
                    help="a key id to trust (repeatable); any other signing key is refused")


def _add_images(sub: _Sub) -> None:
    img = sub.add("images", help="sandbox images")
    isub = _Sub(img.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    isub.add("list", help="the catalog and what is built")
    ib = isub.add("build", help="build a catalog image, or a project's own (--project)")
    ib.add_argument("name", nargs="?", help="a catalog name: minimal, python, node (see `images list`)")
    ib.add_argument("--no-cache", action="store_true")
    _dir_arg(ib.add_argument("--project", metavar="PATH", help="build the project's .agent-desk/Dockerfile or "
                             ".devcontainer/devcontainer.json and make it the project's sandbox image"))


def _add_rules(sub: _Sub) -> None:
    rul = sub.add("rules", help="review and trust a project's .agent-desk/rules.toml")
    rsub = _Sub(rul.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    rd = rsub.add("diff", help="what changed since the rules were last trusted (exit 1: untrusted)")
    rt = rsub.add("trust", help="show the change and trust the rules as they are now")
    for sp in (rd, rt):
        _dir_arg(sp.add_argument("path", nargs="?", default=".", help="the project folder (default: here)"))
    rt.add_argument("--yes", action="store_true", help="trust without asking")


def _add_mcp(sub: _Sub) -> None:
    mcp = sub.add("mcp", help="a project's MCP servers: list them, grant one a relaxation")
    msub = _Sub(mcp.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    ml = msub.add("list", help="start the servers and show each one's state, where it runs and its tools")
    _dir_arg(ml.add_argument("--project", default=".", help="the project folder (default: here)"))
    ml.add_argument("--json", action="store_true", help="the servers as a JSON list")
    ml.add_argument("--image", help="the project's sandbox image, as for `run` (the catalog's `mcp` image has the "
                    "reference servers)")
    ml.add_argument("--sandbox", choices=("docker", "local"), help="where sandboxed servers run (default: docker)")
    mg = msub.add("grant", help="let a project's server run with the network, on the host, or over HTTP")
    mg.add_argument("server", help="the server's name in .agent-desk/mcp.json")
    _dir_arg(mg.add_argument("--project", default=".", help="the project folder (default: here)"))
    mg.add_argument("--revoke", action="store_true", help="take the grant back")


def _add_hooks(sub: _Sub) -> None:
    hooks = sub.add("hooks", help="the person's hooks: list them, grant a project's .agent-desk/hooks.toml")
    hsub = _Sub(hooks.add_subparsers(dest="action", required=True, metavar="ACTION"), sub.common)
    hl = hsub.add("list", help="the hooks that run for a project (yours, and its file when granted)")
    _dir_arg(hl.add_argument("--project", default=".", help="the project folder (default: here)"))
    hg = hsub.add("grant", help="let the project's hooks file run, exactly as it is now (shown first)")
    _dir_arg(hg.add_argument("--project", default=".", help="the project folder (default: here)"))
    hg.add_argument("--yes", action="store_true", help="grant without asking")
    hg.add_argument("--revoke", action="store_true", help="take the grant back")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = _first_word(argv)
    if first not in (*SUBCOMMANDS, "-h", "--help", "--version"):
        return _launch_app(argv)
    try:
        args = _parser().parse_args(argv)
    except SystemExit as e:  # --help, --version (0) and usage errors (2), already printed by argparse
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    args.db = getattr(args, "db", None)
    args.debug = getattr(args, "debug", False)
    from .logs import setup_logging

    setup_logging(args.debug)
    log.info("agent-desk %s: %s", version(), args.command)
    log.debug("arguments: %s", argv)
    return _guarded(args)


def _first_word(argv: list[str]) -> str | None:
    """The first argument that is not a global option (or its value): the subcommand, if there is one."""
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in GLOBAL_FLAGS or any(a.startswith(f"{v}=") for v in GLOBAL_VALUED):
            i += 1
        elif a in GLOBAL_VALUED:
            i += 2
        else:
            return a
    return None


def _guarded(args: argparse.Namespace) -> int:
    """Run the command; every failure is one line on stderr and an exit code, never a traceback (a bug's
    traceback goes to the log file, and to stderr too with --debug)."""
    from .logs import SECRETS, log_file

    try:
        return asyncio.run(_dispatch(args))
    except AgentDeskError as e:
        log.info("failed: %s", e.user_message())
        print(f"agent-desk: {SECRETS.redactor.redact(e.user_message())}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, and keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except Exception as e:
        log.exception("internal error in `%s`", args.command)
        if args.debug:
            import traceback

            traceback.print_exc()
        print(f"agent-desk: internal error: {type(e).__name__}: {SECRETS.redactor.redact(str(e))[:300]}\n"
              f"  hint: this is a bug in agent-desk; the details are in {log_file()}", file=sys.stderr)
        return EXIT_INTERNAL


def _launch_app(argv: list[str]) -> int:
    try:
        from . import app
    except ImportError as e:
        print(
            f"agent-desk: the desktop app cannot start ({e}).\n"
            "  hint: install the GUI dependencies (PySide6-Essentials, qasync), run `agent-desk doctor`, or use "
            "a subcommand: agent-desk run --project DIR 'PROMPT'",
            file=sys.stderr,
        )
        return EXIT_USAGE
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
    if args.command == "mcp":
        return await (_mcp_list(args) if args.action == "list" else _mcp_grant(args))
    if args.command == "hooks":
        return await _hooks(args)
    if args.command == "doctor":
        return await _doctor(args)
    if args.command == "completion":
        return _completion(args)
    return await _images(args)


def _completion(args: argparse.Namespace) -> int:
    import shtab

    print(shtab.complete(_parser(), shell=args.shell), end="")
    return EXIT_OK


async def _doctor(args: argparse.Namespace) -> int:
    from .doctor import format_check, run_checks

    checks = await run_checks(db=args.db)
    for check in checks:
        print(format_check(check))
    failed = [c for c in checks if c.status == "fail"]
    print(f"\n{len(failed)} check(s) failed." if failed else "\nAll checks passed.",
          file=sys.stderr if failed else sys.stdout)
    return EXIT_FAILED if failed else EXIT_OK


# run / resume ---------------------------------------------------------------------------------------
def _settings(args: argparse.Namespace) -> Any:
    """The user's settings with this command's overrides; a turn needs an API key, so say so up front."""
    from .config import Settings, resolve_api_key
    from .core import MISSING_KEY_HINT
    from .logs import remember_secret

    settings = Settings.load()
    key = resolve_api_key(settings)
    if key is None:
        raise ModelError("No Anthropic API key is set.", hint=MISSING_KEY_HINT)
    remember_secret(key.value)  # redacted as it is from every log line, whatever its shape
    log.info("API key from %s; endpoint from %s", key.source, settings.base_url_source())
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
                                 permission_mode=args.permission_mode, profile=getattr(args, "profile", None),
                                 template=getattr(args, "template", None))
    for problem in runtime.templates.problems + (runtime.skills.problems if runtime.skills else []):
        print(f"agent-desk: warning: {problem}", file=sys.stderr)
    for trust in (runtime.rules_trust, runtime.hooks_trust):
        if trust is not None and not trust.ok:
            print(f"agent-desk: warning: {trust.warning()}", file=sys.stderr)
    return runtime


async def _run(args: argparse.Namespace) -> int:
    from .runtime import open_store, project_for_dir
    from .sandbox import resolve_image

    if args.image is not None:  # a catalog name or a valid tag, checked before anything is stored
        args.image = resolve_image(args.image)
    settings = _settings(args)
    store = await open_store(args.db)
    try:
        project = await project_for_dir(store, args.project, image=args.image, settings=settings)
    except BaseException:
        await store.close()
        raise
    await _note_project_image(project)
    runtime = await _open_runtime(args, project, store, settings)
    try:
        session = await runtime.open_session(args.session, title=args.prompt[:60])
        return await _drive(runtime, session, args, args.prompt)
    finally:
        await runtime.close()


async def _note_project_image(project: Any) -> None:
    """The project's own image file changed since its build: said; `run` never builds it."""
    from .doctor import project_image_note

    note = await asyncio.to_thread(project_image_note, project.path, project.image, project.settings)
    if note:
        print(f"agent-desk: note: {note}. Build it again with `agent-desk images build --project "
              f"{project.path}`.", file=sys.stderr)


async def _drive(runtime: Any, session: Any, args: argparse.Namespace, prompt: str | None) -> int:
    printer = _Printer(runtime, session, args)
    off = runtime.bus.on("*", printer.on_event)
    questions = runtime.executor.questions
    questions.no_person = args.on_ask != "prompt"  # allow and deny answer approvals; nobody answers questions
    questions.on_ask = printer.answer_question if args.on_ask == "prompt" else None
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
            return EXIT_OK
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
        return code or EXIT_FAILED
    if not args.json:
        total = await session_usage(runtime.store, session.session.id)
        print(usage_line(printer.usage, total), file=sys.stderr)
    return code


async def session_usage(store: Any, session_id: str) -> list[float]:
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


class _Printer:
    """Streams a turn to the terminal: text as it comes, one line per tool call, or JSON envelopes."""

    def __init__(self, runtime: Any, session: Any, args: argparse.Namespace) -> None:
        self.runtime = runtime
        self.session = session
        self.args = args
        self.sid = session.session.id
        self.mid_line = False
        self._answers: set[asyncio.Future[None]] = set()
        self.usage: list[float] = [0, 0, 0.0]  # this turn's tokens in, out and cost
        self.children: set[str] = set()  # the sub-agents' sessions: their calls and approvals are this run's

    def on_event(self, env: Envelope) -> None:
        sid = env.session_id
        if sid and sid != self.sid and sid not in self.children:
            return
        if env.type == SubagentStarted.type:
            self.children.add(str(env.payload.get("child_session_id") or ""))
        if env.type == TokenUsage.type:  # a sub-agent's model calls are this turn's cost too
            add_usage(self.usage, env.event)
        if sid in self.children and not self.args.json and env.type not in _CHILD_SHOWN:
            return  # a sub-agent's text is its parent's tool result; its calls and approvals are shown
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

    async def answer_question(self, question: Question) -> Answer:
        """--on-ask prompt: the model's question (or plan) at the terminal; the answer goes back to it."""
        self.finish()
        line = (await asyncio.to_thread(_ask, question_text(question))).strip()
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


def question_text(question: Question) -> str:
    """A question with its numbered choices, or a plan with how to approve or reject it; escaped as
    approval_question does, so the terminal shows what the model wrote."""
    if question.kind == "question":
        lines = [f"The agent asks: {visible(question.text)}"]
        lines += [f"  {i}. {visible(c)}" for i, c in enumerate(question.choices, 1)]
        lines.append("Your answer (a number, or your own words): ")
        return "\n".join(lines)
    return "\n".join([
        "The agent's plan:", *(f"  {line}" for line in visible(question.text).split("\n")),
        f"[a]pprove MODE (one of {', '.join(question.modes)}; default ask) / [r]eject NOTE: ",
    ])


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
    if args.action == "compact":
        return await _compact(args, store)
    try:
        if args.action == "list":
            await _list_sessions(args, store)
        elif args.action == "status":
            await _session_status(args, store)
        else:
            for m in await store.messages((await _stored_session(store, args.id)).id):
                for b in m.content:
                    print(f"{m.role:9} {_block(b)}")
        return EXIT_OK
    finally:
        await store.close()


async def _list_sessions(args: argparse.Namespace, store: Any) -> None:
    projects = {p.id: p for p in await store.list_projects()}
    project_id = _project_id(projects.values(), args.project) if args.project else None
    for s in sorted(await store.list_sessions(project_id), key=lambda s: s.updated_at, reverse=True):
        proj = projects.get(s.project_id)
        print(f"{s.id}  {_when(s.updated_at)}  {proj.name if proj else s.project_id}  {s.title!r}")


async def _session_status(args: argparse.Namespace, store: Any) -> None:
    """The agent's state as this session's events last recorded it (the session may run in another process)."""
    from .core import status_from_events

    session = await _stored_session(store, args.id)
    events = await store.events_since(0, STATUS_CHANNELS, session_id=session.id)
    status = status_from_events(session.id, events, await store.session_records(session.id))
    if args.json:
        print(json.dumps({"title": session.title, **status.to_dict()}, default=str))
        return
    for line in status_lines(status, session.title):
        print(line)


def status_lines(status: AgentStatus, title: str = "") -> list[str]:
    state = status.state.value + (f" ({status.reason})" if status.reason else "")
    lines = [f"session   {status.session_id}" + (f"  {title!r}" if title else ""),
             f"state     {state}" + (f": {status.why}" if status.why else "")
             + ("" if status.live else "  (as last recorded)"),
             f"steps     {status.steps} in the last turn, {status.total_steps} in all",
             f"cursor    {status.cursor}"]
    for a in status.pending_approvals:
        lines.append(f"waiting   approval {a['call_id']} {a['name']} (risk {a['risk']}): {visible(a['reason'])}")
    for q in status.pending_questions:
        choices = f" [{' | '.join(q['choices'])}]" if q["choices"] else ""
        lines.append(f"waiting   {q['kind']} {q['question_id']}: {visible(q['text'][:200])}{choices}")
    if status.last_error:
        e = status.last_error
        lines.append(f"error     {e['phase']}/{e['severity']}: {visible(e['message'])}")
    return lines


async def _stored_session(store: Any, session_id: str) -> Any:
    session = await store.get_session(session_id)
    if session is None:
        raise AgentDeskError(f"There is no session {session_id!r}.", hint="`agent-desk sessions list` shows them.")
    return session


async def _session_runtime(args: argparse.Namespace, store: Any) -> tuple[Any, Any]:
    """A stored session (`args.id`) and its project's runtime, which owns `store` from then on (closed here
    when the runtime cannot be opened)."""
    try:
        session = await _stored_session(store, args.id)
        project = await store.get_project(session.project_id)
        if project is None:
            raise AgentDeskError(f"The project of session {session.id} is missing from the database.")
        args.image = None
        return session, await _open_runtime(args, project, store)
    except BaseException:
        await store.close()
        raise


async def _resume(args: argparse.Namespace, store: Any) -> int:
    """Reopen a stored session in its project's runtime, which owns `store` from then on."""
    session, runtime = await _session_runtime(args, store)
    try:
        opened = await runtime.open_session(session.id)
        return await _drive(runtime, opened, args, args.prompt)
    finally:
        await runtime.close()


async def _compact(args: argparse.Namespace, store: Any) -> int:
    """Compact a stored session by hand in its project's runtime, which owns `store` from then on."""
    session, runtime = await _session_runtime(args, store)
    try:
        agent = await runtime.open_session(session.id)
        if not await agent.compact():
            print("nothing to compact: the session has a single turn", file=sys.stderr)
            return EXIT_OK
        from .core import compaction_facts

        summary = (await agent.history())[-1]
        facts = compaction_facts(summary)
        print(f"compacted: {facts.get('summarised', 0)} messages summarised; the audit keeps them", file=sys.stderr)
        print(summary.content[0].get("text", ""))
        return EXIT_OK
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
    return EXIT_OK


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
    return EXIT_OK


async def _audit_export(args: argparse.Namespace, store: Any) -> int:
    from .store import AuditQuery

    n = await store.export(AuditQuery(session_id=args.session, limit=None), args.format, args.out or sys.stdout,
                           signed=args.signed)
    if args.out:
        print(f"exported {n} tool calls to {args.out}{' (signed)' if args.signed else ''}", file=sys.stderr)
    return EXIT_OK


async def _audit_verify(args: argparse.Namespace, store: Any) -> int:
    result = await store.verify()
    if result.ok:
        print(f"audit chain OK: {result.message or f'{result.count} entries verified'}")
        return EXIT_OK
    print(f"audit chain BROKEN ({result.problem}): {result.message}; {result.count} entries checked",
          file=sys.stderr)
    return EXIT_FAILED


def _audit_verify_export(args: argparse.Namespace) -> int:
    from .store import verify_export

    result = verify_export(args.file, args.key)
    if result.ok:
        print(f"export OK: {result.message}")
        return EXIT_OK
    print(f"export REJECTED: {result.problem}: {result.message}", file=sys.stderr)
    return EXIT_FAILED


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
            return EXIT_OK
        for st in statuses:
            mark = "built" if st.present else "-"
            size = f"{st.size / 1e6:.0f} MB" if st.present else ""
            print(f"{st.spec.name:10} {st.spec.tag:32} {mark:6} {size:>7}  {st.spec.description}")
        return EXIT_OK
    if args.project is not None:
        return await _build_project_image(args)
    if not args.name:
        raise ConfigError("name a catalog image to build, or a project folder with --project",
                          hint="agent-desk images build minimal, or agent-desk images build --project .")
    status = await asyncio.to_thread(
        build_image, args.name, lambda line: print(f"  {line}", file=sys.stderr, flush=True),
        nocache=args.no_cache,
    )
    print(f"built {status.spec.tag} ({status.image_id[:19]})")
    return EXIT_OK


async def _build_project_image(args: argparse.Namespace) -> int:
    """The project's own image, built only on this explicit command, then stored as the project's image
    with the digest it was built from (a later change of the file is shown, never built by `run`)."""
    from .runtime import open_store, project_dir, project_for_dir
    from .sandbox import build_project_image

    folder = project_dir(args.project)
    store = await open_store(args.db)
    try:
        project = await project_for_dir(store, folder)
        built = await asyncio.to_thread(
            build_project_image, folder, project_id=project.id, name=project.name, nocache=args.no_cache,
            on_progress=lambda line: print(f"  {line}", file=sys.stderr, flush=True))
        project.image = built.tag
        project.settings["project_image"] = {"source": built.source.path, "digest": built.digest}
        await store.save_project(project)
    finally:
        await store.close()
    print(f"built {built.tag} ({built.image_id[:19]}) from {built.source.path}: the sandbox image of {folder}")
    return EXIT_OK


# mcp --------------------------------------------------------------------------------------------------
async def _mcp_list(args: argparse.Namespace) -> int:
    """Start the project's servers (each ready or failed), print them, close them."""
    from .config import Settings
    from .runtime import open_runtime, open_store, project_for_dir
    from .sandbox import resolve_image

    image = resolve_image(args.image) if args.image is not None else None  # checked before anything is stored
    settings = await asyncio.to_thread(Settings.load)
    if args.sandbox:
        settings.sandbox = args.sandbox
    store = await open_store(args.db)
    try:
        project = await project_for_dir(store, args.project, image=image, settings=settings)
    except BaseException:
        await store.close()
        raise
    if args.sandbox:
        project.settings["sandbox"] = args.sandbox
    runtime = await open_runtime(settings, project, store=store)
    try:
        servers = runtime.mcp_servers()
    finally:
        await runtime.close()
    if args.json:
        print(json.dumps([s.to_dict() for s in servers], indent=2))
        return EXIT_OK
    if not servers:
        print(f"no MCP servers: add them to {Path(project.path) / '.agent-desk/mcp.json'} or your settings",
              file=sys.stderr)
    for s in servers:
        print(_mcp_line(s))
    return EXIT_OK


def _mcp_line(s: Any) -> str:
    where = {"host": "host (unsandboxed)", "http": "http (network)"}.get(s.where.value, s.where.value)
    lines = [f"{s.name}  [{s.state.value}]  {where}  {s.source}" + (f"  {s.version}" if s.version else "")]
    if s.error:
        lines.append(f"  ! {s.error}")
    if s.stderr_tail.strip():
        lines.append("  stderr: " + s.stderr_tail.strip().splitlines()[-1][:200])
    for t in s.tools:
        flags = ", ".join(f for f, on in (("read-only", t.read_only), ("destructive", t.destructive),
                                          ("off", not t.enabled)) if on)
        lines.append(f"  {t.desk_name}" + (f"  ({flags})" if flags else ""))
    return "\n".join(lines)


async def _mcp_grant(args: argparse.Namespace) -> int:
    """Record (or revoke) the relaxation a project's server asks for, bound to its entry as it is now."""
    from .config import Settings
    from .mcp_client import grant, read_project_servers
    from .runtime import open_store, project_dir, project_for_dir

    folder = project_dir(args.project)
    entries = await asyncio.to_thread(read_project_servers, folder)
    entry = next((e for e in entries if e.name == args.server), None)
    if entry is None or (entry.config is None and not args.revoke):
        why = entry.error if entry is not None else f"no server {args.server!r} in {folder / '.agent-desk/mcp.json'}"
        raise ConfigError(why, hint="`agent-desk mcp list` shows the servers")
    settings = await asyncio.to_thread(Settings.load)
    store = await open_store(args.db)
    try:
        project = await project_for_dir(store, folder, settings=settings)
        project.settings = grant(project.settings, entry, revoke=args.revoke)
        await store.save_project(project)
    finally:
        await store.close()
    if args.revoke:
        print(f"revoked: {entry.name} no longer starts with {entry.where.value}.")
    else:
        print(f"granted: {entry.name} runs with {entry.asks_for} (until its entry in mcp.json changes).")
    return EXIT_OK


# hooks ------------------------------------------------------------------------------------------------
async def _hooks(args: argparse.Namespace) -> int:
    """`hooks list`: the hooks that run for the project; `hooks grant`: show the project's hooks file, then
    grant exactly that text (after y, or with --yes), or take the grant back (--revoke)."""
    from .config import Settings
    from .runtime import grant_hooks, open_store, project_dir, project_for_dir, project_hooks_trust, user_hook_specs

    folder = project_dir(args.project)
    settings = await asyncio.to_thread(Settings.load)
    store = await open_store(args.db)
    try:
        project = await project_for_dir(store, folder, settings=settings)
        if args.action == "list":
            specs, trust = await asyncio.to_thread(user_hook_specs, settings, project)
            for spec in specs:
                print(f"{spec.event}\t{spec.matcher}\t{spec.command}\t({spec.source}, {spec.timeout_s:g} s)")
            if not trust.ok:
                print(f"agent-desk: warning: {trust.warning()}", file=sys.stderr)
            return EXIT_OK
        trust = await asyncio.to_thread(project_hooks_trust, project)
        if not args.revoke:
            if trust.text is None:
                raise ConfigError(f"no hooks file in {folder}", hint="write .agent-desk/hooks.toml first")
            sys.stdout.write(trust.text if trust.text.endswith("\n") else trust.text + "\n")
            sys.stdout.flush()
            if not args.yes and _ask("Run these hooks in this project's sandbox? [y/N] ").strip().lower() not in (
                    "y", "yes"):
                print("not granted: the project's hooks do not run.", file=sys.stderr)
                return EXIT_FAILED
        project.settings = grant_hooks(project, trust, revoke=args.revoke)
        await store.save_project(project)
    finally:
        await store.close()
    print("revoked: the project's hooks do not run." if args.revoke else
          "granted: the project's hooks run until the file changes.", file=sys.stderr)
    return EXIT_OK


# rules ------------------------------------------------------------------------------------------------
def _rules(args: argparse.Namespace) -> int:
    """`rules diff`: the change since the rules were trusted (exit 1 when untrusted); `rules trust`: the same,
    then trust exactly the text shown (after y, or with --yes)."""
    from .runtime import project_dir, project_rules_trust, trust_project_rules

    trust = project_rules_trust(project_dir(args.path))
    if trust.ok:
        state = "no rules file" if trust.status == "none" else "the rules are trusted"
        print(f"{trust.project_dir}: {state}; nothing to review.", file=sys.stderr)
        return EXIT_OK
    print(f"{trust.project_dir}: the rules are {trust.status} (not trusted yet):", file=sys.stderr)
    diff = trust.diff()
    sys.stdout.write(diff if diff.endswith("\n") or not diff else diff + "\n")
    sys.stdout.flush()
    if args.action == "diff":
        return EXIT_FAILED
    if not args.yes and _ask("Trust these rules? [y/N] ").strip().lower() not in ("y", "yes"):
        print("not trusted: sessions keep using your own rules only.", file=sys.stderr)
        return EXIT_FAILED
    trust_project_rules(trust)
    print("trusted: sessions of this project use these rules from now on.", file=sys.stderr)
    return EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
