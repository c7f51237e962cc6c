"""Skills on the real DockerSandbox with the fake Anthropic server: the names and descriptions reach the system
prompt, the `skill` tool loads one's body, and its files are readable in the sandbox: a project skill's in the
workspace's read-only control folder, a user skill's copied into the sandbox's /tmp."""

from __future__ import annotations

from pathlib import Path

import pytest

from desktop_app.core import ToolCallState, load_skills, read_project_skills
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit import system_of

pytestmark = pytest.mark.docker

SKILL = """---
name: release-notes
description: Writes release notes from the changelog
---
Read CHANGELOG.md, then run `sh /tmp/agent-desk/skills/notes/make.sh`.
"""


def test_skills_are_found_and_listed(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".agent-desk" / "skills" / "lint").mkdir(parents=True)
    (project / ".agent-desk" / "skills" / "lint" / "SKILL.md").write_text(
        "---\nname: lint\ndescription: |\n  Runs the linter\n  and explains it\n---\nRun ruff.\n")
    (project / ".agent-desk" / "skills" / "lint" / "rules.txt").write_text("E501")
    user = tmp_path / "user" / "lint"
    user.mkdir(parents=True)
    (user / "SKILL.md").write_text("---\nname: lint\ndescription: The user's lint\n---\nx")
    approved = read_project_skills(str(project)).digest  # the person approved the project's skills
    catalog = load_skills(str(project), None, approved)
    lint = catalog.skills["lint"]
    assert (lint.source, lint.description, lint.body) == ("project", "Runs the linter and explains it", "Run ruff.")
    assert lint.files == ("rules.txt",) and lint.sandbox_dir == "/workspace/.agent-desk/skills/lint"
    assert catalog.prompt().endswith("- lint: Runs the linter and explains it")
    both = load_skills(str(project), str(tmp_path / "user"), approved)  # the project's never replaces yours
    assert both.skills["lint"].source == "user" and any("would replace your skill" in p for p in both.problems)
    assert load_skills(str(tmp_path / "nothing")).prompt() == ""


async def test_a_user_skill_loaded_and_used(desk_for, server: AnthropicServer, tmp_path: Path,
                                            monkeypatch) -> None:
    user = tmp_path / "cfg" / "skills" / "notes"
    user.mkdir(parents=True)
    (user / "SKILL.md").write_text(SKILL)
    (user / "make.sh").write_text("echo notes from the skill\n")
    desk = await desk_for(mode="auto")
    server.add(reply(tool_use("skill", {"name": "release-notes"})),
               lambda req: reply(tool_use("bash_run", {"command": "sh /tmp/agent-desk/skills/notes/make.sh"})),
               lambda req: reply(text(req.last_tool_result_text())))
    session = await desk.rt.open_session()
    result = await session.send("write the release notes")
    assert "- release-notes: Writes release notes from the changelog" in system_of(server.requests[0])
    loaded, ran = await desk.records(session.session.id)
    assert loaded.state is ToolCallState.COMPLETED
    assert "Read CHANGELOG.md" in loaded.result["content"][0]["text"]
    assert loaded.result["details"]["copied"] == ["/tmp/agent-desk/skills/notes/make.sh"]
    assert ran.state is ToolCallState.COMPLETED and "notes from the skill" in result.text
    # the copy is read-only in the sandbox; the host's file was never written
    check = await desk.rt.sandbox.exec(["sh", "-c", "test -w /tmp/agent-desk/skills/notes/make.sh || echo ro"])
    assert check.stdout.strip() == "ro"
    assert (user / "make.sh").read_text() == "echo notes from the skill\n"


async def test_a_project_skill_is_read_where_it_lies(desk_for, server: AnthropicServer) -> None:
    desk = await desk_for()
    folder = Path(desk.rt.project.path) / ".agent-desk" / "skills" / "style"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: style\ndescription: House style\n---\nSee guide.md.\n")
    (folder / "guide.md").write_text("Use tabs.\n")
    desk.rt.skills.add_project(desk.rt.project.path, read_project_skills(desk.rt.project.path).digest)
    from desktop_app.tools import SkillTool

    desk.rt.registry.register(SkillTool(desk.rt.skills))
    server.add(reply(tool_use("skill", {"name": "style"})),
               lambda req: reply(tool_use("fs_read", {"path": ".agent-desk/skills/style/guide.md"})),
               lambda req: reply(tool_use("skill", {"name": "nope"})),
               lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("style?")
    loaded, read, missing = await desk.records(session.session.id)
    assert "/workspace/.agent-desk/skills/style/: guide.md" in loaded.result["content"][0]["text"]
    assert read.state is ToolCallState.COMPLETED and "Use tabs." in str(read.result)
    assert missing.is_error and "there is no skill 'nope'" in missing.result["content"][0]["text"]


async def test_an_explore_child_is_told_the_skills_too(desk_for, server: AnthropicServer, tmp_path: Path) -> None:
    user = tmp_path / "cfg" / "skills" / "notes"
    user.mkdir(parents=True)
    (user / "SKILL.md").write_text(SKILL)
    desk = await desk_for()
    server.add(reply(tool_use("task_run", {"task": "look"})), lambda req: reply(text("seen")),
               lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("go")
    assert "release-notes" in system_of(server.requests[1])
    assert "skill" in {t["name"] for t in server.requests[1].body["tools"]}
