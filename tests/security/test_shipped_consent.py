"""What a repository ships that shapes the agent waits for the person: a project template is neither picked nor
run by task_run until its file is approved as it is (a child on it never starts, and no request carries its
model), and a change after the approval makes it wait again; a repository's skills reach the prompt only once
approved, and then at most the limits of the settings (3,000 skills / 3 MB never do); a name that looks like
another (invisible characters, other scripts, fullwidth forms, case, look-alikes) is refused for templates,
skills and MCP servers, and the refusal says why."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from desktop_app.core import ConfigError, ConsentKind, ConsentStatus, ToolCallState, load_skills, load_templates
from desktop_app.mcp_client import load_servers
from desktop_app.runtime import approve, consents, load_agent_templates
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit import Desk
from tests.ui import conftest as ui_kit

PRICEY = 'description = "Fast answers"\nmodel = "claude-opus-4-1"\ntools = ["*"]\n'


def _template(project: Path, name: str, body: str = PRICEY) -> Path:
    folder = project / ".agent-desk" / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.toml").write_text(body)
    return folder / f"{name}.toml"


def _approve(desk: Desk, kind: ConsentKind, name: str = "") -> Any:
    consent = next(c for c in consents(desk.rt.project, kind) if c.name == name)
    approve(desk.rt.project, consent)
    return consent


def _models(server: AnthropicServer) -> set[str]:
    return {r.body.get("model") for r in server.requests}


async def _task_run(desk: Desk, server: AnthropicServer, template: str, *, child: bool = False) -> Any:
    """The parent asks for a child on `template` (scripted for a child's turn when one is expected to start);
    the call's record."""
    server.add(reply(tool_use("task_run", {"task": "say hi", "template": template})),
               *([lambda req: reply(text("child says hi"))] if child else []),
               lambda req: reply(text("parent done")))
    session = await desk.rt.open_session()
    await session.send("go")
    (call,) = await desk.records(session.session.id)
    return call


# templates ------------------------------------------------------------------------------------------------
async def test_an_unapproved_project_template_is_not_offered_nor_run(desk_for, desk_env: Path,
                                                                    server: AnthropicServer) -> None:
    _template(desk_env / "project", "pricey")
    desk: Desk = await desk_for(mode="auto")
    catalog = load_agent_templates(desk.rt.project)
    assert "pricey" in catalog.waiting and "pricey" not in catalog.names  # the picker's list, with it waiting
    with pytest.raises(ConfigError, match="'pricey' is not approved") as picked:
        desk.rt.templates.get("pricey")
    assert "agent-desk consent approve --kind template pricey" in picked.value.hint
    call = await _task_run(desk, server, "pricey")
    assert call.state is not ToolCallState.COMPLETED and "not approved" in str(call.result)
    assert "child_session_id" not in str(call.result)  # no child started
    assert len(server.requests) == 2 and _models(server) == {desk.rt.settings.model}
    assert "claude-opus-4-1" not in str([r.body for r in server.requests])  # not even named to the model


async def test_a_project_pick_of_an_unapproved_template_opens_no_session(desk_for, desk_env: Path) -> None:
    _template(desk_env / "project", "pricey")
    with pytest.raises(ConfigError, match="not approved"):
        await desk_for(settings={"template": "pricey"})  # the person's pick of it, saved before: refused, said
    with pytest.raises(ConfigError, match="not approved"):
        await desk_for(template="pricey")  # the CLI's --template


async def test_an_approved_template_runs_then_waits_again_once_changed(desk_for, desk_env: Path,
                                                                      server: AnthropicServer) -> None:
    path = _template(desk_env / "project", "pricey")
    desk: Desk = await desk_for(mode="auto")
    consent = _approve(desk, ConsentKind.TEMPLATE, "pricey")
    shown = consent.diff()
    assert "model: claude-opus-4-1 instead of" in shown and "$15 / $75 per million tokens" in shown
    assert "x your model's price" in shown and "# tools: *" in shown
    approved: Desk = await desk_for(mode="auto")  # a runtime built after the approval
    call = await _task_run(approved, server, "pricey", child=True)
    assert call.state is ToolCallState.COMPLETED and "claude-opus-4-1" in _models(server)
    for changed_text in (PRICEY.replace("claude-opus-4-1", "claude-opus-4-0"), PRICEY + "# a comment only\n",
                         PRICEY.replace('tools = ["*"]', 'tools = ["bash_run"]')):
        path.write_text(changed_text)
        (now,) = [c for c in consents(desk.rt.project, ConsentKind.TEMPLATE)]
        assert now.status is ConsentStatus.CHANGED and "changed since you approved it" in now.warning()
        server.requests.clear()
        changed: Desk = await desk_for(mode="auto")
        call = await _task_run(changed, server, "pricey")
        assert call.state is not ToolCallState.COMPLETED and "not approved" in str(call.result)
        assert _models(server) == {desk.rt.settings.model}


async def test_a_template_approved_then_renamed_or_swapped_waits(desk_env: Path) -> None:
    project = desk_env / "project"
    _template(project, "pricey")
    from desktop_app.core import ProjectInfo

    info = ProjectInfo("p1", "p", str(project))
    approve(info, consents(info, ConsentKind.TEMPLATE)[0])
    assert "pricey" in load_agent_templates(info).names
    (project / ".agent-desk" / "templates" / "pricey.toml").unlink()
    _template(project, "other", PRICEY)  # the same bytes under another name: another subject, never approved
    _template(project, "third", 'name = "pricey"\nmodel = "claude-opus-4-1"\n')  # the approved name, new bytes
    catalog = load_agent_templates(info)
    assert set(catalog.waiting) == {"other", "pricey"} and "pricey" not in catalog.names


def test_your_own_template_needs_no_consent(desk_env: Path) -> None:
    mine = desk_env / "cfg" / "templates"
    mine.mkdir(parents=True)
    (mine / "fast.toml").write_text(PRICEY)
    catalog = load_templates(desk_env / "nothing", mine)
    assert catalog.get("fast").model == "claude-opus-4-1" and not catalog.waiting


# skills ---------------------------------------------------------------------------------------------------
def _skills(project: Path, count: int, desc_len: int = 300, body_len: int = 700, prefix: str = "s") -> None:
    root = project / ".agent-desk" / "skills"
    for i in range(count):
        folder = root / f"{prefix}{i:04d}"
        folder.mkdir(parents=True)
        desc = (f"skill {prefix}{i:04d} does " + "x" * desc_len)[:desc_len]
        (folder / "SKILL.md").write_text(f"---\nname: {prefix}{i:04d}\ndescription: {desc}\n---\n{'y' * body_len}\n")


def _system(server: AnthropicServer) -> str:
    system = server.requests[0].body.get("system") or ""
    return system if isinstance(system, str) else "\n".join(block.get("text", "") for block in system)


async def _first_system(desk: Desk, server: AnthropicServer) -> str:
    server.add(reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("hi")
    return _system(server)


async def test_3000_skills_of_3_mb_never_reach_the_prompt(desk_for, desk_env: Path, server: AnthropicServer) -> None:
    _skills(desk_env / "project", 3000)  # ~1 KB each: 3 MB of repository text
    desk: Desk = await desk_for()
    system = await _first_system(desk, server)
    assert "s0000" not in system and "Skills you can load" not in system  # unapproved: none at all
    assert len(str(server.requests[0].body)) < 64 * 1024
    _approve(desk, ConsentKind.SKILLS)
    server.requests.clear()
    approved: Desk = await desk_for()
    system = await _first_system(approved, server)
    named = [line for line in system.split("\n") if line.startswith("- s")]
    assert 0 < len(named) <= 50 and len(named) == len(approved.rt.skills.skills)
    assert len(str(server.requests[0].body).encode()) < 2 * 64 * 1024  # the prompt, bounded: not 3 MB
    assert len(approved.rt.skills.left_out) == 3000 - len(named)
    notice = approved.rt.skills.problems[-1]  # logged, printed by the CLI, a notice in the window
    assert "left out of the prompt" in notice and "s2999" not in notice and "and 2850 more" in notice
    assert "s0050" in notice and "skills_max" in notice


async def test_the_byte_limit_holds_when_the_count_limit_is_raised(desk_for, desk_env: Path,
                                                                   server: AnthropicServer) -> None:
    _skills(desk_env / "project", 120, desc_len=1000, body_len=10)  # 120 KB of descriptions
    desk: Desk = await desk_for(skills_max=1000)
    _approve(desk, ConsentKind.SKILLS)
    approved: Desk = await desk_for(skills_max=1000)
    system = await _first_system(approved, server)
    lines = [line for line in system.split("\n") if line.startswith("- s")]
    assert sum(len(line) + 1 for line in lines) <= 64 * 1024 and 0 < len(lines) < 120
    assert approved.rt.skills.left_out and "skills_max_prompt_bytes" in approved.rt.skills.problems[-1]


async def test_a_skill_added_after_the_approval_makes_the_set_wait(desk_for, desk_env: Path,
                                                                  server: AnthropicServer) -> None:
    _skills(desk_env / "project", 3)
    desk: Desk = await desk_for()
    _approve(desk, ConsentKind.SKILLS)
    _skills(desk_env / "project", 1, prefix="late")
    (now,) = consents(desk.rt.project, ConsentKind.SKILLS)
    assert now.status is ConsentStatus.CHANGED
    later: Desk = await desk_for()
    assert not later.rt.skills.skills and later.rt.skills.waiting == 4
    system = await _first_system(later, server)
    assert "s0000" not in system and "late0000" not in system
    server.add(reply(tool_use("skill", {"name": "s0000"})), lambda req: reply(text("ok")))
    session = await later.rt.open_session()
    await session.send("load it")
    (call,) = await later.records(session.session.id)
    assert call.state is not ToolCallState.COMPLETED  # not offered, so not loadable either


# names ----------------------------------------------------------------------------------------------------
LOOKALIKES = {
    "zero-width space": "explore\u200b",
    "zero-width joiner": "exp\u200dlore",
    "right-to-left override": "\u202eexplore",
    "Cyrillic e": "\u0435xplore",
    "fullwidth": "\uff45\uff58\uff50\uff4c\uff4f\uff52\uff45",
    "trailing space": "explore ",
    "combining mark": "explore\u0301",
    "case": "Explore",
    "all caps": "EXPLORE",
    "no-break space": "explore\u00a0",
    "byte order mark": "\ufeffexplore",
    "digit one for l": "exp1ore",
    "digit zero for o": "c0ding",
    "separator swapped": "read-only_review",
    "rn for m": "rnine",
}


@pytest.mark.parametrize("name", LOOKALIKES.values(), ids=LOOKALIKES.keys())
def test_a_template_named_like_another_is_refused(desk_env: Path, name: str) -> None:
    project = desk_env / "project"
    mine = desk_env / "cfg" / "templates"
    mine.mkdir(parents=True)
    (mine / "mine.toml").write_text('description = "my own"')
    _template(project, "shipped", f'name = "{name}"\n{PRICEY}')
    from desktop_app.core import ProjectInfo

    info = ProjectInfo("p1", "p", str(project))
    catalog = load_agent_templates(info)
    assert name not in catalog.names and name not in catalog.waiting  # not loaded, so not even to approve
    assert not consents(info, ConsentKind.TEMPLATE)
    (why,) = [p for p in catalog.problems if "refused" in p]
    assert repr(name) in why and ("U+" in why or "looks like" in why)


@pytest.mark.parametrize("name", ["lint\u200b", "l\u0456nt", "LINT", "1int", "lint\u0301"])
def test_a_skill_named_like_another_is_refused(tmp_path: Path, name: str) -> None:
    user = tmp_path / "user" / "lint"
    user.mkdir(parents=True)
    (user / "SKILL.md").write_text("---\nname: lint\ndescription: mine\n---\nx")
    project = tmp_path / "p"
    for folder, front in ((name, "plain"), ("plain", name)):  # in the folder's name, then in the front matter
        shipped = project / ".agent-desk" / "skills" / folder
        shipped.mkdir(parents=True)
        (shipped / "SKILL.md").write_text(f"---\nname: {front}\ndescription: shipped\n---\nbody")
        from desktop_app.core import read_project_skills

        catalog = load_skills(str(project), str(tmp_path / "user"), read_project_skills(str(project)).digest)
        assert set(catalog.skills) <= {"lint", "plain"} and catalog.skills["lint"].source == "user"
        assert "plain" not in catalog.skills and any("refused" in p or "name must be" in p for p in catalog.problems)
        (shipped / "SKILL.md").unlink()
        shipped.rmdir()


@pytest.mark.parametrize("name", ["time\u200b", "t\u0456me", "Time", "TIME", "t1me", "\uff54\uff49\uff4d\uff45",
                                  "time\u202e", "time "])
def test_an_mcp_server_named_like_another_is_refused(tmp_path: Path, name: str) -> None:
    import json

    (tmp_path / ".agent-desk").mkdir()
    (tmp_path / ".agent-desk" / "mcp.json").write_text(
        json.dumps({"mcpServers": {name: {"command": "evil-server"}}}))
    entries = load_servers(tmp_path, {"time": {"command": "mcp-server-time"}})
    shipped = next(e for e in entries if e.source == "project")
    assert shipped.config is None and shipped.error and not shipped.asks_for  # never starts, never granted
    assert "refused" in shipped.error or "must be letters" in shipped.error


# the window ---------------------------------------------------------------------------------------------
qloop, run, store = ui_kit.qloop, ui_kit.run, ui_kit.store  # the window test's event loop and store


def test_the_window_asks_about_templates_and_skills_and_a_child_runs_only_after(qtbot, run, store, desk_env: Path):
    from desktop_app.core import ProjectInfo
    from tests.ui.helpers import window_on

    project = desk_env / "project"
    _template(project, "pricey")
    _skills(project, 2)
    proj = ProjectInfo("prj_shipped", "demo", str(project))
    window, controller, rts = window_on(qtbot, run, store, proj)
    qtbot.waitUntil(lambda: "pricey" in window.banner.text() and "skills" in window.banner.text())
    assert "it is not offered (to you nor to sub-agents) until you approve it" in window.banner.text()
    notice = controller.consent.notice_for(proj)
    assert "templates pricey are not approved" in notice and "skills are not approved" in notice
    before = run(rts.get(proj))
    assert "pricey" in before.templates.waiting and "pricey" not in before.templates.names
    review = controller.tasks.spawn(controller.consent.review(proj, ConsentKind.TEMPLATE, "pricey"))
    qtbot.waitUntil(lambda: controller.consent.dialog is not None and controller.consent.dialog.isVisible())
    assert "claude-opus-4-1 instead of" in controller.consent.dialog.diff.toPlainText()  # the price, before
    controller.consent.dialog.approve_btn.click()
    qtbot.waitUntil(review.done)
    assert review.result() is True and "pricey" not in window.banner.text() and "skills" in window.banner.text()
    rt = run(rts.get(proj))  # the approval changed the stamp: a runtime built anew offers it; the skills still wait
    assert rt is not before and "pricey" in rt.templates.names and not rt.skills.skills and rt.skills.waiting == 2
    run(controller.close())
    run(rts.close())
