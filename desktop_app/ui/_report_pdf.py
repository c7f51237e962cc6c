"""A report printed to PDF by Qt's own printing (QTextDocument on a QPdfWriter, A4): no browser, no new
dependency. Qt's rich text takes a subset of CSS, so the PDF is plainer than the HTML, with the same words."""

from __future__ import annotations

import os
import re
from pathlib import Path

from PySide6.QtCore import QByteArray, QMarginsF, QSizeF, Qt, QUrl
from PySide6.QtGui import QGuiApplication, QImage, QPageLayout, QPageSize, QPainter, QPdfWriter, QTextDocument
from PySide6.QtSvg import QSvgRenderer

_SVG = re.compile(r"<svg\b.*?</svg>", re.S)
_SCALE = 3  # the charts' pixels per SVG unit in the PDF: sharp when printed


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
    doc.setHtml(_charts_as_images(doc, page_html, int(writer.width() * 0.92)))
    doc.setPageSize(QSizeF(writer.width(), writer.height()))
    doc.print_(writer)
    if not out.exists() or out.stat().st_size == 0:
        raise OSError(f"Qt wrote no PDF to {out}")


def _charts_as_images(doc: QTextDocument, page_html: str, width: int) -> str:
    """Qt's rich text draws no SVG: each inline chart is drawn to an image (QtSvg) the document holds."""
    count = 0

    def swap(m: re.Match[str]) -> str:
        nonlocal count
        svg = m.group(0)
        if "xmlns=" not in svg.split(">", 1)[0]:
            svg = svg.replace("<svg", '<svg xmlns="http://www.w3.org/2000/svg"', 1)
        renderer = QSvgRenderer(QByteArray(svg.encode("utf-8")))
        if not renderer.isValid():
            return ""
        size = renderer.defaultSize()
        image = QImage(size.width() * _SCALE, size.height() * _SCALE, QImage.Format.Format_RGB32)
        image.fill(Qt.GlobalColor.white)
        painter = QPainter(image)
        renderer.render(painter)
        painter.end()
        count += 1
        name = f"agent-desk-chart-{count}.png"
        doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(name), image)
        return f"<img src='{name}' width='{width}' height='{int(width * size.height() / size.width())}'>"

    return _SVG.sub(swap, page_html)
