"""The `agent-desk` entry point: the window without a subcommand, else one subcommand, every failure one line."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

from ..core import (
    AgentDeskError,
)
from ._audit import audit_command
from ._common import EXIT_FAILED, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, log, version
from ._consent import consent_command, hooks_command, mcp_grant_command, rules_command
from ._images import images_command
from ._mcp import mcp_list_command
from ._network import network_command
from ._parser import GLOBAL_FLAGS, GLOBAL_VALUED, SUBCOMMANDS, build_parser
from ._run import run_command
from ._sessions import sessions_command


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    first = _first_word(argv)
    if first not in (*SUBCOMMANDS, "-h", "--help", "--version"):
        return _launch_app(argv)
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # --help, --version (0) and usage errors (2), already printed by argparse
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    args.db = getattr(args, "db", None)
    args.debug = getattr(args, "debug", False)
    from ..logs import setup_logging

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
    from ..logs import SECRETS, log_file
    from ..runtime import run_bounded

    try:
        return run_bounded(_dispatch(args))  # asyncio.run, with an end that waits for a stuck job only so long
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
        from .. import app
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
        return await run_command(args)
    if args.command == "sessions":
        return await sessions_command(args)
    if args.command == "audit":
        return await audit_command(args)
    if args.command == "rules":
        return await asyncio.to_thread(rules_command, args)
    if args.command == "mcp":
        return await (mcp_list_command(args) if args.action == "list" else mcp_grant_command(args))
    if args.command == "hooks":
        return await hooks_command(args)
    if args.command == "consent":
        return await consent_command(args)
    if args.command == "network":
        return await network_command(args)
    if args.command == "doctor":
        return await _doctor(args)
    if args.command == "completion":
        return _completion(args)
    return await images_command(args)


def _completion(args: argparse.Namespace) -> int:
    if args.shell == "fish":
        from ._fish import fish_script

        print(fish_script(build_parser()), end="")
        return EXIT_OK
    import shtab

    print(shtab.complete(build_parser(), shell=args.shell), end="")
    return EXIT_OK


async def _doctor(args: argparse.Namespace) -> int:
    from ..doctor import format_check, run_checks

    checks = await run_checks(db=args.db)
    for check in checks:
        print(format_check(check))
    failed = [c for c in checks if c.status == "fail"]
    print(f"\n{len(failed)} check(s) failed." if failed else "\nAll checks passed.",
          file=sys.stderr if failed else sys.stdout)
    return EXIT_FAILED if failed else EXIT_OK
