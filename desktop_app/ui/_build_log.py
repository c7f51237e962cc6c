"""A build's log, live: the lines an image build prints, in a window of its own that stays open after it ends."""

from __future__ import annotations

from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

MAX_LINES = 5000


class BuildLogDialog(QDialog):
    """What is being built, every line of its log as it comes, and how it ended."""

    def __init__(self, title: str, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle(title)
        self.resize(760, 460)
        self.heading = QLabel(f"<b>{title}</b> — building…")
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(MAX_LINES)
        self.log.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        lay = QVBoxLayout(self)
        lay.addWidget(self.heading)
        lay.addWidget(self.log, 1)
        lay.addWidget(buttons)

    def add_line(self, line: str) -> None:
        self.log.appendPlainText(line.rstrip("\n"))

    def finish(self, ok: bool, message: str) -> None:
        colour = "#2f9e44" if ok else "#d9363e"
        self.heading.setText(f"<span style='color:{colour}'>●</span> {message}")
        self.add_line(message)
