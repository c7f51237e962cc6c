"""A report printed to PDF by Qt's own printing (QTextDocument on a QPdfWriter, A4): no browser, no new
dependency. Qt's rich text takes a subset of CSS, so the PDF is plainer than the HTML, with the same words."""

from __future__ import annotations

import os
from pathlib import Path

from PySide6.QtCore import QMarginsF, QSizeF
from PySide6.QtGui import QGuiApplication, QPageLayout, QPageSize, QPdfWriter, QTextDocument


def write_pdf(page_html: str, out: Path) -> None:
    """Write `page_html` to `out` as an A4 PDF. Runs on the main thread: it starts a (headless) Qt
    application when none runs, as the CLI has none."""
    if QGuiApplication.instance() is None:
        if not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY"):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        _app = QGuiApplication([])  # it must live while the document is printed
    writer = QPdfWriter(str(out))
    writer.setPageLayout(QPageLayout(QPageSize(QPageSize.PageSizeId.A4), QPageLayout.Orientation.Portrait,
                                     QMarginsF(15, 15, 15, 15), QPageLayout.Unit.Millimeter))
    writer.setTitle("Agent Desk audit report")
    writer.setCreator("agent-desk")
    doc = QTextDocument()
    doc.setHtml(page_html)
    doc.setPageSize(QSizeF(writer.width(), writer.height()))
    doc.print_(writer)
    if not out.exists() or out.stat().st_size == 0:
        raise OSError(f"Qt wrote no PDF to {out}")
