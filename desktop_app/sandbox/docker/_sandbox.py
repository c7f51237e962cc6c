"""DockerSandbox: one long-lived, hardened container per project, reached through the in-container
helper over a single attached exec stream (or a `docker exec` per call when the image has no python3).
Every docker call runs in the sandbox's own thread pool, never on the event loop."""

# ruff: noqa: ASYNC109  (a command's `timeout` is the sandbox's own deadline, passed down to it)

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import posixpath
import re
import time
import weakref
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ...core import (
    DEFAULT_OUTPUT_LIMIT,
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    WORKSPACE,
    ExecResult,
    OutputCallback,
    SandboxDescription,
    SandboxError,
    SyncReport,
)
from .._client import ENGINE_HINT, connect, short_reason
from .._config import SandboxConfig, engine_address, human_size
from .._control_mounts import MOUNTS_VERSION, control_mounts
from .._engine_link import RUNSC_HINT
from .._helper_ops import HelperOps, clamp_timeout, exec_result
from .._proxy import system_resolver
from ..exec import ExecTransport
from ..helper.processes import KILL_GRACE_S
from ..images import image_name_for_tag, refuse_loosening
from ..sync import SyncedWorkspace, remove_project_volumes
from ._egress import SandboxEgress, proxy_env
from ._helper_channel import OP_TIMEOUT_S, HelperChannel
from ._helper_door import DoorFolder, remove_door_dir
from ._leases import LABEL_KEEP, LABEL_LEASES, ContainerLease
from ._process import DockerProcessChannel
from ._sandbox_mounts import SandboxMounts

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)


LABEL_MANAGED = "org.agent-desk.sandbox"
LABEL_PROJECT = "org.agent-desk.project"
LABEL_HASH = "org.agent-desk.config-hash"
LABEL_PATH = "org.agent-desk.host-path"
LABEL_COMPANION = "org.agent-desk.companion"  # a companion's suffix; the project's own container has none
LABEL_DESK = "org.agent-desk.desk"  # user@host of the desk that made it: one engine may serve a whole team
HOME = "/home/sandbox"
TWIN_SUFFIX = "mode:read-only"  # the read-only twin's suffix: a ':' no MCP server's name (a companion's) holds
FALLBACK_UID = 1000


def _slug(text: str) -> str:
    base = re.sub(r"[^a-zA-Z0-9_.-]+", "-", text).strip("-.")[:40] or "project"
    return f"{base}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def container_name(project_id: str, companion: str = "") -> str:
    return f"agent-desk-{_slug(project_id)}" + (f"-{_slug(companion)}" if companion else "")


# A companion's network: "bridge" or a network the person made (`docker network create`). Never "host" nor
# "container:...": those share a namespace (the host's loopback services, another container's), not a network.
_NETWORK_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}\Z")
_SHARED_NAMESPACES = ("host", "none")
ALLOWLIST = "allowlist"  # a companion in the project's allowlist mode: through its own proxy, by the same list


class Companion:
    """What makes a DockerSandbox a companion: its suffix, its network and why it has one."""

    __slots__ = ("network", "purpose", "suffix")

    def __init__(self, suffix: str, network: str, purpose: str) -> None:
        if not suffix or "\0" in suffix:
            raise SandboxError("a companion container needs a name")
        if network == ALLOWLIST:  # no network; its only way out is its own proxy socket (the project's list)
            self.suffix, self.network, self.purpose = suffix, "none", purpose
            return
        if not _NETWORK_NAME.match(network) or network in _SHARED_NAMESPACES:
            raise SandboxError(
                f"a companion container cannot use the network {network[:80]!r}",
                hint='use "bridge" or a network made with `docker network create` (never "host")',
            )
        self.suffix, self.network, self.purpose = suffix, network, purpose


def desk_identity() -> str:
    import getpass
    import socket

    return f"{getpass.getuser()}@{socket.gethostname()}"


def folder_owner(folder: str) -> tuple[int, int]:
    """The uid:gid the container runs as: the folder's owner, or 1000 when that is root."""
    st = os.stat(folder)
    if st.st_uid == 0:
        return FALLBACK_UID, FALLBACK_UID
    return st.st_uid, st.st_gid


def _parse_time(text: str) -> float:
    """Docker's RFC 3339 timestamps (nanoseconds, Z) to epoch seconds; 0 for the zero time."""
    if not text or text.startswith("0001-"):
        return 0.0
    m = re.match(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)?", text)
    if not m:
        return 0.0
    tz = m.group(3) or "Z"
    tz = "+00:00" if tz == "Z" else tz
    frac = float(m.group(2) or 0)
    return datetime.fromisoformat(m.group(1) + tz).timestamp() + frac


def remove_orphans(
    client: docker.DockerClient,
    *,
    known_projects: Collection[str] | None = None,
    idle_limit_s: float | None = None,
    only: Collection[str] | None = None,
    now: float | None = None,
) -> list[str]:
    """Remove agent-desk containers whose project is gone (its folder no longer exists, or its id is
    not in `known_projects` when given), or that have been stopped longer than `idle_limit_s`.
    `only` limits the sweep to those project ids. Returns the names removed."""
    import docker.errors

    now = time.time() if now is None else now
    desk = desk_identity()
    removed = []
    # a container another process removes between the listing and its inspection is skipped, not an error
    for c in client.containers.list(all=True, ignore_removed=True, filters={"label": LABEL_MANAGED}):
        labels = c.labels or {}
        pid, path = labels.get(LABEL_PROJECT, ""), labels.get(LABEL_PATH, "")
        if only is not None and pid not in only:
            continue
        if labels.get(LABEL_DESK, desk) != desk:
            continue  # another desk's sandbox on a shared engine: its folder is on another machine
        gone = not path or not os.path.isdir(path)
        if known_projects is not None and pid not in known_projects:
            gone = True
        idle = False
        if idle_limit_s is not None and c.status != "running":
            finished = _parse_time(c.attrs.get("State", {}).get("FinishedAt", "")) or _parse_time(
                c.attrs.get("Created", "")
            )
            idle = finished > 0 and now - finished > idle_limit_s
        if gone or idle:
            try:
                c.remove(force=True)
            except docker.errors.NotFound:
                pass
            except docker.errors.APIError as exc:
                if exc.status_code != 409:
                    raise
                continue  # another sandbox's start is removing it now (several projects opened at once)
            if gone:
                remove_project_volumes(client, pid)
            remove_door_dir(c.name)
            removed.append(c.name)
            log.info("removed sandbox container %s (%s)", c.name, "project gone" if gone else "idle")
    return removed


# ------------------------------------------------------------------------------------------ sandbox
class DockerSandbox(SandboxMounts, HelperOps):
    """The Sandbox protocol in a hardened per-project container (see SandboxConfig for the knobs)."""

    def __init__(
        self,
        project_id: str,
        folder: str | os.PathLike[str],
        config: SandboxConfig | None = None,
        *,
        client: docker.DockerClient | None = None,
        max_workers: int = 8,
    ) -> None:
        self.project_id = project_id
        self.folder = os.path.realpath(folder)
        self.config = config or SandboxConfig()
        self._client = client
        self._pool = ThreadPoolExecutor(
            max_workers=max_workers, thread_name_prefix=f"agent-desk-docker-{project_id[:16]}"
        )
        self._container: Any = None
        self._image_id = ""
        self._uid, self._gid = 0, 0
        self._channel: HelperChannel | None = None
        self._door: DoorFolder | None = None  # the helper's door folder (a local engine), once judged
        self._exec_transport: ExecTransport | None = None
        self._controls: list[tuple[str, str, bool]] = []
        self._start_lock = asyncio.Lock()
        self._closed = False
        self._lease: ContainerLease | None = None  # this process's hold on the container (config.lease_dir)
        self.transport = ""  # "helper" or "exec", once started
        self.companion_of: Companion | None = None  # set by companion(): a second container with a network
        self.twin = ""  # set by read_only_twin(): the project's second container, its workspace read-only
        self._processes: weakref.WeakSet[DockerProcessChannel] = weakref.WeakSet()
        # What the session's end found running and killed, and what is still alive after (see sweep()).
        self.last_sweep: dict[str, Any] = {"killed": [], "alive": []}
        self.synced_workspace = SyncedWorkspace(self.config, self.folder, project_id, self._pool, self._helper_link)
        # "network": "allowlist": the container's only way out is this proxy (see _egress.py)
        allowlist = self.config.allowlist
        self.egress = SandboxEgress(allowlist, _slug(project_id)) if allowlist is not None else None
        # how its companions' proxies resolve names when it has no proxy of its own (tests: local servers)
        self.companion_resolver: Any = None
        self._relay: DockerProcessChannel | None = None
        self._relay_checked = 0.0
        self._relay_pid = 0  # the relay's pid in the container: the desk's own, not a survivor of a session
        self._relay_lock = asyncio.Lock()

    def _helper_link(self, container_id: str) -> HelperChannel:
        return HelperChannel(self._client.api, container_id, self._pool)

    @property
    def synced(self) -> bool:
        """Whether the workspace is a volume on the engine, synced with the folder (judged at start)."""
        return self.synced_workspace.synced

    def engine(self) -> str:
        return engine_address(self._client)

    async def sync_workspace(self, direction: str = "both") -> SyncReport | None:
        """Bring the host folder and the volume level (both ways, by digest); None when not synced.
        `direction` says when it runs ("in": before a call, "both": after one); the work is the same."""
        if not self.synced_workspace.synced:
            return None
        await self.start()
        return await self.synced_workspace.sync()

    # -- lifecycle
    async def _run(self, fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    async def start(self) -> None:
        async with self._start_lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            if self._transport_ready():
                return
            try:
                await self._run(self._ensure_container)
                if self.egress is not None and not self.egress.problem:
                    await self.egress.start()
                channel = HelperChannel(self._client.api, self._container.id, self._pool, self._door)
                has_python = await self._run(channel.open)
            except SandboxError:
                raise
            except Exception as exc:  # docker's and requests' errors: the engine went away or refused
                raise SandboxError(f"Docker failed: {short_reason(exc)}", hint=ENGINE_HINT) from None
            await self.synced_workspace.start()  # a synced workspace: filled before the first call
            if has_python:
                channel.attach(asyncio.get_running_loop())
                self._channel, self._exec_transport, self.transport = channel, None, "helper"
            else:
                log.info("image %s has no python3: one docker exec per call", self.config.image)
                self._channel, self.transport = None, "exec"
                self._exec_transport = ExecTransport(self._client.api, self._container.id, self._pool)

    def _transport_ready(self) -> bool:
        if self._channel is not None and not self._channel.dead:
            return True
        return self._exec_transport is not None and not self._exec_transport.dead

    def _ensure_container(self) -> None:
        import docker.errors

        if self._client is None:
            self._client = connect()
        client = self._client
        if not os.path.isdir(self.folder):
            raise SandboxError(f"the project folder {self.folder} does not exist")
        image = self._image(client)
        refuse_loosening(image)  # a project's own image: no VOLUME beside the read-only root
        self._image_id = image.id
        try:
            remove_orphans(client, idle_limit_s=self.config.idle_limit_s)
        except Exception as exc:  # clean-up must never stop a sandbox from starting
            log.warning("could not remove orphan sandbox containers: %s", short_reason(exc))
        self._take_lease()  # before the container is looked at: a sweep removing it now is waited for
        self._uid, self._gid = (self.config.uid, self.config.uid) if self.config.uid else folder_owner(self.folder)
        st = os.stat(self.folder)
        synced = self.synced_workspace.prepare(client, self.engine(), image.id, self._uid, self._gid)
        self._controls = [] if synced else control_mounts(self.folder)
        # The folder's inode too: a bind mount keeps a deleted-and-recreated folder's old inode. The control
        # mounts too: a `.git` that appeared since (`git init`) is mounted read-only at the next start.
        suffix = self._suffix()
        role: dict[str, Any] = {"companion": [suffix, self._network_mode()]} if suffix else {}
        role.update(self._egress_mount())
        role.update(self._door_mount())
        want = self.config.container_hash(
            image_id=image.id, folder=self.folder, inode=(st.st_dev, st.st_ino), uid=self._uid, gid=self._gid,
            controls=[list(m) for m in self._controls], mounts_version=MOUNTS_VERSION, **role, **synced,
        )
        found = client.containers.list(all=True, ignore_removed=True,  # another desk may remove one meanwhile
                                       filters={"label": f"{LABEL_PROJECT}={self.project_id}"})
        keep = None
        for c in found:
            if (c.labels or {}).get(LABEL_COMPANION, "") != suffix:
                continue  # the project's own container and its companions leave each other alone
            if keep is None and (c.labels or {}).get(LABEL_HASH) == want:
                keep = c
            else:
                log.info("removing sandbox container %s: its configuration changed", c.name)
                with contextlib.suppress(docker.errors.NotFound):
                    c.remove(force=True)
        if keep is None:
            keep = self._create(want)
        if keep.status != "running":
            try:
                keep.start()
            except docker.errors.APIError as exc:
                raise SandboxError(f"the sandbox container did not start: {short_reason(exc)}") from None
            keep.reload()
        self._container = keep

    def _take_lease(self) -> None:
        """Say this process uses the container (a shared lock on its lease, let go at close or by the kernel at
        a crash): a later start's sweep removes it only when no desk process holds it."""
        if self.config.lease_dir and self._lease is None:
            name = container_name(self.project_id, self.companion_of.suffix if self.companion_of else "")
            lease = ContainerLease(self.config.lease_dir, name)
            lease.acquire()
            self._lease = lease

    def _image(self, client: docker.DockerClient) -> Any:
        import docker.errors

        try:
            return client.images.get(self.config.image)
        except docker.errors.ImageNotFound:
            name = image_name_for_tag(self.config.image)
            hint = (
                f"click Build in the status bar (or run `agent-desk images build {name}`)"
                if name
                else "pick another image in the project's settings, or build the project's own image there "
                "(`agent-desk images build --project PATH`)"
            )
            raise SandboxError(f"the sandbox image {self.config.image} is not on this machine", hint=hint) from None
        except docker.errors.DockerException as exc:
            raise SandboxError(f"Docker failed: {short_reason(exc)}", hint=ENGINE_HINT) from None

    def _create(self, config_hash: str) -> Any:
        import docker.errors
        from docker.types import Mount

        cfg = self.config
        ids = f"uid={self._uid},gid={self._gid}"
        try:
            return self._client.containers.create(
                cfg.image,
                command=["sleep", "infinity"],
                entrypoint=[],  # a project's own image: its ENTRYPOINT and HEALTHCHECK never run
                healthcheck={"test": ["NONE"]},
                name=container_name(self.project_id, self._suffix()),
                hostname="sandbox",
                labels={
                    LABEL_MANAGED: "1",
                    LABEL_PROJECT: self.project_id,
                    LABEL_HASH: config_hash,
                    LABEL_PATH: self.folder,
                    **({LABEL_COMPANION: self._suffix()} if self._suffix() else {}),
                    LABEL_DESK: desk_identity(),
                    **({LABEL_LEASES: cfg.lease_dir} if cfg.lease_dir else {}),
                    **({LABEL_KEEP: "1"} if cfg.keep_running else {}),
                },
                user=f"{self._uid}:{self._gid}",
                working_dir=WORKSPACE,
                environment={"HOME": HOME, "LANG": "C.UTF-8", "USER": "sandbox",
                             **(proxy_env() if self.egress is not None else {})},
                # the workspace's own mounts (volumes when synced); the proxy's and the door's folders either way
                mounts=self.synced_workspace.mounts(
                    [Mount(WORKSPACE, self.folder, type="bind", read_only=cfg.workspace_readonly)]
                    + [Mount(target, source, type="bind", read_only=ro) for target, source, ro in self._controls])
                + self._egress_mounts() + self._door_mounts(),
                tmpfs={
                    "/tmp": f"rw,nosuid,nodev,exec,size={cfg.tmp_size},mode=1777",
                    HOME: f"rw,nosuid,nodev,exec,size={cfg.home_size},mode=0700,{ids}",
                },
                read_only=True,
                network_mode=self._network_mode(),
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                pids_limit=cfg.pids,
                mem_limit=cfg.memory,
                memswap_limit=cfg.memory,
                nano_cpus=int(cfg.cpus * 1e9),
                init=True,
                ipc_mode="private",
                runtime=cfg.runtime or None,
                detach=True,
            )
        except docker.errors.APIError as exc:
            if cfg.runtime and "runtime" in str(exc).lower():
                raise SandboxError(f"the engine does not know the runtime {cfg.runtime!r} the project chose "
                                   f"({short_reason(exc)})", hint=RUNSC_HINT) from None
            raise SandboxError(f"could not create the sandbox container: {short_reason(exc)}") from None

    async def sweep(self) -> dict[str, Any]:
        """Kill every process in the container but the helper (and the container's own init and
        command); return {"killed": [...], "alive": [...]}, each {pid, command, started_by}."""
        if self._closed or not self._transport_ready():
            return {"killed": [], "alive": []}
        try:
            if self._channel is not None:
                res = await self._channel.request("sweep", {}, None, 15.0)
            else:
                assert self._exec_transport is not None
                res = await self._exec_transport.request("sweep", {}, None, 15.0)
        except SandboxError as exc:
            log.warning("could not sweep the sandbox's processes: %s", exc)
            return {"killed": [], "alive": [{"pid": 0, "command": "?", "started_by": f"sweep failed: {exc}"}]}
        # the allowlist's relay (while its own channel says it runs): started again before the next command,
        # not reported as a survivor of the session
        mine = self._relay_pid if self._relay is not None and self._relay.returncode is None else 0
        self.last_sweep = {k: [p for p in res.get(k) or [] if not mine or p.get("pid") != mine]
                           for k in ("killed", "alive")}
        return self.last_sweep

    def _own_name(self) -> str:
        return container_name(self.project_id, self._suffix())

    def _suffix(self) -> str:
        """What tells this container from the project's own: a companion's suffix, the twin's, or ""."""
        return self.companion_of.suffix if self.companion_of else self.twin

    def read_only_twin(self) -> DockerSandbox:
        """The project's second container for the modes that change nothing (plan, read-only, strict): the same
        image, mounts, user, limits and network, the workspace mounted read-only by the kernel. Its own name
        and label (TWIN_SUFFIX, never an MCP server's name), so the two containers leave each other alone."""
        other = DockerSandbox(self.project_id, self.folder, replace(self.config, workspace_readonly=True),
                              client=self._client)
        other.twin = TWIN_SUFFIX
        other.egress = self.egress  # one proxy, one list, one gate: a read-only mode keeps the allowlist network
        return other

    def _network_mode(self) -> str:
        if self.companion_of is not None:
            return self.companion_of.network
        return "bridge" if self.config.network else "none"

    def companion(self, suffix: str, *, network: str = "bridge", purpose: str | None = None) -> DockerSandbox:
        """A second container beside this one for one thing that needs the network (an MCP server): the same
        image, mounts, user, limits and hardening, but `network`; its own name; removed when closed. Its
        describe() names the relaxation ("network: bridge, for MCP server 'fetch'")."""
        proxied = network == ALLOWLIST
        role = Companion(suffix, network, purpose or f"MCP server {suffix!r}")
        # proxied: the project's list (empty when the project's network is off: every destination is asked about)
        listed = list(self.config.network_allow or []) if proxied else None
        other = DockerSandbox(self.project_id, self.folder, replace(self.config, network=False, keep_running=False,
                                                                    network_allow=listed),
                              client=self._client, max_workers=4)
        other.companion_of = role
        if proxied and other.config.allowlist is not None:  # its own socket: its connections are the server's
            other.egress = SandboxEgress(other.config.allowlist, f"{_slug(self.project_id)}-{_slug(suffix)}")
            # names resolve as the project's do (its resolver, later too)
            other.egress.resolver = self.egress.resolve if self.egress is not None else self._companion_resolve
        return other

    async def _companion_resolve(self, host: str, port: int) -> list[str]:
        """Names for a companion's proxy when this sandbox has no proxy of its own (looked up at each name)."""
        return await (self.companion_resolver or system_resolver)(host, port)

    async def close(self) -> None:
        if self._closed:
            return
        await self._close_processes()
        await self.sweep()
        await self.synced_workspace.close(self.config.keep_running)
        if self.egress is not None and not self.twin:  # the twin shares the project container's proxy
            await self.egress.close(keep_folder=self.config.keep_running and self.companion_of is None)
        self._closed = True
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        if self._container is not None and self.companion_of is not None:
            with contextlib.suppress(Exception):
                await self._run(lambda: self._container.remove(force=True))
            remove_door_dir(container_name(self.project_id, self._suffix()))
        elif self._container is not None and not self.config.keep_running:
            with contextlib.suppress(Exception):
                await self._run(lambda: self._container.stop(timeout=2))
        if self._lease is not None:
            self._lease.release()
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _close_processes(self) -> None:
        """The processes open_process started, and all they started, end before the container does."""
        channels = list(self._processes)
        if channels:
            await asyncio.gather(*(ch.close() for ch in channels), return_exceptions=True)

    async def stop_container(self) -> None:
        """Stop the container now (every process in it dies); the next call starts it again."""
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.close()
        if self._container is not None:
            await self._run(lambda: self._container.stop(timeout=2))

    @property
    def container_id(self) -> str:
        return self._container.id if self._container is not None else ""

    def describe(self) -> SandboxDescription:
        cfg = self.config
        relaxations = cfg.relaxations()
        if self.companion_of is not None:
            role = self.companion_of
            how = "allowlist through the desk's proxy" if self.egress is not None else role.network
            relaxations.append(f"network: {how}, for {role.purpose}")
        problem = cfg.network_problem or (self.egress.problem if self.egress is not None else "")
        if problem:
            relaxations.append(f"network: none ({problem})")
        return SandboxDescription(
            kind="docker",
            unsandboxed=False,
            container_id=self.container_id[:12],
            image=cfg.image,
            image_digest=self._image_id,
            network=self._network_mode() if self.egress is None else (
                "allowlist" if self.egress.proxy and not self.egress.problem else "none"),
            limits={
                "memory": human_size(cfg.memory),
                "cpus": cfg.cpus,
                "pids": cfg.pids,
                "workspace": ("read-only" if cfg.workspace_readonly else "read-write")
                + (", synced volume" if self.synced else ""),
                "root_fs": "read-only",
                "capabilities": "none",
                "no_new_privileges": True,
                "user": f"{self._uid}:{self._gid}",
                "transport": self.transport,
                "runtime": cfg.runtime or "the engine's default (runc)",
            },
            relaxations=relaxations,
            workspace=WORKSPACE,
            host_path=self.folder,
            **self.synced_workspace.description(self.engine()),
        )

    # -- long-lived processes
    async def open_process(
        self, argv: list[str], *, cwd: str = WORKSPACE, env: Mapping[str, str] | None = None
    ) -> DockerProcessChannel:
        """Start `argv` in this container as its user, with its stdio on one attached `docker exec` for its
        whole life. Its environment is the container's plus `env`: nothing of the host's crosses."""
        if self._closed:
            raise SandboxError("the sandbox is closed")
        if not self._transport_ready():
            await self.start()
        if self.egress is not None and self.companion_of is not None and not self._relay_lock.locked():
            await self._ensure_relay()  # a companion's server reaches out through the relay (not the relay itself)
        cwd = posixpath.normpath(posixpath.join(WORKSPACE, cwd))
        channel = DockerProcessChannel(self._client.api, self._container.id, list(argv), f"{self._uid}:{self._gid}",
                                       self._pool)
        try:
            await self._run(channel.start, cwd, env)
        except SandboxError:
            raise
        except Exception as exc:  # docker's and requests' errors: the engine went away or refused
            raise SandboxError(f"Docker failed: {short_reason(exc)}", hint=ENGINE_HINT) from None
        channel.run_reader(asyncio.get_running_loop())
        self._processes.add(channel)
        return channel

    # -- calls
    async def _call(
        self, op: str, args: dict[str, Any], on_event: Callable | None = None, timeout: float = OP_TIMEOUT_S
    ) -> Any:
        if self._closed:
            raise SandboxError("the sandbox is closed")
        if not self._transport_ready():
            await self.start()
        if self._channel is not None:
            return await self._channel.request(op, args, on_event, timeout)
        assert self._exec_transport is not None
        return await self._exec_transport.request(op, args, on_event, timeout)

    async def exec(
        self,
        command: str | list[str],
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        on_output: OutputCallback | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult:
        timeout = clamp_timeout(timeout, MAX_TIMEOUT_S)
        if self.egress is not None:
            if not self._transport_ready():
                await self.start()
            await self._ensure_relay()
        args = {
            "command": command,
            "cwd": cwd,
            "env": dict(env or {}),
            "timeout": timeout,
            "output_limit": int(output_limit),
            "stream": on_output is not None,
        }
        on_event = None
        if on_output is not None:

            def on_event(msg: dict[str, Any]) -> None:
                on_output(msg["stream"], msg["data"])

        res = await self._call("exec", args, on_event, timeout + KILL_GRACE_S + 30.0)
        return exec_result(res)

    async def _op(self, op: str, args: dict[str, Any]) -> Any:
        return await self._call(op, args)
