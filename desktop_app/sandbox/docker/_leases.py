"""Which desk process uses a sandbox container: each holds a shared lock on the container's lease file while
it uses the container (the kernel lets go when the process dies, a crash included). A running container
whose lease nobody holds was left by a crash and is removed at the next start; one another live desk process
holds is never removed. The sweep holds the lease exclusively while it removes, so a desk starting meanwhile
waits and then makes a fresh container."""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

LABEL_LEASES = "org.agent-desk.leases"  # the folder of the leases its users hold (a desk's data folder's)
LABEL_KEEP = "org.agent-desk.keep-running"  # left running on purpose at close: not a crash's orphan


def _path(directory: str, name: str) -> Path:
    return Path(directory) / f"{name}.lock"


class ContainerLease:
    """This process's hold on the container `name` (a shared lock: several sandboxes may share it)."""

    def __init__(self, directory: str, name: str) -> None:
        self.path = _path(directory, name)
        self._fd: int | None = None

    def acquire(self) -> None:
        if self._fd is not None:
            return
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)  # waits while a sweep removes the container
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None


@contextlib.contextmanager
def unused(directory: str, name: str) -> Iterator[bool]:
    """True (and held exclusively until the block ends) when no process holds the container's lease; False
    while one does. A container without a lease file was never leased: False, it is not judged here."""
    try:
        fd = os.open(_path(directory, name), os.O_RDWR | os.O_CLOEXEC | os.O_NOFOLLOW)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def remove_crashed(client: docker.DockerClient, directory: str) -> list[str]:
    """Remove the running containers leased from `directory` that no live process holds (their desk crashed
    or was killed); a container another desk process uses, or one kept running on purpose, stays."""
    import docker.errors

    removed = []
    found = client.containers.list(ignore_removed=True, filters={"label": f"{LABEL_LEASES}={directory}"})
    for c in found:
        if (c.labels or {}).get(LABEL_KEEP) == "1":
            continue
        with unused(directory, c.name) as free:
            if not free:
                continue
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if exc.status_code != 409:
                    raise
                continue  # being removed already
            removed.append(c.name)
            log.info("removed sandbox container %s: the desk that used it is gone (a crash)", c.name)
    return removed
