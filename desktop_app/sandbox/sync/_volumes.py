"""A synced workspace's place on the engine: the named volumes (the workspace, and the control folders in
volumes of their own, mounted read-only over it in the sandbox) and the sync container, the only one that
mounts them all read-write, whose helper the desk asks to list and change the volumes. Blocking: the
sandbox calls these on its own thread pool."""

from __future__ import annotations

import contextlib
import hashlib
import logging
from typing import Any

from ...core import WORKSPACE, SandboxError
from .._client import short_reason

log = logging.getLogger(__name__)

LABEL_VOLUME_OF = "org.agent-desk.workspace-of"  # on the volumes: the project id
LABEL_SYNC_OF = "org.agent-desk.sync-of"  # on the sync container: the project id
LABEL_SYNC_HASH = "org.agent-desk.sync-hash"
CONTROL_PARTS = {".agent-desk": "desk", ".git": "git"}


def volume_name(project_id: str, part: str = "") -> str:
    """`agent-desk-ws-<project hash>` (the workspace), `…-desk` and `…-git` (the control folders)."""
    base = f"agent-desk-ws-{hashlib.sha256(project_id.encode()).hexdigest()[:16]}"
    return f"{base}-{part}" if part else base


def sync_container_name(project_id: str) -> str:
    return volume_name(project_id).replace("-ws-", "-sync-")


class SyncedVolumes:
    """The volumes of one project on one engine, and the mounts that put them together at /workspace."""

    def __init__(self, client: Any, project_id: str, controls: list[str], uid: int, gid: int) -> None:
        self.client = client
        self.project_id = project_id
        self.controls = controls  # which of .agent-desk and .git the host folder has as folders
        self.uid, self.gid = uid, gid

    def names(self) -> dict[str, str]:
        """{container path: volume name}, the workspace first."""
        out = {WORKSPACE: volume_name(self.project_id)}
        for name in self.controls:
            out[f"{WORKSPACE}/{name}"] = volume_name(self.project_id, CONTROL_PARTS[name])
        return out

    def mounts(self, *, sandbox: bool, workspace_readonly: bool = False) -> list[Any]:
        """The sandbox's mounts (control folders read-only), or the sync container's (all read-write)."""
        from docker.types import Mount

        out = []
        for target, name in self.names().items():
            ro = sandbox and (target != WORKSPACE or workspace_readonly)
            out.append(Mount(target, name, type="volume", read_only=ro, no_copy=True))  # keep the chown
        return out

    def ensure(self, image: str) -> bool:
        """Create the volumes that are missing; True when any was (its folder then belongs to the sandbox's
        user: a new volume's root is root's, and the sync container runs as that user, without privileges)."""
        import docker.errors

        made = False
        for name in self.names().values():
            try:
                self.client.volumes.get(name)
            except docker.errors.NotFound:
                self.client.volumes.create(name, labels={LABEL_VOLUME_OF: self.project_id})
                made = True
        if made:
            self._chown(image)
        return made

    def _chown(self, image: str) -> None:
        """One short container with only CHOWN, as root, giving the volumes' roots to the sandbox's user."""
        from docker.types import Mount

        paths = [f"/v/{i}" for i in range(len(self.names()))]
        mounts = [Mount(p, n, type="volume") for p, n in zip(paths, self.names().values(), strict=True)]
        try:
            self.client.containers.run(
                image, ["chown", f"{self.uid}:{self.gid}", *paths], user="0:0", mounts=mounts, remove=True,
                network_mode="none", cap_drop=["ALL"], cap_add=["CHOWN"], security_opt=["no-new-privileges"],
                read_only=True, labels={LABEL_VOLUME_OF: self.project_id},
            )
        except Exception as exc:
            raise SandboxError(f"could not prepare the workspace volume: {short_reason(exc)}") from None

    def sync_container(self, image: str, want: str) -> Any:
        """The running sync container for these volumes (made again when `want`, its config hash, changed)."""
        import docker.errors

        name = sync_container_name(self.project_id)
        found = self.client.containers.list(all=True, ignore_removed=True,
                                            filters={"label": f"{LABEL_SYNC_OF}={self.project_id}"})
        keep = None
        for c in found:
            if keep is None and (c.labels or {}).get(LABEL_SYNC_HASH) == want:
                keep = c
            else:
                with contextlib.suppress(docker.errors.NotFound):
                    c.remove(force=True)
        if keep is None:
            keep = self._create_sync(image, name, want)
        if keep.status != "running":
            keep.start()
            keep.reload()
        return keep

    def _create_sync(self, image: str, name: str, want: str) -> Any:
        ids = f"uid={self.uid},gid={self.gid}"
        return self.client.containers.create(
            image, command=["sleep", "infinity"], name=name, hostname="sync",
            labels={LABEL_SYNC_OF: self.project_id, LABEL_SYNC_HASH: want},
            user=f"{self.uid}:{self.gid}", working_dir="/", environment={"HOME": "/tmp", "LANG": "C.UTF-8"},
            mounts=self.mounts(sandbox=False), tmpfs={"/tmp": f"rw,nosuid,nodev,exec,size=64m,mode=1777,{ids}"},
            read_only=True, network_mode="none", cap_drop=["ALL"], security_opt=["no-new-privileges"],
            pids_limit=64, mem_limit=512 * 1024**2, init=True, ipc_mode="private", detach=True,
        )

    def stop_sync(self) -> None:
        with contextlib.suppress(Exception):
            self.client.containers.get(sync_container_name(self.project_id)).stop(timeout=1)


def remove_project_volumes(client: Any, project_id: str) -> None:
    """The sync container and the volumes of a project whose sandbox was removed as an orphan."""
    with contextlib.suppress(Exception):
        for c in client.containers.list(all=True, ignore_removed=True,
                                        filters={"label": f"{LABEL_SYNC_OF}={project_id}"}):
            c.remove(force=True)
    with contextlib.suppress(Exception):
        for v in client.volumes.list(filters={"label": f"{LABEL_VOLUME_OF}={project_id}"}):
            v.remove(force=True)
