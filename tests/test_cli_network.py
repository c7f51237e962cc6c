"""`agent-desk network list|allow|revoke`: the person's list and answers from the terminal, the repository's list
shown with its consent, a malformed pattern refused naming the setting, and every change in the hash chain."""

from __future__ import annotations

import asyncio
from pathlib import Path

from desktop_app import cli
from desktop_app.cli import EXIT_OK, EXIT_USAGE
from desktop_app.config import consent_records
from desktop_app.core import Channel
from desktop_app.runtime._network import allow_for_project
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
