"""How the hub reaches one server, by where it runs: a `ProcessChannel` in the project's sandbox (or in a
companion sandbox with network), the SDK's `stdio_client` on the host, or its Streamable-HTTP client."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ..core import WORKSPACE, McpWhere, ProcessChannel, Sandbox, SandboxDescription
from ._config import ServerConfig
from ._transport import channel_streams

STDERR_TAIL_BYTES = 4096
HTTP_TIMEOUT_S = 30.0


@dataclass(slots=True)
class Link:
    """An open transport to one server: the SDK's streams, and what tells why it died."""

    read: Any
    write: Any
    where: McpWhere
    describe: Callable[[], SandboxDescription | None]
    stderr_tail: Callable[[], str] = lambda: ""
    returncode: Callable[[], int | None] = lambda: None
    ended: anyio.Event = field(default_factory=anyio.Event)  # set when the transport's output ends


Connect = Callable[[AsyncExitStack], Awaitable[Link]]
CompanionFactory = Callable[[str], Sandbox]  # server name -> a not yet started sandbox with network


SandboxFor = Callable[[AsyncExitStack], Awaitable[Sandbox]]


def channel_connect(config: ServerConfig, where: McpWhere, sandbox: SandboxFor) -> Connect:
    """A stdio server in a sandbox: `sandbox(stack)` gives it started (the project's, or a companion whose
    close goes on the stack)."""

    async def connect(stack: AsyncExitStack) -> Link:
        box = await sandbox(stack)
        channel: ProcessChannel = await box.open_process(config.argv, cwd=config.cwd or WORKSPACE,
                                                         env=config.env or None)
        stack.push_async_callback(channel.close)
        ended = anyio.Event()
        read, write = await stack.enter_async_context(channel_streams(channel, ended=ended))
        return Link(read, write, where, box.describe, channel.stderr_tail, lambda: channel.returncode, ended)

    return connect


def host_connect(config: ServerConfig, cwd: str) -> Connect:
    """A server on the host, unsandboxed, through the SDK's own stdio client; its stderr goes to a temporary
    file whose tail explains a death."""

    async def connect(stack: AsyncExitStack) -> Link:
        errlog = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
        params = StdioServerParameters(command=config.command or "", args=config.args, env=config.env or None,
                                       cwd=_host_cwd(config.cwd, cwd))
        read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        return Link(read, write, McpWhere.HOST, lambda: _host_description(cwd), lambda: _tail(errlog))

    return connect


def http_connect(url: str, headers: dict[str, str]) -> Connect:
    """A Streamable-HTTP server reached from the host, with the configured (resolved) headers."""

    async def connect(stack: AsyncExitStack) -> Link:
        client = await stack.enter_async_context(httpx2.AsyncClient(headers=headers, timeout=HTTP_TIMEOUT_S))
        read, write = await stack.enter_async_context(streamable_http_client(url, http_client=client))
        return Link(read, write, McpWhere.HTTP, lambda: _http_description(url))

    return connect


def _host_cwd(configured: str | None, project: str) -> str:
    if configured is None or configured == WORKSPACE:
        return project
    if configured.startswith(WORKSPACE + "/"):
        return os.path.join(project, configured[len(WORKSPACE) + 1:])
    return configured if os.path.isabs(configured) else os.path.join(project, configured)


def _tail(f: Any) -> str:
    try:
        f.flush()
        size = f.seek(0, os.SEEK_END)
        f.seek(max(0, size - STDERR_TAIL_BYTES))
        return f.read()
    except (OSError, ValueError):
        return ""


def _host_description(cwd: str) -> SandboxDescription:
    return SandboxDescription(kind="host", unsandboxed=True, network="host", relaxations=["host"], host_path=cwd)


def _http_description(url: str) -> SandboxDescription:
    origin = httpx2.URL(url)
    return SandboxDescription(kind="http", unsandboxed=False, network=f"{origin.scheme}://{origin.host}",
                              relaxations=["network"], workspace="")
