"""A synced workspace: the project folder copied to and from a volume on the engine by digest. The host
side lists the folder, the sync container's helper lists the volume, `_plan` decides, and each write
is done only where the other side still holds what the desk last saw. The host is written through core's
link-refusing functions; nothing is ever brought back into .agent-desk or .git."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import os
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ...core import (
    CONFLICT_SUFFIX,
    WORKSPACE,
    AgentDeskError,
    SyncReport,
    control_dir,
    make_dirs_beneath,
    read_beneath,
    remove_beneath,
    symlink_beneath,
    write_beneath,
)
from ._plan import (
    Entry,
    Manifest,
    deepest_first,
    host_entry_now,
    host_manifest,
    link_refusal,
    plan,
    pull_refusal,
    same,
)

Request = Callable[[str, dict[str, Any]], Awaitable[Any]]
Offload = Callable[..., Awaitable[Any]]
BATCH_BYTES = 4 << 20  # per request to the helper, before base64
MAX_FILE = 1 << 30


class WorkspaceSync:
    """The host folder and the engine's volume, kept equal by `sync()`; one sync at a time."""

    def __init__(self, folder: str, request: Request, offload: Offload) -> None:
        self.folder = folder
        self._request = request  # the sync container's helper
        self._offload = offload  # a blocking function on the sandbox's thread pool
        self._base_host: Manifest = {}
        self._base_vol: Manifest = {}
        self._cache: dict = {}
        self._unflushed: list[str] = []
        self._lock = asyncio.Lock()
        self.last: SyncReport | None = None

    async def start(self) -> SyncReport:
        """Make the volume equal to the host folder, sending only what differs: what the volume holds is
        taken as the last sync on both sides, so every difference counts as the host's change."""
        async with self._lock:
            vol = await self._request("sync_manifest", {})
            self._base_host, self._base_vol = dict(vol), dict(vol)
            return await self._sync(vol)

    async def sync(self) -> SyncReport:
        async with self._lock:
            return await self._sync(await self._request("sync_manifest", {}))

    async def _sync(self, vol: Manifest) -> SyncReport:
        began = time.perf_counter()
        host = await self._offload(host_manifest, self.folder, self._cache)
        todo = plan(host, vol, self._base_host, self._base_vol)
        report = SyncReport()
        for path in todo.equal:
            self._settle(path, host.get(path), vol.get(path))
        await self._pull(todo.pull, host, vol, report)
        await self._conflicts(todo.conflicts, host, vol, report)
        await self._push(todo.push, host, vol, report)
        if self._unflushed:
            await self._offload(self._flush)
        report.duration_ms = (time.perf_counter() - began) * 1000
        self.last = report
        return report

    def _settle(self, path: str, h: Entry | None, v: Entry | None) -> None:
        for base, e in ((self._base_host, h), (self._base_vol, v)):
            if e is None:
                base.pop(path, None)
            else:
                base[path] = e

    # -- to the host
    async def _pull(self, paths: list[str], host: Manifest, vol: Manifest, report: SyncReport) -> None:
        restore = []
        files = [p for p in paths if vol.get(p) and vol[p][0] == "f" and not pull_refusal(p, vol[p])]
        data = await self._read(files, vol)
        removals = [p for p in paths if vol.get(p) is None]
        for path in [p for p in paths if p not in removals] + deepest_first(removals):
            why = pull_refusal(path, vol.get(path))
            if why and control_dir(f"{WORKSPACE}/{path}"):
                report.refused.append(f"{path}: {why}; the host's version was put back")
                restore.append(path)
            elif why:  # a link out, a FIFO: reported once, left in the volume, never made on the host
                report.refused.append(f"{path}: {why}")
                self._base_vol[path] = vol[path]
            else:
                await self._pull_one(path, host.get(path), vol.get(path), data, report)
        await self._push(restore, host, vol, report)

    async def _pull_one(self, path: str, h: Entry | None, v: Entry | None, data: dict[str, bytes],
                        report: SyncReport) -> None:
        if v is not None and v[0] == "f" and path not in data:
            return  # it changed again while being read: the next sync takes it
        try:
            done = await self._offload(self._write_host, path, h, v, data.get(path))
        except AgentDeskError as e:
            report.refused.append(f"{path}: the host refused it ({e})")
            return
        if done is False:
            return  # the person changed it in the meantime: the next sync judges it as a conflict
        report.to_host.append(path)
        self._settle(path, done, v)

    def _write_host(self, path: str, h: Entry | None, v: Entry | None, body: bytes | None) -> Entry | bool | None:
        """Make the host's `path` what the volume holds; False when the host changed since it was listed."""
        if not same(host_entry_now(self.folder, path), h):
            return False
        if v is None:
            if h is not None:
                remove_beneath(self.folder, path)
        elif v[0] == "d":
            make_dirs_beneath(self.folder, path)
        elif v[0] == "l":
            symlink_beneath(self.folder, path, link_refusal(path, v[3])[0])
        else:  # made durable with the others in `_flush` (one fsync per file, in parallel, at the end)
            write_beneath(self.folder, path, body or b"", mode=v[1] & 0o777, durable=False)
            self._unflushed.append(path)
        return host_entry_now(self.folder, path)

    def _flush(self) -> None:
        """fsync what this sync wrote on the host, and their folders: a crash after a sync loses nothing."""
        paths, self._unflushed = self._unflushed, []
        targets = sorted(set(paths) | {os.path.dirname(p) for p in paths})
        with ThreadPoolExecutor(max_workers=8) as pool:
            list(pool.map(self._fsync, targets))

    def _fsync(self, rel: str) -> None:
        try:
            fd = os.open(os.path.join(self.folder, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except OSError:
            return  # gone or a link: nothing of ours to flush
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    async def _read(self, paths: list[str], vol: Manifest) -> dict[str, bytes]:
        """The volume's bytes of `paths` whose digest still matches the manifest (the others changed again)."""
        out: dict[str, bytes] = {}
        for batch in _batches(paths, vol):
            items = [{"path": p, "offset": 0, "limit": MAX_FILE} for p in batch]
            for got in await self._request("sync_read", {"items": items}):
                if got.get("gone"):
                    continue
                body = base64.b64decode(got["data"])
                if hashlib.sha256(body).hexdigest() == vol[got["path"]][3]:
                    out[got["path"]] = body
        return out

    # -- both changed
    async def _conflicts(self, paths: list[str], host: Manifest, vol: Manifest, report: SyncReport) -> None:
        """The host's copy stays and goes into the volume; the sandbox's file is kept beside it on the host."""
        data = await self._read([p for p in paths if vol.get(p) and vol[p][0] == "f"], vol)
        for path in paths:
            report.conflicts.append(path)
            if not pull_refusal(path, vol.get(path)):
                await self._keep_beside(path, vol.get(path), data.get(path), report)
        await self._push(paths, host, vol, report)

    async def _keep_beside(self, path: str, v: Entry | None, body: bytes | None, report: SyncReport) -> None:
        if v is None or v[0] != "f" or body is None:
            return
        try:
            await self._offload(self._write_beside, path, body, v[1] & 0o777)
        except AgentDeskError as e:
            report.refused.append(f"{path}{CONFLICT_SUFFIX}: the host refused it ({e})")

    def _write_beside(self, path: str, body: bytes, mode: int) -> None:
        """`path.sandbox-conflict`, or `…-2`, `…-3`: an earlier conflict's copy is the person's now, kept too."""
        name, n = path + CONFLICT_SUFFIX, 1
        while host_entry_now(self.folder, name) is not None:
            n += 1
            name = f"{path}{CONFLICT_SUFFIX}-{n}"
        write_beneath(self.folder, name, body, mode=mode)

    # -- to the volume
    async def _push(self, paths: list[str], host: Manifest, vol: Manifest, report: SyncReport) -> None:
        if not paths:
            return
        removals = [p for p in paths if host.get(p) is None]
        ordered = [p for p in paths if p not in removals] + deepest_first(removals)
        items = await self._offload(self._push_items, ordered, host, vol)
        for batch in _item_batches(items):
            result = await self._request("sync_apply", {"items": batch})
            for it in batch:
                path, status = it["path"], result.get(it["path"])
                if status == "ok":
                    report.to_sandbox.append(path)
                    self._settle(path, host.get(path), host.get(path))
                elif status != "changed":  # changed: the sandbox moved it meanwhile; the next sync judges
                    report.refused.append(f"{path}: the sandbox's volume refused it ({status})")

    def _push_items(self, paths: list[str], host: Manifest, vol: Manifest) -> list[dict[str, Any]]:
        items = []
        for path in paths:
            h, it = host.get(path), {"path": path, "expect": vol.get(path)}
            if h is None:
                it["op"] = "delete"
            elif h[0] == "d":
                it.update(op="mkdir", mode=h[1])
            elif h[0] == "l":
                it.update(op="link", target=h[3])
            elif h[0] == "f":
                body = read_beneath(self.folder, path, limit=MAX_FILE)
                if body is None or hashlib.sha256(body).hexdigest() != h[3]:
                    continue  # the person is changing it right now: the next sync sends it
                it.update(op="put", mode=h[1], data=base64.b64encode(body).decode("ascii"))
            else:
                continue  # a FIFO, socket or device stays on the host
            items.append(it)
        return items


def _batches(paths: list[str], vol: Manifest) -> list[list[str]]:
    """`paths` in groups of about BATCH_BYTES (a larger file alone)."""
    out: list[list[str]] = []
    size = 0
    for p in paths:
        if not out or (out[-1] and size + vol[p][2] > BATCH_BYTES):
            out.append([])
            size = 0
        out[-1].append(p)
        size += vol[p][2]
    return out


def _item_batches(items: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    out: list[list[dict[str, Any]]] = [[]]
    size = 0
    for it in items:
        n = len(it.get("data", "")) * 3 // 4
        if out[-1] and size + n > BATCH_BYTES:
            out.append([])
            size = 0
        out[-1].append(it)
        size += n
    return [b for b in out if b]
