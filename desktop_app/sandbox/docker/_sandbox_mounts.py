"""DockerSandbox's two ways through a bind-mounted folder of this machine: the allowlist mode's proxy (its folder
mounted into the container, and the relay from the container's 127.0.0.1:3128 to it, see _egress.py) and the
helper's door (a unix socket straight to the helper, see _helper_door.py)."""

# ruff: noqa: ASYNC109  (DockerSandbox's own signature)

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from ...core import WORKSPACE, SandboxError
from .._helper_ops import exec_result
from ._egress import CONTAINER_DIR, RELAY, SandboxEgress, egress_dir
from ._helper_door import CONTAINER_DIR as DOOR_DIR
from ._helper_door import DoorFolder, door_dir, door_possible

if TYPE_CHECKING:
    from ._process import DockerProcessChannel

log = logging.getLogger(__name__)


class SandboxMounts:
    """The proxy's and the door's mounts and the proxy's relay, for DockerSandbox (which sets these fields)."""

    egress: SandboxEgress | None
    transport: str
    _door: DoorFolder | None
    _uid: int
    _relay: DockerProcessChannel | None
    _relay_checked: float
    _relay_pid: int
    _relay_lock: asyncio.Lock

    if TYPE_CHECKING:  # DockerSandbox's own
        def engine(self) -> str: ...
        def _own_name(self) -> str: ...
        async def open_process(self, argv: list[str]) -> DockerProcessChannel: ...
        async def _call(self, op: str, args: dict[str, Any], on_event: Any, timeout: float) -> Any: ...

    # -- the allowlist network mode (see _egress.py)
    def _egress_mount(self) -> dict[str, str]:
        """The proxy's folder on this machine, mounted into the container (and so in its hash); {} when the mode
        is off or cannot be served (a remote engine cannot see this machine's folder: no network then)."""
        eg = self.egress
        if eg is None or eg.problem:
            return {}
        if not self.engine().startswith("unix://"):
            eg.refuse(f"the desk's proxy needs the engine on this machine, not {self.engine()}")
            return {}
        try:
            eg.folder = egress_dir(eg.slug)
        except OSError as exc:
            eg.refuse(f"the proxy's folder cannot be made ({exc})")
            return {}
        return {"egress": f"{eg.folder}@{eg.folder.stat().st_ino}"}  # a folder made again: a new container

    def _egress_mounts(self) -> list[Any]:
        from docker.types import Mount

        eg = self.egress
        if eg is None or eg.problem or eg.folder is None:
            return []
        return [Mount(CONTAINER_DIR, str(eg.folder), type="bind", read_only=True)]

    # -- the helper's door (see _helper_door.py)
    def _door_mount(self) -> dict[str, str]:
        """The door's folder on this machine, mounted read-only into the container (and so in its hash); {} when
        the engine is elsewhere or the folder cannot be made: the exec stream carries the helper then."""
        self._door = None
        if not door_possible(self.engine()):
            return {}
        try:
            self._door = door_dir(self._own_name(), self._uid)
        except OSError as exc:
            log.warning("the helper's door folder cannot be made (%s): the helper goes through the engine", exc)
            return {}
        return {"door": f"{self._door.path}@{self._door.path.stat().st_ino}"}  # a folder made again: a new container

    def _door_mounts(self) -> list[Any]:
        from docker.types import Mount

        if self._door is None:
            return []
        return [Mount(DOOR_DIR, str(self._door.path), type="bind", read_only=True)]

    async def _ensure_relay(self) -> None:
        """The relay from 127.0.0.1:3128 in the container to the proxy's socket runs (a session's end kills every
        process in the container; the agent may kill it too): started again before a command when it is gone."""
        eg = self.egress
        if eg is None or eg.proxy is None or eg.problem:
            return
        if self.transport != "helper":
            eg.refuse("the image has no python3 for the proxy's relay")
            return
        async with self._relay_lock:
            if self._relay is not None and self._relay.returncode is None and await self._relay_alive():
                return
            held = self._relay is not None and not self._relay_pid
            if held and time.monotonic() - self._relay_checked < 5.0:
                return  # the port was held (an earlier desk's relay): looked at again in a while
            self._relay_checked, self._relay_pid = time.monotonic(), 0
            relay = await self.open_process(["python3", "-c", RELAY])
            try:
                first = await asyncio.wait_for(relay.read(), 15.0)
            except (TimeoutError, SandboxError) as exc:
                log.warning("the proxy's relay did not start: %s", exc)
                first = b""
            self._relay = relay
            words = first.split()
            if first.startswith(b"ready") and len(words) > 1 and words[1].isdigit():
                self._relay_pid = int(words[1])
            if not first.startswith((b"ready", b"busy")):
                eg.refuse(f"the proxy's relay did not start in the container ({first[:200]!r})")

    async def _relay_alive(self) -> bool:
        """Whether the relay's process is there now (its channel learns of a kill only a moment later)."""
        if not self._relay_pid:
            return False  # an earlier desk's relay held the port: try ours again (at most every few seconds)
        alive = f"s=$(cat /proc/{self._relay_pid}/stat) || exit 1; case \"$s\" in *') Z '*|*') X '*) exit 1;; esac"
        probe = {"command": ["sh", "-c", alive], "cwd": WORKSPACE, "env": {}, "timeout": 10.0,
                 "output_limit": 1000, "stream": False}  # a killed relay may linger as a zombie a moment
        return exec_result(await self._call("exec", probe, None, 30.0)).exit_code == 0
