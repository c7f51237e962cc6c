"""Review a project file the sandbox (or a repository) can write before it is used: the rules, the hooks or an
MCP server. The change since it was last approved (the whole file when new), then approve or ignore it. Opened
with open(), never exec()."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtGui import QColor, QFont, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

from .._consent_words import words_for
from .._mcp import runs_where
from ._base import FutureDialog


class ConsentDialog(FutureDialog):
    """A subject to approve (value True) or ignore (None). `consent` is the runtime's Consent."""

    def __init__(self, consent: Any, project_name: str, parent=None) -> None:
        super().__init__(parent)
        self.consent = consent
        words = words_for(consent.kind)
        self.setWindowTitle(words.title.format(project=project_name, name=consent.name))
        self.resize(720, 480)
        lay = QVBoxLayout(self)
        where = f"{consent.project_dir}/{consent.file}"
        what = words.status(str(getattr(consent.status, "value", consent.status)))
        head = QLabel(words.head.format(where=html.escape(where), what=what, name=html.escape(consent.name),
                                        asks=html.escape(runs_where(str(consent.asks)))))
        head.setWordWrap(True)
        lay.addWidget(head)
        self.diff = QPlainTextEdit()
        self.diff.setReadOnly(True)
        self.diff.setFont(QFont("monospace"))
        self.diff.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        _show_diff(self.diff, consent.diff() or "(the file is empty)")
        lay.addWidget(self.diff, 1)
        lay.addWidget(QLabel(f"<small>{words.foot}</small>"))
        bb = QDialogButtonBox()
        self.approve_btn = bb.addButton(words.approve, QDialogButtonBox.ButtonRole.AcceptRole)
        self.ignore_btn = bb.addButton(words.ignore, QDialogButtonBox.ButtonRole.RejectRole)
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
