"""The app's logging: always a rotating file in the platform log folder (0600, secrets redacted), and
stderr for warnings, or for everything with `-v/--debug`."""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import threading
from pathlib import Path

from .config import user_dir
from .core import Redactor

LOG_FILE = "agent-desk.log"
MAX_BYTES = 2_000_000
BACKUPS = 3
FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
_OURS = "_agent_desk_handler"


def log_dir() -> Path:
    """Where the log lives: $AGENT_DESK_LOG_DIR, or platformdirs' user log folder."""
    return user_dir("log")


def log_file() -> Path:
    return log_dir() / LOG_FILE


class SecretFilter(logging.Filter):
    """Renders each record once and redacts it: the message with its arguments, the traceback and the
    stack, with core's patterns and the secrets this process knows (the API key, exactly). Put on every
    handler, so neither the file nor stderr ever receives a secret, whichever logger wrote it."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.redactor = Redactor()
        self._render = logging.Formatter()

    def remember(self, secret: str | None) -> None:
        """A secret to redact as it is, wherever it appears (patterns alone may miss a custom key)."""
        if secret and secret.strip():
            with self._lock:
                self.redactor = self.redactor.with_literals([secret.strip()])

    def filter(self, record: logging.LogRecord) -> bool:
        redact = self.redactor.redact
        try:
            message = record.getMessage()
        except Exception as exc:  # a bad format string must not lose the record
            message = f"{record.msg!r} (unformattable: {type(exc).__name__})"
        record.msg, record.args = redact(message), None
        if record.exc_info:
            record.exc_text = redact(self._render.formatException(record.exc_info))
            record.exc_info = None  # the formatter uses the redacted text, never the live exception
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


SECRETS = SecretFilter()


class _PrivateRotatingFile(logging.handlers.RotatingFileHandler):
    """A rotating file created 0600 (a log holds commands and paths), never through a link."""

    def _open(self):  # type: ignore[override]
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
        fd = os.open(self.baseFilename, flags, 0o600)
        os.fchmod(fd, 0o600)
        return os.fdopen(fd, "a", encoding=self.encoding or "utf-8", errors=self.errors)


class _BriefFormatter(logging.Formatter):
    """stderr without --debug: the message only; the traceback stays in the file."""

    def format(self, record: logging.LogRecord) -> str:
        brief = logging.makeLogRecord(record.__dict__)
        brief.exc_info, brief.exc_text, brief.stack_info = None, None, None
        return super().format(brief)


def setup_logging(debug: bool = False, *, stream=None) -> Path | None:
    """Log to the rotating file (INFO, or DEBUG with `debug`) and to `stream` (stderr: warnings, or DEBUG with
    `debug`). Calling it again replaces what an earlier call set up. Returns the file, or None when the log
    folder cannot be written (then said once on stderr: the app still runs)."""
    _remember_known_keys()
    root = logging.getLogger()
    for h in [h for h in root.handlers if getattr(h, _OURS, False)]:
        root.removeHandler(h)
        h.close()
    root.setLevel(logging.DEBUG if debug else logging.INFO)
    fmt = logging.Formatter(FORMAT)
    console = logging.StreamHandler(stream or sys.stderr)
    console.setLevel(logging.DEBUG if debug else logging.WARNING)
    handlers: list[logging.Handler] = [console]
    path: Path | None = log_file()
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        handlers.append(_PrivateRotatingFile(path, maxBytes=MAX_BYTES, backupCount=BACKUPS, encoding="utf-8"))
    except OSError as exc:
        print(f"agent-desk: warning: no log file ({path}: {exc.strerror or exc})", file=stream or sys.stderr)
        path = None
    for h in handlers:
        h.setFormatter(fmt)
        h.addFilter(SECRETS)
        setattr(h, _OURS, True)
        root.addHandler(h)
    if not debug:
        console.setFormatter(_BriefFormatter("agent-desk: %(levelname)s: %(message)s"))
    for name in ("httpx", "httpcore", "urllib3", "docker", "alembic", "anthropic", "asyncio"):
        # the libraries' chatter stays out of the file unless asked for
        logging.getLogger(name).setLevel(logging.NOTSET if debug else logging.WARNING)
    return path


def _remember_known_keys() -> None:
    """The keys known without asking the keyring (the environment's, the settings file's): redacted from the
    first line on, the command line included. The keyring's is added when it is read (`remember_secret`)."""
    SECRETS.remember(os.environ.get("ANTHROPIC_API_KEY"))
    from .config import Settings

    try:
        SECRETS.remember(Settings.load().api_key)
    except Exception:  # a broken settings file is reported by whoever uses it, not by the logging
        pass


def remember_secret(secret: str | None) -> None:
    """Redact `secret` (e.g. the resolved API key) from every log line from now on."""
    SECRETS.remember(secret)
