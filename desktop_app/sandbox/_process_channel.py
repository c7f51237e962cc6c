"""A long-lived process with its stdio attached, on the host: LocalSandbox's `open_process`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping

from ..core import SandboxError

STDERR_TAIL_BYTES = 8192
_READ_CHUNK = 65536


class SubprocessChannel:
    """`ProcessChannel` over an asyncio subprocess in a session of its own (so `close` ends its tree)."""

    def __init__(self, proc: asyncio.subprocess.Process, argv: list[str]) -> None:
        self._proc = proc
        self._argv = argv
        self._stderr = bytearray()
        self._stderr_task = asyncio.ensure_future(self._drain_stderr())

    @classmethod
    async def spawn(cls, argv: list[str], *, cwd: str, env: Mapping[str, str]) -> SubprocessChannel:
        if not argv:
            raise SandboxError("no command to start")
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, cwd=cwd, env=dict(env), start_new_session=True,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )
        except OSError as exc:
            raise SandboxError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        return cls(proc, argv)

    async def _drain_stderr(self) -> None:
        assert self._proc.stderr is not None
        while chunk := await self._proc.stderr.read(_READ_CHUNK):
            self._stderr += chunk
            del self._stderr[:-STDERR_TAIL_BYTES]

    async def read(self) -> bytes:
        assert self._proc.stdout is not None
        return await self._proc.stdout.read(_READ_CHUNK)

    async def write(self, data: bytes) -> None:
        assert self._proc.stdin is not None
        if self._proc.returncode is not None:
            raise SandboxError(f"{self._argv[0]!r} has ended (exit {self._proc.returncode})")
        try:
            self._proc.stdin.write(data)
            await self._proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise SandboxError(f"{self._argv[0]!r} has closed its input") from None

    def stderr_tail(self) -> str:
        return self._stderr.decode("utf-8", "replace")

    @property
    def returncode(self) -> int | None:
        return self._proc.returncode

    async def close(self) -> None:
        if self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self._proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(self._proc.wait(), 2.0)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGKILL)
                await self._proc.wait()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._stderr_task
