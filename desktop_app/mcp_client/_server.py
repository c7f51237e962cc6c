"""One MCP server's life: connect, initialize, list its tools, follow `tools/list_changed`, call tools, and
notice a death (the failed call carries the stderr tail; the next call starts the server again)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import mcp_types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError

from ..core import AgentDeskError, McpServerInfo, McpServerState, McpWhere, SandboxDescription
from ._links import Connect, Link

log = logging.getLogger(__name__)

START_TIMEOUT_S = 60.0  # initialize and the first tools/list
CLIENT_INFO = mcp_types.Implementation(name="agent-desk", version="1")
Progress = Callable[[float, float | None, str | None], Any]


class McpServerError(AgentDeskError):
    """A server failed to start, died during a call, or answered a call with an error."""


class McpServer:
    """A connection to one server, kept by a task of its own (the SDK's context managers live there)."""

    def __init__(self, info: McpServerInfo, connect: Connect, on_change: Callable[[McpServer], None],
                 on_life: Callable[[McpServer, str, str], None] | None = None) -> None:
        self.info = info
        self._on_life = on_life  # (server, "started" | "stopped", reason): recorded by the hub
        self._connect = connect
        self._on_change = on_change
        self.session: ClientSession | None = None  # once ready
        self._open: ClientSession | None = None  # from the moment it is entered: a list_changed may come early
        self._asked = self._kept = 0  # listings asked for, and the latest one kept (an older answer never wins)
        self.tools: list[mcp_types.Tool] = []
        self.link: Link | None = None
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Event = asyncio.Event()
        self._stop: asyncio.Event = asyncio.Event()
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def where(self) -> McpWhere:
        return self.info.where

    def describe(self) -> SandboxDescription | None:
        return self.link.describe() if self.link is not None else None

    # -- life -----------------------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect and list the tools; returns once ready or failed (the state says which)."""
        async with self._lock:
            await self._start_locked()

    async def _start_locked(self) -> None:
        if self._task is not None and not self._task.done() and self.session is not None:
            return
        await self._end_task()
        self._ready, self._stop = asyncio.Event(), asyncio.Event()
        self._task = asyncio.ensure_future(self._life())
        await self._ready.wait()

    async def _life(self) -> None:
        try:
            async with AsyncExitStack() as stack:
                self.link = await self._connect(stack)
                session = await stack.enter_async_context(
                    ClientSession(self.link.read, self.link.write, message_handler=self._on_message,
                                  client_info=CLIENT_INFO))
                self._open = session
                async with asyncio.timeout(START_TIMEOUT_S):
                    init = await session.initialize()
                    await self._relist(session)
                info = init.server_info
                self.info.version = f"{info.name} {info.version}".strip() if info else ""
                self.session = session
                self._set(McpServerState.READY, error="")
                self._life_event("started", "")
                self._ready.set()
                await self._watch()
                self._life_event("stopped", "closed" if self._stop.is_set() else self._death())
        except Exception as e:  # any failure to start is the server's state, not the window's exception
            if self.session is not None:
                self._life_event("stopped", _reason(e))
            self._failed(e)
        finally:
            self.session = self._open = None
            self._ready.set()

    def _life_event(self, what: str, reason: str) -> None:
        if self._on_life is not None:
            try:
                self._on_life(self, what, reason)
            except Exception:  # recording must not end the server's life
                log.exception("recording %s %s failed", self.name, what)

    async def _watch(self) -> None:
        """Until closed, or the server's output ends (it died while idle: restarting on the next call)."""
        assert self.link is not None
        stop = asyncio.ensure_future(self._stop.wait())
        ended = asyncio.ensure_future(self.link.ended.wait())
        try:
            await asyncio.wait({stop, ended}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()
            ended.cancel()
        if not self._stop.is_set():
            self.session = None
            self._set(McpServerState.RESTARTING, error=self._death(), stderr_tail=self._stderr())

    def _failed(self, e: BaseException) -> None:
        if self._stop.is_set():
            return
        why = _reason(e)
        self.session = None
        self._set(McpServerState.FAILED, error=f"{self.name} could not start: {why}", stderr_tail=self._stderr())

    async def close(self) -> None:
        async with self._lock:
            await self._end_task()

    async def _end_task(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 10.0)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    # -- calls ----------------------------------------------------------------------------------------
    async def call(self, tool: str, arguments: dict[str, Any], progress: Progress | None) -> mcp_types.CallToolResult:
        """Call `tool`; a server found dead is started again first. Cancelling the caller cancels the request
        (the SDK sends notifications/cancelled)."""
        session = await self._live_session()
        try:
            result = await session.call_tool(tool, arguments, progress_callback=progress)
        except MCPError as e:
            if e.code == mcp_types.CONNECTION_CLOSED or self._is_dead():
                raise self._died_during_call() from None
            raise McpServerError(f"{self.name} answered with an error: {e.message}") from None
        except (ConnectionError, OSError) as e:
            raise self._died_during_call() from e
        if not isinstance(result, mcp_types.CallToolResult):
            raise McpServerError(f"{self.name} answered tools/call with something other than a tool result")
        return result

    async def _live_session(self) -> ClientSession:
        async with self._lock:
            if self.session is None or self._is_dead():
                if self.info.state is not McpServerState.STARTING:
                    self._set(McpServerState.RESTARTING)
                await self._start_locked()
            if self.session is None:
                raise McpServerError(self.info.error or f"{self.name} is not running",
                                     hint=_tail_hint(self.info.stderr_tail))
            return self.session

    def _is_dead(self) -> bool:
        link = self.link
        return link is not None and (link.ended.is_set() or link.returncode() is not None)

    def _died_during_call(self) -> McpServerError:
        why, tail = self._death(), self._stderr()
        self.session = None
        self._set(McpServerState.RESTARTING, error=why, stderr_tail=tail)
        message = f"{why}; its last stderr: {tail.strip()[-1500:]}" if tail.strip() else why
        return McpServerError(message, hint="the server is started again on the next call")

    def _death(self) -> str:
        code = self.link.returncode() if self.link is not None else None
        return f"the MCP server {self.name} ended" + (f" (exit {code})" if code is not None else "")

    def _stderr(self) -> str:
        try:
            return self.link.stderr_tail() if self.link is not None else ""
        except Exception:  # a channel already torn down has nothing more to say
            return ""

    # -- notifications --------------------------------------------------------------------------------
    async def _on_message(self, message: Any) -> None:
        session = self._open
        if isinstance(message, mcp_types.ToolListChangedNotification) and session is not None:
            try:
                await self._relist(session)
            except Exception as e:  # a server that cannot list its tools keeps the last list
                log.warning("%s: relisting tools failed: %s", self.name, _reason(e))
                return
            self._on_change(self)
        elif isinstance(message, Exception):
            log.info("%s sent a message that is not JSON-RPC: %s", self.name, str(message)[:200])

    async def _relist(self, session: ClientSession) -> None:
        self._asked += 1
        mine = self._asked
        tools = await _list_all(session)
        if mine > self._kept:
            self._kept, self.tools = mine, tools

    def _set(self, state: McpServerState, *, error: str | None = None, stderr_tail: str | None = None) -> None:
        self.info.state = state
        if error is not None:
            self.info.error = error
        if stderr_tail is not None:
            self.info.stderr_tail = stderr_tail
        self._on_change(self)


async def _list_all(session: ClientSession) -> list[mcp_types.Tool]:
    """Every page of tools/list (a bounded number of pages: a server cannot keep the desk listing)."""
    tools: list[mcp_types.Tool] = []
    cursor: str | None = None
    for _ in range(100):
        params = mcp_types.PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            break
    return tools


def _reason(e: BaseException) -> str:
    if isinstance(e, BaseExceptionGroup):
        return "; ".join(_reason(x) for x in e.exceptions)
    if isinstance(e, TimeoutError):
        return f"no answer within {START_TIMEOUT_S:g} s"
    if isinstance(e, MCPError):
        return e.message
    if isinstance(e, AgentDeskError) and e.hint:
        return f"{e} ({e.hint})"
    return str(e) or type(e).__name__


def _tail_hint(tail: str) -> str:
    return f"its last stderr: {tail.strip()[-500:]}" if tail.strip() else ""
