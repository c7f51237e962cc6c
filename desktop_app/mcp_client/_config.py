"""MCP server configuration: the `mcpServers` shape users already have (Claude Desktop, Claude Code, Cursor),
read from the project's `.agent-desk/mcp.json` (never through a link) and from the user's settings, merged.

A bad entry fails alone: it becomes a `ServerEntry` with its error, and the other servers still load.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..core import ConfigError, McpWhere, name_refusal, read_beneath

log = logging.getLogger(__name__)

PROJECT_CONFIG = ".agent-desk/mcp.json"
MAX_CONFIG_BYTES = 1_000_000
MAX_DESK_NAME = 64  # the Messages API's limit on a tool name
# A server's name goes into `mcp__<server>__<tool>`: `__` or an `_` at either end would let two servers'
# tools share one desk name, so neither is allowed.
_SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_))*(?<!_)$")
_SECRET_REF = re.compile(r"\$\{(keyring|env):([^}]*)\}")
_KNOWN_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "type", "run", "disabled",
                         "transport", "timeout", "description", "autoApprove", "alwaysAllow"})


class ServerConfig(BaseModel):
    """One server as configured: a command (stdio) or a url (Streamable HTTP)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    type: Literal["stdio", "http", "streamable-http", "streamableHttp", "sse"] | None = None
    run: Literal["sandbox", "sandbox+network", "host"] = "sandbox"
    disabled: bool = False

    @field_validator("command")
    @classmethod
    def _command(cls, v: str | None) -> str | None:
        if v is not None and not v.strip():
            raise ValueError("is empty")
        if v is not None and "\0" in v:
            raise ValueError("holds a NUL byte")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith(("http://", "https://")):
            raise ValueError("must start with http:// or https://")
        return v

    @property
    def where(self) -> McpWhere:
        if self.url is not None:
            return McpWhere.HTTP
        return McpWhere(self.run)

    @property
    def argv(self) -> list[str]:
        return [self.command or "", *self.args]


@dataclass(slots=True)
class ServerEntry:
    """A configured server, or why its entry could not be read (`config` None, `error` set)."""

    name: str
    source: str  # "project" | "user"
    config: ServerConfig | None = None
    error: str = ""
    notes: list[str] = field(default_factory=list)  # warnings: unknown keys, a user server overridden

    @property
    def where(self) -> McpWhere:
        return self.config.where if self.config is not None else McpWhere.SANDBOX

    @property
    def asks_for(self) -> str | None:
        """What a project server needs granted, as where it runs ("sandbox", "sandbox+network", "host", "http"),
        else None. A repository's server runs its own command beside the agent even in the sandbox, so every
        project server waits for the person; the user's own servers need none."""
        if self.source != "project" or self.config is None:
            return None
        return self.where.value

    @property
    def relaxation(self) -> str | None:
        """What it asks for beyond the sandbox's limits ("sandbox+network", "host", "http"), else None."""
        asks = self.asks_for
        return None if asks == McpWhere.SANDBOX.value else asks

    def digest(self) -> str:
        """What a grant is bound to: the whole entry, so a repository that changes a granted server's
        command, url or headers afterwards has to be granted again."""
        body = self.config.model_dump(mode="json") if self.config is not None else {}
        return hashlib.sha256(json.dumps([self.name, body], sort_keys=True).encode()).hexdigest()


def parse_servers(data: Any, *, source: str, where: str) -> list[ServerEntry]:
    """The servers of one `{"mcpServers": {...}}` document (or the bare `{name: {...}}` mapping of the
    settings). The document itself must be an object; each entry fails alone."""
    servers = data.get("mcpServers", data) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ConfigError(f"{where}: expected an object with \"mcpServers\": {{NAME: {{...}}}}",
                          hint='e.g. {"mcpServers": {"time": {"command": "mcp-server-time"}}}')
    return [_entry(str(name), raw, source, where) for name, raw in servers.items()]


def _entry(name: str, raw: Any, source: str, where: str) -> ServerEntry:
    entry = ServerEntry(name, source)
    if not _SERVER_NAME.fullmatch(name) or len(name) > 40:
        why = name_refusal(name, what="server name")  # what is wrong with it, said plainly (e.g. an invisible one)
        entry.error = (f"{where}: server {name!r}: the name must be letters, digits, '-' or single '_' "
                       f"(ASCII, not at either end), at most 40 characters: its tools are named "
                       f"mcp__<server>__<tool>{' (' + why + ')' if why else ''}")
        return entry
    if not isinstance(raw, dict):
        entry.error = f"{where}: server {name!r}: expected an object with \"command\" or \"url\""
        return entry
    unknown = sorted(k for k in raw if k not in _KNOWN_KEYS)
    if unknown:
        entry.notes.append(f"{where}: server {name!r}: ignored unknown key(s) {', '.join(unknown)}")
        log.warning("%s", entry.notes[-1])
    try:
        config = ServerConfig.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        field_name = ".".join(str(p) for p in err.get("loc", ())) or "(entry)"
        entry.error = f"{where}: server {name!r}, field {field_name!r}: {err.get('msg')}"
        return entry
    entry.error = _shape_error(config, name, where)
    entry.config = None if entry.error else config
    return entry


def _shape_error(config: ServerConfig, name: str, where: str) -> str:
    if config.type == "sse":
        return (f"{where}: server {name!r}, field 'type': SSE servers are not supported; use the server's "
                f"Streamable HTTP endpoint (\"type\": \"http\")")
    if (config.command is None) == (config.url is None):
        return f"{where}: server {name!r}: give exactly one of \"command\" (stdio) or \"url\" (HTTP)"
    if config.url is not None and config.run != "sandbox":
        return f"{where}: server {name!r}, field 'run': an HTTP server runs elsewhere; \"run\" is for commands"
    return ""


def read_project_servers(project_dir: str | os.PathLike[str]) -> list[ServerEntry]:
    """The project's servers from `.agent-desk/mcp.json`; [] when there is none. A file that cannot be read
    (a link, not JSON, too large) raises ConfigError naming it."""
    path = os.path.join(os.fspath(project_dir), PROJECT_CONFIG)
    data = read_beneath(project_dir, PROJECT_CONFIG, limit=MAX_CONFIG_BYTES)
    if data is None:
        return []
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise ConfigError(f"{path}: not valid JSON: {e}",
                          hint='the file holds {"mcpServers": {NAME: {"command": ..., "args": [...]}}}') from None
    return parse_servers(doc, source="project", where=path)


def merged_servers(project: list[ServerEntry], user: list[ServerEntry]) -> list[ServerEntry]:
    """The user's servers, then the project's; a project server of the same name wins, and says so."""
    names = {e.name for e in project}
    out = [e for e in user if e.name not in names]
    for e in project:
        if any(u.name == e.name for u in user):
            e.notes.append(f"server {e.name!r}: the project's entry replaces the one in your settings")
        why = name_refusal(e.name, [u.name for u in user], what="server name") if not e.error else None
        if why is not None:  # a project server that looks like one of yours is not loaded
            e.error, e.config = f"{PROJECT_CONFIG}: {why}", None
        out.append(e)
    return out


def load_servers(project_dir: str | os.PathLike[str] | None, user_servers: dict[str, Any]) -> list[ServerEntry]:
    """Every configured server. A project file that cannot be read at all becomes one failed entry named
    after the file, so the user's servers still load."""
    user = parse_servers(user_servers or {}, source="user", where="settings mcp_servers") if user_servers else []
    project: list[ServerEntry] = []
    if project_dir is not None:
        try:
            project = read_project_servers(project_dir)
        except ConfigError as e:
            project = [ServerEntry("mcp.json", "project", error=str(e))]
    return merged_servers(project, user)


SecretResolver = Any  # Callable[[str, str], str | None]: (kind "keyring" | "env", name) -> value


def resolve_values(values: dict[str, str], resolve: SecretResolver, *, server: str,
                   field_name: str) -> tuple[dict[str, str], list[str]]:
    """`${keyring:NAME}` and `${env:NAME}` replaced through `resolve`; the values resolved (secrets, for the
    redactor). A reference that resolves to nothing is a ConfigError naming the server and the field."""
    secrets: list[str] = []

    def sub(m: re.Match[str]) -> str:
        value = resolve(m.group(1), m.group(2)) if resolve is not None else None
        if value is None:
            raise ConfigError(f"server {server!r}, field {field_name!r}: {m.group(0)} has no value",
                              hint=_secret_hint(m.group(1), m.group(2)))
        secrets.append(value)
        return value

    return {k: _SECRET_REF.sub(sub, v) for k, v in values.items()}, secrets


def _secret_hint(kind: str, name: str) -> str:
    if kind == "keyring":
        return f'store it with: keyring set agent-desk-mcp {name}'
    return f"set the environment variable {name}"
