"""A timeline row's "Rewind files to before this call": the dialog shows the diff (restored, removed, the person's
own change kept unless ticked), nothing changes until the person confirms, and the rewind is done off the event
loop, shown as a notice and recorded as a row of its own."""

from __future__ import annotations

from pathlib import Path

from desktop_app.config import Settings
from desktop_app.core import REWIND_TOOL, EventBus, ToolCall, ToolCallRecord, ToolCallState, ToolResult
from desktop_app.core._recorder import RecordWriter
from desktop_app.runtime import checkpoint_store
from tests.ui.helpers import window_on


async def _agent_call(store, bus: EventBus, shadow, change) -> ToolCallRecord:
    """A call recorded as the executor records it: its checkpoint before it runs, and after."""
    writer = RecordWriter(store, bus, lambda r: r.name)
    record = ToolCallRecord(name="bash_run", input={"command": "sed -i s/demo/changed/ README.md; echo > new.txt"},
                            session_id="ses_1", project_id="prj_rt")
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
