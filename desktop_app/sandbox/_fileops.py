"""The file and process operations both sandboxes share: each is one request to the helper's code,
which runs inside the container for DockerSandbox and in-process for LocalSandbox."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from ..core import DEFAULT_READ_LIMIT, WORKSPACE, BackgroundLogs, FileStat, GrepMatch
from ._convert import background_logs, file_stat, grep_match


class HelperOps:
    """Mixin: the Sandbox protocol's file and background-process methods over `_op(name, args)`."""

    async def _op(self, op: str, args: dict[str, Any]) -> Any:
        raise NotImplementedError

    async def read_file(self, path: str, *, offset: int = 0, limit: int = DEFAULT_READ_LIMIT) -> bytes:
        res = await self._op("read", {"path": path, "offset": offset, "limit": limit})
        return base64.b64decode(res["data"])

    async def write_file(self, path: str, data: bytes, *, make_dirs: bool = True) -> FileStat:
        args = {"path": path, "data": base64.b64encode(bytes(data)).decode("ascii"), "make_dirs": make_dirs}
        return file_stat(await self._op("write", args))

    async def read_text(self, path: str, *, limit: int = DEFAULT_READ_LIMIT) -> str:
        return await self._op("read_text", {"path": path, "limit": limit})

    async def write_text(self, path: str, text: str) -> FileStat:
        return file_stat(await self._op("write", {"path": path, "text": text}))

    async def stat(self, path: str) -> FileStat | None:
        d = await self._op("stat", {"path": path})
        return None if d is None else file_stat(d)

    async def list_dir(self, path: str = ".") -> list[FileStat]:
        return [file_stat(d) for d in await self._op("list", {"path": path})]

    async def glob(self, pattern: str, path: str = ".", *, limit: int = 200) -> list[FileStat]:
        return [file_stat(d) for d in await self._op("glob", {"pattern": pattern, "path": path, "limit": limit})]

    async def grep(
        self,
        pattern: str,
        path: str = ".",
        *,
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int = 200,
    ) -> list[GrepMatch]:
        args = {"pattern": pattern, "path": path, "glob": glob, "ignore_case": ignore_case, "max_results": max_results}
        return [grep_match(d) for d in await self._op("grep", args)]

    async def start_background(self, command: str, cwd: str = WORKSPACE, env: Mapping[str, str] | None = None) -> str:
        return await self._op("bg_start", {"command": command, "cwd": cwd, "env": dict(env or {})})

    async def logs(self, process_id: str) -> BackgroundLogs:
        return background_logs(await self._op("bg_logs", {"process_id": process_id}))

    async def kill(self, process_id: str) -> BackgroundLogs:
        return background_logs(await self._op("bg_kill", {"process_id": process_id}))
