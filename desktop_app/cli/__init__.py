"""The `agent-desk` command: the desktop app with no subcommand; run, sessions, audit, images, consent, mcp,
hooks, doctor and completion headless, one module per subcommand group."""

from ._common import (
    EXIT_CODES,
    EXIT_FAILED,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_MAX_STEPS,
    EXIT_OK,
    EXIT_PAUSED,
    EXIT_USAGE,
    version,
)
from ._main import main
from ._parser import EPILOG, SUBCOMMANDS
from ._run import RunPrinter

__all__ = [
    "EPILOG",
    "EXIT_CODES",
    "EXIT_FAILED",
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_MAX_STEPS",
    "EXIT_OK",
    "EXIT_PAUSED",
    "EXIT_USAGE",
    "SUBCOMMANDS",
    "RunPrinter",
    "main",
    "version",
]
