"""File edits dry-run before a person is asked: a call bound to fail fails at once (FAILED, its reason sent to
the model and kept in the audit) and never reaches the inbox; one that would work carries its diff to the card;
an edit a person makes is tried again; a note given with an allow goes to the model with the result."""

from __future__ import annotations

import asyncio

import pytest

from desktop_app.core import (
    Allow,
    EventBus,
    Executor,
    HookChain,
    MemoryStore,
    PermissionPolicy,
    PermissionRequired,
    RunContext,
    ToolCall,
    ToolCallState,
    ToolRegistry,
)
from desktop_app.tools import builtin_tools


class Desk:
    """The real tools, the real policy in `ask` mode and an executor on a store; asked calls are kept."""

    def __init__(self, sandbox) -> None:
        self.store = MemoryStore()
        self.bus = EventBus(self.store)
        self.asked: list[PermissionRequired] = []
        self.executor = Executor(ToolRegistry(builtin_tools()), PermissionPolicy("ask"), bus=self.bus,
                                 store=self.store, hooks=HookChain())
        self.run = RunContext(session_id="s1", project_id="p1", sandbox=sandbox)
        self._asked = asyncio.Event()
        self.bus.on("permission_required", self._required)
        self.n = 0

    def _required(self, env) -> None:
        self.asked.append(env)
        self._asked.set()

    def call(self, name: str, **inp) -> ToolCall:
        self.n += 1
        return ToolCall(id=f"toolu_{self.n}", name=name, input=inp)

    async def batch(self, *calls: ToolCall):
        return await asyncio.wait_for(self.executor.run_batch(list(calls), self.run), 60)

    async def asked_once(self):
        await asyncio.wait_for(self._asked.wait(), 30)
        self._asked.clear()
        return self.asked[-1]


@pytest.fixture
def desk(sandbox) -> Desk:
    return Desk(sandbox)


BOUND_TO_FAIL = [
    pytest.param("fs_edit", {"path": "a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"},
                 "has not been read", id="unread"),
    pytest.param("fs_edit", {"path": "b.py", "old_string": "nowhere", "new_string": "x"}, "0 matches",
                 id="old-string-missing"),
    pytest.param("fs_edit", {"path": "b.py", "old_string": "y = 0", "new_string": "y = 9"}, "matches 2 times",
                 id="old-string-ambiguous"),
    pytest.param("fs_edit", {"path": "nope.py", "old_string": "a", "new_string": "b"}, "does not exist",
                 id="missing-file"),
    pytest.param("fs_write", {"path": "a.py", "content": "overwritten\n"}, "has not been read",
                 id="write-over-unread"),
    pytest.param("fs_multi_edit", {"edits": [
        {"path": "b.py", "old_string": "y = 0\ny = 0", "new_string": "y = 1\ny = 1"},
        {"path": "b.py", "old_string": "y = 0", "new_string": "z"}]}, "edit 2", id="multi-second-fails"),
    pytest.param("fs_edit", {"path": "b.py", "old_string": "same", "new_string": "same"}, "the same",
                 id="no-op"),
    pytest.param("fs_write", {"path": ".", "content": "x"}, "directory", id="write-workspace-root"),
]


@pytest.mark.parametrize(("name", "inp", "why"), BOUND_TO_FAIL)
async def test_an_edit_bound_to_fail_fails_at_once_and_never_reaches_the_inbox(desk, sandbox, name, inp, why):
    await sandbox.write_file("a.py", b"x = 1\n")
    await sandbox.write_file("b.py", b"y = 0\ny = 0\nsame\n")
    read = await desk.batch(desk.call("fs_read", path="b.py"))
    assert read[0].state is ToolCallState.COMPLETED
    (record,) = await desk.batch(desk.call(name, **inp))
    assert record.state is ToolCallState.FAILED, record.trail
    assert desk.asked == [] and desk.executor.pending() == []
    assert why in (record.error or "") and "nobody was asked" in record.error
    # the model reads the reason as the tool result; the audit keeps it on the FAILED transition
    assert why in record.result["content"][0]["text"]
    last = desk.store.entries[-1]
    assert last.state is ToolCallState.FAILED and last.actor == "dry run" and why in last.note
    assert ToolCallState.APPROVAL_REQUIRED not in [e.state for e in record.trail]
    assert await sandbox.read_file("a.py") == b"x = 1\n" and await sandbox.read_file("b.py") == b"y = 0\ny = 0\nsame\n"


async def test_a_file_changed_since_it_was_read_fails_before_asking(desk, sandbox):
    await sandbox.write_file("a.py", b"x = 1\n")
    await desk.batch(desk.call("fs_read", path="a.py"))
    await sandbox.write_file("a.py", b"x = 1\n# someone else\n")  # the person, or a command, changed it
    (record,) = await desk.batch(desk.call("fs_edit", path="a.py", old_string="x = 1", new_string="x = 2"))
    assert record.state is ToolCallState.FAILED and "changed since you last read it" in record.error
    assert desk.asked == []


async def test_an_edit_that_works_asks_with_its_diff_and_a_note_reaches_the_model(desk, sandbox):
    await sandbox.write_file("a.py", b"x = 1\n")
    await desk.batch(desk.call("fs_read", path="a.py"))
    task = asyncio.ensure_future(desk.batch(desk.call("fs_edit", path="a.py", old_string="x = 1",
                                                      new_string="x = 2")))
    env = await desk.asked_once()
    diff = env.payload["meta"]["diff"]
    assert "-x = 1\n+x = 2\n" in diff and "a/a.py" in diff
    assert await sandbox.read_file("a.py") == b"x = 1\n"  # a dry run writes nothing
    desk.executor.decide(env.payload["call_id"], Allow(note="yes, but add a test for it"))
    (record,) = await task
    assert record.state is ToolCallState.COMPLETED
    texts = [b["text"] for b in record.result["content"]]
    assert any("approved this call with a note: yes, but add a test for it" in t for t in texts)
    approved = next(e for e in record.trail if e.state is ToolCallState.APPROVED)
    assert approved.data["approval_note"] == "yes, but add a test for it"
    assert await sandbox.read_file("a.py") == b"x = 2\n"


async def test_a_persons_edit_is_tried_again_before_it_runs(desk, sandbox):
    await sandbox.write_file("a.py", b"x = 1\n")
    await desk.batch(desk.call("fs_read", path="a.py"))
    task = asyncio.ensure_future(desk.batch(desk.call("fs_edit", path="a.py", old_string="x = 1",
                                                      new_string="x = 2")))
    env = await desk.asked_once()
    edited = {"path": "a.py", "old_string": "x = 100", "new_string": "x = 3"}  # a typo: not in the file
    desk.executor.decide(env.payload["call_id"], Allow(edited_input=edited))
    (record,) = await task
    assert record.state is ToolCallState.FAILED and "0 matches" in record.error
    assert record.input == edited and len(desk.asked) == 1
    assert await sandbox.read_file("a.py") == b"x = 1\n"


async def test_a_write_that_would_work_carries_a_creation_diff(desk, sandbox):
    task = asyncio.ensure_future(desk.batch(desk.call("fs_write", path="new/n.py", content="print(1)\n")))
    env = await desk.asked_once()
    assert "+print(1)" in env.payload["meta"]["diff"] and "/dev/null" in env.payload["meta"]["diff"]
    assert await sandbox.stat("new/n.py") is None
    desk.executor.decide(env.payload["call_id"], Allow())
    (record,) = await task
    assert record.state is ToolCallState.COMPLETED


async def test_a_secret_in_the_file_is_redacted_on_the_card(desk, sandbox):
    key = "sk-ant-api03-" + "A" * 90
    await sandbox.write_file("env.txt", f"KEY={key}\nx = 1\n".encode())
    await desk.batch(desk.call("fs_read", path="env.txt"))
    task = asyncio.ensure_future(desk.batch(desk.call("fs_edit", path="env.txt", old_string="x = 1",
                                                      new_string="x = 2")))
    env = await desk.asked_once()
    desk.executor.decide(env.payload["call_id"], Allow())
    await task
    # the diff's context lines hold the file's secret: the card (and the store) never see it
    assert key not in str(env.payload) and key not in str([e.data for e in desk.store.entries])
