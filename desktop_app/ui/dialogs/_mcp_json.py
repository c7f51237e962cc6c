"""The check of the user's own MCP servers pasted in the settings: a whole `mcpServers` file (Claude Desktop,
Claude Code, Cursor) or just its mapping, refused with an error naming the server and the field."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ...core import ConfigError, mcp_tool_name

RUN_PLACES = ("sandbox", "sandbox+network", "host")
TRANSPORTS = ("stdio", "http", "streamable-http")
KNOWN_KEYS = {"command", "args", "env", "cwd", "url", "headers", "type", "run"}
_HINT = ('Paste your "mcpServers" object, e.g. {"mcpServers": {"git": {"command": "uvx", "args": '
         '["mcp-server-git"]}}}: each server has a "command" (with "args", "env") or a "url" (with "headers").')


@dataclass(slots=True)
class McpServersCheck:
    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _bad(message: str) -> ConfigError:
    return ConfigError(f"MCP servers: {message}", hint=_HINT)


def check_mcp_json(text: str) -> McpServersCheck:
    """The servers in `text` (nothing when it is blank); unknown keys are warnings, never errors."""
    if not text.strip():
        return McpServersCheck()
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as e:
        raise _bad(f"not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from e
    except RecursionError as e:
        raise _bad("the JSON is nested too deeply") from e
    if not isinstance(data, dict):
        raise _bad(f"expected a JSON object of servers, got {type(data).__name__}")
    out = McpServersCheck()
    if "mcpServers" in data:  # the whole file: its other keys (a client's own settings) are not ours
        out.warnings += [f"ignored the file's key {k!r}" for k in data if k != "mcpServers"]
        data = data["mcpServers"]
        if not isinstance(data, dict):
            raise _bad(f'"mcpServers" must be an object of servers by name, got {type(data).__name__}')
    desk_names: dict[str, str] = {}
    for name, spec in data.items():
        out.servers[name] = _check_server(name, spec, out.warnings)
        clash = desk_names.setdefault(mcp_tool_name(name, "t"), name)
        if clash != name:
            raise _bad(f'"{name}" and "{clash}" give their tools the same names (mcp__…); rename one')
    _engine_check(out.servers)
    return out


def _engine_check(servers: dict[str, Any]) -> None:
    """What the engine itself refuses (its name rule, its field checks): refused here, not at the next start."""
    from ...runtime import parse_mcp_servers

    for entry in parse_mcp_servers(servers, source="user", where="MCP servers") if servers else ():
        if entry.error:
            raise ConfigError(entry.error, hint=_HINT)


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A key given twice would silently keep the last one (a server pasted twice, half edited): refused."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _bad(f'"{k}" is given twice in one object')
        out[k] = v
    return out


def where_it_runs(spec: dict[str, Any]) -> str:
    """Where a checked server will run, as McpWhere's values say it."""
    return "http" if "url" in spec else str(spec.get("run") or "sandbox")


def _check_server(name: str, spec: Any, warnings: list[str]) -> dict[str, Any]:
    if not name.strip():
        raise _bad("a server has an empty name")
    if not isinstance(spec, dict):
        raise _bad(f'"{name}": must be an object with "command" or "url", got {type(spec).__name__}')
    has_command, has_url = "command" in spec, "url" in spec
    if has_command == has_url:
        raise _bad(f'"{name}": needs either "command" (a program to start) or "url" (an HTTP server)'
                   + (", not both" if has_command else ""))
    if has_command:
        _string(name, spec, "command", required=True)
        _strings(name, spec, "args")
        _string(name, spec, "cwd")
        _mapping(name, spec, "env")
        _choice(name, spec, "run", RUN_PLACES)
    else:
        _check_url(name, spec)
    if spec.get("type") == "sse":
        raise _bad(f'"{name}".type: "sse" servers are not supported; use the server\'s streamable-http URL')
    _choice(name, spec, "type", TRANSPORTS)
    warnings += [f'"{name}": ignored the unknown key {k!r}' for k in spec if k not in KNOWN_KEYS]
    return spec


def _check_url(name: str, spec: dict[str, Any]) -> None:
    url = _string(name, spec, "url", required=True)
    if not url.startswith(("https://", "http://")):
        raise _bad(f'"{name}".url: must start with https:// or http://, got {url[:80]!r}')
    _mapping(name, spec, "headers")
    if "run" in spec:
        raise _bad(f'"{name}".run: a url server is reached from this machine; "run" is for "command" servers')


def _string(name: str, spec: dict[str, Any], key: str, *, required: bool = False) -> str:
    value = spec.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise _bad(f'"{name}".{key}: must be a non-empty string, got {json.dumps(value)[:80]}')
    return value


def _strings(name: str, spec: dict[str, Any], key: str) -> None:
    value = spec.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _bad(f'"{name}".{key}: must be a list of strings, got {json.dumps(value)[:80]}')


def _mapping(name: str, spec: dict[str, Any], key: str) -> None:
    value = spec.get(key, {})
    if not isinstance(value, dict):
        raise _bad(f'"{name}".{key}: must be an object of names to strings, got {type(value).__name__}')
    for k, v in value.items():
        if not isinstance(v, str):
            raise _bad(f'"{name}".{key}.{k}: must be a string, got {json.dumps(v)[:80]}')


def _choice(name: str, spec: dict[str, Any], key: str, allowed: tuple[str, ...]) -> None:
    if key in spec and spec[key] not in allowed:
        raise _bad(f'"{name}".{key}: must be one of {", ".join(allowed)}; got {json.dumps(spec[key])[:80]}')


def servers_text(servers: dict[str, Any]) -> str:
    """The saved servers as the editor shows them: the whole-file shape people already have."""
    return json.dumps({"mcpServers": servers}, indent=2, ensure_ascii=False) if servers else ""
