"""Rewind files to before a call (or a turn): the diff of what changes on disk (restored, removed, the person's
own changes kept unless they tick the box), and whether the conversation is rewound too (files only / files and
conversation: a new session from before the turn), asked before anything is done."""

from __future__ import annotations

from typing import Any

from PySide6.QtGui import QFont
from PySide6.QtWidgets import QCheckBox, QDialogButtonBox, QLabel, QPlainTextEdit, QRadioButton, QVBoxLayout

from ._base import FutureDialog


class RewindDialog(FutureDialog):
    """Shows a rewind's plan (core.RewindPlan) and, when the conversation can be rewound (`point`, a
    core.BranchPoint; else `no_conversation` says why), the choice of files only or files and conversation.
    `ask()` gives {"include_mine": bool, "conversation": bool}, or None when cancelled."""

    def __init__(self, plan: Any, parent=None, *, point: Any = None, no_conversation: str = "",
                 conversation: bool = False, title: str = "Rewind files to before this call") -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setMinimumSize(620, 420)
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
        self.files_only = QRadioButton("Files only: the conversation goes on as it is")
        self.with_conversation = QRadioButton("Files and conversation: go on in a new session from before that turn"
                                              " (this session is kept as it is)")
        (self.with_conversation if conversation and point is not None else self.files_only).setChecked(True)
        self.with_conversation.setEnabled(point is not None)
        self.conversation_note = QLabel("\n".join(point.lines()) if point is not None
                                        else f"The conversation cannot be rewound: {no_conversation}")
        self.conversation_note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.rewind_button = buttons.addButton("Rewind", QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.with_conversation.toggled.connect(self._chosen)
        self._chosen()
        lay = QVBoxLayout(self)
        for w in (self.summary, self.diff, self.mine, self.files_only, self.with_conversation,
                  self.conversation_note, buttons):
            lay.addWidget(w)

    def _chosen(self) -> None:
        both = self.with_conversation.isChecked()
        self.rewind_button.setText("Rewind files and conversation" if both else "Rewind files")
        self.rewind_button.setEnabled(both or not self.plan.empty)

    def value(self) -> dict[str, bool]:
        return {"include_mine": self.mine.isChecked(), "conversation": self.with_conversation.isChecked()}
