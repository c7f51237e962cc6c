"""'Edit, then allow': the call's JSON input in an editor that refuses to close on invalid JSON."""

from __future__ import annotations

import json
from typing import Any

from PySide6.QtGui import QFont
from PySide6.QtWidgets import QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

from ._base import FutureDialog


class EditInputDialog(FutureDialog):
    """Edit the call's JSON input, then allow it; refuses to close on invalid JSON."""

    def __init__(self, tool: str, data: dict[str, Any], parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"Edit, then allow: {tool}")
        self.resize(560, 360)
        lay = QVBoxLayout(self)
        self.edit = QPlainTextEdit(json.dumps(data, indent=2, ensure_ascii=False))
        self.edit.setFont(QFont("monospace"))
        self.error = QLabel()
        self.error.setStyleSheet("color: #d9363e")
        lay.addWidget(self.edit)
        lay.addWidget(self.error)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        bb.button(QDialogButtonBox.StandardButton.Ok).setText("Allow edited")
        bb.accepted.connect(self._check)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)
        self._parsed: dict | None = None

    def _check(self) -> None:
        try:
            data = json.loads(self.edit.toPlainText())
        except json.JSONDecodeError as exc:
            self.error.setText(f"Not valid JSON: {exc}")
            return
        if not isinstance(data, dict):
            self.error.setText("The input must be a JSON object.")
            return
        self._parsed = data
        self.accept()

    def value(self) -> dict | None:
        return self._parsed
