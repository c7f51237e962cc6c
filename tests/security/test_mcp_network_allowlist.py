"""An MCP server of kind `sandbox+network` in a project of the allowlist mode gets no open network: its companion
container has none, and its own proxy (its own socket, so its connections are the server's) admits only what
the project's list admits. A real server (mcp-server-fetch in the mcp image) fetches a listed test domain and is
refused an unlisted one; the proxy's test resolver maps both to a local server."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from desktop_app.sandbox import DockerSandbox, SandboxConfig
from tests.conftest import make_workspace
from tests.kit.netservers import LocalServers, local_servers
from tests.sandbox.mcp_wire import Wire, need_mcp_image, text_of

pytestmark = pytest.mark.docker


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    with local_servers(tmp_path / "certs") as s:
        s.names["other.test"] = ["127.0.0.1"]
        yield s


async def _fetch(sb: DockerSandbox, url: str) -> dict:
    ch = await sb.open_process(["mcp-server-fetch", "--ignore-robots-txt", "--allow-private-ips"])
    try:
        wire = Wire(ch)
        await wire.initialize()
        return await wire.call("fetch", {"url": url, "raw": True})
    finally:
        await ch.close()


async def test_a_networked_mcp_server_uses_the_projects_list(docker_client: Any, tmp_path: Path,
                                                             servers: LocalServers) -> None:
    h = servers.http_port
    config = SandboxConfig.from_settings({"network": "allowlist", "image": need_mcp_image(docker_client),
                                          "network_allow": [f"good.test:{h}", f"127.0.0.1:{h}"]})
    sb = DockerSandbox(f"mcpnet-{uuid.uuid4().hex[:8]}", make_workspace(tmp_path / "project"), config,
                       client=docker_client)
    comp = sb.companion("mcp-fetch", network="allowlist", purpose="MCP server 'fetch'")
    assert comp.egress is not None and sb.egress is not None and comp.egress.slug != sb.egress.slug
    comp.egress.resolver = servers.resolve
    try:
        allowed = await _fetch(comp, f"http://good.test:{h}/page")
        assert not allowed.get("isError") and "Release notes" in text_of(allowed), allowed
        refused = await _fetch(comp, f"http://other.test:{h}/page")
        assert refused.get("isError") and "Release notes" not in text_of(refused)
        seen = [(c.domain, c.verdict, c.reason) for c in comp.egress.gate.connections]  # type: ignore[attr-defined]
        assert seen == [("good.test", "allowed", "listed"), ("other.test", "refused", "not listed (nobody to ask)")]
        described = comp.describe()
        assert described.network == "allowlist"
        assert "network: allowlist through the desk's proxy, for MCP server 'fetch'" in described.relaxations
        attrs = docker_client.containers.get(comp.container_id).attrs
        assert attrs["HostConfig"]["NetworkMode"] == "none"
    finally:
        await comp.close()
        await sb.close()
        for c in docker_client.containers.list(all=True, filters={"label": f"org.agent-desk.project={sb.project_id}"}):
            c.remove(force=True)
