"""One consent dialog for every kind: the rules (trust), the hooks (grant) and an MCP server (grant) are each
shown with what changed since their approval and answered with the kind's own words."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop_app.core import ConsentKind, ConsentStatus, ProjectInfo
from desktop_app.runtime import consents
from desktop_app.ui.dialogs import ConsentDialog

RULES = '[permissions]\ndeny = ["bash_run(curl *)"]\n'
HOOKS = '[[PreToolUse]]\nmatcher = "bash_run"\ncommand = "echo no >&2; exit 2"\n'


@pytest.fixture
def project(tmp_path: Path, monkeypatch) -> ProjectInfo:
    monkeypatch.setenv("AGENT_DESK_CONFIG_DIR", str(tmp_path / "cfg"))
    folder = tmp_path / "project"
    (folder / ".agent-desk").mkdir(parents=True)
    (folder / ".agent-desk/rules.toml").write_text(RULES)
    (folder / ".agent-desk/hooks.toml").write_text(HOOKS)
    (folder / ".agent-desk/mcp.json").write_text(json.dumps({"mcpServers": {"tool": {"command": "t", "run": "host"}}}))
    (folder / ".agent-desk/templates").mkdir()
    (folder / ".agent-desk/templates/pricey.toml").write_text('model = "claude-opus-4-1"\n')
    (folder / ".agent-desk/skills/lint").mkdir(parents=True)
    (folder / ".agent-desk/skills/lint/SKILL.md").write_text("---\nname: lint\ndescription: Lints\n---\nRun ruff.\n")
    return ProjectInfo(id="p", name="demo", path=str(folder))


@pytest.mark.parametrize("kind,title,approve,shown", [
    (ConsentKind.RULES, "Review the rules of demo", "Trust these rules", '+deny = ["bash_run(curl *)"]'),
    (ConsentKind.HOOKS, "Review the hooks of demo", "Grant these hooks", '+matcher = "bash_run"'),
    (ConsentKind.MCP, "Review the MCP server tool of demo", "Grant this server", "+    \"run\": \"host\""),
    (ConsentKind.TEMPLATE, "Review the agent template pricey of demo", "Approve this template",
     "+# model: claude-opus-4-1 instead of"),
    (ConsentKind.SKILLS, "Review the skills of demo", "Approve these skills", "+description: Lints"),
])
def test_each_kind_is_reviewed_in_the_one_dialog(qtbot, project: ProjectInfo, kind: ConsentKind, title: str,
                                                 approve: str, shown: str) -> None:
    [consent] = consents(project, kind)
    assert consent.status is ConsentStatus.NEW
    dialog = ConsentDialog(consent, project.name)
    qtbot.addWidget(dialog)
    assert dialog.windowTitle() == title and dialog.approve_btn.text() == approve
    assert shown in dialog.diff.toPlainText()
