"""One consent for every project file the sandbox or a repository can write: the rules file, the hooks file and
each MCP server entry share one type, one status enum, one registry of kinds and one approve/revoke call."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop_app.config import CONSENT_FILE
from desktop_app.core import ConfigError, ConsentKind, ConsentStatus, ProjectInfo
from desktop_app.runtime import CONSENT_KINDS, approve, consents

RULES = '[permissions]\ndeny = ["bash_run(curl *)"]\n'
HOOKS = '[[PreToolUse]]\nmatcher = "bash_run"\ncommand = "echo no >&2; exit 2"\n'
MCP = {"mcpServers": {"tool": {"command": "true", "run": "host"}, "quiet": {"command": "true"}}}


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> ProjectInfo:
    monkeypatch.setenv("AGENT_DESK_CONFIG_DIR", str(tmp_path / "cfg"))
    folder = tmp_path / "project"
    (folder / ".agent-desk").mkdir(parents=True)
    return ProjectInfo(id="p", name="p", path=str(folder))


def _write_all(project: ProjectInfo, suffix: str = "") -> None:
    base = Path(project.path) / ".agent-desk"
    (base / "rules.toml").write_text(RULES + suffix)
    (base / "hooks.toml").write_text(HOOKS + suffix)
    mcp = json.loads(json.dumps(MCP))
    if suffix:
        mcp["mcpServers"]["tool"]["args"] = ["--edited"]
    (base / "mcp.json").write_text(json.dumps(mcp))


def _statuses(project: ProjectInfo) -> dict[tuple[ConsentKind, str], ConsentStatus]:
    return {(c.kind, c.name): c.status for c in consents(project)}


def test_every_kind_has_its_entry_in_the_registry() -> None:
    assert set(CONSENT_KINDS) == set(ConsentKind)


def test_nothing_to_approve_in_a_project_without_the_files(project: ProjectInfo) -> None:
    assert {c.status for c in consents(project)} == {ConsentStatus.NONE}
    assert all(c.ok for c in consents(project))


def test_each_kind_is_new_approved_changed_and_revoked_alike(project: ProjectInfo, tmp_path: Path) -> None:
    _write_all(project)
    keys = {(ConsentKind.RULES, ""), (ConsentKind.HOOKS, ""), (ConsentKind.MCP, "tool"), (ConsentKind.MCP, "quiet")}
    assert _statuses(project) == dict.fromkeys(keys, ConsentStatus.NEW)  # "quiet" runs in the sandbox: asked too
    for c in consents(project):
        project.settings = approve(project, c)
    assert _statuses(project) == dict.fromkeys(keys, ConsentStatus.APPROVED)
    record = json.loads((tmp_path / "cfg" / CONSENT_FILE).read_text())  # out of the sandbox's reach, one file
    assert set(record) == {"rules", "hooks", "mcp"} and project.settings == {}  # nothing in the project settings
    _write_all(project, "# edited\n")  # "quiet" is left as it was
    assert _statuses(project) == {**dict.fromkeys(keys, ConsentStatus.CHANGED),
                                  (ConsentKind.MCP, "quiet"): ConsentStatus.APPROVED}
    assert [c.name for c in consents(project) if c.ok] == ["quiet"]
    for c in consents(project):
        project.settings = approve(project, c, revoke=True)
    assert _statuses(project) == dict.fromkeys(keys, ConsentStatus.NEW)


def test_a_subject_changed_after_it_was_shown_is_not_approved(project: ProjectInfo) -> None:
    _write_all(project)
    shown = {c.kind: c for c in consents(project) if c.name != "quiet"}
    _write_all(project, "# edited\n")
    project.settings = approve(project, shown[ConsentKind.RULES])
    project.settings = approve(project, shown[ConsentKind.HOOKS])
    with pytest.raises(ConfigError, match="changed since it was shown"):
        approve(project, shown[ConsentKind.MCP])
    # what was approved is what was shown: the files on disk are not
    assert set(_statuses(project).values()) == {ConsentStatus.CHANGED, ConsentStatus.NEW}


def test_a_subject_that_cannot_be_used_is_refused_not_approved(project: ProjectInfo) -> None:
    (Path(project.path) / ".agent-desk/hooks.toml").write_text('[[PreToolUse]]\nmatcher = "x"\n')
    (Path(project.path) / ".agent-desk/rules.toml").write_text("[permissions\n")
    for c in consents(project):
        if c.kind is not ConsentKind.MCP:
            with pytest.raises(ConfigError):
                approve(project, c)
    assert {c.status for c in consents(project) if c.kind is not ConsentKind.MCP} == {ConsentStatus.NEW}


def test_the_status_is_one_enum_from_two_digests() -> None:
    assert ConsentStatus.of(None, None) is ConsentStatus.NONE
    assert ConsentStatus.of(None, "a") is ConsentStatus.DELETED
    assert ConsentStatus.of("a", None) is ConsentStatus.NEW
    assert ConsentStatus.of("a", "a") is ConsentStatus.APPROVED
    assert ConsentStatus.of("a", "b") is ConsentStatus.CHANGED


def test_approvals_the_project_settings_held_before_count_until_they_move(project: ProjectInfo,
                                                                          tmp_path: Path) -> None:
    """An installation upgraded from the settings-held grants keeps its hooks and servers granted; the next
    approval or revocation of a kind moves it to consent.json and out of the settings."""
    _write_all(project)
    hooks, tool = (next(c for c in consents(project, k)) for k in (ConsentKind.HOOKS, ConsentKind.MCP))
    project.settings = {"hooks_grant_digest": hooks.digest, "mcp_grants": {"tool": "host", "gone": "host"},
                        "mcp_grant_digests": {"tool": tool.digest, "gone": "0" * 64}, "network": False}
    assert _statuses(project)[(ConsentKind.HOOKS, "")] is ConsentStatus.APPROVED
    assert _statuses(project)[(ConsentKind.MCP, "tool")] is ConsentStatus.APPROVED
    # granted for another relaxation than the entry asks for now: a change, never a match
    stale = {**project.settings, "mcp_grants": {"tool": "sandbox+network"}}
    assert _statuses(ProjectInfo("p", "p", project.path, settings=stale))[(ConsentKind.MCP, "tool")] is \
        ConsentStatus.CHANGED
    project.settings = approve(project, hooks, revoke=True)
    assert "hooks_grant_digest" not in project.settings
    assert _statuses(project)[(ConsentKind.HOOKS, "")] is ConsentStatus.NEW
    project.settings = approve(project, tool)
    assert project.settings == {"mcp_grants": {"gone": "host"}, "mcp_grant_digests": {"gone": "0" * 64},
                                "network": False}
    assert _statuses(ProjectInfo("p", "p", project.path))[(ConsentKind.MCP, "tool")] is ConsentStatus.APPROVED


async def test_an_open_runtime_is_rebuilt_when_an_approval_changes(project: ProjectInfo, tmp_path: Path) -> None:
    """A grant given elsewhere (the CLI while the window is open) reaches the next session: the runtime that
    was built without it is replaced."""
    from desktop_app.config import Settings
    from desktop_app.core import EventBus
    from desktop_app.runtime import ProjectRuntimes, open_store
    from desktop_app.sandbox import LocalSandbox

    _write_all(project)
    store = await open_store(tmp_path / "desk.db")
    rts = ProjectRuntimes(settings=Settings(api_key="sk-test"), store=store, bus=await EventBus.open(store),
                          sandbox_factory=lambda p: LocalSandbox(p.path))
    try:
        first = await rts.get(project)
        assert await rts.get(project) is first  # nothing changed: the same runtime
        approve(project, next(c for c in consents(project) if c.kind is ConsentKind.HOOKS))
        second = await rts.get(project)
        assert second is not first and second.hooks_trust is not None and second.hooks_trust.ok
        assert await rts.get(project) is second
    finally:
        await rts.close()
        await store.close()
