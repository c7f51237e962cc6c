"""MCP servers as the desk sees them: their names on the wire, their status and their tools.

The client that talks to the servers lives above core (it needs the `mcp` SDK); these shapes are what
the engine, the window and the CLI share about them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from ._events import Channel, Event

MCP_PREFIX = "mcp__"
MCP_GROUP = "mcp"  # every MCP tool's group: rules name it `group:mcp`
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


class McpServerState(StrEnum):
    STARTING = "starting"
    READY = "ready"
    FAILED = "failed"  # with the error and the stderr tail
    RESTARTING = "restarting"
    DISABLED = "disabled"  # switched off by the person
    NEEDS_APPROVAL = "needs_approval"  # asks for a relaxation (network, host) the person has not granted


class McpWhere(StrEnum):
    """Where a server runs: what every record of its calls shows."""

    SANDBOX = "sandbox"  # inside the project's container, no network
    SANDBOX_NETWORK = "sandbox+network"  # a container of its own with network: a recorded relaxation
    HOST = "host"  # a process on the host: unsandboxed
    HTTP = "http"  # a Streamable-HTTP server reached from the host: network


def mcp_tool_name(server: str, tool: str) -> str:
    """`mcp__<server>__<tool>`, with anything a tool name cannot hold replaced by `_` (the API allows
    letters, digits, `_` and `-`)."""
    return f"{MCP_PREFIX}{_UNSAFE.sub('_', server)}__{_UNSAFE.sub('_', tool)}"


def split_mcp_tool_name(name: str) -> tuple[str, str] | None:
    """(server, tool) of an `mcp__server__tool` name, or None for any other tool."""
    if not name.startswith(MCP_PREFIX):
        return None
    server, sep, tool = name[len(MCP_PREFIX) :].partition("__")
    return (server, tool) if sep and server and tool else None


@dataclass(slots=True, frozen=True)
class McpToolInfo:
    server: str
    name: str  # the server's own name for the tool
    description: str = ""
    read_only: bool = False  # readOnlyHint
    destructive: bool = False  # destructiveHint
    enabled: bool = True  # the person's switch in the project settings

    @property
    def desk_name(self) -> str:
        return mcp_tool_name(self.server, self.name)


@dataclass(slots=True)
class McpServerInfo:
    """One configured server and what the desk knows of it now."""

    name: str
    state: McpServerState = McpServerState.STARTING
    where: McpWhere = McpWhere.SANDBOX
    source: str = "project"  # project (.agent-desk/mcp.json) | user (the settings)
    version: str = ""  # serverInfo name and version from initialize
    tools: tuple[McpToolInfo, ...] = ()
    error: str = ""
    stderr_tail: str = ""
    relaxations: tuple[str, ...] = ()  # asked for by the config, e.g. ("network",) or ("host",)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "state": self.state.value,
            "where": self.where.value,
            "source": self.source,
            "version": self.version,
            "tools": [
                {"name": t.name, "description": t.description, "read_only": t.read_only,
                 "destructive": t.destructive, "enabled": t.enabled}
                for t in self.tools
            ],
            "error": self.error,
            "stderr_tail": self.stderr_tail,
            "relaxations": list(self.relaxations),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> McpServerInfo:
        name = str(d["name"])
        return cls(
            name=name,
            state=McpServerState(d.get("state", "starting")),
            where=McpWhere(d.get("where", "sandbox")),
            source=str(d.get("source", "project")),
            version=str(d.get("version", "")),
            tools=tuple(
                McpToolInfo(server=name, name=str(t["name"]), description=str(t.get("description", "")),
                            read_only=bool(t.get("read_only")), destructive=bool(t.get("destructive")),
                            enabled=bool(t.get("enabled", True)))
                for t in d.get("tools", ())
            ),
            error=str(d.get("error", "")),
            stderr_tail=str(d.get("stderr_tail", "")),
            relaxations=tuple(d.get("relaxations", ())),
        )


@dataclass(slots=True)
class McpServersChanged(Event):
    """A project's MCP servers changed state (started, failed, restarted, listed new tools)."""

    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "mcp:servers"
    project_id: str = ""
    servers: list[dict[str, Any]] = field(default_factory=list)  # McpServerInfo.to_dict() each


@dataclass(slots=True)
class McpServerLife(Event):
    """An MCP server started or stopped: recorded (the `events` row is bound into the audit chain) with where it
    ran (the sandbox's container and image digest, a companion's, or the host) and the consent digest it ran
    under (the entry's digest a project server's grant is bound to; "" for the person's own servers)."""

    channel: ClassVar[Channel] = Channel.CONTROL
    type: ClassVar[str] = "mcp:life"
    project_id: str = ""
    server: str = ""
    what: str = ""  # started | stopped
    source: str = ""  # project | user
    where: str = ""  # sandbox | sandbox+network | host | http
    container_id: str = ""
    image: str = ""
    image_digest: str = ""
    unsandboxed: bool = False
    consent_digest: str = ""
    reason: str = ""  # why it stopped: closed, ended (exit 1), ...
