"""Sandbox helpers shared by several test files: a LocalSandbox that keeps what its processes were sent, many
concurrent writes, and the argument-too-long error every sandbox names."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import pytest

from desktop_app.core import SandboxError
from desktop_app.sandbox import LocalSandbox

WRITES = 3000


class SpyChannel:
    """A ProcessChannel that keeps what was written to the server's stdin."""

    def __init__(self, inner: Any, written: list[bytes]) -> None:
        self.inner, self.written = inner, written

    async def read(self) -> bytes:
        return await self.inner.read()

    async def write(self, data: bytes) -> None:
        self.written.append(data)
        await self.inner.write(data)

    def stderr_tail(self) -> str:
        return self.inner.stderr_tail()

    @property
    def returncode(self) -> int | None:
        return self.inner.returncode

    async def close(self) -> None:
        await self.inner.close()


class SpySandbox(LocalSandbox):
    """A LocalSandbox whose processes' stdin is kept in `written` (reset it in each test)."""

    written: ClassVar[list[bytes]] = []

    async def open_process(self, argv, *, cwd="/workspace", env=None):
        return SpyChannel(await super().open_process(argv, cwd=cwd, env=env), self.written)


async def write_many(sb: Any, prefix: str, writes: int = WRITES, at_once: int = 100) -> tuple[int, list[str]]:
    """`writes` fs_writes under `prefix`, `at_once` at a time; how many landed, and the refusals."""
    ok, errors = 0, []

    async def one(i: int) -> None:
        nonlocal ok
        try:
            await sb.write_file(f"{prefix}/f{i}.txt", b"payload")
            ok += 1
        except SandboxError as exc:
            errors.append(str(exc))

    for start in range(0, writes, at_once):
        await asyncio.gather(*(one(i) for i in range(start, min(writes, start + at_once))))
    return ok, errors


async def argument_too_long(sb: Any) -> None:
    """An argument over 128 KB is refused with "argument too long" (not a pids error), and the sandbox goes on."""
    for command in (["echo", "x" * 200_000], "echo " + "x" * 200_000):
        with pytest.raises(SandboxError) as err:
            await sb.exec(command, timeout=10)
        assert "argument too long" in str(err.value) and "pids" not in str(err.value)
    with pytest.raises(SandboxError, match="argument too long"):
        await sb.start_background("echo " + "y" * 200_000)
    assert (await sb.exec("echo fine", timeout=10)).stdout == "fine\n"
