"""`agent-desk network list|allow|revoke`: the person's list and answers from the terminal, the repository's list
shown with its consent, a malformed pattern refused naming the setting, and every change in the hash chain."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from desktop_app import cli
from desktop_app.cli import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from desktop_app.config import consent_records
from desktop_app.core import Channel
from desktop_app.runtime import open_store
from desktop_app.runtime._network import allow_for_project
from desktop_app.sandbox import SandboxConfig
from desktop_app.store import SqlStore


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    seen = capsys.readouterr()
    return code, seen.out, seen.err


def test_network_lists_allows_and_revokes_in_the_chain(desk_env: Path, tmp_path: Path, capsys) -> None:
    project = tmp_path / "project"
    (project / ".agent-desk").mkdir(parents=True)
    (project / ".agent-desk/network.toml").write_text('allow = ["docs.example.org"]\n')
    db = str(tmp_path / "desk.db")
    where = ["--project", str(project), "--db", db]
    assert _run(capsys, "network", "allow", "pypi.org", *where)[0] == EXIT_OK
    code, out, err = _run(capsys, "network", "allow", "@python", *where)
    assert code == EXIT_OK and "@python is in the project's list" in err and "the project's network is off" in err
    for bad in ("*", "*.com", "exa mple.org", "10.0.0.0/33", "@nothing"):
        code, out, err = _run(capsys, "network", "allow", bad, *where)
        assert code == EXIT_USAGE and "network_allow" in err and "Traceback" not in err, (bad, err)
    allow_for_project(str(project), "proj.test", 8080)
    allow_for_project(str(project), "proj.test", 8443)
    code, out, err = _run(capsys, "network", "list", *where)
    assert code == EXIT_OK and out.splitlines() == [
        "yours\tpypi.org", "yours\t@python", "answered\tproj.test:8080", "answered\tproj.test:8443",
        "repository\tdocs.example.org\tnew"]
    code, out, err = _run(capsys, "network", "revoke", "proj.test", *where)  # every port of the host
    assert code == EXIT_OK and "proj.test:8080, proj.test:8443 no longer reachable" in err
    assert consent_records("network", str(project)) == {}
    assert _run(capsys, "network", "revoke", "PyPI.org", *where)[0] == EXIT_OK
    code, out, err = _run(capsys, "network", "revoke", "docs.example.org", *where)
    assert code == EXIT_USAGE and "consent revoke --kind network-list" in err
    assert _run(capsys, "network", "list", *where)[1].splitlines() == ["yours\t@python",
                                                                       "repository\tdocs.example.org\tnew"]

    async def stored() -> tuple[list[str], object, dict]:
        store = await SqlStore.open(db)
        try:
            events = [e.payload.get("message", "") for e in await store.events_since(0, list(Channel))]
            [info] = await store.list_projects()
            return events, await store.verify(), info.settings
        finally:
            await store.close()

    events, verified, settings = asyncio.run(stored())
    assert [m.split(" (")[0] for m in events if m.startswith("network ")] == [
        "network allow pypi.org in project", "network allow @python in project", "network revoke proj.test in project",
        "network revoke PyPI.org in project"]
    assert settings["network_allow"] == ["@python"] and verified.ok, verified  # type: ignore[attr-defined]
    assert _run(capsys, "audit", "verify", "--db", db)[0] == EXIT_OK


def _settings(db: str) -> tuple[dict, list[str], bool]:
    """The one project's settings, the network events' messages and whether the chain verifies."""

    async def read() -> tuple[dict, list[str], bool]:
        store = await SqlStore.open(db)
        try:
            [info] = await store.list_projects()
            events = [e.payload.get("message", "") for e in await store.events_since(0, list(Channel))]
            return info.settings, [m for m in events if m.startswith("network ")], (await store.verify()).ok
        finally:
            await store.close()

    return asyncio.run(read())


def test_network_mode_is_shown_and_set_from_the_terminal(desk_env: Path, tmp_path: Path, capsys,
                                                         monkeypatch) -> None:
    """A headless desk sets the mode the window's Network tab sets: off, allowlist or on (asked first), each
    change saved with the project and told on the event log, in the chain."""
    project = tmp_path / "project"
    project.mkdir()
    db = str(tmp_path / "desk.db")
    where = ["--project", str(project), "--db", db]
    assert _run(capsys, "network", "mode", *where)[:2] == (EXIT_OK, "off\n")
    code, out, err = _run(capsys, "network", "mode", "allowlist", *where)
    assert code == EXIT_OK and "allowlist (was off)" in err and "your list is empty" in err
    assert _run(capsys, "network", "mode", *where)[:2] == (EXIT_OK, "allowlist\n")
    code, out, err = _run(capsys, "network", "allow", "pypi.org", *where)
    assert code == EXIT_OK and "the project's network is" not in err  # the list applies: no note
    allowlisted = SandboxConfig.from_settings(_settings(db)[0])  # what the next sandbox is made with
    assert allowlisted.network is False and list(allowlisted.network_allow or []) == ["pypi.org"]

    asked: list[str] = []
    monkeypatch.setattr("desktop_app.cli._network.ask", lambda q: asked.append(q) or "n\n")
    code, out, err = _run(capsys, "network", "mode", "on", *where)
    assert code == EXIT_FAILED and out == "" and "not changed" in err and "full network" in asked[0]
    assert _run(capsys, "network", "mode", *where)[1] == "allowlist\n"
    monkeypatch.setattr("desktop_app.cli._network.ask", lambda q: "y\n")
    assert _run(capsys, "network", "mode", "on", *where)[0] == EXIT_OK
    assert _run(capsys, "network", "mode", *where)[1] == "on\n"
    monkeypatch.setattr("desktop_app.cli._network.ask", lambda q: pytest.fail("--yes asks nothing"))
    assert _run(capsys, "network", "mode", "off", "--yes", *where)[0] == EXIT_OK
    assert _run(capsys, "network", "mode", "on", "--yes", *where)[0] == EXIT_OK
    code, _, err = _run(capsys, "network", "mode", "sometimes", *where)
    assert code == EXIT_USAGE and "invalid choice" in err

    settings, events, verified = _settings(db)
    assert settings["network"] is True and settings["network_allow"] == ["pypi.org"] and verified
    assert [m.split(" (")[0] for m in events] == [
        "network mode allowlist in project", "network allow pypi.org in project", "network mode on in project",
        "network mode off in project", "network mode on in project"]
    assert SandboxConfig.from_settings(settings).network is True


def test_network_mode_allowlist_refuses_a_malformed_list_and_keeps_the_mode(desk_env: Path, tmp_path: Path,
                                                                           capsys) -> None:
    """A list written by hand with a malformed entry: the allowlist mode is refused naming the setting, and the
    mode stays what it was (that sandbox would have had no network at all, silently)."""
    project = tmp_path / "project"
    project.mkdir()
    db = str(tmp_path / "desk.db")
    where = ["--project", str(project), "--db", db]
    assert _run(capsys, "network", "mode", *where)[0] == EXIT_OK  # the project is made

    async def hand_edit() -> None:
        store = await open_store(db)  # the desk's own store (its signer), as a hand-edited older desk's would be
        try:
            [info] = await store.list_projects()
            info.settings = {**info.settings, "network": None, "network_allow": ["pypi.org", "exa mple.org"]}
            await store.save_project(info)
        finally:
            await store.close()

    asyncio.run(hand_edit())
    assert _run(capsys, "network", "mode", *where)[1] == "off\n"  # a null mode is off, as the sandbox reads it
    code, _, err = _run(capsys, "network", "mode", "allowlist", *where)
    assert code == EXIT_USAGE and "network_allow" in err and "exa mple.org" in err and "Traceback" not in err
    assert _run(capsys, "network", "mode", *where)[1] == "off\n"
    settings, events, verified = _settings(db)
    assert settings.get("network") is None and events == [] and verified
