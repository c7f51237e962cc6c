"""Help › About (the version and where the data, the settings and the log live) and Help › Check setup (the
checks of `agent-desk doctor`, run off the GUI thread, with their fixes)."""

from __future__ import annotations

import html
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialogButtonBox, QLabel, QPushButton, QTextBrowser, QVBoxLayout

from ._base import FutureDialog


def about_rows() -> list[tuple[str, str]]:
    """(label, value) for the About box: the version, and the folders and files a person may look for."""
    from ... import __version__
    from ...config import config_dir, data_dir, default_db_url
    from ...logs import log_dir, log_file

    return [("Version", __version__), ("Data folder", str(data_dir())), ("Settings folder", str(config_dir())),
            ("Log folder", str(log_dir())), ("Log file", str(log_file())), ("Database", default_db_url())]


class AboutDialog(FutureDialog):
    """The version and the paths, selectable so they can be copied."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("About Agent Desk")
        self.setMinimumWidth(560)
        rows = "".join(f"<tr><td><b>{html.escape(k)}</b></td><td>{html.escape(v)}</td></tr>"
                       for k, v in about_rows())
        self.label = QLabel(
            "<h2>Agent Desk</h2><p>An LLM agent whose every tool call is visible, governed and recorded.</p>"
            f"<table cellspacing='6'>{rows}</table>")
        self.label.setTextFormat(Qt.TextFormat.RichText)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        bb.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.label)
        lay.addWidget(bb)


_MARKS = {"ok": ("✓", "#2f9e44"), "warn": ("!", "#d4890b"), "fail": ("✗", "#d9363e")}


def checks_html(checks: list[Any]) -> str:
    out = []
    for c in checks:
        mark, colour = _MARKS.get(c.status, ("?", "#888"))
        fix = f"<br>&nbsp;&nbsp;&nbsp;<i>fix:</i> {html.escape(c.fix)}" if c.fix and c.status != "ok" else ""
        out.append(f"<p><span style='color:{colour}'><b>{mark}</b></span> <b>{html.escape(c.name)}</b>: "
                   f"{html.escape(c.detail)}{fix}</p>")
    return "".join(out)


class ChecksDialog(FutureDialog):
    """The doctor's checks; `run()` (awaited by the controller) runs them on worker threads."""

    def __init__(self, db: str | None = None, parent=None) -> None:
        super().__init__(parent)
        self.db = db
        self.setWindowTitle("Check setup — Agent Desk")
        self.resize(760, 520)
        self.view = QTextBrowser()
        self.view.setHtml("<p>Checking…</p>")
        self.again = QPushButton("Check again")
        bb = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        bb.addButton(self.again, QDialogButtonBox.ButtonRole.ActionRole)
        bb.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        lay.addWidget(self.view, 1)
        lay.addWidget(bb)
        self.checks: list[Any] = []

    async def run(self) -> list[Any]:
        from ...doctor import run_checks

        self.again.setEnabled(False)
        self.view.setHtml("<p>Checking… (Docker, the endpoint and the database are asked off the window)</p>")
        try:
            self.checks = await run_checks(db=self.db)
        finally:
            self.again.setEnabled(True)
        failed = sum(c.status == "fail" for c in self.checks)
        head = f"<p><b>{failed} check(s) failed.</b></p>" if failed else "<p><b>All checks passed.</b></p>"
        self.view.setHtml(head + checks_html(self.checks))
        return self.checks
