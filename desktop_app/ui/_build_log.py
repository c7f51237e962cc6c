"""A build's log, live: the lines an image build prints, its elapsed time and a Cancel that stops it, in a
window of its own that stays open after it ends. Closing it leaves the build running (the status bar shows
it, and opens this window again)."""

from __future__ import annotations

from PySide6.QtCore import QTimer
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QHBoxLayout, QLabel, QPlainTextEdit, QVBoxLayout

from ._builds import RunningBuild, elapsed_text
from ._theme import bring_to_front

MAX_LINES = 5000


class BuildLogDialog(QDialog):
    """What is being built, every line of its log as it comes, how long it has run, Cancel, and how it ended."""

    def __init__(self, build: RunningBuild, parent=None) -> None:
        super().__init__(parent)
        self.build = build
        self.setWindowTitle(build.title)
        self.resize(760, 460)
        self.heading = QLabel()
        self.elapsed = QLabel()
        self.log = QPlainTextEdit()
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(MAX_LINES)
        self.log.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.log.setPlainText("\n".join(build.lines))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        self.cancel_btn = buttons.addButton("Cancel build", QDialogButtonBox.ButtonRole.ActionRole)
        self.cancel_btn.setToolTip("Stop the build now: the engine stops the step it runs; nothing is tagged")
        self.cancel_btn.clicked.connect(build.request_cancel)
        buttons.rejected.connect(self.close)
        top = QHBoxLayout()
        top.addWidget(self.heading, 1)
        top.addWidget(self.elapsed)
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.log, 1)
        lay.addWidget(buttons)
        self._tick = QTimer(self, interval=1000)
        self._tick.timeout.connect(self._show_elapsed)
        build.lineAdded.connect(self.add_line)
        build.finished.connect(self.finish)
        if build.running:
            self.heading.setText(f"<b>{build.title}</b> — building…")
            self._tick.start()
        else:
            self.finish(bool(build.ok), build.message, echo=False)
        self._show_elapsed()

    def _show_elapsed(self) -> None:
        self.elapsed.setText(f"elapsed {elapsed_text(self.build.elapsed())}")

    def add_line(self, line: str) -> None:
        self.log.appendPlainText(line.rstrip("\n"))

    def finish(self, ok: bool, message: str, *, echo: bool = True) -> None:
        self._tick.stop()
        self._show_elapsed()
        self.cancel_btn.setEnabled(False)
        colour = "#2f9e44" if ok else "#d9363e"
        self.heading.setText(f"<span style='color:{colour}'>●</span> {message}")
        if echo:
            self.add_line(message)


def show_build_log(build: RunningBuild, parent=None) -> BuildLogDialog:
    """The build's log window: the one already open raised, else a new one with every line so far."""
    dlg = build.dialog
    if dlg is None:
        dlg = build.dialog = BuildLogDialog(build, parent)
    bring_to_front(dlg)
    return dlg
