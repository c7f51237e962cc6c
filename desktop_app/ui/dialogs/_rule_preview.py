"""The 'always allow' preview: the rule that will be written, and where, editable before it is."""

from __future__ import annotations

import html

from PySide6.QtWidgets import QDialogButtonBox, QLabel, QLineEdit, QVBoxLayout

from ._base import FutureDialog


class RulePreviewDialog(FutureDialog):
    """Shows the rule that 'always allow' will write, and where, before writing it."""

    def __init__(self, rule: str, target: str, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Always allow: preview the rule")
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel(f"This rule will be added to <code>{html.escape(target)}</code>:"))
        self.edit = QLineEdit(rule)
        lay.addWidget(self.edit)
        lay.addWidget(QLabel("<small>Future calls that match it run without asking. Edit it to make it "
                             "narrower.</small>"))
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)

    def value(self) -> str | None:
        return self.edit.text().strip() or None
