"""Per-project sandbox settings: SandboxConfig, its sizes, and what loosens the hardened defaults."""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from ..core import ALLOWLIST_SETTING, DEFAULT_IMAGE, ConfigError, NetworkAllowlist

GIB = 1024**3
DEFAULT_MEMORY = 2 * GIB
DEFAULT_CPUS = 2.0
DEFAULT_PIDS = 256
DEFAULT_IDLE_LIMIT_S = 7 * 24 * 3600.0

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_size(value: int | float | str) -> int:
    """Bytes from 2147483648, "2g", "512m", "2GiB"."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    m = _SIZE.match(str(value))
    if not m:
        raise ConfigError(f"cannot read the size {value!r}", hint='write it like "2g", "512m" or a number of bytes')
    return int(float(m.group(1)) * 1024 ** "_kmgt".index((m.group(2) or "_").lower()))


def human_size(n: int) -> str:
    for unit, size in (("GiB", GIB), ("MiB", 1024**2), ("KiB", 1024)):
        if n >= size and n % (size // 16 or 1) == 0:
            return f"{n / size:g} {unit}"
    return f"{n} B"


@dataclass(frozen=True, slots=True)
class SandboxConfig:
    """How a project's sandbox is made. The defaults are the hardened ones; any change that loosens
    them shows up in `relaxations()` and so in every record's audit trail."""

    kind: str = "docker"  # docker | local (local must be chosen explicitly)
    image: str = DEFAULT_IMAGE
    network: bool = False
    memory: int = DEFAULT_MEMORY  # bytes
    cpus: float = DEFAULT_CPUS
    pids: int = DEFAULT_PIDS
    workspace_readonly: bool = False
    tmp_size: int = 512 * 1024**2  # tmpfs /tmp
    home_size: int = 512 * 1024**2  # tmpfs home
    uid: int | None = None  # default: the owner of the project folder (1000 when that is root)
    keep_running: bool = False  # leave the container running at close() for a faster next start
    idle_limit_s: float = DEFAULT_IDLE_LIMIT_S  # stopped this long: removed as an orphan
    workspace: str = "auto"  # auto | synced | bind: see syncs_workspace()
    lease_dir: str = ""  # where the desk's processes hold their containers' leases ("": no lease, never swept)
    runtime: str = ""  # the OCI runtime: "" (the engine's default, runc) or "runsc" (gVisor: a kernel of its own)
    # "network": "allowlist": the patterns as written (None: not that mode). The container then sits on an
    # internal network whose only way out is the desk's proxy; `network` stays False (no bridge).
    network_allow: tuple[str, ...] | None = None
    network_problem: str = ""  # why the allowlist mode fell back to no network (a malformed pattern)

    def __post_init__(self) -> None:
        if self.kind not in ("docker", "local"):
            raise ConfigError(f"unknown sandbox kind {self.kind!r}", hint='use "docker" (default) or "local"')
        if self.memory < 6 * 1024**2:
            raise ConfigError(f"memory limit {self.memory} bytes is too small", hint="Docker needs at least 6 MiB")
        if self.cpus <= 0 or self.pids < 8:
            raise ConfigError("cpus must be positive and pids at least 8")
        if self.workspace not in WORKSPACE_MODES:
            raise ConfigError(f"unknown workspace setting {self.workspace!r}",
                              hint='use "auto" (default: synced on a tcp:// or ssh:// engine), "synced" or "bind"')
        if self.runtime not in RUNTIMES:
            raise ConfigError(f"unknown sandbox runtime {self.runtime!r}",
                              hint='use "runsc" (gVisor, registered with the engine), or leave "runtime" out for '
                              "the engine's default (runc)")

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any] | None = None, *, image: str | None = None) -> SandboxConfig:
        """From a project's settings dict: sandbox (kind), image, network, memory ("4g"), cpus, pids,
        workspace_ro / workspace_readonly, keep_running. Unknown keys are ignored (they belong to others:
        git_writable, the old "let the agent commit", now offers the git_commit tool and leaves .git read-only)."""
        s = dict(settings or {})
        known = {f.name for f in fields(cls)}
        known.discard("lease_dir")  # the desk's, never a project's setting
        kw: dict[str, Any] = {k: v for k, v in s.items() if k in known}
        if "sandbox" in s:
            kw["kind"] = s["sandbox"]
        if "workspace_ro" in s:
            kw["workspace_readonly"] = bool(s["workspace_ro"])
        kw.update(_network_mode(s))
        if image and "image" not in kw:
            kw["image"] = image
        for key in ("memory", "tmp_size", "home_size"):
            if key in kw:
                kw[key] = parse_size(kw[key])
        try:
            return cls(**kw)
        except TypeError as exc:
            raise ConfigError(f"bad sandbox settings: {exc}") from None

    @property
    def allowlist(self) -> NetworkAllowlist | None:
        """The parsed list in the allowlist mode (checked when the config was made), else None."""
        return NetworkAllowlist.parse(self.network_allow) if self.network_allow is not None else None

    def relaxations(self) -> list[str]:
        out = []
        if self.network:
            out.append("network: on (bridge)")
        if self.network_allow:
            out.append(f"network: allowlist through the desk's proxy ({', '.join(self.network_allow)})")
        if self.memory > DEFAULT_MEMORY:
            out.append(f"memory: {human_size(self.memory)} (default {human_size(DEFAULT_MEMORY)})")
        if self.cpus > DEFAULT_CPUS:
            out.append(f"cpus: {self.cpus:g} (default {DEFAULT_CPUS:g})")
        if self.pids > DEFAULT_PIDS:
            out.append(f"pids: {self.pids} (default {DEFAULT_PIDS})")
        return out

    def container_hash(self, **extra: Any) -> str:
        """What a container was made from; a different hash means the container is recreated."""
        d = asdict(self)
        d["network_allow"] = self.network_allow is not None  # the list itself is the proxy's, not the container's
        for k in ("keep_running", "idle_limit_s", "kind", "workspace", "lease_dir", "network_problem"):
            d.pop(k)  # the workspace's mode is judged with the engine: the caller passes `synced`
        if not d["runtime"]:
            d.pop("runtime")  # a container made before the setting existed keeps its hash
        d.update(extra)
        return hashlib.sha256(json.dumps(d, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _network_mode(s: Mapping[str, Any]) -> dict[str, Any]:
    """The `network` setting: False (default), True (bridge) or "allowlist" with `network_allow`. A malformed
    list falls back to no network at all, with the reason kept (never to a full network)."""
    mode = s.get("network", False)
    if mode is False or mode is None or mode is True:
        return {"network": bool(mode), "network_allow": None, "network_problem": ""}
    if mode != "allowlist":
        raise ConfigError(f"unknown network setting {mode!r}", hint='use false (none), true (full) or "allowlist"')
    try:
        allow = NetworkAllowlist.parse(s.get(ALLOWLIST_SETTING) or [])
    except ConfigError as exc:
        return {"network": False, "network_allow": None, "network_problem": exc.user_message()}
    return {"network": False, "network_allow": allow.written, "network_problem": ""}


WORKSPACE_MODES = ("auto", "synced", "bind")
RUNTIMES = ("", "runc", "runsc")  # closed: an unknown runtime could weaken the boundary
_REMOTE_SCHEMES = ("tcp://", "ssh://", "http://", "https://")


def engine_address(client: Any = None) -> str:
    """The engine's address as a person writes it: DOCKER_HOST, else the given client's, else the socket."""
    env = os.environ.get("DOCKER_HOST", "").strip()
    if client is None or env:
        return env or "unix:///var/run/docker.sock"
    url = str(getattr(getattr(client, "api", client), "base_url", "") or "")
    if url.startswith("http+docker://ssh"):
        return "ssh://" + url.removeprefix("http+docker://ssh")
    if url.startswith(("http://", "https://")):
        return "tcp://" + url.split("://", 1)[1]
    return "unix:///var/run/docker.sock" if url.startswith("http+docker://") else url


def syncs_workspace(config: SandboxConfig, address: str) -> bool:
    """The one place that says whether the workspace is synced instead of bind-mounted: when the engine
    cannot see the project folder (a tcp:// or ssh:// engine), or the project says "workspace": "synced".
    "bind" forces a bind mount (an engine on tcp://127.0.0.1 of this same machine sees the folder)."""
    if config.workspace != "auto":
        return config.workspace == "synced"
    return address.strip().lower().startswith(_REMOTE_SCHEMES)


def workspace_where(settings: Mapping[str, Any] | None = None) -> str:
    """For a project's settings, before its sandbox runs: "remote engine, synced workspace (address)", or
    "" when the workspace is the project folder mounted into the container (or the settings are bad)."""
    from ..core import SandboxDescription

    try:
        config = SandboxConfig.from_settings(settings)
    except ConfigError:
        return ""
    address = engine_address()
    synced = config.kind == "docker" and syncs_workspace(config, address)
    where = SandboxDescription("docker", False, engine_address=address, workspace_sync="synced" if synced else "")
    return where.where()
