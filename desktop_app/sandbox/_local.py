"""LocalSandbox: runs commands and file operations on the host, in the project folder. Unsafe by
design (no isolation); for development and machines without Docker, and only when a project opts in."""

# ruff: noqa: ASYNC109  (a command's `timeout` is the sandbox's own deadline, passed down to it)

from __future__ import annotations

import asyncio
import contextlib
import os
import re
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..core import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    WORKSPACE,
    ExecResult,
    FileStat,
    OutputCallback,
    SandboxDescription,
    SandboxError,
    control_dir,
    control_reason,
)
from ._control_mounts import check_control_dirs
from ._helper_ops import ErrorCode, HelperOps, clamp_timeout, exec_result, file_stat, sandbox_error
from ._process_channel import SubprocessChannel
from .helper.errors import HelperError
from .helper.processes import CommandRun, Processes
from .helper.proctree import Tracker
from .helper.search import Search
from .helper.server import call_op
from .helper.workspace import Workspace, fs_write

# Names whose values never reach a command on the host: API keys and the like.
SECRET_ENV_MARKERS = ("KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH")


def _re2_compile(pattern: str) -> Any:
    """RE2 (linear time, so no pattern can hold a thread) for the walker's regexes and the globs; the
    glob translation's `\\Z` is RE2's `\\z`."""
    import re2

    if pattern.endswith(")\\Z"):
        pattern = pattern[:-2] + "\\z"
    options = re2.Options()
    options.log_errors = False
    return _Re2(re2.compile(pattern, options))


_SURROGATE = re.compile("[\ud800-\udfff]")


class _Re2:
    """An RE2 pattern that also takes the file system's undecodable bytes (a name's lone surrogates, which RE2
    refuses to encode): each is matched as one U+FFFD, so `?` and `*` cover it as they cover any character."""

    def __init__(self, rx: Any) -> None:
        self._rx = rx

    def match(self, text: str) -> Any:
        try:
            return self._rx.match(text)
        except UnicodeEncodeError:
            return self._rx.match(_SURROGATE.sub("\ufffd", text))

    def search(self, text: str) -> Any:
        try:
            return self._rx.search(text)
        except UnicodeEncodeError:
            return self._rx.search(_SURROGATE.sub("\ufffd", text))


def _host_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not any(m in k.upper() for m in SECRET_ENV_MARKERS)}


@contextlib.contextmanager
def _helper_errors() -> Iterator[None]:
    """The helper's errors, raised in-process, as the host's."""
    try:
        yield
    except HelperError as exc:
        raise sandbox_error(ErrorCode.of(exc.kind), str(exc)) from None


class LocalSandbox(HelperOps):
    """The Sandbox protocol on the host, reusing the in-container helper's code so semantics match."""

    def __init__(self, folder: str | os.PathLike[str], *, max_workers: int = 8) -> None:
        path = Path(folder)
        if not path.is_dir():
            raise SandboxError(f"the project folder {path} does not exist or is not a folder")
        check_control_dirs(os.path.realpath(path))
        self._ws = Workspace(str(path), WORKSPACE)
        self._ws.searcher = Search(regex=_re2_compile)  # rg on the host when there is one
        # No subreaper on the desk's own process: runs are tracked by their session/group, their cookie
        # and their parentage (see helper/proctree.py); only those are ever killed on the host.
        self._procs = Processes(base_env=_host_env(), tracker=Tracker(container=False))
        self.last_sweep: dict[str, Any] = {"killed": [], "alive": []}
        self._pool = ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="agent-desk-local")
        self._closed = False

    @property
    def root(self) -> str:
        return self._ws.root

    async def start(self) -> None:
        return None

    async def sweep(self) -> dict[str, Any]:
        """Kill every process this sandbox's commands started (see helper/proctree.py for what is found on
        the host); return {"killed": [...], "alive": [...]}, each {pid, command, started_by}."""
        if self._closed:
            return {"killed": [], "alive": []}
        self.last_sweep = await asyncio.get_running_loop().run_in_executor(self._pool, self._procs.sweep)
        return self.last_sweep

    async def close(self) -> None:
        if self._closed:
            return
        await self.sweep()
        self._closed = True
        self._pool.shutdown(wait=False, cancel_futures=True)

    def describe(self) -> SandboxDescription:
        return SandboxDescription(
            kind="local",
            unsandboxed=True,
            network="host",
            limits={},
            relaxations=["unsandboxed: commands run on the host as the app's user, with its network"],
            workspace=self._ws.root,
            host_path=self._ws.root,
        )

    async def open_process(
        self, argv: list[str], *, cwd: str = WORKSPACE, env: Mapping[str, str] | None = None
    ) -> SubprocessChannel:
        """On the host, unsandboxed, in the workspace folder, with the host's environment minus secrets."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        with _helper_errors():
            host_cwd = self._ws.resolve(cwd)  # refuses a cwd outside the workspace
        return await SubprocessChannel.spawn(list(argv), cwd=host_cwd, env={**_host_env(), **(env or {})})

    async def _op(self, op: str, args: dict[str, Any]) -> Any:
        if self._closed:
            raise SandboxError("the sandbox is closed")
        loop = asyncio.get_running_loop()
        with _helper_errors():
            return await loop.run_in_executor(self._pool, call_op, self._ws, self._procs, op, args)

    async def exec(
        self,
        command: str | list[str],
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        on_output: OutputCallback | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult:
        if self._closed:
            raise SandboxError("the sandbox is closed")
        timeout = clamp_timeout(timeout, MAX_TIMEOUT_S)
        loop = asyncio.get_running_loop()
        on_chunk = None
        if on_output is not None:

            def on_chunk(stream: str, text: str) -> None:
                loop.call_soon_threadsafe(on_output, stream, text)

        with _helper_errors():
            real_cwd = self._ws.resolve(cwd)
        run = CommandRun(
            command, real_cwd, env, timeout, output_limit, on_chunk, base_env=_host_env(), tracker=self._procs.tracker
        )
        fut = loop.run_in_executor(self._pool, run.run)
        try:
            with _helper_errors():
                result = await asyncio.shield(fut)
        except asyncio.CancelledError:
            run.cancel()
            raise
        return exec_result(result)

    async def write_file(self, path: str, data: bytes, *, make_dirs: bool = True) -> FileStat:
        loop = asyncio.get_running_loop()
        if self._closed:
            raise SandboxError("the sandbox is closed")
        with _helper_errors():
            d = await loop.run_in_executor(self._pool, self._write, path, bytes(data), make_dirs)
        return file_stat(d)

    def _write(self, path: str, data: bytes, make_dirs: bool) -> Any:
        """No mount protects the control folders here: a write that resolves into one is refused."""
        for spelled in (path, self._ws.real_path(path)):
            control = control_dir(spelled)
            if control is not None:
                raise SandboxError(control_reason(spelled, control))
        return fs_write(self._ws, path, data, make_dirs)
