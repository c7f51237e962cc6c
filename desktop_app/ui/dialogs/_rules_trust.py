"""Review a project's untrusted rules file: the diff since it was last trusted (the whole file when new),
then "Trust these rules" or "Ignore them". Opened with open(), never exec()."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

from ._base import FutureDialog

_WHAT = {
    "new": "were never trusted (a repository may have shipped them)",
    "changed": "changed since you last trusted them",
    "deleted": "were deleted since you last trusted them",
}


class RulesTrustDialog(FutureDialog):
    """The change to a project's rules, to trust (value True) or ignore (None). `trust` is a RulesTrust."""

    def __init__(self, trust: Any, project_name: str, parent=None) -> None:
        super().__init__(parent)
        self.trust = trust
        self.setWindowTitle(f"Review the rules of {project_name}")
        self.resize(720, 480)
        lay = QVBoxLayout(self)
        what = _WHAT.get(trust.status, "are not trusted")
        head = QLabel(
            f"The permission rules in <code>{html.escape(trust.project_dir)}/.agent-desk/rules.toml</code> "
            f"{what}. The agent's sandbox can write that file, so until you trust them, sessions use your own "
            "rules only (and the deny and ask rules you trusted before).")
        head.setWordWrap(True)
        lay.addWidget(head)
        self.diff = QPlainTextEdit()
        self.diff.setReadOnly(True)
        self.diff.setFont(QFont("monospace"))
        self.diff.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        _show_diff(self.diff, trust.diff() or "(the file is empty)")
        lay.addWidget(self.diff, 1)
        lay.addWidget(QLabel("<small>Trusting takes the text shown here; a file changed after this was read "
                             "is asked about again.</small>"))
        bb = QDialogButtonBox()
        self.trust_btn = bb.addButton("Trust these rules", QDialogButtonBox.ButtonRole.AcceptRole)
        self.ignore_btn = bb.addButton("Ignore them", QDialogButtonBox.ButtonRole.RejectRole)
        bb.accepted.connect(self.accept)
        bb.rejected.connect(self.reject)
        lay.addWidget(bb)


def _show_diff(view: QPlainTextEdit, diff: str) -> None:
    """The diff with added lines green and removed lines red (a new file is all additions)."""
    cursor = view.textCursor()
    plain = QTextCharFormat()
    for line in diff.splitlines(keepends=True):
        fmt = QTextCharFormat(plain)
        if line.startswith("+") and not line.startswith("+++"):
            fmt.setForeground(QColor("#2f9e44"))
        elif line.startswith("-") and not line.startswith("---"):
            fmt.setForeground(QColor("#d9363e"))
        elif line.startswith("@@"):
            fmt.setForeground(QColor("#8a8f98"))
        cursor.insertText(line, fmt)
    view.moveCursor(QTextCursor.MoveOperation.Start)
