"""The allowlist network mode's claim: the sandbox's only way out is the desk's proxy, and the proxy connects
only to what it resolved itself for a listed name and port. Attacks from inside a real container (no route, no
DNS, no service of this machine, the proxy's folder read-only), and through the proxy (unlisted ports, address
literals in every spelling, names that resolve to private addresses, a Host header or TLS server name that
claims another site)."""

from __future__ import annotations

import contextlib
import shutil
import socket
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from desktop_app.core import NetworkAllowlist
from desktop_app.sandbox import DockerSandbox, SandboxConfig
from desktop_app.sandbox._proxy import EgressProxy, ListOnlyGate
from tests.conftest import TEST_IMAGE, make_workspace, remove_project
from tests.kit.netservers import NETCLIENT, LocalServers, local_servers


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    with local_servers(tmp_path / "certs") as s:
        yield s


@pytest.fixture
async def sandbox(docker_client: Any, tmp_path: Path, servers: LocalServers) -> AsyncIterator[DockerSandbox]:
    folder = make_workspace(tmp_path / "project")
    shutil.copy(NETCLIENT, folder / "netclient.py")
    ports = f"{servers.http_port},{servers.https_port}"
    config = SandboxConfig.from_settings({"network": "allowlist", "image": TEST_IMAGE,
                                          "network_allow": [f"good.test:{ports}", f"127.0.0.1:{ports}"]})
    sb = DockerSandbox(f"net-{uuid.uuid4().hex[:8]}", folder, config, client=docker_client)
    assert sb.egress is not None
    sb.egress.resolver = servers.resolve
    await sb.start()
    yield sb
    await sb.close()
    remove_project(docker_client, sb.project_id)


async def _client(sb: DockerSandbox, *args: object) -> str:
    res = await sb.exec(["python3", "netclient.py", *map(str, args)], timeout=60)
    return res.stdout.strip()


@contextlib.contextmanager
def _host_listener() -> Any:
    """A service of this machine bound to every address, as a careless database or dev server is."""
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", 0))
    srv.listen()
    srv.settimeout(0)
    try:
        yield srv
    finally:
        srv.close()


def _host_addresses(docker_client: Any) -> list[str]:
    gateways = [c.get("Gateway") for n in docker_client.networks.list() for c in
                ((n.attrs.get("IPAM") or {}).get("Config") or []) if c.get("Gateway")]
    return sorted({g for g in gateways if ":" not in g} | {"127.0.0.1", socket.gethostbyname(socket.gethostname())})


@pytest.mark.docker
async def test_no_way_out_but_the_proxy(sandbox: DockerSandbox, servers: LocalServers, docker_client: Any) -> None:
    h = servers.http_port
    assert sandbox.describe().network == "allowlist"
    assert (await _client(sandbox, "http", "good.test", h)).startswith("status 200")  # the way out works
    for host in ("1.1.1.1", "8.8.8.8", "2606:4700:4700::1111"):
        assert (await _client(sandbox, "direct", host, 443)).startswith("error"), host
    for name in ("pypi.org", "good.test", "localhost.localdomain.example"):
        assert (await _client(sandbox, "dns", name, 0)).startswith("error"), name
    with _host_listener() as srv:
        port = srv.getsockname()[1]
        for address in _host_addresses(docker_client):  # this machine's services, by every address it has
            assert (await _client(sandbox, "direct", address, port)).startswith("error"), address
        with pytest.raises(BlockingIOError):
            srv.accept()  # nothing reached it
    res = await sandbox.exec("touch /run/agent-desk/egress/planted; ls -la /run/agent-desk/egress")
    assert res.exit_code == 0 and "planted" not in res.stdout and "proxy.sock" in res.stdout
    res = await sandbox.exec("touch /run/agent-desk/egress/planted 2>&1; echo $?")
    assert "Read-only file system" in res.stdout
    # The relay dies with a session's end (not reported as a survivor of it) or by the agent's hand: the next
    # command has it again, and still no other way out.
    relay = sandbox._relay_pid
    assert relay and await sandbox.sweep() == {"killed": [], "alive": []}
    assert (await _client(sandbox, "http", "good.test", h)).startswith("status 200")
    gone = f"grep -q '^State:.*Z' /proc/{relay}/status 2>/dev/null || [ ! -e /proc/{relay} ]"
    await sandbox.exec(f"kill {relay}; until {gone}; do :; done", timeout=30)  # the agent kills it, and it is gone
    assert (await _client(sandbox, "http", "good.test", h)).startswith("status 200")
    assert sandbox._relay_pid not in (0, relay)


@pytest.mark.docker
async def test_through_the_proxy_only_what_it_resolved(sandbox: DockerSandbox, servers: LocalServers) -> None:
    h, s = servers.http_port, servers.https_port
    unlisted = next(p for p in range(h + 1, h + 100) if p != s)
    cases = {
        ("https", "good.test", unlisted): "status 403",  # a listed name on an unlisted port
        ("http", "good.test", unlisted): "status 403",
        ("http", "rebind.test", h): "status 403",
        ("http", "mixed.test", h): "status 403",
        ("http", "127.0.0.2", h): "status 403",
        ("http", "[::1]", h): "status 403",
        ("https", "127.0.0.1", 3128): "status 403",  # the relay itself, as a destination
        ("https", "nosuch.test", 443): "status 502",
    }
    for (mode, host, port), want in cases.items():
        assert (await _client(sandbox, mode, host, port)).startswith(want), (mode, host, port)
    # A Host header or a TLS server name that claims another site changes nothing: the proxy connects to what
    # it resolved for the name it was asked, and that is all it judged.
    assert (await _client(sandbox, "http", "good.test", h, "/", "evil.example")).endswith("server plain")
    assert (await _client(sandbox, "https", "good.test", s, "/", "evil.example")).endswith("server tls")
    refused = [c for c in sandbox.egress.gate.connections if c.verdict == "refused"]  # type: ignore[union-attr]
    assert len(refused) == len(cases)
    assert all(c.bytes_up == 0 and c.bytes_down == 0 and c.address in ("", "127.0.0.1") for c in refused)


@pytest.mark.docker
async def test_a_stopped_proxy_leaves_no_way_out_and_says_so(sandbox: DockerSandbox, servers: LocalServers) -> None:
    """The desk's proxy stops while the container runs (a desk closed over a kept container): every connection is
    answered 502, saying why, and none goes anywhere else; a proxy listening again in the same folder (the next
    desk) is the way out again."""
    assert sandbox.egress is not None
    h, s = servers.http_port, servers.https_port
    assert (await _client(sandbox, "https", "good.test", s)).startswith("status 200")
    await sandbox.egress.close(keep_folder=True)
    for mode, host, port in (("https", "good.test", s), ("http", "good.test", h), ("https", "127.0.0.1", s),
                             ("http", "elsewhere.test", 80)):
        said = await _client(sandbox, mode, host, port)
        assert said.startswith("status 502"), (mode, host, said)
        if mode == "https":  # the CONNECT's refusal, with its text
            assert "the desk's network proxy is not running" in said, said
    assert (await _client(sandbox, "direct", "127.0.0.1", h)).startswith("error")  # still no route of its own
    await sandbox.egress.start()
    assert (await _client(sandbox, "https", "good.test", s)).startswith("status 200")
    assert (await _client(sandbox, "http", "good.test", h)).startswith("status 200")


@pytest.mark.parametrize("host", ["localhost", "127.1", "2130706433", "0x7f000001", "0177.0.0.1", "0.0.0.0",
                                  "ip6-localhost", "127.0.0.1.nip.io.invalid"])
async def test_numeric_and_local_names_are_not_a_way_around(host: str) -> None:
    """With the real resolver: a name the system resolves to this machine (or that does not resolve) is refused,
    even when the list names it."""
    gate = ListOnlyGate(NetworkAllowlist.parse([f"{host}:80"] if not host[0].isdigit() else ["ok.example"]))
    proxy = EgressProxy(gate)
    await proxy.start("127.0.0.1", 0)
    try:
        reader, writer = await __import__("asyncio").open_connection(*proxy.address)
        writer.write(f"CONNECT {host}:80 HTTP/1.1\r\n\r\n".encode())
        reply = await reader.read()
        writer.close()
    finally:
        await proxy.close()
    assert reply.startswith((b"HTTP/1.1 403", b"HTTP/1.1 502")), reply
    [conn] = gate.connections
    assert conn.verdict == "refused" and conn.bytes_up == 0


async def test_a_kept_answer_is_judged_again_at_each_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    """The system resolver keeps answers a short while (_proxy.NAME_TTL_S): a kept answer that names a private
    address is refused at every connection, as a fresh one is; keeping it asks the name no more often."""
    import asyncio

    from desktop_app.sandbox import _proxy

    monkeypatch.setattr(_proxy, "_names", {})
    asked: list[str] = []

    async def getaddrinfo(host: str, port: int, **_: object) -> list:
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.1.2.3", port))]

    monkeypatch.setattr(asyncio.get_running_loop(), "getaddrinfo", getaddrinfo)
    gate = ListOnlyGate(NetworkAllowlist.parse(["flip.example:443"]))
    proxy = EgressProxy(gate)
    await proxy.start("127.0.0.1", 0)
    try:
        for _ in range(3):
            reader, writer = await asyncio.open_connection(*proxy.address)
            writer.write(b"CONNECT flip.example:443 HTTP/1.1\r\n\r\n")
            reply = await reader.read()
            writer.close()
            assert reply.startswith(b"HTTP/1.1 403") and b"rebinding" in reply, reply
    finally:
        await proxy.close()
    assert asked == ["flip.example"]
    assert [c.verdict for c in gate.connections] == ["refused"] * 3
    assert all(c.bytes_up == 0 and c.bytes_down == 0 for c in gate.connections)


@pytest.mark.docker
async def test_a_synced_workspace_keeps_the_proxy_as_its_only_way_out(docker_client: Any, tmp_path: Path,
                                                                      servers: LocalServers) -> None:
    """A synced workspace (a volume, no bind mount of the folder) on this engine has the proxy's folder mounted
    too: a listed destination answers through it, and a direct connection still finds no route."""
    folder = make_workspace(tmp_path / "project")
    shutil.copy(NETCLIENT, folder / "netclient.py")
    h = servers.http_port
    config = SandboxConfig.from_settings({"network": "allowlist", "image": TEST_IMAGE, "workspace": "synced",
                                          "network_allow": [f"good.test:{h}", f"127.0.0.1:{h}"]})
    sb = DockerSandbox(f"net-{uuid.uuid4().hex[:8]}", folder, config, client=docker_client)
    assert sb.egress is not None
    sb.egress.resolver = servers.resolve
    await sb.start()
    try:
        assert sb.synced and sb.describe().network == "allowlist"
        assert (await _client(sb, "http", "good.test", h)).startswith("status 200")
        assert (await _client(sb, "direct", "1.1.1.1", 443)).startswith("error")
        res = await sb.exec("touch /run/agent-desk/egress/planted 2>&1; echo $?")
        assert "Read-only file system" in res.stdout
    finally:
        await sb.close()
        remove_project(docker_client, sb.project_id)
