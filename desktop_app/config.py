"""The app's configuration: user settings (a JSON file in the user's config folder), the API key's
home (the keyring), and the record of what project files the person approved (consent.json).

ANTHROPIC_API_KEY and ANTHROPIC_BASE_URL override what is stored, as in the anthropic SDK and Claude Code;
without them the key is looked up in the keyring (service "agent-desk"), then in the settings file. It is
never logged: `Settings.__repr__` hides it. The installation's audit signing key
(`desk_signing_key`) lives in the same keyring, else in a 0600 file in the user's data folder.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from .core import (
    DEFAULT_IMAGE,
    DEFAULT_MAX_PROMPT_BYTES,
    DEFAULT_MAX_SKILLS,
    DEFAULT_MAX_STEPS,
    DEFAULT_MODEL,
    ConfigError,
    ConsentKind,
    PermissionMode,
)

log = logging.getLogger(__name__)

APP_NAME = "agent-desk"
KEYRING_SERVICE = "agent-desk"
KEYRING_USER = "anthropic-api-key"
SETTINGS_FILE = "settings.json"


def user_dir(kind: str) -> Path:
    """The user's `kind` folder (config, data, log): $AGENT_DESK_<KIND>_DIR, or platformdirs' own."""
    override = os.environ.get(f"AGENT_DESK_{kind.upper()}_DIR")
    if override:
        return Path(override)
    import platformdirs

    return Path(getattr(platformdirs, f"user_{kind}_dir")(APP_NAME))


def config_dir() -> Path:
    """Where settings live: $AGENT_DESK_CONFIG_DIR, or platformdirs' user config dir."""
    return user_dir("config")


def checkpoints_dir() -> Path:
    """Where the workspaces' checkpoints live (a git object store per project): outside every workspace."""
    return data_dir() / "checkpoints"


def data_dir() -> Path:
    """Where the database lives by default: $AGENT_DESK_DATA_DIR, or platformdirs' user data dir."""
    return user_dir("data")


def default_db_url() -> str:
    """$AGENT_DESK_DB, or a SQLite file in the user's data folder."""
    env = os.environ.get("AGENT_DESK_DB")
    if env:
        return env
    return f"sqlite:///{data_dir() / 'agent-desk.db'}"


def sqlite_file(url: str) -> Path | None:
    """The file a database URL or path names when it is SQLite (absolute), else None (a server's URL). A URI
    form (`sqlite:///file:/path/audit.db?mode=ro&uri=true`) names the file of its path."""
    if "://" not in url:
        return Path(url).expanduser().resolve()
    if url.startswith("sqlite") and ":///" in url:
        database, _, query = url.split(":///", 1)[1].partition("?")
        return Path(sqlite_uri_path(database, query)).expanduser().resolve()
    return None


def sqlite_uri_path(database: str, query: str) -> str:
    """The file path of SQLite's `database` part: with `uri=true` in the URL's `query`, a `file:` URI's path
    (SQLite opens that file); else the text as it is (then `file:` is just a name's first letters)."""
    from urllib.parse import parse_qs, unquote, urlsplit

    uri = parse_qs(query).get("uri", [""])[-1].lower() in ("true", "1")
    return unquote(urlsplit(database).path) if uri and database.startswith("file:") else database


# the keys checked as counts: a non-negative integer each
_COUNTS = ("max_tokens", "max_retries", "thinking_budget", "max_steps", "subagent_max_depth",
           "subagent_max_children", "subagent_max_running", "skills_max", "skills_max_prompt_bytes",
           "mistake_limit", "checkpoint_max_file_mb", "instructions_max_bytes")


def _refused(message: str) -> PydanticCustomError:
    """A refused settings value, its message kept word for word (load() prefixes the file)."""
    return PydanticCustomError("settings_value", "{message}", {"message": message})


def _bad_value(path: Path, error: ValidationError) -> str:
    """The first refused key as one line naming the file: a check's own words, else pydantic's."""
    first = error.errors(include_url=False)[0]
    if first["type"] == "settings_value":
        return f"{path}: {first['msg']}"
    key = ".".join(str(part) for part in first["loc"])
    return f"The settings file {path} has a bad value: '{key}': {first['msg']}, got {first['input']!r}."


class Settings(BaseModel):
    """What a user sets once: the model, the endpoint, defaults for new projects, extra permission rules.

    Each key is declared once below, with its default and its check. The file is checked when it is read
    (`load`); an assignment is not checked again (the CLI and the dialogs assign values they checked).
    """

    model_config = ConfigDict(use_attribute_docstrings=True)

    model: str = DEFAULT_MODEL
    """The Anthropic model new sessions talk to."""
    base_url: str | None = None
    """The API endpoint; None: the SDK's default (ANTHROPIC_BASE_URL overrides it)."""
    api_key: str | None = Field(default=None, repr=False)
    """Only used when no keyring backend exists (see `store_api_key`); hidden from repr."""
    max_tokens: int = 16000
    """The most tokens one model reply may have."""
    max_retries: int = 2
    """How often the client retries a failed request."""
    request_timeout_s: float = 600.0
    """How long one model request may take."""
    thinking_budget: int = 0
    """Tokens of extended thinking per reply; 0: extended thinking off."""
    permission_mode: str = PermissionMode.ASK.value
    """The permission mode of new projects."""
    rules: list[Any] = Field(default_factory=list)
    """The user's own permission rules, below the project's."""
    default_image: str = DEFAULT_IMAGE
    """The sandbox image of new projects."""
    sandbox: str = "docker"
    """The sandbox kind of new projects: docker | local."""
    max_steps: int = DEFAULT_MAX_STEPS
    """The most model turns one request may take."""
    mistake_limit: int = 5
    """Failed tool calls in a row, of any tools, after which a turn pauses and says so; 0: never."""
    plugins_disabled: list[str] = Field(default_factory=list)
    """Plugin tools switched off: tool names, entry point names or package names (see `agent-desk doctor`)."""
    theme: str = "system"
    """The window's theme: system | light | dark."""
    mcp_servers: dict[str, Any] = Field(default_factory=dict)
    """The user's MCP servers, in the `mcpServers` shape (name -> {command, args, env} or {url, headers}); each
    project's .agent-desk/mcp.json adds its own, and a project's server of the same name wins."""
    approval_expiry_s: float | None = None
    """How long an approval waits before it is denied (seconds; 0 or None: it waits), for projects that do
    not set their own."""
    hooks: dict[str, Any] = Field(default_factory=dict)
    """The user's own hooks: {"PreToolUse": [...], "PostToolUse": [...]}."""
    subagent_max_depth: int = 2
    """How deep sub-agents (task_run) nest."""
    subagent_max_children: int = 8
    """How many sub-agents one session starts."""
    subagent_max_running: int = 2
    """How many sub-agents run at once."""
    skills_max: int = DEFAULT_MAX_SKILLS
    """The most skills the system prompt names (yours first, then the project's approved ones); the rest are
    left out, and named in a notice."""
    skills_max_prompt_bytes: int = DEFAULT_MAX_PROMPT_BYTES
    """The most bytes of skill lines in the system prompt; the skills past it are left out, and named."""
    instructions_max_bytes: int = 32 * 1024
    """The most bytes of instructions (your AGENTS.md in the settings folder, then the project's approved
    AGENTS.md and CLAUDE.md) put in a session's system prompt; the rest is left out, and named."""
    checkpoint_max_file_mb: int = 50
    """Files larger than this (MB) are not kept in the checkpoints taken before each call that may write; they
    are named as "not kept", and a rewind leaves them as they are."""
    extra: dict[str, Any] = Field(default_factory=dict, exclude=True)
    """Keys this version does not know, kept as they are and written back."""
    path: Path | None = Field(default=None, repr=False, exclude=True)
    """The settings file this was read from (and `save` writes to)."""

    # The checks replace pydantic's own for these keys: a value is kept as written, or refused with a message
    # that names the key.
    @field_validator("model", mode="plain")
    @classmethod
    def _model_named(cls, value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise _refused("'model' must be a non-empty string.")
        return value

    @field_validator(*_COUNTS, mode="plain")
    @classmethod
    def _counts(cls, value: Any, info: ValidationInfo) -> int:
        if not isinstance(value, int) or value < 0:
            raise _refused(f"'{info.field_name}' must be a non-negative integer, got {value!r}.")
        return value

    @field_validator("rules", mode="plain")
    @classmethod
    def _rules_list(cls, value: Any) -> list[Any]:
        if not isinstance(value, list):
            raise _refused("'rules' must be a list.")
        return value

    @field_validator("mcp_servers", mode="plain")
    @classmethod
    def _servers_by_name(cls, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _refused("'mcp_servers' must be an object of servers by name.")
        return value

    @field_validator("approval_expiry_s", mode="plain")
    @classmethod
    def _expiry_seconds(cls, value: Any) -> float | None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise _refused(f"'approval_expiry_s' must be a number of seconds (0: approvals wait), got {value!r}.")
        return value

    @field_validator("hooks", mode="plain")
    @classmethod
    def _hooks_by_event(cls, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise _refused("'hooks' must be an object of PreToolUse / PostToolUse lists.")
        return value

    @classmethod
    def load(cls, path: Path | None = None) -> Settings:
        """Read the settings file; a missing file gives the defaults, a broken one a ConfigError."""
        path = path or config_dir() / SETTINGS_FILE
        if not path.exists():
            return cls(path=path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ConfigError(
                f"The settings file {path} could not be read: {e}",
                hint="Fix or delete the file; the defaults are used when it is missing.",
            ) from e
        if not isinstance(raw, dict):
            raise ConfigError(f"The settings file {path} must hold a JSON object, not {type(raw).__name__}.")
        known = set(cls.model_fields) - {"extra", "path"}
        kwargs = {k: v for k, v in raw.items() if k in known}
        extra = {k: v for k, v in raw.items() if k not in known}
        try:
            return cls(**kwargs, extra=extra, path=path)
        except ValidationError as e:
            raise ConfigError(_bad_value(path, e)) from None

    def to_dict(self) -> dict[str, Any]:
        d = self.model_dump()  # `extra` and `path` are not written as keys
        if d.get("api_key") is None:
            d.pop("api_key", None)
        return {**self.extra, **d}

    def save(self, path: Path | None = None) -> Path:
        """Write atomically, readable by the user only (it may hold a key when no keyring exists)."""
        path = path or self.path or config_dir() / SETTINGS_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".settings-", dir=path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.to_dict(), f, indent=2, sort_keys=True)
                f.write("\n")
            os.chmod(tmp, 0o600)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        self.path = path
        return path

    def resolved_base_url(self) -> str | None:
        """ANTHROPIC_BASE_URL, else the settings' base URL, else None (the SDK's default endpoint)."""
        return _env("ANTHROPIC_BASE_URL") or self.base_url or None

    def base_url_source(self) -> str:
        """Where the endpoint comes from: "env" (ANTHROPIC_BASE_URL), "settings", or "default"."""
        if _env("ANTHROPIC_BASE_URL"):
            return "env"
        return "settings" if self.base_url else "default"


def _env(name: str) -> str | None:
    """An environment variable, stripped; an empty or blank one counts as unset (`export X=` clears it)."""
    value = os.environ.get(name, "").strip()
    return value or None


# keyring ----------------------------------------------------------------------------------------
def keyring_available() -> bool:
    """True when a real keyring backend exists (not keyring's `fail` placeholder)."""
    if os.environ.get("AGENT_DESK_NO_KEYRING"):
        return False
    try:
        import keyring
        from keyring.backends import fail
    except Exception:  # keyring missing or broken: same as no backend
        return False
    try:
        backend = keyring.get_keyring()
    except Exception:
        return False
    if isinstance(backend, fail.Keyring):
        return False
    return getattr(backend, "priority", 1) > 0


def _keyring_get() -> str | None:
    if not keyring_available():
        return None
    import keyring

    try:
        return keyring.get_password(KEYRING_SERVICE, KEYRING_USER) or None
    except Exception as e:  # a locked or broken keyring: fall through to the next source
        log.warning("the keyring could not be read (%s); trying the settings file", type(e).__name__)
        return None


@dataclass(slots=True, frozen=True)
class ApiKey:
    """A resolved key and where it came from; repr never shows the value."""

    value: str = field(repr=False)
    source: str  # keyring | settings | env (ANTHROPIC_API_KEY) | env-token (ANTHROPIC_AUTH_TOKEN, sent as a bearer)


def resolve_api_key(settings: Settings) -> ApiKey | None:
    """ANTHROPIC_AUTH_TOKEN (a bearer token, the SDK's auth_token; it wins over a key, as in Claude Code), then
    ANTHROPIC_API_KEY (it overrides what is stored, as in the SDK), then the keyring, then the settings file;
    None when none is set."""
    token = _env("ANTHROPIC_AUTH_TOKEN")
    if token:
        return ApiKey(token, "env-token")
    env = _env("ANTHROPIC_API_KEY")
    if env:
        return ApiKey(env, "env")
    key = _keyring_get()
    if key:
        return ApiKey(key, "keyring")
    if settings.api_key:
        return ApiKey(settings.api_key, "settings")
    return None


def store_api_key(settings: Settings, key: str) -> str:
    """Keep `key` in the keyring; without a keyring backend, in the settings file (with a warning).

    Returns where it went: "keyring" or "settings".
    """
    key = key.strip()
    if not key:
        raise ConfigError("The API key is empty.")
    if keyring_available():
        import keyring

        try:
            keyring.set_password(KEYRING_SERVICE, KEYRING_USER, key)
        except Exception as e:
            log.warning("the keyring refused the key (%s); storing it in the settings file", type(e).__name__)
        else:
            if settings.api_key:  # one home only
                settings.api_key = None
                settings.save()
            return "keyring"
    else:
        log.warning(
            "no keyring backend is available: the API key is stored in %s (mode 0600)",
            settings.path or config_dir() / SETTINGS_FILE,
        )
    settings.api_key = key
    settings.save()
    return "settings"


def clear_api_key(settings: Settings) -> None:
    """Forget the stored key (keyring and settings file); ANTHROPIC_API_KEY is left alone."""
    if keyring_available():
        import keyring

        try:
            keyring.delete_password(KEYRING_SERVICE, KEYRING_USER)
        except Exception:  # nothing stored, or a locked keyring: the settings file is still cleared
            pass
    if settings.api_key:
        settings.api_key = None
        settings.save()


# the consent records ------------------------------------------------------------------------------------
# A project's rules, hooks and MCP servers are used only as the person last approved them: the sandbox (or a
# cloned repository) can write those files, so the record lives in the user's config folder, out of its reach.
CONSENT_FILE = "consent.json"
TRUSTED_RULES_FILE = "trusted_rules.json"  # the rules' record before consent.json: read until the first write


@dataclass(slots=True, frozen=True)
class ConsentRecord:
    """What the person approved of one subject: its sha256, its text where the kind keeps it (the rules), when."""

    sha256: str
    text: str | None
    at: float


def rules_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _project_key(project_dir: str | os.PathLike[str]) -> str:
    return os.path.realpath(os.fspath(project_dir))


def _read_record_file(path: Path) -> dict[str, Any]:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"The consent record {path} could not be read: {e}",
                          hint="delete it: every project's rules, hooks and MCP servers will then be asked about "
                               "again") from e
    return raw if isinstance(raw, dict) else {}


def _read_consents(folder: Path) -> dict[str, Any]:
    """{kind: {project key: {name: entry}}}; before the first write, the rules of trusted_rules.json."""
    if (folder / CONSENT_FILE).exists():
        return _read_record_file(folder / CONSENT_FILE)
    legacy = _read_record_file(folder / TRUSTED_RULES_FILE)
    return {"rules": {key: {"": entry} for key, entry in legacy.items()}} if legacy else {}


def consent_record(kind: str, project_dir: str | os.PathLike[str], name: str = "") -> ConsentRecord | None:
    """What the person last approved of this subject; None when nothing was."""
    return consent_records(kind, project_dir).get(name)


def consent_records(kind: str, project_dir: str | os.PathLike[str]) -> dict[str, ConsentRecord]:
    """What the person last approved of each subject of a kind in a project, by name."""
    by_project = _read_consents(config_dir()).get(str(kind))
    names = by_project.get(_project_key(project_dir), {}) if isinstance(by_project, dict) else {}
    out = {}
    for name, entry in (names.items() if isinstance(names, dict) else ()):
        if not isinstance(entry, dict) or not isinstance(entry.get("sha256"), str):
            continue
        text = entry.get("text")
        if text is not None and (not isinstance(text, str) or entry["sha256"] != rules_digest(text)):
            continue  # a record edited by hand is no record
        out[str(name)] = ConsentRecord(entry["sha256"], text, float(entry.get("at", 0.0)))
    return out


def record_consent(kind: str, project_dir: str | os.PathLike[str], name: str,
                   record: ConsentRecord | None) -> None:
    """Record `record` as this subject's approval (None: the approval goes). Read, changed and written under
    a lock, atomically, readable by the user only."""
    folder = config_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with _consent_lock(folder):
        consents = _read_consents(folder)
        by_project = consents.setdefault(str(kind), {})
        names = by_project.setdefault(_project_key(project_dir), {})
        if record is None:
            names.pop(name, None)
        else:
            names[name] = {"sha256": record.sha256, "at": record.at,
                           **({"text": record.text} if record.text is not None else {})}
        if not names:
            by_project.pop(_project_key(project_dir))
        _write_private(folder, CONSENT_FILE, consents)


def _write_private(folder: Path, name: str, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}-", dir=folder)  # 0600 from the start
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, sort_keys=True)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, folder / name)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextlib.contextmanager
def _consent_lock(folder: Path) -> Iterator[None]:
    """The window and a CLI run may approve at once: one read-modify-write at a time."""
    try:
        import fcntl
    except ImportError:  # no flock on this platform: the atomic replace still keeps the file whole
        yield
        return
    fd = os.open(folder / ".consent.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def trusted_rules(project_dir: str | os.PathLike[str]) -> ConsentRecord | None:
    """What the person last trusted as this project's rules; None when nothing was."""
    record = consent_record(ConsentKind.RULES, project_dir)
    return record if record is not None and record.text is not None else None


def trust_rules(project_dir: str | os.PathLike[str], text: str | None) -> None:
    """Record `text` as this project's trusted rules (None: no rules file is trusted, the record goes)."""
    record = None if text is None else ConsentRecord(rules_digest(text), text, time.time())
    record_consent(ConsentKind.RULES, project_dir, "", record)


# the audit signing key (issue 10, audit-keys) -----------------------------------------------------------
KEYRING_SIGNING_USER = "audit-signing-key"
SIGNING_KEY_FILE = "audit-signing.key"
WITNESS_DIR = "witness"
_SEED_BYTES = 32  # an Ed25519 private key is 32 random bytes


@dataclass(slots=True, frozen=True)
class DeskKey:
    """This installation's Ed25519 private key (its 32-byte seed) and where it lives; repr hides the seed."""

    seed: bytes = field(repr=False)
    source: str  # keyring | file
    path: Path | None = None  # the key file, when source is "file"


def witness_dir() -> Path:
    """Where the signed witnesses of each database's chain head are written (one file per database)."""
    return data_dir() / WITNESS_DIR


def desk_signing_key() -> DeskKey:
    """This installation's audit signing key: from the keyring (service "agent-desk"), else from a 0600 file
    in the user's data folder; made on first use. Never logged."""
    if keyring_available():
        import keyring

        try:
            stored = keyring.get_password(KEYRING_SERVICE, KEYRING_SIGNING_USER)
        except Exception as e:
            log.warning("the keyring could not be read (%s); using the signing key file", type(e).__name__)
        else:
            if stored:
                return DeskKey(_decode_seed(stored, "the keyring"), "keyring")
            path = data_dir() / SIGNING_KEY_FILE
            if not path.exists() and not path.is_symlink():
                seed = os.urandom(_SEED_BYTES)
                try:
                    keyring.set_password(KEYRING_SERVICE, KEYRING_SIGNING_USER, base64.b64encode(seed).decode())
                except Exception as e:
                    log.warning("the keyring refused the signing key (%s); using a key file", type(e).__name__)
                else:
                    return DeskKey(seed, "keyring")
    return _file_key(data_dir() / SIGNING_KEY_FILE)


def _decode_seed(text: str, where: str) -> bytes:
    try:
        seed = base64.b64decode(text.strip(), validate=True)
    except ValueError:
        seed = b""
    if len(seed) != _SEED_BYTES:
        raise ConfigError(f"The audit signing key in {where} is damaged (not a base64 Ed25519 key).",
                          hint="Move it aside: a new key is made, and `audit verify` names the old one.")
    return seed


def _file_key(path: Path) -> DeskKey:
    """Read the key file (refusing a link or a file others can read), or create it 0600 with O_EXCL."""
    for _ in range(50):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            if _create_key_file(path):
                continue  # read back what won the race, ours or another process's
            time.sleep(0.01)
            continue
        except OSError as e:
            raise ConfigError(f"The audit signing key file {path} cannot be opened: {e}",
                              hint="It must be a regular file, not a link, owned by you.") from e
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if st.st_uid != os.getuid() or st.st_mode & 0o077:
                raise ConfigError(f"The audit signing key file {path} is readable or owned by someone else "
                                  f"(mode {st.st_mode & 0o777:o}).",
                                  hint=f"Run `chmod 600 {path}` if you own it, or move it aside.")
            text = f.read().decode("ascii", "replace")
        if text.strip():
            return DeskKey(_decode_seed(text, str(path)), "file", path)
        time.sleep(0.01)  # another process is between link() and our read; it cannot be empty after link
    raise ConfigError(f"The audit signing key file {path} stays empty.", hint="Move it aside and retry.")


def _create_key_file(path: Path) -> bool:
    """Write a new key to a private temp file, then link it into place: the name appears complete or not at
    all, and an existing key is never replaced (link fails with EEXIST). True when a file now exists."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(6).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(base64.b64encode(os.urandom(_SEED_BYTES)) + b"\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, path, follow_symlinks=False)
        except FileExistsError:
            return True
    finally:
        tmp.unlink(missing_ok=True)
    log.warning("no keyring backend is available: the audit signing key is kept in %s (mode 0600)", path)
    return True
