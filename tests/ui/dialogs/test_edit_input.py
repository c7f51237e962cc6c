"""'Edit, then allow' edits text, not JSON with \\n escapes: a command, a file's new contents, an edit's old and
new text each in a highlighted editor; what the editor could not keep as written is edited as JSON."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor

from desktop_app.ui.dialogs import EditInputDialog


def _dialog(qtbot, tool, data):
    dlg = EditInputDialog(tool, data)
    qtbot.addWidget(dlg)
    dlg.show()
    return dlg


def _painted(editor) -> bool:
    """Whether the highlighter gave any character of the editor a format of its own."""
    block = editor.document().firstBlock()
    while block.isValid():
        if block.layout().formats():
            return True
        block = block.next()
    return False


def test_a_command_is_edited_as_text_with_highlighting(qtbot):
    dlg = _dialog(qtbot, "bash_run", {"command": "for f in *.py; do\n  echo \"$f\"\ndone", "timeout_ms": 5000})
    ed = dlg.editors["command"]
    assert ed.toPlainText() == "for f in *.py; do\n  echo \"$f\"\ndone"  # real lines, no \n escapes
    assert _painted(ed)
    ed.moveCursor(QTextCursor.MoveOperation.End)
    qtbot.keyClicks(ed, " | sort")
    dlg._check()
    assert dlg.value() == {"command": "for f in *.py; do\n  echo \"$f\"\ndone | sort", "timeout_ms": 5000}


def test_an_edit_shows_old_and_new_text_and_keeps_what_it_did_not_touch(qtbot):
    data = {"path": "src/a.py", "old_string": "x = 1\n", "new_string": "x = 2\n"}
    dlg = _dialog(qtbot, "fs_edit", data)
    assert dlg.editors["old_string"].toPlainText() == "x = 1\n" and _painted(dlg.editors["new_string"])
    dlg._check()
    assert dlg.value() == data  # unchanged: no replace_all added behind the person's back
    dlg.editors["new_string"].setPlainText("x = 3\n")
    dlg.replace_all.setChecked(True)
    dlg._check()
    assert dlg.value() == {**data, "new_string": "x = 3\n", "replace_all": True}


def test_a_write_is_edited_as_the_files_text(qtbot):
    dlg = _dialog(qtbot, "fs_write", {"path": "notes.md", "content": "# Title\n\n- one\n"})
    assert dlg.editors["content"].toPlainText() == "# Title\n\n- one\n" and dlg.path.text() == "notes.md"
    dlg.path.setText("")
    dlg._check()
    assert dlg.value() is None and "path is empty" in dlg.error.text()


def test_text_an_editor_would_change_is_edited_as_json(qtbot):
    """CRLF or a Unicode line separator would come back as plain newlines: such an input stays JSON."""
    for text in ("a\r\nb\r\n", "a\u2028b"):
        dlg = _dialog(qtbot, "fs_write", {"path": "w.bat", "content": text})
        assert dlg.fields == () and ("\\r\\n" in dlg.edit.toPlainText() or "\\u2028" in dlg.edit.toPlainText())
        dlg._check()
        assert dlg.value() == {"path": "w.bat", "content": text}


def test_another_tools_input_is_json_and_must_parse(qtbot):
    dlg = _dialog(qtbot, "mcp__notes__append", {"text": "hi"})
    assert _painted(dlg.edit)
    dlg.edit.setPlainText("[1, 2]")
    dlg._check()
    assert dlg.value() is None and "JSON object" in dlg.error.text()
