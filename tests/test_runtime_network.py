"""The allowlist network mode through a whole desk: a real sandbox container whose only way out is the desk's
proxy, local HTTP(S) servers behind a test resolver, the fake model asking for bash_run. What is listed passes,
what is not asks (ask mode) or is refused without asking (strict, auto), each connection is in the call's trail
with its bytes and the call that made it, the history finds the call by domain, and the chain verifies."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from desktop_app.config import consent_records
from desktop_app.core import Answer
from desktop_app.runtime import audit_query
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit.netservers import NETCLIENT, LocalServers, local_servers

pytestmark = pytest.mark.docker

ANSWERS = {"ask.test": "allow once", "deny.test": "deny", "proj.test": "allow for this project"}


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    with local_servers(tmp_path) as s:
        for name in ANSWERS:
            s.names[name] = ["127.0.0.1"]  # 127.0.0.1 is listed as an address: these names reach the asking
        yield s


def _network(record: Any) -> list[dict[str, Any]]:
    return [t.data["network"] for t in record.trail if t.actor == "network"]


def _answer_questions(desk: Any, asked: list[Any]) -> None:
    def on_question(env: Any) -> None:
        q = env.event
        asked.append(q)
        domain = q.meta["network"]["domain"]
        desk.rt.executor.questions.answer(q.question_id, Answer(text=ANSWERS[domain]))

    desk.rt.bus.on("question_asked", on_question)


async def _turn(desk: Any, server: AnthropicServer, session: Any, command: str, tool: str = "bash_run") -> Any:
    key = "command" if tool == "bash_run" else "url"
    server.add(reply(tool_use(tool, {key: command})), reply(text("done")))
    await session.send("fetch")
    [record] = [r for r in await desk.records(session.session.id) if r.input.get(key) == command]
    return record


async def test_listed_passes_unlisted_asks_every_connection_is_evidence(desk_for, server: AnthropicServer,
                                                                          servers: LocalServers) -> None:
    ports = f"{servers.http_port},{servers.https_port}"
    desk = await desk_for(mode="ask", settings={"network": "allowlist",
                                                "network_allow": [f"good.test:{ports}", f"127.0.0.1:{ports}"]},
                          rules=[["allow", "bash_run(python3 netclient.py *)"]])  # the client runs in strict too
    desk.rt.sandbox.egress.resolver = servers.resolve
    project = Path(desk.rt.project.path)
    shutil.copy(NETCLIENT, project / "netclient.py")
    asked: list[Any] = []
    _answer_questions(desk, asked)
    session = await desk.rt.open_session()
    assert desk.rt.sandbox.describe().network == "allowlist"
    h, s = servers.http_port, servers.https_port
    client = "python3 netclient.py"
    first = await _turn(desk, server, session, "; ".join([
        f"{client} https good.test {s} /bytes/50000", f"{client} http ask.test {h}", f"{client} http deny.test {h}",
        f"{client} http proj.test {h}", f"{client} http rebind.test {h}", f"{client} http 127.0.0.2 {h}",
        f"{client} direct 127.0.0.1 {h}"]))
    out = first.result["content"][0]["text"]
    assert out.count("status 200") == 3 and out.count("status 403") == 3 and "error" in out  # direct: no route
    conns = _network(first)
    assert [(c["domain"], c["verdict"], c["reason"]) for c in conns] == [
        ("good.test", "allowed", "listed"),
        ("ask.test", "allowed", "answered: allowed once"),
        ("deny.test", "refused", "not listed (the person denied it)"),
        ("proj.test", "allowed", "answered: allowed for this project"),
        ("rebind.test", "refused", "rebinding: the name resolves to the non-public address 10.20.30.40"),
        ("127.0.0.2", "refused", "an IP address, not listed"),
    ]
    assert all(c["calls"] == [first.id] and c["attribution"] == "the one call executing" for c in conns)
    assert conns[0]["bytes_down"] > 50000 and conns[0]["bytes_up"] > 0 and conns[2]["bytes_down"] == 0
    assert all(c["ended_at"] >= c["started_at"] for c in conns)
    assert [q.meta["network"]["domain"] for q in asked] == ["ask.test", "deny.test", "proj.test"]
    assert asked[0].text.startswith("bash_run `python3 netclient.py https good.test") and \
        f"wants ask.test:{h}" in asked[0].text
    assert asked[0].choices == ["allow once", "allow for this project", "deny"]
    assert [r.text for r in consent_records("network", project).values()] == [f"proj.test:{h}"]

    desk.rt.policy.set_session_mode(session.session.id, "strict")
    strict = await _turn(desk, server, session, f"{client} http ask.test {h}; {client} http proj.test {h}")
    assert [(c["domain"], c["verdict"], c["reason"]) for c in _network(strict)] == [
        ("ask.test", "refused", "not listed (strict mode)"), ("proj.test", "allowed", "listed")]
    desk.rt.policy.set_session_mode(session.session.id, "auto")
    auto = await _turn(desk, server, session, f"{client} http deny.test {h}")
    assert [c["reason"] for c in _network(auto)] == ["not listed (auto mode never widens the network)"]
    fetched = await _turn(desk, server, session, f"http://good.test:{h}/moved", "web_fetch")
    page = fetched.result["content"][0]["text"]
    assert page.startswith(f"http://good.test:{h}/page (200, text/html") and "# Release notes" in page
    assert "[the docs](/docs)" in page and "secret" not in page
    assert [(c["domain"], c["verdict"]) for c in _network(fetched)] == [("good.test", "allowed")] * 2  # a redirect
    refused = await _turn(desk, server, session, f"https://deny.test:{s}/", "web_fetch")
    assert refused.is_error and "auto mode never widens the network" in refused.result["content"][0]["text"]
    assert len(asked) == 3  # strict and auto never asked

    store = desk.rt.store
    found = {r.id for r in await store.list_records(audit_query(domain="good.test"))}
    assert found == {first.id, fetched.id}
    every = {first.id, strict.id, auto.id, fetched.id, refused.id}
    assert {r.id for r in await store.list_records(audit_query(domain="test"))} == every
    assert await store.list_records(audit_query(domain="pypi.org")) == []
    result = await store.verify()
    assert result.ok, result
