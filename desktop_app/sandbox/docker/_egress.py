"""The allowlist network mode of a Docker sandbox: its internal network (no route out, no DNS), and the desk's
egress proxy bound to that network's gateway on this machine, the container's only way out."""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING, Any

from ...core import NetworkAllowlist, SandboxError
from .._client import short_reason
from .._proxy import EgressProxy, ListOnlyGate, NetworkGate, Resolver, system_resolver

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

PROXY_PORT = 3128  # on the gateway address of the project's own network: one port per network, no clash
LABEL_EGRESS = "org.agent-desk.egress"
NO_PROXY = "localhost,127.0.0.1,::1"


def internal_network(client: docker.DockerClient, name: str, project_id: str, labels: dict[str, str]) -> str:
    """The project's internal network (made once, then found by name); returns its gateway address."""
    import docker.errors

    try:
        net = client.networks.get(name)
    except docker.errors.NotFound:
        try:
            net = client.networks.create(name, driver="bridge", internal=True, check_duplicate=True,
                                         labels={**labels, LABEL_EGRESS: project_id})
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # another start of the same project made it meanwhile
                raise SandboxError(f"could not make the sandbox's network {name}: {short_reason(exc)}") from None
            net = client.networks.get(name)
    net.reload()
    if not (net.attrs.get("Internal") and (net.attrs.get("Labels") or {}).get(LABEL_EGRESS) == project_id):
        raise SandboxError(f"the network {name} exists but is not this project's internal network",
                           hint=f"remove it (`docker network rm {name}`) and start the sandbox again")
    configs = (net.attrs.get("IPAM") or {}).get("Config") or []
    gateway = next((c.get("Gateway") for c in configs if c.get("Gateway") and ":" not in c["Gateway"]), "")
    if not gateway:
        raise SandboxError(f"the sandbox's network {name} has no IPv4 gateway")
    return str(gateway)


def proxy_env(gateway: str) -> dict[str, str]:
    url = f"http://{gateway}:{PROXY_PORT}"
    return {"HTTP_PROXY": url, "HTTPS_PROXY": url, "http_proxy": url, "https_proxy": url,
            "NO_PROXY": NO_PROXY, "no_proxy": NO_PROXY}


def container_address(container: Any, network: str) -> str:
    nets = ((container.attrs.get("NetworkSettings") or {}).get("Networks") or {})
    return str((nets.get(network) or {}).get("IPAddress") or "")


class SandboxEgress:
    """A sandbox's proxy: started after its container, bound to the gateway, closed with the sandbox. A proxy
    that cannot start leaves `problem` set and the container with no way out at all (never a full network)."""

    def __init__(self, allowlist: NetworkAllowlist) -> None:
        self.gate: NetworkGate = ListOnlyGate(allowlist)
        self.resolver: Resolver | None = None  # tests map their names to local servers
        self.gateway = ""
        self.peer = ""
        self.problem = ""
        self.proxy: EgressProxy | None = None

    async def start(self, gateway: str, peer: str) -> None:
        """Serve on the gateway, for the container's address only."""
        await self.close()
        self.gateway, self.peer = gateway, peer
        proxy = EgressProxy(self.gate, resolve=self._resolve, peers=lambda: {self.peer})
        try:
            await proxy.start(gateway, PROXY_PORT)
        except OSError as exc:
            self.problem = (f"the network setting \"allowlist\": the desk's proxy could not start on {gateway}:"
                            f"{PROXY_PORT} ({exc.strerror or exc}); the sandbox has no network")
            log.warning("%s", self.problem)
            return
        self.proxy, self.problem = proxy, ""

    async def _resolve(self, host: str, port: int) -> list[str]:
        return await (self.resolver or system_resolver)(host, port)

    async def close(self) -> None:
        proxy, self.proxy = self.proxy, None
        if proxy is not None:
            with contextlib.suppress(Exception):
                await proxy.close()


def remove_egress_network(client: docker.DockerClient, project_id: str) -> None:
    """Remove a gone project's internal network (kept while a container of it exists)."""
    import docker.errors

    for net in client.networks.list(filters={"label": f"{LABEL_EGRESS}={project_id}"}):
        with contextlib.suppress(docker.errors.NotFound, docker.errors.APIError):
            net.remove()
