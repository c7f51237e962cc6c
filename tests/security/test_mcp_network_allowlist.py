"""A `sandbox+network` MCP server in a project of the allowlist mode gets no open network. Through a whole
runtime (the default companion, no factory of the test's) and a real server (mcp-server-fetch in the mcp image):
its companion container has network "none" and its own proxy socket under the project's list; a listed domain
is fetched, an unlisted one asks like a call's (the person denies it: refused), and each connection is in the
trail of the server's call, attributed to the server, in a chain that verifies. The proxy's test resolver maps
the test domains to a local server: nothing leaves the machine. With the project's network off (the default) the
server is still behind the proxy, with an empty list: each destination is asked about (allowed once it passes,
denied it is refused), never a fully open network."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from desktop_app.config import Settings
from desktop_app.core import Allow, Answer, ConsentKind, ProjectInfo, ToolCallState
from desktop_app.runtime import approve, consents, open_runtime
from desktop_app.runtime._network import allow_for_project
from tests.conftest import make_workspace, remove_project
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit import Desk
from tests.kit.netservers import LocalServers, local_servers
from tests.mcp_client.conftest import write_config
from tests.sandbox.mcp_wire import need_mcp_image

pytestmark = pytest.mark.docker
FETCH = {"command": "mcp-server-fetch", "args": ["--ignore-robots-txt", "--allow-private-ips"],
         "run": "sandbox+network"}


@pytest.fixture
def fetch_project(docker_client, tmp_path: Path) -> Iterator[tuple[Path, str, LocalServers]]:
    """A project whose MCP config (consented) runs mcp-server-fetch as `sandbox+network`, and the local servers
    with `other.test` mapped to loopback too: (the project's folder, the mcp image, the servers)."""
    image = need_mcp_image(docker_client)
    project = make_workspace(tmp_path / "project")
    (project / ".agent-desk").mkdir(exist_ok=True)
    write_config(project, {"fetch": FETCH})
    [consent] = consents(ProjectInfo("p", "p", str(project)), ConsentKind.MCP)
    approve(ProjectInfo("p", "p", str(project)), consent)
    with local_servers(tmp_path / "certs") as servers:
        servers.names["other.test"] = ["127.0.0.1"]
        yield project, image, servers


@contextlib.asynccontextmanager
async def _runtime(docker_client, server: AnthropicServer, info: ProjectInfo, db: Path,
                   port: int) -> AsyncIterator[Any]:
    """The project's whole runtime in the ask mode, the model told to fetch good.test then other.test (on the
    local server's `port`); its containers removed after."""
    rt = await open_runtime(Settings(base_url=server.url, api_key=server.api_key), info, db_url=str(db),
                            permission_mode="ask")
    fetch = [{"url": f"http://{name}.test:{port}/page", "raw": True} for name in ("good", "other")]
    server.add(reply(tool_use("mcp__fetch__fetch", fetch[0])),
               lambda req: reply(tool_use("mcp__fetch__fetch", fetch[1])), lambda req: reply(text("ok")))
    try:
        yield rt
    finally:
        await rt.close()
        remove_project(docker_client, info.id)


def _companion_network(docker_client, info: ProjectInfo, record: Any) -> str:
    mine = docker_client.containers.list(filters={"label": f"org.agent-desk.project={info.id}"})
    [companion] = [c for c in mine if c.id.startswith(record.sandbox["container_id"])]
    return companion.attrs["HostConfig"]["NetworkMode"]


async def test_a_networked_server_asks_and_is_recorded_like_a_call(
        docker_client, desk_env: Path, server: AnthropicServer, tmp_path: Path,
        fetch_project: tuple[Path, str, LocalServers]) -> None:
    project, image, servers = fetch_project
    h = servers.http_port
    info = ProjectInfo(id=f"mcpnet-{os.urandom(4).hex()}", name="p", path=str(project), image=image,
                       settings={"network": "allowlist", "network_allow": [f"good.test:{h}", f"127.0.0.1:{h}"]})
    async with _runtime(docker_client, server, info, tmp_path / "desk.db", h) as rt:
        rt.sandbox.egress.resolver = servers.resolve
        desk = Desk(rt)  # it allows the calls (the ask mode); the network's question is the test's own
        asked: list[Any] = []

        def deny(env: Any) -> None:
            asked.append(env.event)
            rt.executor.questions.answer(env.event.question_id, Answer(text="deny"))

        rt.bus.on("question_asked", deny)
        session = await rt.open_session()
        await session.send("fetch both")
        good, other = await desk.records(session.session.id)
        assert good.state is ToolCallState.COMPLETED and "Release notes" in good.result["content"][0]["text"]
        nets = [[t.data["network"] for t in r.trail if t.actor == "network"] for r in (good, other)]
        assert [(n["domain"], n["verdict"], n["reason"]) for n in nets[0]] == [("good.test", "allowed", "listed")]
        assert [(n["domain"], n["verdict"], n["reason"]) for n in nets[1]] == [
            ("other.test", "refused", "not listed (the person denied it)")]
        assert nets[0][0]["attribution"] == "MCP server 'fetch': the one call executing"
        assert nets[0][0]["calls"] == [good.id] and nets[1][0]["calls"] == [other.id]
        assert [q.meta["network"]["domain"] for q in asked] == ["other.test"]
        assert asked[0].text.startswith("mcp__fetch__fetch")
        assert "network: allowlist through the desk's proxy, for MCP server 'fetch'" in good.sandbox["relaxations"]
        assert good.sandbox["network"] == "allowlist"
        assert _companion_network(docker_client, info, good) == "none"
        assert good.sandbox["container_id"] != rt.sandbox.describe().container_id
        result = await rt.store.verify()
        assert result.ok, result


async def test_with_the_projects_network_off_a_networked_server_asks_for_every_destination(
        docker_client, desk_env: Path, server: AnthropicServer, tmp_path: Path,
        fetch_project: tuple[Path, str, LocalServers]) -> None:
    """The project's network off (the default): the server still gets no open network. Its list is empty, so
    each destination is asked about: allowed once it is fetched, denied it is refused; both in the trail."""
    project, image, servers = fetch_project
    h = servers.http_port
    # the test servers listen on loopback: the person once allowed that address for this project (a name
    # resolving to a non-public address is refused as rebinding unless the address itself is allowed)
    allow_for_project(str(project), "127.0.0.1", h)
    info = ProjectInfo(id=f"mcpoff-{os.urandom(4).hex()}", name="p", path=str(project), image=image)
    async with _runtime(docker_client, server, info, tmp_path / "desk.db", h) as rt:
        assert getattr(rt.sandbox, "egress", None) is None  # the project itself has no network at all
        rt.sandbox.companion_resolver = servers.resolve
        answers = iter(["allow once", "deny"])
        asked: list[Any] = []

        def answer(env: Any) -> None:
            asked.append(env.event.meta["network"]["domain"])
            rt.executor.questions.answer(env.event.question_id, Answer(text=next(answers)))

        rt.bus.on("question_asked", answer)
        # the call itself asks first (a networked server, the project's network off): the person allows it
        rt.bus.on("permission_required", lambda env: rt.executor.decide(env.event.call_id, Allow()))
        session = await rt.open_session()
        await session.send("fetch both")
        good, other = await Desk(rt).records(session.session.id)
        assert asked == ["good.test", "other.test"]
        assert good.state is ToolCallState.COMPLETED and "Release notes" in good.result["content"][0]["text"]
        nets = [[t.data["network"] for t in r.trail if t.actor == "network"] for r in (good, other)]
        assert [(n["domain"], n["verdict"], n["reason"]) for n in nets[0]] == [
            ("good.test", "allowed", "answered: allowed once")]
        assert [(n["domain"], n["verdict"]) for n in nets[1]] == [("other.test", "refused")]
        assert good.sandbox["network"] == "allowlist"
        assert _companion_network(docker_client, info, good) == "none"
        assert (await rt.store.verify()).ok
