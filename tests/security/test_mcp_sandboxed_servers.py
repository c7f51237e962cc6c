"""A real MCP server in the sandbox cannot reach the network (mcp-server-fetch, and a raw connect) while its
companion with the network relaxation can; cannot read the host's files (server-filesystem allowed "/"); runs
as uid 1000 without capabilities; cannot write outside /workspace nor the read-only control folders. And the
image build's CA bundle does not remain in the mcp image."""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from desktop_app.sandbox import DockerSandbox, SandboxConfig
from tests.sandbox.mcp_wire import Wire, need_mcp_image, text_of

pytestmark = pytest.mark.docker
MARKER = f"agent-desk-host-page-{uuid.uuid4().hex}"


class _Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"<html><body><p>{MARKER}</p></body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def host_page(docker_client, test_network: str) -> Iterator[str]:
    """An HTTP server on the host, on the test network's gateway: any container on that network reaches it."""
    gateway = docker_client.networks.get(test_network).attrs["IPAM"]["Config"][0]["Gateway"]
    server = http.server.ThreadingHTTPServer((gateway, 0), _Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://{gateway}:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture
async def mcp_sandbox(docker_client, make_docker_sandbox) -> DockerSandbox:
    return await make_docker_sandbox(SandboxConfig(image=need_mcp_image(docker_client)))


async def _fetch(sb: DockerSandbox, url: str) -> dict:
    ch = await sb.open_process(["mcp-server-fetch", "--ignore-robots-txt", "--allow-private-ips"])
    try:
        wire = Wire(ch)
        await wire.initialize()
        return await wire.call("fetch", {"url": url, "raw": True})
    finally:
        await ch.close()


async def test_a_sandboxed_server_cannot_reach_the_network_but_its_companion_can(
    mcp_sandbox: DockerSandbox, host_page: str, test_network: str
) -> None:
    blocked = await _fetch(mcp_sandbox, host_page)
    assert blocked.get("isError") and MARKER not in text_of(blocked)
    assert "Refused to fetch" not in text_of(blocked)  # it tried: the network, not the server's own rule, said no
    comp = mcp_sandbox.companion("fetch", network=test_network)
    try:
        allowed = await _fetch(comp, host_page)
        assert not allowed.get("isError") and MARKER in text_of(allowed)
        assert f"network: {test_network}, for MCP server 'fetch'" in comp.describe().relaxations
    finally:
        await comp.close()


@pytest.mark.parametrize("target", ["host_page", "1.1.1.1:53", "[2606:4700:4700::1111]:53"])
async def test_a_raw_connect_from_a_sandboxed_process_fails(
    mcp_sandbox: DockerSandbox, host_page: str, target: str
) -> None:
    address = host_page.split("//")[1].rstrip("/") if target == "host_page" else target
    host, port = address.rsplit(":", 1)
    code = (
        "import socket,sys\n"
        f"try:\n socket.create_connection(({host.strip('[]')!r}, {port}), timeout=5)\n"
        "except OSError as e:\n print('refused', e.errno); sys.exit(0)\n"
        "print('connected')\n"
    )
    ch = await mcp_sandbox.open_process(["python3", "-c", code])
    out = b""
    while data := await ch.read():
        out += data
    assert out.startswith(b"refused"), out


async def _filesystem(sb: DockerSandbox) -> Wire:
    ch = await sb.open_process(["mcp-server-filesystem", "/"])
    wire = Wire(ch)
    await wire.initialize()
    return wire


async def test_a_sandboxed_server_cannot_read_the_hosts_files(mcp_sandbox: DockerSandbox, tmp_path: Path) -> None:
    secret = tmp_path / "outside-the-project.txt"
    secret.write_text("host-only-secret")
    wire = await _filesystem(mcp_sandbox)
    try:
        got = await wire.call("read_text_file", {"path": str(secret)})
        assert got.get("isError") and "host-only-secret" not in text_of(got)
        hostname = await wire.call("read_text_file", {"path": "/etc/hostname"})
        assert not hostname.get("isError") and text_of(hostname).strip() == "sandbox"
        listing = await wire.call("list_directory", {"path": "/home"})
        assert "sandbox" in text_of(listing) and Path.home().name not in text_of(listing).replace("sandbox", "")
    finally:
        await wire.channel.close()


async def test_a_sandboxed_server_writes_only_its_workspace(mcp_sandbox: DockerSandbox) -> None:
    folder = Path(mcp_sandbox.folder)
    (folder / ".agent-desk").mkdir(exist_ok=True)
    (folder / ".git").mkdir(exist_ok=True)
    (folder / ".agent-desk" / "rules.toml").write_text("# the person's\n")
    await mcp_sandbox.stop_container()  # the control folders are mounted read-only at the next start
    await mcp_sandbox.start()
    wire = await _filesystem(mcp_sandbox)
    try:
        for path in ("/etc/passwd-x", "/opt/mcp/bin/evil", "/usr/local/bin/evil", "/workspace/.agent-desk/rules.toml",
                     "/workspace/.agent-desk/mcp.json", "/workspace/.git/config"):
            res = await wire.call("write_file", {"path": path, "content": "pwned"})
            assert res.get("isError"), path
        ok = await wire.call("write_file", {"path": "/workspace/notes.txt", "content": "fine"})
        assert not ok.get("isError")
    finally:
        await wire.channel.close()
    assert (folder / "notes.txt").read_text() == "fine"
    assert (folder / ".agent-desk" / "rules.toml").read_text() == "# the person's\n"
    assert not (folder / ".agent-desk" / "mcp.json").exists() and not (folder / ".git" / "config").exists()


async def test_a_sandboxed_server_runs_unprivileged(mcp_sandbox: DockerSandbox) -> None:
    code = (
        "import os,json\n"
        "st=dict(l.split(':\\t',1) for l in open('/proc/self/status').read().splitlines() if ':\\t' in l)\n"
        "print(json.dumps({'uid':os.getuid(),'cap':st['CapEff'].strip(),'nnp':st['NoNewPrivs'].strip()}))\n"
    )
    ch = await mcp_sandbox.open_process(["python3", "-c", code])
    out = b""
    while data := await ch.read():
        out += data
    facts = json.loads(out)
    assert facts == {"uid": 1000, "cap": "0000000000000000", "nnp": "1"}


async def test_the_build_ca_bundle_is_not_in_the_mcp_image(docker_client) -> None:
    image = need_mcp_image(docker_client)
    out = docker_client.containers.run(
        image, ["sh", "-c", "find / -xdev -name 'agent-desk-build-ca*' 2>/dev/null; env"], remove=True,
        network_mode="none",
    ).decode()
    assert "agent-desk-build-ca" not in out and "PIP_CERT" not in out and "NPM_CONFIG_CAFILE" not in out
    history = json.dumps(docker_client.api.history(image))
    assert "agent-desk-build-ca" not in history and "npm ci" not in history  # the fetch stage is not a layer
