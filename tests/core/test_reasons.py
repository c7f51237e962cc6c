"""Every reason sentence, rendered from one place (core/_reasons.py), reads as a sentence: the policy's asks for
real calls in every mode, a person's denial, a skipped call, a stopped one, an edit told to the model, the word
of every terminal state and outcome, and counts."""

from __future__ import annotations

import asyncio
import itertools
import json
import re

import pytest

from desktop_app.core import (
    Deny,
    MemoryStore,
    Outcome,
    PermissionPolicy,
    ToolCallRecord,
    ToolCallState,
    ToolFacts,
    plural,
    skipped_after,
    status_word,
)
from desktop_app.core import _reasons as reasons
from desktop_app.core._record import OUTCOMES_BY_STATE
from tests.core.conftest import Harness, call

TOOLS = {
    "bash_run": ToolFacts("bash_run", "group:runtime", False),
    "fs_edit": ToolFacts("fs_edit", "group:fs", False),
    "fs_write": ToolFacts("fs_write", "group:fs", False),
    "fs_read": ToolFacts("fs_read", "group:fs", True),
    "todo_write": ToolFacts("todo_write", "group:todo", False),
    "mcp__srv__do": ToolFacts("mcp__srv__do", "group:mcp", False),
}
INPUTS = {
    "bash_run": [{"command": c} for c in ("ls", "ls && git status", "make", "rm -rf /", "echo $(curl x | sh)",
                                          "python3 -c 'print(1)'", "cat a > b", ")(")],
    "fs_edit": [{"path": "calc.py", "edits": []}, {"path": "../outside.py", "edits": []}],
    "fs_write": [{"path": "a.txt", "content": "x"}, {"path": "/etc/passwd", "content": "x"}],
    "fs_read": [{"path": "a.txt"}],
    "todo_write": [{"todos": []}],
    "mcp__srv__do": [{}],
}
MODES = ("ask", "accept-edits", "auto", "read-only", "strict", "plan")


def sentence_problems(text: str, tools: tuple[str, ...] = tuple(TOOLS)) -> list[str]:
    """What keeps `text` from reading as a plain sentence."""
    problems = []
    if not text or not text[0].isalnum():
        problems.append("does not start with a word")
    words = text.split()
    problems += [f"doubled word {a!r}" for a, b in itertools.pairwise(words) if a.lower() == b.lower()]
    problems += [f"'{t} it'" for t in tools if re.search(rf"\b{re.escape(t)} it\b", text)]
    if re.search(r"(?<![\d,.])1 [a-z]+s\b", text) and not re.search(r"(?<![\d,.])1 (is|was|has|does)\b", text):
        problems.append("a plural after 1")
    if re.search(r"denied by (the )?user: denied by", text):
        problems.append("denial said twice")
    if "  " in text or " ," in text or ",," in text or text.rstrip() != text:
        problems.append("stray spacing or punctuation")
    return problems


def policy_reasons() -> list[str]:
    out = []
    for mode in MODES:
        policy = PermissionPolicy(mode)
        for name, facts in TOOLS.items():
            for inp in INPUTS[name]:
                decision = policy.resolve_ask(policy.evaluate(facts, inp))
                out.append(decision.reason)
    return out


def test_every_reason_of_the_policy_reads_as_a_sentence():
    found = {r: sentence_problems(r) for r in policy_reasons()}
    assert {r: p for r, p in found.items() if p} == {}
    # the two seen garbled, now plain
    ask = PermissionPolicy("ask")
    assert ask.evaluate(TOOLS["bash_run"], {"command": "ls && git status"}).reason.startswith(
        "bash_run only reads (ls, git), and mode ask")
    assert ask.evaluate(TOOLS["fs_edit"], {"path": "calc.py"}).reason.startswith("fs_edit writes calc.py, and")


@pytest.mark.parametrize(("by", "note", "said"), [
    ("user", "", "denied by the user"),
    ("user", "  ", "denied by the user"),
    ("user", "not that file", "denied by the user: not that file"),
    ("bob", "", "denied by bob"),
])
def test_a_denial_says_who_once_and_their_note(by, note, said):
    assert reasons.denied_by_person(by, note) == said


def kinds() -> dict[str, str]:
    """Every reason kind the module builds, rendered."""
    rec = ToolCallRecord(name="fs_read", input={})
    rec.transition(ToolCallState.DENIED, actor="executor", outcome=Outcome.SKIPPED,
                   data={"after_denial_of": "fs_write"})
    out = {
        "skipped (to the model)": reasons.skipped("fs_write"),
        "skipped by someone": reasons.skipped("bash_run", "bob"),
        "skipped, tool unknown": reasons.skipped(""),
        "skipped (shown)": skipped_after(rec),
        "skipped (shown), tool unknown": reasons.skipped_shown(""),
        "stopped running": reasons.STOPPED_RUNNING,
        "stopped before it ran": reasons.STOPPED_BEFORE_RUN,
        "stopped while waiting": reasons.STOPPED_WAITING,
        "turn cancelled": reasons.STOPPED_CANCELLED,
        "edit note": reasons.edit_note({"path": "a.py", "content": "x = 1\n"},
                                       {"path": "a.py", "content": "x = 2\ny = 3\n", "mode": "w"}),
        "about, named": reasons.about("fs_edit", "fs_edit writes a.py"),
        "about, it": reasons.about("bash_run", "it only reads (ls)"),
        "about, other": reasons.about("bash_run", "rm deletes files"),
        "mode asks": reasons.mode_asks("fs_write", "fs_write writes a", "accept-edits"),
        "mode auto asks": reasons.mode_asks("bash_run", "rm -rf deletes files", "auto"),
        "expired": reasons.APPROVAL_EXPIRED,
        "tool reported an error": reasons.TOOL_REPORTED_ERROR,
        "lost secrets": reasons.LOST_SECRETS,
        "unknown tool": reasons.unknown_tool("fs_wirte"),
        "not offered": reasons.not_offered("bash_run", "sub-agent reviewer", "reviewer"),
        "not offered, no template": reasons.not_offered("bash_run", "this agent"),
        "not json": reasons.not_json("fs_write", "Expecting value: line 1 column 1"),
        "not json, nothing": reasons.not_json("fs_write", ""),
        "invalid input": reasons.invalid_input("fs_write", "field `path`: Field required"),
        "would fail": reasons.would_fail("fs_edit", "old_text not found in calc.py"),
        "timed out": reasons.timed_out("bash_run", 120.0),
        "tool failed": reasons.tool_failed("fs_read", "no such file"),
        "tool raised": reasons.tool_raised("fs_read", "RuntimeError", "kaboom"),
        "tool raised, no message": reasons.tool_raised("fs_read", "RuntimeError", ""),
        "unrecorded": reasons.unrecorded("disk I/O error"),
    }
    for n in (0, 1, 2, 1000):
        out[f"count {n}"] = plural(n, "record") + " match"
    for state, outcomes in OUTCOMES_BY_STATE.items():
        for outcome in outcomes:
            out[f"{state.value}/{outcome.value}"] = status_word(state, outcome)
    return out


def test_every_reason_kind_reads_as_a_sentence():
    rendered = kinds()
    assert {k: sentence_problems(v) for k, v in rendered.items() if sentence_problems(v)} == {}
    assert rendered["skipped (shown)"] == "skipped after your denial of fs_write"
    assert rendered["count 1"] == "1 record match" and rendered["count 1000"] == "1,000 records match"
    assert rendered["timed out"] == "bash_run timed out after 120 s"
    assert rendered["tool raised, no message"] == "fs_read raised RuntimeError"
    assert "-x = 1" in rendered["edit note"] and "+y = 3" in rendered["edit note"]
    assert '- mode: added as "w"' in rendered["edit note"]


def test_one_word_for_a_call_stopped_by_the_person_or_by_a_crash():
    stopped = [status_word(ToolCallState.FAILED, o) for o in (Outcome.INTERRUPTED, Outcome.CANCELLED)]
    assert [*stopped, status_word(ToolCallState.SEALED, Outcome.SEALED)] == ["interrupted"] * 3
    assert status_word("DENIED", "skipped") == "skipped" and status_word("DENIED", "user") == "denied"
    assert status_word("FAILED", "error") == "failed" and status_word("COMPLETED", "ok") == "done"
    assert status_word("FAILED", None) == "failed"  # live, before the end's outcome arrives


def error_text(record) -> str:
    return json.loads(record.result["content"][0]["text"])["error"]


async def test_what_a_denial_and_a_skip_record_and_tell_the_model():
    h = Harness(MemoryStore())
    w1, w2 = call("write", path="a", content="1"), call("write", path="b", content="2")
    task = asyncio.ensure_future(h.batch(w1, w2))
    await h.wait_pending()
    h.executor.decide(h.rid(w1), Deny())
    r1, r2 = await task
    assert r1.trail[-1].note == "denied by the user" and error_text(r1) == "denied by the user"
    assert r2.trail[-1].note == error_text(r2) == \
        "skipped after a denial: the user denied write, an earlier call of this batch, so this call did not run"
    assert not sentence_problems(r2.trail[-1].note, ("write",))
