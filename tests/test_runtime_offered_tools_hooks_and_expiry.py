"""A project's reach, through the one recipe, against the fake Anthropic server and a real SQLite file: the tools
offered (profile, switches, outright denials), the person's hooks (deny, annotate, time out, crash), and the
approval expiry's default and override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from desktop_app.config import Settings
from desktop_app.core import ConfigError, ProjectInfo, ToolCallState
from desktop_app.runtime import approval_expiry, open_runtime, open_store, project_for_dir
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use


@pytest.fixture
def env(tmp_path: Path, desk_env: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


async def _turn(env: Path, tmp_path: Path, replies: list, *, project_settings: dict | None = None,
                mode: str = "auto", **settings_kw):
    """One turn of a local-sandbox project; returns (requests, the session's records)."""
    with AnthropicServer(replies) as server:
        settings = Settings(base_url=server.url, api_key=server.api_key, sandbox="local", **settings_kw)
        store = await open_store(str(tmp_path / "desk.db"))
        project = await project_for_dir(store, env, settings=settings)
        project.settings.update(project_settings or {})
        project.permission_mode = mode
        rt = await open_runtime(settings, project, store=store)
        try:
            session = await rt.open_session()
            await session.send("go")
            records = await store.session_records(session.session.id)
        finally:
            await rt.close()
        return server.requests, records


def _offered(request) -> list[str]:
    return [t["name"] for t in request.body["tools"]]


async def test_a_switched_off_or_outright_denied_tool_is_not_offered_and_a_call_of_it_is_denied(
        env: Path, tmp_path: Path) -> None:
    requests, [rec] = await _turn(
        env, tmp_path, [reply(tool_use("bash_run", {"command": "touch ran"})), reply(text("ok"))],
        project_settings={"disabled_tools": ["bash_run"]},
        rules=[["deny", "fs_write"], ["deny", "fs_edit(secrets/*)"]])
    offered = _offered(requests[0])
    assert "bash_run" not in offered and "fs_write" not in offered  # switched off; denied outright
    assert "fs_edit" in offered and "fs_read" in offered  # a deny with a pattern leaves the tool offered
    assert rec.state is ToolCallState.DENIED and "switched off" in rec.error
    assert not (env / "ran").exists()
    assert "switched off" in json.dumps(requests[1].tool_results())  # the model is told why


async def test_the_projects_tool_profile_chooses_the_tools_and_a_tool_outside_it_is_denied(
        env: Path, tmp_path: Path) -> None:
    requests, [rec] = await _turn(
        env, tmp_path, [reply(tool_use("fs_write", {"path": "x", "content": "y"})), reply(text("ok"))],
        project_settings={"tool_profile": "read-only"})
    assert "fs_read" in _offered(requests[0]) and "fs_write" not in _offered(requests[0])
    assert rec.state is ToolCallState.DENIED and "tool profile 'read-only'" in rec.error
    assert not (env / "x").exists()


async def test_an_unknown_tool_profile_is_a_clear_error(env: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown tool profile 'everything'") as e:
        await _turn(env, tmp_path, [reply(text("ok"))], project_settings={"tool_profile": "everything"})
    assert "coding" in e.value.hint


def _hook(event: str, command: str, matcher: str = "bash_run", **kw) -> dict:
    return {event: [{"matcher": matcher, "command": command, **kw}]}


async def test_a_user_hook_that_denies_sends_its_reason_to_the_model(env: Path, tmp_path: Path) -> None:
    guard = "cat > hook-input.json; echo 'no deletes in this project' >&2; exit 2"
    requests, [rec] = await _turn(
        env, tmp_path, [reply(tool_use("bash_run", {"command": "touch ran"})), reply(text("ok"))],
        hooks=_hook("PreToolUse", guard))
    assert rec.state is ToolCallState.DENIED and "no deletes in this project" in rec.error
    assert rec.trail[-1].actor.startswith("hook:user:")
    assert not (env / "ran").exists()
    assert "no deletes in this project" in json.dumps(requests[1].tool_results())
    seen = json.loads((env / "hook-input.json").read_text())  # the call arrived on stdin, as JSON
    assert seen["tool_name"] == "bash_run" and seen["tool_input"] == {"command": "touch ran"}


async def test_a_user_post_hook_annotates_the_result_and_the_audit(env: Path, tmp_path: Path) -> None:
    requests, [rec] = await _turn(
        env, tmp_path, [reply(tool_use("bash_run", {"command": "echo built"})), reply(text("ok"))],
        hooks=_hook("PostToolUse", "echo '2 lint warnings'"))
    assert rec.state is ToolCallState.COMPLETED
    sent = json.dumps(requests[1].tool_results())
    assert "built" in sent and "2 lint warnings" in sent
    assert any("2 lint warnings" in e.note for e in rec.trail if e.actor.startswith("hook:user:"))


async def test_a_pre_hook_that_matches_another_tool_does_not_run(env: Path, tmp_path: Path) -> None:
    _, [rec] = await _turn(env, tmp_path, [reply(tool_use("bash_run", {"command": "touch ran"})), reply(text("ok"))],
                           hooks=_hook("PreToolUse", "exit 2", matcher="fs_*"))
    assert rec.state is ToolCallState.COMPLETED and (env / "ran").exists()


@pytest.mark.parametrize(("command", "hook_timeout", "words"), [
    ("sleep 30", 0.5, "timed out after 0.5 s"),
    ("echo 'Traceback: KeyError' >&2; exit 1", 10, "failed with exit code 1: Traceback: KeyError"),
    ("kill -9 $$", 10, "failed with exit code"),
    ("./missing-hook.sh", 10, "failed with exit code 127"),
])
async def test_a_pre_hook_that_times_out_or_crashes_fails_closed(env: Path, tmp_path: Path, command: str,
                                                                 hook_timeout: float, words: str) -> None:
    requests, [rec] = await _turn(
        env, tmp_path, [reply(tool_use("bash_run", {"command": "touch ran"})), reply(text("ok"))],
        hooks=_hook("PreToolUse", command, timeout=hook_timeout))
    assert rec.state is ToolCallState.DENIED and words in rec.error and "fail closed" in rec.error
    assert not (env / "ran").exists()
    assert words in json.dumps(requests[1].tool_results())


async def test_a_post_hook_that_crashes_keeps_the_result_and_says_so(env: Path, tmp_path: Path) -> None:
    requests, [rec] = await _turn(
        env, tmp_path, [reply(tool_use("bash_run", {"command": "echo built"})), reply(text("ok"))],
        hooks=_hook("PostToolUse", "exit 3"))
    assert rec.state is ToolCallState.COMPLETED
    sent = json.dumps(requests[1].tool_results())
    assert "built" in sent and "failed with exit code 3" in sent


async def test_bad_hooks_in_the_settings_stop_the_session_with_a_clear_error(env: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="'command' must be"):
        await _turn(env, tmp_path, [reply(text("ok"))], hooks={"PreToolUse": [{"matcher": "x"}]})


def test_the_approval_expiry_comes_from_the_project_else_the_settings() -> None:
    project = ProjectInfo(id="p", name="p", path="/tmp")
    assert approval_expiry(Settings(), project) is None
    assert approval_expiry(Settings(approval_expiry_s=300), project) == 300
    project.settings["approval_expiry_s"] = 0  # this project's approvals wait
    assert approval_expiry(Settings(approval_expiry_s=300), project) is None
    project.settings["approval_expiry_s"] = 30
    assert approval_expiry(Settings(approval_expiry_s=300), project) == 30
    project.settings["approval_expiry_s"] = "soon"
    with pytest.raises(ConfigError, match="not a number of seconds"):
        approval_expiry(Settings(), project)


def test_a_bad_default_expiry_in_the_settings_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"approval_expiry_s": -5}))
    with pytest.raises(ConfigError, match="approval_expiry_s"):
        Settings.load(path)
    path.write_text(json.dumps({"hooks": ["echo"]}))
    with pytest.raises(ConfigError, match="'hooks' must be"):
        Settings.load(path)


async def test_hooks_changed_in_the_settings_reach_an_open_runtime(env: Path, tmp_path: Path) -> None:
    from desktop_app.core import EventBus
    from desktop_app.runtime import ProjectRuntimes
    from desktop_app.sandbox import LocalSandbox

    settings = Settings(sandbox="local", api_key="sk-ant-test")
    store = await open_store(str(tmp_path / "desk.db"))
    bus = await EventBus.open(store)
    project = await project_for_dir(store, env, settings=settings)
    runtimes = ProjectRuntimes(settings=settings, store=store, bus=bus, sandbox_factory=lambda p: LocalSandbox(p.path))
    try:
        rt = await runtimes.get(project)
        assert rt.executor.user_hooks.pre == [] and rt.executor.approvals.timeout_s is None
        settings.hooks = _hook("PreToolUse", "exit 2")
        settings.approval_expiry_s = 60
        runtimes.forget_model()
        await runtimes.settings_applied()
        assert [h.spec.command for h in rt.executor.user_hooks.pre] == ["exit 2"]
        assert rt.executor.approvals.timeout_s == 60
    finally:
        await runtimes.close()
        bus.close()
        await store.close()


async def test_an_ungranted_hooks_file_is_said_on_the_bus_and_does_not_run(env: Path, tmp_path: Path) -> None:
    from desktop_app.core import EventBus
    from desktop_app.runtime import build_runtime
    from desktop_app.sandbox import LocalSandbox

    (env / ".agent-desk").mkdir()
    (env / ".agent-desk/hooks.toml").write_text('[[PreToolUse]]\ncommand = "exit 2"\n')
    settings = Settings(sandbox="local", api_key="sk-ant-test")
    store = await open_store(str(tmp_path / "desk.db"))
    bus = await EventBus.open(store)
    seen: list = []
    bus.on("error", seen.append)
    project = await project_for_dir(store, env, settings=settings)
    rt = await build_runtime(settings, project, store=store, bus=bus, sandbox_factory=lambda p: LocalSandbox(p.path))
    try:
        assert rt.hooks_trust.status == "new" and rt.executor.user_hooks.pre == []
        assert [e.payload["source"] for e in seen] == ["hooks"] and "never granted" in seen[0].payload["message"]
    finally:
        await rt.close()
        bus.close()
        await store.close()
