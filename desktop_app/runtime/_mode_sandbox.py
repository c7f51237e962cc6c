"""A mode binds the session's whole sandbox, by the kernel: in plan, read-only and strict mode every process of a
session (its commands and file tools, the person's hooks on its calls, its sub-agents) runs in the project's
read-only twin, a second container whose workspace is a read-only mount; in the other modes, in the project's
own container. `ModeSandboxes` holds the two; each session gets a `SessionSandbox`, a view that picks the
container by the session's mode at every call. A mode change switches at once (the policy tells the pair; a
call waits for a switch under way), and the switch is a record in the audit chain (`sandbox_switch`: the mode,
the container left and the one entered). A process
started while read-only stays in the read-only container for its whole life, so it never writes after the
switch; the session's own background processes in the writable container end when it enters a read-only mode.
The project's MCP servers run in the twin while the project's mode or any open session's is read-only, and
move when that changes (`on_switch`, awaited within the switch)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..core import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_READ_LIMIT,
    DEFAULT_TIMEOUT_S,
    WORKSPACE,
    BackgroundLogs,
    EventBus,
    ExecResult,
    FileStat,
    GrepMatch,
    OutputCallback,
    PermissionMode,
    ProcessChannel,
    Sandbox,
    SandboxDescription,
    SandboxError,
    SessionNotice,
    ToolCallRecord,
    ToolCallState,
)

log = logging.getLogger(__name__)

# The modes that change nothing: the kernel holds the workspace read-only for every process of the session.
KERNEL_READ_ONLY_MODES = frozenset({PermissionMode.PLAN, PermissionMode.READ_ONLY, PermissionMode.STRICT})
SWITCH_RECORD = "sandbox_switch"  # the audit record of a switch (no tool: the desk writes it)
EROFS = "Read-only file system"
WRITABLE_MODES = "ask, accept-edits or auto"


def read_only_mode(policy: Any, session_id: str | None) -> PermissionMode | None:
    """The mode that holds this session's workspace read-only (the session's own, or a template's it runs
    under), or None when it may write."""
    mode = policy.mode_for(session_id)
    if mode in KERNEL_READ_ONLY_MODES:
        return PermissionMode(mode)
    layer = policy
    while layer is not None:  # a NarrowedPolicy's template (and the templates under it)
        tpl_mode = getattr(getattr(layer, "template", None), "mode", None)
        if tpl_mode in KERNEL_READ_ONLY_MODES:
            return PermissionMode(tpl_mode)
        layer = getattr(layer, "base", None)
    return None


def how_to_write(mode: PermissionMode | str) -> str:
    """How the person allows writes again, for a refusal."""
    how = f"switch this session to a mode that may write ({WRITABLE_MODES})"
    if mode == PermissionMode.PLAN:
        return f"approve the agent's plan (exit_plan_mode), or {how}"
    return how


def refusal(mode: PermissionMode | str, what: str) -> str:
    return (f"{what} was refused: the workspace is read-only in mode {PermissionMode(mode).value} (a read-only "
            f"mount, held by the kernel for every process of this session). To allow it, {how_to_write(mode)}.")


class ModeSandboxes:
    """A project's two containers: its own (`writable`) and, made on first need, its read-only twin. A sandbox
    that has no twin (the local sandbox, a test's) serves every mode: nothing to switch."""

    def __init__(self, writable: Sandbox, *, store: Any, bus: EventBus, project_id: str) -> None:
        self.writable = writable
        self.store, self.bus, self.project_id = store, bus, project_id
        self._twin: Sandbox | None = None
        make = getattr(writable, "read_only_twin", None)
        already = bool(getattr(getattr(writable, "config", None), "workspace_readonly", False))
        self._make_twin = make if callable(make) and not already else None
        self._views: weakref.WeakValueDictionary[str, SessionSandbox] = weakref.WeakValueDictionary()
        self._switching: set[asyncio.Task[None]] = set()
        # Awaited within every switch, before the session's next call: the runtime moves its MCP servers.
        self.on_switch: Callable[[], Awaitable[None]] | None = None

    @property
    def twin(self) -> Sandbox | None:
        """The read-only twin once made."""
        return self._twin

    def for_mode(self, read_only: bool) -> Sandbox:
        """The container for a mode that may write (False) or one that may not (True)."""
        if not read_only or self._make_twin is None:
            return self.writable
        if self._twin is None:
            self._twin = self._make_twin()
        return self._twin

    def any_read_only(self) -> bool:
        """Whether an open session (or sub-agent) is in a mode that holds the workspace read-only."""
        return any(view.read_only_mode() is not None for view in list(self._views.values()))

    def mode_changed(self, session_id: str) -> None:
        """A session's own mode changed (a plan approved, the window's or the CLI's switch): its sandbox
        switches now, in the background, rather than at its next call (a call waits for the switch)."""
        view = self._views.get(session_id)
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop: the next call switches
        if view is not None and view.current() is not view.last:
            task = loop.create_task(view.follow_mode())
            self._switching.add(task)
            task.add_done_callback(self._switching.discard)

    def modes_changed(self) -> None:
        """The project's mode changed: every session without a mode of its own switches now."""
        for session_id in list(self._views):
            self.mode_changed(session_id)

    def view(self, policy: Any, session_id: str = "") -> SessionSandbox:
        """A session's view, judged by `policy` (the session's own: a template's narrowed one included)."""
        view = SessionSandbox(self, policy, session_id)
        if session_id:
            self._views[session_id] = view
        return view

    def view_of(self, session_id: str, policy: Any) -> SessionSandbox:
        """The session's view if it has one (its own policy), else a new one judged by `policy`."""
        found = self._views.get(session_id)
        return found if found is not None else self.view(policy, session_id)

    async def sweep(self) -> dict[str, Any]:
        """Every process but the helpers ends, in both containers; what was running and what outlived it."""
        out: dict[str, Any] = {"killed": [], "alive": []}
        for box in (self.writable, self._twin):
            sweep = getattr(box, "sweep", None)
            if sweep is None:
                continue
            found = await sweep()
            out["killed"] += list(found.get("killed") or [])
            out["alive"] += list(found.get("alive") or [])
        return out

    async def close(self) -> None:
        """The twin closes (the project's own container is closed by its owner)."""
        for task in list(self._switching):
            task.cancel()
        if self._twin is not None:
            await self._twin.close()


class SessionSandbox:
    """One session's sandbox: at every call the container of the session's mode now. Implements the Sandbox
    protocol; what else a caller reads (config, synced, ...) is the current container's."""

    def __init__(self, pair: ModeSandboxes, policy: Any, session_id: str = "") -> None:
        self._pair, self._policy, self.session_id = pair, policy, session_id
        self._last: Sandbox | None = self.current()  # the container of the mode the session opened in
        self._procs: dict[str, Sandbox] = {}  # a background process -> the container it runs in
        self._lock = asyncio.Lock()
        self.last_switch_ms: float | None = None

    def bind(self, session_id: str) -> None:
        """The session's id, once it has one (a new session gets it when opened)."""
        self.session_id = session_id
        self._pair._views[session_id] = self

    def for_session(self, session_id: str, policy: Any) -> SessionSandbox:
        """A sub-agent's own view: its mode (its template's included) picks its container."""
        return self._pair.view(policy, session_id)

    def read_only_mode(self) -> PermissionMode | None:
        return read_only_mode(self._policy, self.session_id or None)

    @property
    def last(self) -> Sandbox | None:
        """The container the session's processes ran in last."""
        return self._last

    async def follow_mode(self) -> None:
        """Switch to the container of the session's mode now (a failure is logged: the next call tries again)."""
        try:
            await self._box()
        except Exception:
            log.exception("switching the sandbox of session %s failed", self.session_id)

    def current(self) -> Sandbox:
        """The container of the session's mode now (no switch is recorded by asking)."""
        return self._pair.for_mode(self.read_only_mode() is not None)

    async def _box(self) -> Sandbox:
        box = self.current()
        if box is not self._last:
            async with self._lock:
                if box is not self._last:
                    await self._switch(box)
        return box

    async def _switch(self, box: Sandbox) -> None:
        """Under the lock: calls wait until the switch is done (the old container's last word is said)."""
        old = self._last
        if old is None:
            self._last = box
            return
        t0 = time.perf_counter()
        mode = self.read_only_mode()
        ended = []
        if mode is not None:  # into read-only: the session's own background writers end now
            for pid, where in list(self._procs.items()):
                if where is old:
                    with contextlib.suppress(Exception):
                        await old.kill(pid)
                    ended.append(pid)
                    del self._procs[pid]
        await box.start()
        if self._pair.on_switch is not None:
            await self._pair.on_switch()
        self.last_switch_ms = (time.perf_counter() - t0) * 1000.0
        await self._record(old, box, mode, ended)
        self._last = box

    async def _record(self, old: Sandbox, box: Sandbox, mode: PermissionMode | None, ended: list[str]) -> None:
        shown = mode.value if mode is not None else PermissionMode(self._policy.mode_for(self.session_id)).value
        workspace = "read-only" if mode is not None else "read-write"
        to, was = box.describe(), old.describe()
        note = (f"mode {shown}: the session's processes now run in container {to.container_id} (workspace "
                f"{workspace}); they ran in {was.container_id or 'a container not started'}")
        record = ToolCallRecord(name=SWITCH_RECORD, input={"mode": shown, "workspace": workspace},
                                session_id=self.session_id, project_id=self._pair.project_id, read_only=True,
                                sandbox=to.to_dict())
        data = {"mode": shown, "workspace": workspace, "container": to.container_id, "left": was.container_id,
                "ended_processes": ended, "switch_ms": round(self.last_switch_ms or 0.0, 1)}
        for state in (ToolCallState.EXECUTING, ToolCallState.COMPLETED):
            await self._pair.store.save_transition(record, record.transition(state, actor="desk", note=note,
                                                                              data=data))
        self._pair.bus.publish(SessionNotice(session_id=self.session_id, text=f"Sandbox switched: {note}."))

    def _refused(self, box: Sandbox, exc: SandboxError, what: str) -> SandboxError:
        mode = self.read_only_mode()
        if box is self._pair.writable or mode is None or not any(m in str(exc) for m in (EROFS, "is read-only")):
            return exc
        return SandboxError(refusal(mode, what), hint=how_to_write(mode))

    # -- the Sandbox protocol
    async def start(self) -> None:
        await (await self._box()).start()

    async def close(self) -> None:
        """A session's view closes nothing: the containers are the project's."""

    def describe(self) -> SandboxDescription:
        return self.current().describe()

    async def exec(self, command: str | list[str], cwd: str = WORKSPACE, env: Mapping[str, str] | None = None,
                   timeout: float = DEFAULT_TIMEOUT_S, on_output: OutputCallback | None = None,  # noqa: ASYNC109
                   output_limit: int = DEFAULT_OUTPUT_LIMIT) -> ExecResult:
        box = await self._box()
        res = await box.exec(command, cwd, env, timeout, on_output, output_limit)
        mode = self.read_only_mode()
        if box is not self._pair.writable and mode is not None and EROFS in (res.stderr or ""):
            res.stderr += f"\n[agent-desk] {refusal(mode, 'a write to /workspace')}\n"
        return res

    async def read_file(self, path: str, *, offset: int = 0, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        return await (await self._box()).read_file(path, offset=offset, limit=limit)

    async def write_file(self, path: str, data: bytes, *, make_dirs: bool = True) -> FileStat:
        box = await self._box()
        try:
            return await box.write_file(path, data, make_dirs=make_dirs)
        except SandboxError as exc:
            raise self._refused(box, exc, f"writing {path}") from None

    async def read_text(self, path: str, *, limit: int = DEFAULT_READ_LIMIT) -> str:
        return await (await self._box()).read_text(path, limit=limit)

    async def write_text(self, path: str, text: str) -> FileStat:
        box = await self._box()
        try:
            return await box.write_text(path, text)
        except SandboxError as exc:
            raise self._refused(box, exc, f"writing {path}") from None

    async def stat(self, path: str) -> FileStat | None:
        return await (await self._box()).stat(path)

    async def real_path(self, path: str) -> str:
        return await (await self._box()).real_path(path)

    async def list_dir(self, path: str = ".") -> list[FileStat]:
        return await (await self._box()).list_dir(path)

    async def glob(self, pattern: str, path: str = ".", *, limit: int = 200,
                   include_ignored: bool = False, newest_first: bool = False) -> list[FileStat]:
        return await (await self._box()).glob(pattern, path, limit=limit, include_ignored=include_ignored,
                                              newest_first=newest_first)

    async def grep(self, pattern: str, path: str = ".", *, glob: str | None = None, ignore_case: bool = False,
                   max_results: int = 200, include_ignored: bool = False) -> list[GrepMatch]:
        return await (await self._box()).grep(pattern, path, glob=glob, ignore_case=ignore_case,
                                              max_results=max_results, include_ignored=include_ignored)

    async def start_background(self, command: str, cwd: str = WORKSPACE,
                               env: Mapping[str, str] | None = None) -> str:
        box = await self._box()
        pid = await box.start_background(command, cwd, env)
        self._procs[pid] = box
        return pid

    def _owner(self, process_id: str) -> Sandbox:
        return self._procs.get(process_id) or self.current()

    async def logs(self, process_id: str) -> BackgroundLogs:
        return await self._owner(process_id).logs(process_id)

    async def kill(self, process_id: str) -> BackgroundLogs:
        return await self._owner(process_id).kill(process_id)

    async def open_process(self, argv: list[str], *, cwd: str = WORKSPACE,
                           env: Mapping[str, str] | None = None) -> ProcessChannel:
        return await (await self._box()).open_process(argv, cwd=cwd, env=env)

    async def sync_workspace(self, direction: str = "both") -> Any:
        box = await self._box()
        sync = getattr(box, "sync_workspace", None)
        return await sync(direction) if sync is not None else None

    def __getattr__(self, name: str) -> Any:  # config, synced, container_id, ...: the current container's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.current(), name)
