"""A timeline row's "Rewind files to before this call": the dialog shows the diff (restored, removed, the person's
own change kept unless ticked), nothing changes until the person confirms, and the rewind is done off the event
loop, shown as a notice and recorded as a row of its own. A prompt's "Rewind to before this turn" in the
conversation: files and conversation, the branch opened in the window with the prompt back in the box."""

from __future__ import annotations

from pathlib import Path

from desktop_app.config import Settings
from desktop_app.core import (
    BRANCH_OF,
    REWIND_TOOL,
    EventBus,
    StoredMessage,
    ToolCall,
    ToolCallRecord,
    ToolCallState,
    ToolResult,
)
from desktop_app.core._recorder import RecordWriter
from desktop_app.runtime import checkpoint_store
from tests.ui.helpers import window_on


async def _agent_call(store, bus: EventBus, shadow, change) -> ToolCallRecord:
    """A call recorded as the executor records it: its checkpoint before it runs, and after."""
    writer = RecordWriter(store, bus, lambda r: r.name)
    record = ToolCallRecord(name="bash_run", input={"command": "sed -i s/demo/changed/ README.md; echo > new.txt"},
                            session_id="ses_1", project_id="prj_rt", tool_use_id="tu_1")
    writer.create(record, ToolCall("tu_1", record.name, record.input))
    await writer.move(record, ToolCallState.EXECUTING, actor="executor",
                      data={"checkpoint": shadow.take().to_dict()})
    change()
    await writer.finish(record, ToolResult.text("ok"), data={"checkpoint_after": shadow.take().to_dict()})
    return record


def test_a_row_rewinds_the_files_after_the_person_confirms(qtbot, run, store, window_project, monkeypatch,
                                                           tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_DESK_DATA_DIR", str(tmp_path / "data"))
    folder, project = window_project
    window, controller, rts = window_on(qtbot, run, store, project)
    shadow = checkpoint_store(Settings(), project)

    def change() -> None:
        (folder / "README.md").write_text("changed\n")
        (folder / "new.txt").write_text("\n")

    call = run(_agent_call(store, controller.desk.bus, shadow, change))
    (folder / "mine.txt").write_text("the person's note\n")  # made by the person after the call
    run(controller.select_session("ses_1"))
    qtbot.waitUntil(lambda: window.timeline_model.row_of(call.id) >= 0)
    menu = window.timeline.row_menu(window.timeline_model.index(window.timeline_model.row_of(call.id), 0))
    (action,) = menu.actions()
    assert action.text() == "Rewind files to before this call…"
    action.trigger()
    qtbot.waitUntil(lambda: controller.rewind.dialog is not None and controller.rewind.dialog.isVisible())
    dialog = controller.rewind.dialog
    assert dialog.files_only.isChecked() and not dialog.with_conversation.isEnabled()  # no message asked for it
    assert "The conversation cannot be rewound" in dialog.conversation_note.text()
    shown = dialog.diff.toPlainText()
    assert "restore  README.md" in shown and "remove   new.txt" in shown and "yours    mine.txt" in shown
    assert dialog.mine.isVisible() and not dialog.mine.isChecked()
    assert (folder / "README.md").read_text() == "changed\n"  # nothing yet: it asks first
    dialog.rewind_button.click()
    qtbot.waitUntil(lambda: (folder / "README.md").read_text() == "demo\n")
    assert not (folder / "new.txt").exists() and (folder / "mine.txt").read_text() == "the person's note\n"
    qtbot.waitUntil(lambda: "Files rewound to before" in window.conversation.toPlainText())
    rows = run(store.session_records("ses_1"))
    (rewind,) = [r for r in rows if r.name == REWIND_TOOL]
    assert rewind.state is ToolCallState.COMPLETED and rewind.trail[-1].data["kept"] == ["mine.txt"]
    assert next(e for e in rewind.trail if e.state is ToolCallState.APPROVED).actor == "person:window"
    qtbot.waitUntil(lambda: window.timeline_model.row_of(rewind.id) >= 0)  # a row of its own
    run(controller.close())
    run(rts.close())


def _said(session_id: str, role: str, *blocks: dict) -> StoredMessage:
    return StoredMessage(session_id, role, list(blocks))


def test_a_prompt_rewinds_files_and_conversation_into_a_new_session(qtbot, run, store, window_project, monkeypatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("AGENT_DESK_DATA_DIR", str(tmp_path / "data"))
    folder, project = window_project
    window, controller, rts = window_on(qtbot, run, store, project)
    shadow = checkpoint_store(Settings(), project)

    def change() -> None:
        (folder / "README.md").write_text("changed\n")
        (folder / "new.txt").write_text("\n")

    for m in (_said("ses_1", "user", {"type": "text", "text": "first ask"}),
              _said("ses_1", "assistant", {"type": "tool_use", "id": "tu_1", "name": "bash_run", "input": {}})):
        run(store.append_message(m))
    call = run(_agent_call(store, controller.desk.bus, shadow, change))
    for m in (_said("ses_1", "user", {"type": "tool_result", "tool_use_id": "tu_1", "content": "ok"}),
              _said("ses_1", "assistant", {"type": "text", "text": "done it"}),
              _said("ses_1", "user", {"type": "text", "text": "second ask"}),
              _said("ses_1", "assistant", {"type": "text", "text": "answered"})):
        run(store.append_message(m))
    original = run(store.messages("ses_1"))
    controller.current_session = None  # the window opened on ses_1 before its messages were stored: read again
    run(controller.select_session("ses_1"))
    view = window.conversation
    qtbot.waitUntil(lambda: "second ask" in view.toPlainText())

    window.show()
    qtbot.waitExposed(window)

    def menu_on(words: str):  # the menu where the person right-clicks the middle of `words`
        found = view.document().find(words)
        found.setPosition((found.selectionStart() + found.selectionEnd()) // 2)
        view.setTextCursor(found)
        view.ensureCursorVisible()
        return view.menu_at(view.cursorRect(found).center())

    assert "Rewind to before this turn…" not in [a.text() for a in menu_on("done it").actions()]  # not a prompt
    second = next(a for a in menu_on("second ask").actions() if a.text() == "Rewind to before this turn…")
    second.trigger()  # the second turn asked for no call: the conversation only
    qtbot.waitUntil(lambda: controller.rewind.dialog is not None and controller.rewind.dialog.isVisible())
    dialog = controller.rewind.dialog
    assert dialog.with_conversation.isChecked() and "files: none to rewind" in dialog.diff.toPlainText()
    dialog.files_only.setChecked(True)
    assert not dialog.rewind_button.isEnabled()  # files only, and none to rewind: nothing to do
    dialog.reject()

    first = next(a for a in menu_on("first ask").actions() if a.text() == "Rewind to before this turn…")
    first.trigger()
    qtbot.waitUntil(lambda: controller.rewind.dialog is not dialog and controller.rewind.dialog is not None
                    and controller.rewind.dialog.isVisible())
    dialog = controller.rewind.dialog
    assert "restore  README.md" in dialog.diff.toPlainText() and "remove   new.txt" in dialog.diff.toPlainText()
    assert dialog.rewind_button.text() == "Rewind files and conversation"
    dialog.rewind_button.click()
    qtbot.waitUntil(lambda: controller.current_session not in (None, "ses_1"))
    branch = run(store.get_session(controller.current_session))
    assert branch.meta[BRANCH_OF] == "ses_1" and branch.meta["branched_before_message"] == original[0].id
    assert (folder / "README.md").read_text() == "demo\n" and not (folder / "new.txt").exists()
    assert run(store.messages(branch.id)) == [] and window.prompt.toPlainText() == "first ask"
    qtbot.waitUntil(lambda: "Conversation rewound" in view.toPlainText())
    assert "second ask" not in view.toPlainText()
    assert branch.id in {s.id for s in run(store.list_sessions())} and run(store.messages("ses_1")) == original
    rows = run(store.session_records(branch.id))  # the rewinds are the branch's; the call stays the original's
    assert {r.name for r in rows} == {"rewind_conversation", REWIND_TOOL} and call.id not in {r.id for r in rows}
    assert run(store.verify()).ok
    run(controller.close())
    run(rts.close())
