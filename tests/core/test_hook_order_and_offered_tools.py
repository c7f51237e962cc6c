"""Tools as the seeds define them (metadata, their own hooks, ctx.emit), the order of every hook around a call,
the person's hooks read from their configuration, and which tools are offered to the model."""

from __future__ import annotations

import pytest

from desktop_app.core import (
    ConfigError,
    ExecResult,
    HookChain,
    OfferedToolsHook,
    Outcome,
    PermissionMode,
    PreHookResult,
    Rule,
    ToolCallState,
    ToolContext,
    ToolRegistry,
    ToolResult,
    denied_outright,
    offered_tools,
    parse_user_hooks,
    post_hook,
    pre_hook,
    tool,
    user_hooks_from_toml,
)
from desktop_app.core._user_hooks import UserHookSpec, hook_input, read_answer

from .conftest import TOOLS, call

SECRET = "sk-ant-api03-" + "A" * 40


def test_a_tool_carries_its_version_and_tags_beside_its_flags() -> None:
    @tool(read_only=True, timeout=5, version="1.2.0", tags=["vcs", "read"])
    async def git_log() -> str:
        """Show the log."""
        return ""

    meta = git_log.metadata()
    assert meta["version"] == "1.2.0" and meta["tags"] == ["vcs", "read"]
    assert meta["read_only"] is True and meta["timeout_s"] == 5


async def test_hooks_run_user_pre_then_tool_pre_then_tool_post_then_user_post_then_redaction(harness) -> None:
    order: list[str] = []

    @tool(group="group:fs")
    async def stamp(ctx: ToolContext) -> str:
        """Runs between the hooks."""
        order.append("run")
        return "ran"

    @stamp.pre_hook
    async def tool_pre(c):
        order.append("tool-pre")

    @stamp.post_hook
    async def tool_post(c, result):
        order.append("tool-post")

    @pre_hook("user-pre")
    async def user_pre(c):
        order.append("user-pre")

    @post_hook("user-post")
    async def user_post(c, result):
        order.append("user-post")
        from desktop_app.core import PostHookResult, TextBlock
        return PostHookResult.update(ToolResult([*result.content, TextBlock(f"token {SECRET}")]), "annotated")

    harness.registry.register(stamp)
    harness.policy.mode = PermissionMode.AUTO
    harness.executor.user_hooks = HookChain(pre=[user_pre], post=[user_post])
    [rec] = await harness.batch(call("stamp"))
    assert order == ["user-pre", "tool-pre", "run", "tool-post", "user-post"]
    assert rec.state is ToolCallState.COMPLETED
    text = rec.result["content"][0]["text"] + rec.result["content"][-1]["text"]
    assert SECRET not in text and "[REDACTED" in text  # what a user hook adds is redacted like the output


async def test_a_tools_own_pre_hook_that_raises_denies_the_call_before_it_runs(harness) -> None:
    ran: list[int] = []

    @tool(group="group:fs")
    async def guarded() -> str:
        """Never runs."""
        ran.append(1)
        return "ran"

    @guarded.pre_hook
    async def broken(c):
        raise RuntimeError("cannot judge")

    harness.registry.register(guarded)
    harness.policy.mode = PermissionMode.AUTO
    [rec] = await harness.batch(call("guarded"))
    assert rec.state is ToolCallState.DENIED and ran == []
    assert "cannot judge" in rec.error


async def test_ctx_emit_publishes_a_custom_event_under_its_call_redacted(harness) -> None:
    @tool(read_only=True)
    async def progress(ctx: ToolContext) -> str:
        """Emits its own events."""
        ctx.emit("phase", {"step": 1, "key": SECRET})
        ctx.emit("phase", {"step": 2})
        with pytest.raises(ValueError):
            ctx.emit("  ", {})
        return "done"

    harness.registry.register(progress)
    c = call("progress")
    [rec] = await harness.batch(c)
    custom = [e for e in harness.events if e.type == "tool:custom"]
    assert [e.payload["data"]["step"] for e in custom] == [1, 2]
    assert all(e.payload["call_id"] == rec.id and e.payload["tool"] == "progress" for e in custom)
    assert SECRET not in str(custom[0].payload) and "REDACTED" in str(custom[0].payload)
    from desktop_app.core import Channel
    stored = await harness.store.events_since(0, [Channel.PROGRESS], session_id="s1")
    assert any(e.type == "tool:custom" for e in stored)


async def test_a_hook_note_goes_into_the_trail_and_the_call_goes_on(harness) -> None:
    @pre_hook("noter")
    async def noter(c):
        return PreHookResult.note("checked by the linter")

    harness.policy.mode = PermissionMode.AUTO
    harness.executor.user_hooks = HookChain(pre=[noter])
    [rec] = await harness.batch(call("echo", text="hi"))
    assert rec.state is ToolCallState.COMPLETED
    assert any(e.actor == "hook:noter" and "checked by the linter" in e.note for e in rec.trail)


async def test_an_approval_expires_denied_and_recorded(store_harness) -> None:
    h = store_harness(approval_timeout_s=0.2)
    [rec] = await h.batch(call("write", path="a", content="b"))
    assert rec.state is ToolCallState.DENIED and rec.outcome is Outcome.EXPIRED
    assert rec.approval.expires_at is not None
    assert rec.trail[-1].actor == "system" and "expired" in rec.trail[-1].note


@pytest.fixture
def store_harness():
    from desktop_app.core import MemoryStore

    from .conftest import Harness

    return lambda **kw: Harness(MemoryStore(), **kw)


# -- the person's hooks, as configured ------------------------------------------------------------------
def test_hooks_toml_reads_events_matchers_and_timeouts() -> None:
    specs = user_hooks_from_toml('[[PreToolUse]]\nmatcher = "bash_run"\ncommand = "./guard.sh"\ntimeout = 3\n'
                                 '[[PostToolUse]]\nmatcher = "fs_(write|edit)"\ncommand = "echo ok"\n')
    pre, post = specs
    assert (pre.event, pre.matcher, pre.timeout_s) == ("PreToolUse", "bash_run", 3.0)
    assert pre.matches("bash_run") and not pre.matches("bash_runner")
    assert post.matches("fs_write") and post.matches("fs_edit") and not post.matches("fs_read")
    glob = UserHookSpec("PreToolUse", "x", matcher="fs_*")
    assert glob.matches("fs_read") and not glob.matches("bash_run")
    assert UserHookSpec("PreToolUse", "x", matcher="").matches("anything")


@pytest.mark.parametrize(("text", "what"), [
    ('[[OnStart]]\ncommand = "x"', "unknown hook event"),
    ('[[PreToolUse]]\nmatcher = "x"', "'command' must be"),
    ('[[PreToolUse]]\ncommand = "x"\nmatcher = "fs_(write"', "not a valid regex"),
    ('[[PreToolUse]]\ncommand = "x"\ntimeout = 0', "'timeout' must be"),
    ('[[PreToolUse]]\ncommand = "x"\ntimeout = 1e9', "'timeout' must be"),
    ('[[PreToolUse]]\ncommand = "x"\nrun_on = "host"', "unknown keys"),
    ("PreToolUse = 3", "must be a list"),
    ("[[PreToolUse]\n", "not valid TOML"),
])
def test_a_hook_that_cannot_be_read_is_a_clear_error(text: str, what: str) -> None:
    with pytest.raises(ConfigError, match=what) as e:
        user_hooks_from_toml(text)
    assert e.value.user_message()


def test_settings_hooks_of_the_wrong_shape_are_refused() -> None:
    with pytest.raises(ConfigError, match="table of PreToolUse"):
        parse_user_hooks(["echo"], "settings: hooks")


@pytest.mark.parametrize(("res", "decision", "words"), [
    (ExecResult(2, "", "no rm -rf here\n"), "deny", "no rm -rf here"),
    (ExecResult(0, '{"decision": "block", "reason": "not on main"}', ""), "deny", "not on main"),
    (ExecResult(0, '{"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "x"}}', ""),
     "deny", "x"),
    (ExecResult(0, '{"decision": "ask", "reason": "looks odd"}', ""), "ask", "looks odd"),
    (ExecResult(0, '{"decision": "allow"}', ""), "go", ""),
    (ExecResult(0, "lint: 2 warnings\n", ""), "go", "lint: 2 warnings"),
    (ExecResult(1, "", "Traceback: boom"), "deny", "failed with exit code 1: Traceback: boom"),
    (ExecResult(None, "", "", timed_out=True), "deny", "timed out after 10 s"),
])
def test_what_a_hook_says_is_read_as_claude_code_reads_it(res, decision: str, words: str) -> None:
    answer = read_answer(UserHookSpec("PreToolUse", "x"), res)
    assert answer.decision == decision and words in answer.text


def test_the_hook_input_is_the_call_as_json_with_long_values_cut() -> None:
    import json

    from desktop_app.core import HookCall

    spec = UserHookSpec("PostToolUse", "x")
    body = json.loads(hook_input(spec, HookCall("c1", "s1", "fs_write", {"path": "a", "content": "x" * 100_000},
                                                False), ToolResult.text("ok")))
    assert body["hook_event_name"] == "PostToolUse" and body["tool_name"] == "fs_write"
    assert body["tool_input"]["path"] == "a" and "more characters cut" in body["tool_input"]["content"]
    assert body["tool_response"] == {"content": "ok", "is_error": False}


# -- which tools the model is offered --------------------------------------------------------------------
def test_a_deny_rule_without_a_pattern_hides_the_tool_one_with_a_pattern_does_not() -> None:
    tools = ToolRegistry(TOOLS).for_profile("full")
    outright = [Rule.parse("bash_run", "deny"), Rule.parse("write(secrets/*)", "deny")]
    names = {t.name for t in offered_tools(tools, disabled=["nap"], rules=outright)}
    assert "bash_run" not in names and "nap" not in names and "write" in names and "echo" in names
    by_group = Rule.parse("group:fs", "deny")
    assert denied_outright(ToolRegistry(TOOLS).get("echo"), [by_group]) is by_group
    assert denied_outright(ToolRegistry(TOOLS).get("echo"), [Rule.parse("echo", "ask")]) is None
    assert offered_tools(tools, rules=[Rule.parse("*", "deny")]) == []


async def test_a_call_of_a_tool_not_offered_is_denied_and_never_runs(harness) -> None:
    hidden = {"bash_run"}
    harness.executor.hooks.pre.insert(0, OfferedToolsHook(lambda n: "switched off" if n in hidden else None))
    harness.policy.mode = PermissionMode.AUTO
    [rec] = await harness.batch(call("bash_run", command="id"))
    assert rec.state is ToolCallState.DENIED and "switched off" in rec.error
    assert "ran" not in harness.run.state


async def test_a_tool_cannot_flood_the_audit_with_custom_events(harness) -> None:
    from pathlib import PurePosixPath

    @tool(read_only=True)
    async def chatter(ctx: ToolContext) -> str:
        """Emits too much."""
        ctx.emit("odd", {"path": PurePosixPath("/w/a"), "ids": {1}})  # not JSON: carried as text
        ctx.emit("big", {"blob": "x" * 100_000})
        for i in range(1_500):
            ctx.emit("tick", {"i": i})
        return "done"

    harness.registry.register(chatter)
    [rec] = await harness.batch(call("chatter"))
    assert rec.state is ToolCallState.COMPLETED
    custom = [e.payload for e in harness.events if e.type == "tool:custom"]
    assert custom[0]["data"] == {"path": "/w/a", "ids": "{1}"}
    assert custom[1]["data"]["truncated"] is True and len(str(custom[1])) < 5_000
    assert len(custom) == 1_001 and custom[-1]["name"] == "dropped"


async def test_a_call_with_many_long_strings_is_denied_before_a_pre_hook_judges_it_cut(tmp_path) -> None:
    """Issue 22: a pre hook given a cut input could pass what it exists to refuse, so it fails closed; the
    input a post hook reads stays under the environment's limit, whole in shape."""
    import json

    from desktop_app.core import HookCall
    from desktop_app.core._user_hooks import HOOK_INPUT_BYTES, UserPreHook, hook_input
    from desktop_app.sandbox import LocalSandbox

    sandbox = LocalSandbox(str(tmp_path))
    spec = UserHookSpec("PreToolUse", "cat > got.json; echo seen >&2; exit 2")
    edits = [{"old_string": "a" * 30_000, "new_string": "b" * 30_000} for _ in range(6)]
    call = HookCall("c1", "s1", "fs_multi_edit", {"path": "f", "edits": edits}, False)
    answer = await UserPreHook(spec, lambda _sid: sandbox)(call)
    assert answer is not None and "cannot see the whole input" in answer.reason and "fail closed" in answer.reason
    assert not (tmp_path / "got.json").exists()  # the hook never ran on the cut input
    got = hook_input(UserHookSpec("PostToolUse", "x"), call, ToolResult.text("ok"))
    assert len(got.encode()) <= HOOK_INPUT_BYTES
    body = json.loads(got)
    assert body["tool_input"]["path"] == "f" and len(body["tool_input"]["edits"]) == 6
    await sandbox.close()
