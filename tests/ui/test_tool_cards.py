"""The conversation's tool cards tell the truth: a command's exit status in colour with its first error line, why a
call was refused, its output folded under it (streamed while it runs, head and tail when long, all of it one click
away), and questions, plans and sub-agents as what they are. The records carry the results as the tools write them
(tools/_bash.py, tools/_person.py, tools/_task.py); the real command path is in test_keyboard_path.py."""

from __future__ import annotations

from PySide6.QtCore import QUrl

from desktop_app.core import (
    EventBus,
    MemoryStore,
    Outcome,
    TextBlock,
    ToolCallRecord,
    ToolCallState,
    ToolEnd,
    ToolResult,
    ToolStart,
)
from desktop_app.ui._bridge import EventBridge
from desktop_app.ui._conversation import ConversationView
from desktop_app.ui._tool_card import HEAD_LINES, RED, TAIL_LINES, card_truth, sentence

RUN = [ToolCallState.EXECUTING, ToolCallState.COMPLETED]


def _record(name: str, data: dict, result: ToolResult | None, states: list[ToolCallState], *, cid: str = "call_1",
            error: str | None = None) -> ToolCallRecord:
    rec = ToolCallRecord(name=name, input=data, id=cid, session_id="s")
    for st in states:
        outcome = {ToolCallState.COMPLETED: Outcome.OK, ToolCallState.FAILED: Outcome.ERROR,
                   ToolCallState.DENIED: Outcome.POLICY}.get(st)
        rec.transition(st, actor="executor", outcome=outcome,
                       note="denied by policy: rule bash_run(curl *)" if st is ToolCallState.DENIED else "")
    rec.result = result.to_dict() if result else None
    rec.error = error
    return rec


def _bash(command: str, code: int | None, stdout: str = "", stderr: str = "", **more) -> ToolResult:
    """The result bash_run gives: the exit code, the two streams in details."""
    return ToolResult.text(f"exit code: {code}\nstdout:\n{stdout}\nstderr:\n{stderr}", command=command,
                           cwd="/workspace", exit_code=code, stdout=stdout, stderr=stderr, timed_out=False,
                           oom_killed=False, killed_signal=None, **more)


def _view(qtbot) -> ConversationView:
    view = ConversationView()
    qtbot.addWidget(view)
    return view


def _shown(view: ConversationView, rec: ToolCallRecord) -> str:
    view.add_tool_card(rec.id, rec.name, rec.input, rec.state.value)
    view.set_record(rec)
    return view.card_text(rec.id)


def test_a_command_that_exits_1_is_red_with_its_first_error_line_not_done(qtbot):
    view = _view(qtbot)
    rec = _record("bash_run", {"command": "python -m pytest -q"},
                  _bash("python -m pytest -q", 1, stderr="/usr/bin/python: No module named pytest\nsecond line\n"), RUN)
    text = _shown(view, rec)
    assert "✗ exit 1" in text and "done" not in text and "✓" not in text
    assert "/usr/bin/python: No module named pytest" in text.splitlines()[1]  # the reason, under the title
    assert "second line" in text  # the output, folded under it
    assert RED in view.toHtml().lower() or "#d9363e" in view.toHtml().lower()


def test_a_command_that_exits_0_says_so_in_green(qtbot):
    view = _view(qtbot)
    text = _shown(view, _record("bash_run", {"command": "ls"}, _bash("ls", 0, stdout="README.md\nsrc\n"), RUN))
    assert "✓ exit 0" in text and "README.md" in text and "src" in text


def test_the_end_event_colours_a_failed_command_before_its_record_is_read(qtbot, qloop):
    bus = EventBus(MemoryStore())
    bridge = EventBridge(bus)
    view = _view(qtbot)
    view.attach(bridge, lambda: "s")
    bus.publish(ToolStart(session_id="s", call_id="call_9", name="bash_run", input={"command": "false"}))
    bus.publish(ToolEnd(session_id="s", call_id="call_9", name="bash_run", state="COMPLETED", outcome="ok",
                        duration_ms=12.0, exit_code=1))
    qtbot.waitUntil(lambda: "✗ exit 1" in view.card_text("call_9"))
    assert "done" not in view.card_text("call_9")


def test_a_refusal_says_why_in_one_sentence(qtbot):
    view = _view(qtbot)
    rec = _record("bash_run", {"command": "curl https://example.com"}, None, [ToolCallState.DENIED],
                  error="denied by rule bash_run(curl *)")
    text = _shown(view, rec)
    assert "denied" in text and "Denied by rule bash_run(curl *)." in text
    assert "done" not in text


def test_a_failure_says_why(qtbot):
    view = _view(qtbot)
    rec = _record("fs_read", {"path": "nope.txt"}, ToolResult.error("nope.txt does not exist"),
                  [ToolCallState.EXECUTING, ToolCallState.FAILED], error="nope.txt does not exist")
    assert "Nope.txt does not exist." in _shown(view, rec)


def test_a_failure_reads_as_words_and_advice_not_as_the_body_the_model_got(qtbot):
    """The model gets the desk's error body (message and advice); the card shows the message as its reason and
    the advice under it, never the JSON. A record stored before the recorder kept the message alone (its
    `error` is the whole body) reads the same."""
    view = _view(qtbot)
    result = ToolResult.error("'/etc/shadow' resolves to /etc/shadow, outside the workspace /workspace",
                              ["only files under /workspace can be used; pass a path relative to it"])
    for error in (result.error_text, result.text_content):  # as stored now, and as stored before
        rec = _record("fs_read", {"path": "/etc/shadow"}, result, [ToolCallState.EXECUTING, ToolCallState.FAILED],
                      cid=f"call_{len(error)}", error=error)
        text = _shown(view, rec)
        assert "'/etc/shadow' resolves to /etc/shadow, outside the workspace /workspace." in text
        assert "→ only files under /workspace can be used; pass a path relative to it" in text
        assert '"ok"' not in text and "recommendations" not in text
    # an MCP server's own error text is shown as it came
    mcp = _record("mcp__git__log", {}, ToolResult(content=[TextBlock("fatal: not a git repository")], is_error=True),
                  [ToolCallState.EXECUTING, ToolCallState.FAILED], cid="call_mcp", error="fatal: not a git repository")
    assert card_truth(mcp.name, "FAILED", mcp).output == "fatal: not a git repository"


def test_a_question_reads_as_the_answer_not_as_json(qtbot):
    view = _view(qtbot)
    rec = _record("ask_user", {"question": "Which database?", "choices": ["SQLite", "Postgres"]},
                  ToolResult.text("The person answered: SQLite", answered=True, answer="SQLite", by="user"), RUN)
    text = _shown(view, rec)
    assert "Question: Which database? → you answered “SQLite”" in text
    assert "{" not in text and "done" not in text


def test_an_approved_plan_says_into_which_mode_and_a_rejected_one_says_the_note(qtbot):
    view = _view(qtbot)
    plan = {"plan": "## Retry failed uploads\n\n1. wrap send_chunk"}
    approved = _record("exit_plan_mode", plan, ToolResult.text("approved", approved=True, mode="accept-edits"), RUN)
    rejected = _record("exit_plan_mode", plan, ToolResult.text("rejected", approved=False, note="add a test first"),
                       RUN, cid="call_2")
    text = _shown(view, approved)
    assert "Plan approved → accept-edits · Retry failed uploads" in text and "done" not in text
    text = _shown(view, rejected)
    assert "Plan rejected: add a test first" in text and "✓" not in text and "done" not in text


def test_a_subagents_answer_is_folded_under_its_card(qtbot):
    view = _view(qtbot)
    rec = _record("task_run", {"task": "Where is parse_price called?", "template": "explore"},
                  ToolResult.text("parse_price is called in cart.py:41 and export.py:17.", child_session_id="ses_c",
                                  subagent="explore 1", template="explore", steps=3, reason="end_turn"), RUN)
    text = _shown(view, rec)
    assert "Sub-agent explore 1 (explore): Where is parse_price called?" in text
    assert "answered in 3 steps" in text and "cart.py:41 and export.py:17" in text


def test_long_output_shows_head_and_tail_and_all_of_it_one_click_away(qtbot):
    view = _view(qtbot)
    out = "".join(f"line {i}\n" for i in range(200))
    rec = _record("bash_run", {"command": "seq"}, _bash("seq", 0, stdout=out), RUN)
    text = _shown(view, rec)
    assert "line 0" in text and f"line {HEAD_LINES - 1}" in text and "line 199" in text
    assert f"line {HEAD_LINES + 5}" not in text and f"… {200 - HEAD_LINES - TAIL_LINES} more lines …" in text
    assert "show all 200 lines" in text
    view.anchorClicked.emit(QUrl("output:call_1"))
    text = view.card_text("call_1")
    assert all(f"line {i}\n" in text + "\n" for i in range(200)) and "fold" in text
    view.anchorClicked.emit(QUrl("output:call_1"))
    assert "line 100\n" not in view.card_text("call_1")


def test_output_streams_under_a_running_card(qtbot):
    view = _view(qtbot)
    view.add_tool_card("call_1", "bash_run", {"command": "make"}, "EXECUTING")
    for i in range(3):
        view.append_output("call_1", f"step {i}\n")
    qtbot.waitUntil(lambda: "step 2" in view.card_text("call_1"))
    assert "running" in view.card_text("call_1") and "step 0" in view.card_text("call_1")


def test_a_queued_call_does_not_show_empty_braces(qtbot):
    view = _view(qtbot)
    view.add_tool_card("streaming:toolu_1", "fs_write", {}, "PENDING")
    text = view.card_text("streaming:toolu_1")
    assert "{}" not in text and "input arriving" in text


def test_a_reason_is_one_sentence():
    assert sentence("denied by rule bash_run(curl *)") == "Denied by rule bash_run(curl *)."
    assert sentence("\n  first\nsecond") == "First."
    assert sentence("") == ""
    assert card_truth("bash_run", "COMPLETED", None, "", 2).label == "✗ exit 2"


def test_a_python_traceback_is_told_by_its_error_not_its_header(qtbot):
    view = _view(qtbot)
    err = ('Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n'
           "ModuleNotFoundError: No module named 'nope'\n")
    rec = _record("bash_run", {"command": "python3 -c 'import nope'"}, _bash("python3", 1, stderr=err), RUN)
    text = _shown(view, rec)
    assert text.splitlines()[1] == "ModuleNotFoundError: No module named 'nope'."


def test_a_waiting_question_plan_or_task_shows_its_words_not_json(qtbot):
    view = _view(qtbot)
    view.add_tool_card("c_q", "ask_user", {"question": "Which \"database\"?", "choices": ["a"]}, "EXECUTING")
    view.add_tool_card("c_p", "exit_plan_mode", {"plan": "## Plan\n1. do it"}, "EXECUTING")
    view.add_tool_card("c_t", "task_run", {"task": "Find the callers", "template": "explore"}, "EXECUTING")
    assert 'Which "database"?' in view.card_text("c_q")
    assert "## Plan 1. do it" in view.card_text("c_p") and "Find the callers" in view.card_text("c_t")
    assert all("{" not in view.card_text(c) for c in ("c_q", "c_p", "c_t"))


def test_a_skipped_or_interrupted_call_says_the_one_word_the_record_says():
    """A call skipped after a denial, or stopped by the person, reads on its card as the timeline, the history
    and the export say it (core's status_word): "skipped" naming the denied call, "interrupted"."""
    skipped = ToolCallRecord(name="fs_write", input={"path": "a"}, id="call_2", session_id="s")
    skipped.transition(ToolCallState.DENIED, actor="executor", outcome=Outcome.SKIPPED,
                       data={"after_denial_of": "bash_run"})
    truth = card_truth("fs_write", "DENIED", skipped)
    assert truth.label == "skipped" and "bash_run" in truth.reason and truth.colour != RED
    stopped = _record("fs_read", {"path": "a"}, None, [ToolCallState.EXECUTING])
    stopped.transition(ToolCallState.FAILED, actor="user", outcome=Outcome.INTERRUPTED)
    assert card_truth("fs_read", "FAILED", stopped).label == "interrupted"
    bash = _record("bash_run", {"command": "sleep 9"}, _bash("sleep 9", None, cancelled=True), RUN[:1])
    bash.transition(ToolCallState.FAILED, actor="user", outcome=Outcome.INTERRUPTED)
    assert card_truth("bash_run", "FAILED", bash).label == "■ interrupted"
