"""The hub: one per project runtime. It starts every enabled server in the background, keeps each server's
`McpServerInfo` current, publishes `McpServersChanged`, and keeps the registry's MCP tools in step."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from ..core import (
    ConfigError,
    McpServerInfo,
    McpServerLife,
    McpServersChanged,
    McpServerState,
    McpWhere,
    ProjectSettings,
    Sandbox,
    ToolRegistry,
)
from ._config import MAX_DESK_NAME, SecretResolver, ServerEntry, resolve_values
from ._links import CompanionFactory, Connect, channel_connect, host_connect, http_connect
from ._server import McpServer
from ._tool import BadToolSchema, McpTool, checked_schema

log = logging.getLogger(__name__)
# The ProjectSettings fields that switch MCP servers and tools off (read straight from the stored settings)
_OFF_SERVERS, _OFF_TOOLS = "mcp_disabled_servers", "mcp_disabled_tools"
assert {_OFF_SERVERS, _OFF_TOOLS} <= set(ProjectSettings.model_fields)


@dataclass(slots=True)
class HubPlaces:
    """What the runtime gives the hub: where servers run and how their secrets are found."""

    project_id: str
    project_dir: str
    sandbox: Callable[[], Awaitable[Sandbox]]  # the project's sandbox, started
    settings: Callable[[], dict[str, Any]]  # the project's settings (the switches), read live
    consented: Callable[[ServerEntry], bool] = lambda entry: entry.asks_for is None  # the person's approval
    publish: Callable[[Any], Any] = lambda event: None
    companion: CompanionFactory | None = None  # server name -> a sandbox with network, not started
    resolve_secret: SecretResolver | None = None  # (kind, name) -> value
    on_secrets: Callable[[list[str]], None] | None = None  # resolved header values, for the redactor


class McpHub:
    def __init__(self, entries: list[ServerEntry], places: HubPlaces, registry: ToolRegistry | None = None) -> None:
        self.places = places
        self.registry = registry
        self.infos: dict[str, McpServerInfo] = {}
        self.servers: dict[str, McpServer] = {}
        self._tools: dict[str, McpTool] = {}
        self._started: asyncio.Future[None] | None = None
        self._moves: set[asyncio.Future[None]] = set()  # servers starting again in another container
        for entry in entries:
            self._add(entry)

    # -- building ---------------------------------------------------------------------------------------
    def _add(self, entry: ServerEntry) -> None:
        info = McpServerInfo(name=entry.name, where=entry.where, source=entry.source,
                             relaxations=(entry.relaxation,) if entry.relaxation else ())
        self.infos[entry.name] = info
        settings = self.places.settings()
        if entry.config is None:
            info.state, info.error = McpServerState.FAILED, entry.error
        elif entry.config.disabled or entry.name in (ProjectSettings.of(settings).mcp_disabled_servers or ()):
            info.state = McpServerState.DISABLED
        elif not self.places.consented(entry):
            info.state, info.error = McpServerState.NEEDS_APPROVAL, _needs_grant(entry, self.places.project_dir)
        else:
            self.servers[entry.name] = McpServer(info, self._connect(entry), self._changed,
                                                 on_life=lambda server, what, why: self._life(entry, server, what, why))
        if entry.notes and not info.error:
            info.error = "; ".join(entry.notes)

    def _connect(self, entry: ServerEntry) -> Connect:
        config = entry.config
        assert config is not None
        where = config.where
        if where is McpWhere.HTTP:
            return self._http(entry)
        if where is McpWhere.HOST:
            return host_connect(config, self.places.project_dir)
        if where is McpWhere.SANDBOX_NETWORK:
            return channel_connect(config, where, self._companion(entry.name))
        return channel_connect(config, where, lambda stack: self.places.sandbox())

    def _http(self, entry: ServerEntry) -> Connect:
        config = entry.config
        assert config is not None and config.url is not None

        async def connect(stack: AsyncExitStack):
            # the keyring may ask the system (and wait): never on the event loop
            headers, secrets = await asyncio.to_thread(resolve_values, config.headers, self.places.resolve_secret,
                                                       server=entry.name, field_name="headers")
            if secrets and self.places.on_secrets is not None:
                self.places.on_secrets(secrets)
            return await http_connect(config.url or "", headers)(stack)

        return connect

    def _companion(self, name: str):
        factory = self.places.companion

        async def sandbox(stack: AsyncExitStack) -> Sandbox:
            if factory is None:
                raise ConfigError(f"server {name!r}: no sandbox with network is available here")
            box = factory(name)
            stack.push_async_callback(box.close)
            await box.start()
            return box

        return sandbox

    # -- life -------------------------------------------------------------------------------------------
    def start(self) -> asyncio.Future[None]:
        """Start every server in the background, once; never raises (a failure is a server's state)."""
        if self._started is None:
            self._changed(None)
            self._started = asyncio.ensure_future(self._start_all())
        return self._started

    async def wait_started(self) -> None:
        await asyncio.shield(self.start())

    async def _start_all(self) -> None:
        await asyncio.gather(*(s.start() for s in self.servers.values()), return_exceptions=True)

    async def close(self) -> None:
        if self._started is not None and not self._started.done():
            self._started.cancel()
            with contextlib.suppress(BaseException):
                await self._started
        await asyncio.gather(*(s.close() for s in self.servers.values()), return_exceptions=True)
        for name in list(self._tools):
            self._unregister(name)

    async def move_sandboxed(self) -> None:
        """The sandbox's place changed (the project's container or its read-only twin): the servers that run in
        a container end now, and start again in the background where `places.sandbox` (or the companion
        factory) says now. Returns once the old ones have ended."""
        moving = [s for s in self.servers.values() if s.where in (McpWhere.SANDBOX, McpWhere.SANDBOX_NETWORK)]
        await asyncio.gather(*(s.close() for s in moving), return_exceptions=True)
        if self._started is None:
            return  # not started yet: they start where the places say when the hub starts
        for server in moving:
            task = asyncio.ensure_future(server.start())
            self._moves.add(task)
            task.add_done_callback(self._moves.discard)

    # -- what the runtime asks --------------------------------------------------------------------------
    def server_infos(self) -> list[McpServerInfo]:
        return list(self.infos.values())

    def offered_tools(self) -> list[McpTool]:
        """The tools of the servers that are ready, minus those the person switched off."""
        ready = {n for n, i in self.infos.items() if i.state in (McpServerState.READY, McpServerState.RESTARTING)}
        return [t for t in self._tools.values() if t.server.name in ready and self.is_enabled(t.name)]

    def is_enabled(self, desk_name: str) -> bool:
        # Asked on every call: the two switches are read from the stored settings as they are, without
        # building the whole typed ProjectSettings (its default factories cost ~0.3 ms a call).
        settings = self.places.settings() or {}
        tool = self._tools.get(desk_name)
        off_servers = settings.get(_OFF_SERVERS) or ()
        return desk_name not in (settings.get(_OFF_TOOLS) or ()) and (tool is None or tool.server.name
                                                                      not in off_servers)

    # -- keeping the tools in step ----------------------------------------------------------------------
    def _life(self, entry: ServerEntry, server: McpServer, what: str, reason: str) -> None:
        """A server started or stopped: an event (stored, and bound into the audit chain) with where it ran and
        the consent digest it ran under."""
        where = server.describe()
        self.places.publish(McpServerLife(
            project_id=self.places.project_id, server=entry.name, what=what, source=entry.source,
            where=entry.where.value, container_id=where.container_id if where else "",
            image=where.image if where else "", image_digest=where.image_digest if where else "",
            unsandboxed=bool(where.unsandboxed) if where else entry.where is McpWhere.HOST,
            consent_digest=entry.digest() if entry.asks_for is not None else "", reason=reason))

    def _changed(self, server: McpServer | None) -> None:
        if server is not None:
            self._retool(server)
        event = McpServersChanged(project_id=self.places.project_id,
                                  servers=[i.to_dict() for i in self.infos.values()])
        try:
            self.places.publish(event)
        except Exception:  # a closed bus must not stop a server
            log.debug("publishing McpServersChanged failed", exc_info=True)

    def _retool(self, server: McpServer) -> None:
        tools, skipped = build_tools(server)
        for t in tools.values():
            t.is_enabled = self.is_enabled
        for name in [n for n, t in self._tools.items() if t.server is server and n not in tools]:
            self._unregister(name)
        for name, t in tools.items():
            self._tools[name] = t
            if self.registry is not None:
                self.registry.register(t, replace=True)
        server.info.tools = tuple(t.info(self.is_enabled(t.name)) for t in tools.values())
        if skipped and server.info.state is McpServerState.READY:
            server.info.error = "; ".join(skipped)[:2000]

    def _unregister(self, name: str) -> None:
        self._tools.pop(name, None)
        if self.registry is not None:
            self.registry.unregister(name)


def build_tools(server: McpServer) -> tuple[dict[str, McpTool], list[str]]:
    """The desk tools of a server's listing, and why any was left out (a bad schema, a name too long, or a
    name that another of its tools already maps to)."""
    out: dict[str, McpTool] = {}
    skipped: list[str] = []
    for listed in server.tools:
        try:
            schema, validator = checked_schema(listed)
        except BadToolSchema as e:
            skipped.append(str(e))
            continue
        tool = McpTool(server, listed, schema, validator)
        if not listed.name or len(tool.name) > MAX_DESK_NAME:
            skipped.append(f"tool {listed.name[:80]!r}: its name {tool.name[:80]!r} is empty or longer than "
                           f"{MAX_DESK_NAME} characters")
        elif tool.name in out:
            skipped.append(f"tool {listed.name[:80]!r}: its name {tool.name!r} is taken by another of its tools")
        else:
            out[tool.name] = tool
    return out, skipped


def header_secrets(entries: list[ServerEntry], consented: Callable[[ServerEntry], bool],
                   resolve: SecretResolver) -> list[str]:
    """The secret values the headers of the servers that will start resolve to, for the redactor: a server
    that echoes one back never gets it into a record. Unresolvable references are the server's error later."""
    out: list[str] = []
    for e in entries:
        if e.config is None or not e.config.headers or not consented(e):
            continue
        try:
            out += resolve_values(e.config.headers, resolve, server=e.name, field_name="headers")[1]
        except ConfigError:
            continue
    return out


def _needs_grant(entry: ServerEntry, project_dir: str) -> str:
    what = {"sandbox": "runs its own command in the project's sandbox, beside the agent",
            "sandbox+network": "asks for a sandbox with network", "host": "asks to run on your computer, "
            "unsandboxed", "http": "asks to be reached over the network from your computer"}[entry.asks_for or ""]
    return (f"the project's server {entry.name!r} {what}; nothing the repository says can grant it (a grant "
            f"holds for the entry as it was granted). If you trust it, grant it with: agent-desk mcp grant "
            f"{entry.name} --project {project_dir}")
