"""DockerSandbox's synced workspace (a remote engine, or "workspace": "synced"), a part the sandbox holds:
no bind mount at all, the workspace in volumes on the engine (see _volumes.py), filled at start and kept
equal to the host folder by the sandbox's `sync_workspace()`, which the executor calls before each call and
after each call that may write (see core/_workspace_sync.py)."""

from __future__ import annotations

import asyncio
import logging
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import Any, Protocol

from ...core import SandboxError, SyncReport
from .._config import SandboxConfig, syncs_workspace
from .._control_mounts import check_control_dirs, control_mounts
from ._volumes import SyncedVolumes
from ._workspace_sync import WorkspaceSync

log = logging.getLogger(__name__)
SYNC_TIMEOUT_S = 300.0


class HelperLink(Protocol):
    """What the sync container's helper is reached through (the sandbox's HelperChannel)."""

    @property
    def dead(self) -> bool: ...

    def open(self) -> bool: ...

    async def request(self, op: str, args: dict[str, Any], on_event: Any, timeout: float) -> Any: ...  # noqa: ASYNC109

    def close(self) -> None: ...


class SyncedWorkspace:
    """One DockerSandbox's synced workspace; inert (the sandbox bind-mounts) unless `synced`. `open_link`
    makes the (unopened) link to a container's helper: the sandbox knows how, the sync only uses it."""

    def __init__(self, config: SandboxConfig, folder: str, project_id: str, pool: ThreadPoolExecutor,
                 open_link: Callable[[str], HelperLink]) -> None:
        self.config, self.folder, self.project_id = config, folder, project_id
        self._pool = pool
        self._open_link = open_link
        self.synced = False
        self._volumes: SyncedVolumes | None = None
        self._sync_box: Any = None  # the sync container
        self._sync_channel: HelperLink | None = None
        self._workspace_sync: WorkspaceSync | None = None
        self._sync_want: tuple[str, str] = ("", "")  # (image, config hash) of the sync container

    def prepare(self, client: Any, engine: str, image: str, uid: int, gid: int) -> dict[str, Any]:
        """Judge the mode (the one place: _config.syncs_workspace) for the engine at `engine`; when synced,
        make the volumes and the sync container. What the container hash must include."""
        self.synced = syncs_workspace(self.config, engine)
        if not self.synced:
            return {}
        control_mounts(self.folder)  # refuses linked control folders; makes .agent-desk before the agent can
        _, git = check_control_dirs(self.folder)
        controls = [".agent-desk"] + ([".git"] if git is not None and stat.S_ISDIR(git.st_mode) else [])
        self._volumes = SyncedVolumes(client, self.project_id, controls, uid, gid)
        self._volumes.ensure(image)
        extra = {"synced": sorted(self._volumes.names().items()), "uid": uid, "gid": gid, "image_id": image}
        # the read-only twin shares the project's sync container: its own workspace setting is not the sync's
        self._sync_want = (image, replace(self.config, workspace_readonly=False).container_hash(**extra))
        self._sync_box = self._volumes.sync_container(*self._sync_want)
        return {"synced": extra["synced"]}

    def mounts(self, bind: list[Any]) -> list[Any]:
        """The sandbox's mounts: the volumes when synced, else the bind mounts given."""
        if not self.synced or self._volumes is None:
            return bind
        return self._volumes.mounts(sandbox=True, workspace_readonly=self.config.workspace_readonly)

    async def start(self) -> None:
        """The sync container's helper, and the first sync (the volume made equal to the host folder)."""
        if not self.synced or (self._sync_channel is not None and not self._sync_channel.dead):
            return
        loop = asyncio.get_running_loop()
        if self._sync_channel is not None:  # its helper died: the container may be gone too (made again)
            assert self._volumes is not None
            self._sync_box = await loop.run_in_executor(self._pool, self._volumes.sync_container, *self._sync_want)
        channel = self._open_link(self._sync_box.id)
        if not await loop.run_in_executor(self._pool, channel.open):
            raise SandboxError(f"a synced workspace needs python3 in the image {self.config.image}",
                               hint="use an image with python3 (every image of `agent-desk images list` has it)")
        self._sync_channel = channel

        async def request(op: str, args: dict[str, Any]) -> Any:
            return await channel.request(op, args, None, SYNC_TIMEOUT_S)

        async def offload(fn: Any, *args: Any, **kw: Any) -> Any:
            return await loop.run_in_executor(self._pool, lambda: fn(*args, **kw))

        fresh = self._workspace_sync is None
        if fresh:
            self._workspace_sync = WorkspaceSync(self.folder, request, offload)
        else:
            self._workspace_sync._request = request  # a restarted helper: the bases are still right
        if fresh:
            report = await self._workspace_sync.start()
            log.info("synced workspace of %s filled: %d item(s) in %.0f ms", self.project_id,
                     len(report.to_sandbox), report.duration_ms)

    async def sync(self) -> SyncReport:
        """Bring the host folder and the volume level (both ways, by digest); the sandbox has started."""
        await self.start()
        assert self._workspace_sync is not None
        return await self._workspace_sync.sync()

    async def close(self, keep_running: bool) -> None:
        if not self.synced:
            return
        if self._workspace_sync is not None and self._sync_channel is not None and not self._sync_channel.dead:
            try:
                await self._workspace_sync.sync()  # what background processes wrote since the last call
            except Exception as exc:
                log.warning("the last sync of %s failed: %s", self.folder, exc)
        channel, self._sync_channel = self._sync_channel, None
        if channel is not None:
            channel.close()
        if not keep_running and self._volumes is not None:
            await asyncio.get_running_loop().run_in_executor(self._pool, self._volumes.stop_sync)

    def description(self, engine: str) -> dict[str, str]:
        """The engine's address, and "synced" when the workspace is (judged before the start too)."""
        synced = self.synced or syncs_workspace(self.config, engine)
        return {"engine_address": engine, "workspace_sync": "synced" if synced else ""}
