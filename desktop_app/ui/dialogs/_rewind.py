"""Rewind files to before a call: the diff of what changes on disk (restored, removed, the person's own
changes kept unless they tick the box), asked before anything is done."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QFont
from PySide6.QtWidgets import QCheckBox, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

from ._base import FutureDialog


class RewindDialog(FutureDialog):
    """Shows a rewind's plan (core.RewindPlan); `ask()` gives {"include_mine": bool}, or None when cancelled."""

    def __init__(self, plan: Any, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Rewind files to before this call")
        self.setMinimumSize(620, 380)
        self.plan = plan
        counts = (f"{len(plan.restore)} file(s) restored, {len(plan.remove)} removed"
                  + (f"; {len(plan.mine)} you changed since are kept unless you tick the box" if plan.mine else ""))
        self.summary = QLabel("Nothing to change: the files are as they were." if plan.empty else counts)
        self.summary.setWordWrap(True)
        self.diff = QPlainTextEdit("\n".join(plan.lines()))
        self.diff.setReadOnly(True)
        self.diff.setFont(QFont("monospace"))
        self.mine = QCheckBox(f"Also put back the {len(plan.mine)} file(s) I changed since")
        self.mine.setVisible(bool(plan.mine))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.rewind_button = buttons.addButton("Rewind files", QDialogButtonBox.ButtonRole.AcceptRole)
        self.rewind_button.setEnabled(not plan.empty)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        for w in (self.summary, self.diff, self.mine, buttons):
            lay.addWidget(w)

    def value(self) -> dict[str, bool]:
        return {"include_mine": self.mine.isChecked()}
