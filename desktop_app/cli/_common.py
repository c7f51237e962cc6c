"""What every subcommand shares: the exit codes, the settings a command runs with, opening a project's runtime."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from typing import TYPE_CHECKING

from ..core import (
    ConfigError,
    ModelError,
    PermissionMode,
    TurnEnd,
)

if TYPE_CHECKING:
    from ..config import Settings
    from ..core import ProjectInfo
    from ..runtime import ProjectRuntime, SqlStore

log = logging.getLogger("desktop_app.cli")


# The exit codes, one meaning each (README "Exit codes" and the --help epilog say the same).
EXIT_OK = 0  # done; a turn that ended normally
EXIT_FAILED = 1  # done, and the answer is "no": a turn that failed, a broken chain, a failed doctor check


EXIT_USAGE = 2  # could not run as asked: bad arguments, a bad --db URL or image name, no API key, no engine


EXIT_PAUSED = 3  # the turn was paused by the loop guard (the same call repeated): nothing waits, resume to go on


EXIT_MAX_STEPS = 4  # the turn used all its steps


EXIT_INTERNAL = 70  # a bug in agent-desk (EX_SOFTWARE): the traceback is in the log file


EXIT_INTERRUPTED = 130  # Ctrl-C


EXIT_CODES = {TurnEnd.END_TURN: EXIT_OK, TurnEnd.ERROR: EXIT_FAILED, TurnEnd.PAUSED: EXIT_PAUSED,
              TurnEnd.MAX_STEPS: EXIT_MAX_STEPS, TurnEnd.INTERRUPTED: EXIT_INTERRUPTED}


MODES = tuple(m.value for m in PermissionMode)


def version() -> str:
    from .. import __version__

    return __version__


# run / resume ---------------------------------------------------------------------------------------
def command_settings(args: argparse.Namespace) -> Settings:
    """The user's settings with this command's overrides; a turn needs an API key, so say so up front."""
    from ..config import Settings, resolve_api_key
    from ..core import MISSING_KEY_HINT
    from ..logs import remember_secret

    settings = Settings.load()
    key = resolve_api_key(settings)
    if key is None:
        raise ModelError("No Anthropic API key is set.", hint=MISSING_KEY_HINT)
    remember_secret(key.value)  # redacted as it is from every log line, whatever its shape
    log.info("API key from %s; endpoint from %s", key.source, settings.base_url_source())
    settings.model = getattr(args, "model", None) or _env_model() or settings.model  # flag > env > settings
    if getattr(args, "max_steps", None):
        settings.max_steps = args.max_steps
    if getattr(args, "sandbox", None):
        settings.sandbox = args.sandbox
    return settings


async def open_project_runtime(args: argparse.Namespace, project: ProjectInfo, store: SqlStore,
                               settings: Settings | None = None) -> ProjectRuntime:
    """The project's runtime on `store` (which it then owns), with this command's sandbox and image."""
    from ..runtime import open_runtime

    if getattr(args, "sandbox", None):
        project.settings["sandbox"] = args.sandbox
    if getattr(args, "image", None):
        project.image = args.image
    runtime = await open_runtime(settings or command_settings(args), project, store=store,
                                 permission_mode=args.permission_mode, profile=getattr(args, "profile", None),
                                 template=getattr(args, "template", None))
    for problem in runtime.templates.problems + (runtime.skills.problems if runtime.skills else []):
        print(f"agent-desk: warning: {problem}", file=sys.stderr)
    for trust in (runtime.rules_trust, runtime.hooks_trust):
        if trust is not None and not trust.ok:
            print(f"agent-desk: warning: {trust.warning()}", file=sys.stderr)
    return runtime


def _env_model() -> str | None:
    """ANTHROPIC_MODEL, as Claude Code reads it (blank counts as unset)."""
    return os.environ.get("ANTHROPIC_MODEL", "").strip() or None


def read_prompt(prompt: str | None, *, required: bool) -> str | None:
    """The prompt as given; `-` reads it from stdin, as does no prompt when stdin is piped (not a terminal)
    and one is `required`. An empty prompt is refused."""
    if prompt == "-" or (prompt is None and required and not _stdin_is_terminal()):
        try:
            prompt = sys.stdin.read()
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"Cannot read the prompt from stdin: {e}.") from None
        if not prompt.strip():
            raise ConfigError("The prompt read from stdin is empty.",
                              hint="pipe the prompt in (echo 'fix the test' | agent-desk run -), or pass it as "
                                   "an argument")
        return prompt
    if required and not (prompt or "").strip():
        raise ConfigError("No prompt: say what to ask.",
                          hint="agent-desk run 'PROMPT', or pipe it in: echo 'PROMPT' | agent-desk run -")
    return prompt


def _stdin_is_terminal() -> bool:
    try:
        return sys.stdin is None or sys.stdin.isatty()
    except (ValueError, AttributeError):  # closed
        return True


def when(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))
