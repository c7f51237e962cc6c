"""'Edit, then allow': the call's command or file text edited as text, highlighted, never as escaped JSON.

A command tool's `command`, fs_write's content and fs_edit's old and new text each get an editor of their own
(the path a line); any other tool's input is JSON. The executor validates and dry-runs the edit again."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QVBoxLayout,
    QWidget,
)

from .._syntax import PygmentsHighlighter, lexer_for
from ._base import FutureDialog

# the fields each tool's input is edited as, in the editor's order; the rest of the input is kept as it was
TEXT_FIELDS = {"fs_write": ("content",), "fs_edit": ("old_string", "new_string")}
FIELD_LABELS = {"command": "Command", "content": "New contents of the file", "old_string": "Replace this text",
                "new_string": "With this text"}


def text_fields(tool: str, data: dict[str, Any]) -> tuple[str, ...]:
    """The input's fields edited as plain text: the command of a shell tool, a file tool's texts; () when
    the input is edited as JSON (another tool, or a value of an unexpected type)."""
    fields = ("command",) if tool.startswith("bash") else TEXT_FIELDS.get(tool, ())
    return fields if fields and all(isinstance(data.get(f), str) for f in fields) else ()


def _round_trips(*texts: str) -> bool:
    """Whether each text comes back from an editor as it went in: a carriage return or a Unicode line
    separator would not (the editor turns them into its own line breaks), so such an input is edited as
    JSON with escapes rather than changed behind the person's back."""
    probe = QPlainTextEdit()
    try:
        for text in texts:
            probe.setPlainText(text)
            if probe.toPlainText() != text:
                return False
        return True
    finally:
        probe.deleteLater()


def _json_text(data: dict[str, Any]) -> str:
    """The input as JSON an editor keeps as written: readable characters as they are, unless one of them
    would change in the editor (a line separator), then everything non-ASCII as an escape."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    return text if _round_trips(text) else json.dumps(data, indent=2)


class EditInputDialog(FutureDialog):
    """Edit the call's input, then allow it: text in highlighted editors, or JSON that must parse."""

    def __init__(self, tool: str, data: dict[str, Any], parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Edit, then allow: {tool}")
        self.resize(720, 520)
        self._tool, self._data = tool, dict(data)
        self._parsed: dict | None = None
        fields = text_fields(tool, data)
        self.fields = fields if _round_trips(*(data[f] for f in fields)) else ()
        self.editors: dict[str, QPlainTextEdit] = {}
        self.path: QLineEdit | None = None
        self.replace_all: QCheckBox | None = None
        lay = QVBoxLayout(self)
        lay.addWidget(self._text_form() if self.fields else self._json_editor())
        self.error = QLabel()
        self.error.setStyleSheet("color: #d9363e")
        self.error.setWordWrap(True)
        lay.addWidget(self.error)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        bb.button(QDialogButtonBox.StandardButton.Ok).setText("Allow edited")
        bb.accepted.connect(self._check)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)

    def _editor(self, text: str, lexer) -> QPlainTextEdit:
        ed = QPlainTextEdit(text)
        ed.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        ed.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        ed.setTabChangesFocus(False)
        ed.highlighter = PygmentsHighlighter(ed.document(), lexer)  # kept alive with its editor
        ed.highlighter.rehighlight()  # now, not on the next turn of the loop: the editor opens painted
        return ed

    def _text_form(self) -> QWidget:
        box = QWidget()
        form = QFormLayout(box)
        form.setContentsMargins(0, 0, 0, 0)
        if isinstance(self._data.get("path"), str):
            self.path = QLineEdit(self._data["path"])
            form.addRow("File", self.path)
        path = str(self._data.get("path") or "")
        for name in self.fields:
            lexer = lexer_for(language="bash") if name == "command" else lexer_for(filename=path)
            self.editors[name] = self._editor(self._data[name], lexer)
            form.addRow(QLabel(FIELD_LABELS.get(name, name)))
            form.addRow(self.editors[name])
        if "replace_all" in self._data or self._tool == "fs_edit":
            self.replace_all = QCheckBox("Replace every match")
            self.replace_all.setChecked(bool(self._data.get("replace_all")))
            form.addRow(self.replace_all)
        rest = {k: v for k, v in self._data.items() if k not in {*self.fields, "path", "replace_all"}}
        if rest:  # kept as they were: shown, so nothing of the input is hidden from the person
            shown = QLabel(f"Also sent unchanged: {json.dumps(rest, ensure_ascii=False)}")
            shown.setWordWrap(True)
            form.addRow(shown)
        return box

    def _json_editor(self) -> QWidget:
        self.edit = self._editor(_json_text(self._data), lexer_for(language="json"))
        return self.edit

    def _check(self) -> None:
        data = self._from_text() if self.fields else self._from_json()
        if data is None:
            return
        self._parsed = data
        self.accept()

    def _from_text(self) -> dict | None:
        data = dict(self._data)
        for name, ed in self.editors.items():
            data[name] = ed.toPlainText()
        if self.path is not None:
            if not self.path.text().strip():
                self.error.setText("The file path is empty.")
                return None
            data["path"] = self.path.text()
        if self.replace_all is not None and (self.replace_all.isChecked() or "replace_all" in data):
            data["replace_all"] = self.replace_all.isChecked()
        if "command" in self.editors and not data["command"].strip():
            self.error.setText("The command is empty.")
            return None
        return data

    def _from_json(self) -> dict | None:
        try:
            data = json.loads(self.edit.toPlainText())
        except json.JSONDecodeError as exc:
            self.error.setText(f"Not valid JSON: {exc}")
            return None
        if not isinstance(data, dict):
            self.error.setText("The input must be a JSON object.")
            return None
        return data

    def value(self) -> dict | None:
        return self._parsed
