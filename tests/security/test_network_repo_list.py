"""A repository cannot widen its own network list: .agent-desk/network.toml applies only once the person approved
exactly the patterns it adds (consent bound to their digest); until then only the person's own list applies and
a refusal says which consent allows it. Attacks: a list edited after consent, patterns that widen (`*`, `*.com`,
shared suffixes, addresses, networks), confusable and punycode names, a list smuggled in through a template, a
link, and a file that tries to set the mode."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from desktop_app.core import AgentDeskError, ConfigError, ConsentKind, ConsentStatus, ProjectInfo, template_from_text
from desktop_app.runtime import approve, consents
from desktop_app.runtime._network_repo import NETWORK_FILE, read_repo_entries, repo_network
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit.netservers import NETCLIENT, LocalServers, local_servers
from tests.ui import conftest as ui_kit


def _ship(project: Path, body: str) -> None:
    (project / ".agent-desk").mkdir(exist_ok=True)
    (project / NETWORK_FILE).write_text(body)


def _project(path: Path) -> ProjectInfo:
    return ProjectInfo(id="p1", name="p", path=str(path))


@pytest.mark.parametrize("pattern, why", [
    ("*", "malformed"), ("*.*", "malformed"), ("*.com", "malformed"), ("*.", "malformed"),
    ("**.example.org", "malformed"),
    ("*.co.uk", "anyone registers"), ("*.com.au", "anyone registers"), ("*.github.io", "anyone can have a name"),
    ("*.amazonaws.com", "anyone can have a name"), ("*.ngrok-free.app", "anyone can have a name"),
    ("10.0.0.5", "address"), ("127.0.0.1:8080", "address"), ("169.254.169.254", "address"), ("[::1]:443", "address"),
    ("0.0.0.0/0", "address"), ("10.0.0.0/8", "address"), ("::/0", "address"),
    ("xn--pypi-7ve.org", "punycode"), ("pypi.xn--rg-8ka", "punycode"), ("*.xn--80ak6aa92e.com", "punycode"),
    ("pypі.org", "malformed"), ("ρypi.org", "malformed"), ("pypi.org\u200b", "malformed"),
    ("ｐｙｐｉ.org", "malformed"),
    ("localhost", "single-label"), ("metadata", "single-label"), ("@everything", "malformed"),
])
def test_a_repository_cannot_list_what_widens(tmp_path: Path, desk_env: Path, pattern: str, why: str) -> None:
    _ship(tmp_path, f'allow = ["pypi.org", {pattern!r}]\n'.replace("'", '"'))
    with pytest.raises(ConfigError) as err:
        read_repo_entries(str(tmp_path))
    message = err.value.user_message()
    assert ("network_allow" in message or NETWORK_FILE in message) and (why == "malformed" or why in message)
    # ... and such a file can be shown, never approved, and applies nothing
    [consent] = consents(_project(tmp_path), ConsentKind.NETWORK)
    assert consent.status is ConsentStatus.NEW and "#" in (consent.current or "")
    with pytest.raises(AgentDeskError):
        approve(_project(tmp_path), consent)
    found = repo_network(str(tmp_path))
    assert not found.approved.patterns and not found.waiting.patterns


@pytest.mark.parametrize("body, fragment", [
    ('network = true\nallow = ["pypi.org"]\n', "unknown key(s) network"),
    ('allow = ["pypi.org"]\nnetwork_allow = ["*"]\n', "unknown key(s) network_allow"),
    ('allow = "pypi.org"\n', "a list of patterns"),
    ("allow = [\n", "not TOML"),
    ('allow = ["pypi.org"]\n[sandbox]\nnetwork = true\n', "unknown key(s) sandbox"),
])
def test_a_repository_file_cannot_set_the_mode_or_smuggle_keys(tmp_path: Path, desk_env: Path, body: str,
                                                               fragment: str) -> None:
    _ship(tmp_path, body)
    with pytest.raises(ConfigError) as err:
        read_repo_entries(str(tmp_path))
    assert fragment in err.value.user_message()


def test_a_link_is_not_followed(tmp_path: Path, desk_env: Path) -> None:
    elsewhere = tmp_path / "elsewhere.toml"
    elsewhere.write_text('allow = ["evil.example"]\n')
    project = tmp_path / "p"
    (project / ".agent-desk").mkdir(parents=True)
    os.symlink(elsewhere, project / NETWORK_FILE)
    with pytest.raises(ConfigError):
        read_repo_entries(str(project))
    assert not repo_network(str(project)).waiting.patterns


def test_consent_is_bound_to_what_the_file_adds(tmp_path: Path, desk_env: Path) -> None:
    project = _project(tmp_path)
    _ship(tmp_path, '# what the build needs\nallow = ["@python", "docs.example.org"]\n')
    [consent] = consents(project, ConsentKind.NETWORK)
    assert consent.status is ConsentStatus.NEW and consent.current == "@python\ndocs.example.org\n"
    assert repo_network(tmp_path.as_posix()).waiting.admits_name("pypi.org", 443)
    approve(project, consent)
    now = repo_network(str(tmp_path))
    assert now.approved.admits_name("files.pythonhosted.org", 443) and not now.waiting.patterns
    # reordered, commented, upper-cased: the same patterns, still approved
    _ship(tmp_path, 'allow = [\n  "DOCS.example.org",  # docs\n  "@python",\n]\n')
    assert consents(project, ConsentKind.NETWORK)[0].status is ConsentStatus.APPROVED
    # one more domain after consent: the whole list waits again, the approved part included
    _ship(tmp_path, 'allow = ["@python", "docs.example.org", "exfil.example.net"]\n')
    [changed] = consents(project, ConsentKind.NETWORK)
    assert changed.status is ConsentStatus.CHANGED and "+exfil.example.net" in changed.diff()
    after = repo_network(str(tmp_path))
    assert not after.approved.patterns and after.waiting.admits_name("exfil.example.net", 443)
    # what was shown before the edit cannot be approved now
    with pytest.raises(ConfigError, match="changed since it was shown"):
        approve(project, consent)
    approve(project, changed, revoke=True)
    assert consents(project, ConsentKind.NETWORK)[0].status is ConsentStatus.NEW


def test_a_template_cannot_carry_a_network_list(tmp_path: Path) -> None:
    for body in ('description = "x"\nnetwork_allow = ["evil.example"]\n',
                 'description = "x"\nnetwork = "allowlist"\n',
                 'description = "x"\n[permissions]\nallow = ["web_fetch(*)"]\n'):
        with pytest.raises(ConfigError):
            template_from_text(body, "t", "project:t.toml")


# one real session: the repository's list refused until approved, then used, then refused again once edited
def _network(record: Any) -> list[dict[str, Any]]:
    return [t.data["network"] for t in record.trail if t.actor == "network"]


async def _turn(desk: Any, server: AnthropicServer, session: Any, command: str) -> Any:
    server.add(reply(tool_use("bash_run", {"command": command})), reply(text("done")))
    await session.send("fetch")
    [record] = [r for r in await desk.records(session.session.id) if r.input.get("command") == command]
    return record


@pytest.fixture
def servers(tmp_path: Path) -> Any:
    with local_servers(tmp_path) as s:
        for name in ("repo.test", "more.test"):
            s.names[name] = ["127.0.0.1"]
        yield s


@pytest.mark.docker
async def test_the_repository_list_waits_for_the_person(desk_for, server: AnthropicServer,
                                                        servers: LocalServers) -> None:
    h = servers.http_port
    desk = await desk_for(mode="strict", settings={"network": "allowlist", "network_allow": [f"127.0.0.1:{h}"]},
                          rules=[["allow", "bash_run(python3 netclient.py *)"]])
    desk.rt.sandbox.egress.resolver = servers.resolve
    root = Path(desk.rt.project.path)
    shutil.copy(NETCLIENT, root / "netclient.py")
    _ship(root, f'allow = ["repo.test:{h}"]\n')
    session = await desk.rt.open_session()
    command = f"python3 netclient.py http repo.test {h}"
    hint = "agent-desk consent approve --kind network-list"

    refused = await _turn(desk, server, session, command)
    [conn] = _network(refused)
    assert conn["verdict"] == "refused" and conn["reason"].startswith("not listed (strict mode); ") and \
        hint in conn["reason"] and NETWORK_FILE in conn["reason"]
    assert "status 403" in refused.result["content"][0]["text"]

    [consent] = consents(desk.rt.project, ConsentKind.NETWORK)
    approve(desk.rt.project, consent)
    allowed = await _turn(desk, server, session, command + " ")
    assert [(c["verdict"], c["reason"]) for c in _network(allowed)] == [
        ("allowed", "listed (the repository's list, approved)")]

    _ship(root, f'allow = ["repo.test:{h}", "more.test:{h}"]\n')  # edited after consent: nothing of it applies
    again = await _turn(desk, server, session, f"{command}; python3 netclient.py http more.test {h}")
    assert [(c["domain"], c["verdict"], hint in c["reason"]) for c in _network(again)] == [
        ("repo.test", "refused", True), ("more.test", "refused", True)]
    result = await desk.rt.store.verify()
    assert result.ok, result


# the window: the banner asks about the repository's list like any shipped file ------------------------------
qloop, run, store = ui_kit.qloop, ui_kit.run, ui_kit.store  # the window test's event loop and store


def test_the_window_asks_about_the_repositorys_list(qtbot, run, store, desk_env: Path) -> None:
    from tests.ui.helpers import window_on

    project = desk_env / "project"
    project.mkdir()
    _ship(project, 'allow = ["docs.example.org"]\n')
    proj = ProjectInfo("prj_netlist", "demo", str(project))
    window, controller, rts = window_on(qtbot, run, store, proj)
    qtbot.waitUntil(lambda: "network list" in window.banner.text())
    assert "its domains are not reachable until you approve it" in window.banner.text()
    assert "The repository's network list is not approved" in controller.consent.notice_for(proj)
    review = controller.tasks.spawn(controller.consent.review(proj, ConsentKind.NETWORK, ""))
    qtbot.waitUntil(lambda: controller.consent.dialog is not None and controller.consent.dialog.isVisible())
    assert "+docs.example.org" in controller.consent.dialog.diff.toPlainText()
    controller.consent.dialog.approve_btn.click()
    qtbot.waitUntil(review.done)
    assert review.result() is True and "network list" not in window.banner.text()
    assert repo_network(str(project)).approved.admits_name("docs.example.org", 443)
    run(controller.close())
    run(rts.close())
