"""The inbox's painted card: risk chip, tool, countdown, the input, and why it asks."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPalette
from PySide6.QtWidgets import QStyle, QStyledItemDelegate

from ...core import visible
from .._call_labels import call_headline
from .._roles import Role
from .._theme import RISK_COLOURS
from ._items import PendingApproval


class InboxCardDelegate(QStyledItemDelegate):
    """Paints a compact card: tool and input, risk chip, why it asks, and a countdown."""

    HEIGHT = 58

    def sizeHint(self, option, index) -> QSize:
        return QSize(120, self.HEIGHT)  # the width follows the view

    def paint(self, painter, option, index) -> None:
        item: PendingApproval = index.data(Role.ITEM)
        if item is None:
            return
        painter.save()
        pal = option.palette
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        r = option.rect.adjusted(3, 2, -3, -2)
        bg = pal.color(QPalette.ColorRole.Highlight) if selected else pal.color(QPalette.ColorRole.AlternateBase)
        painter.setRenderHint(painter.RenderHint.Antialiasing)
        painter.setPen(QColor(RISK_COLOURS.get(item.risk, "#8a8f98")))
        painter.setBrush(bg)
        painter.drawRoundedRect(r, 5, 5)
        fg = pal.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        small = QFont(option.font)
        small.setPointSizeF(max(6.0, option.font.pointSizeF() * 0.88))
        self._paint_title(painter, option, item, r, fg, small)
        self._paint_body(painter, option, item, r, fg, small)
        painter.restore()

    @staticmethod
    def _paint_title(painter, option, item: PendingApproval, r: QRect, fg: QColor, small: QFont) -> None:
        """Line 1: risk chip, tool, countdown."""
        bold = QFont(option.font)
        bold.setBold(True)
        chip = QRect(r.left() + 8, r.top() + 7, QFontMetrics(small).horizontalAdvance(item.risk) + 14, 15)
        painter.setPen(Qt.PenStyle.NoPen)
        painter.setBrush(QColor(RISK_COLOURS.get(item.risk, "#8a8f98")))
        painter.drawRoundedRect(chip, 7, 7)
        painter.setPen(QColor("white"))
        painter.setFont(small)
        painter.drawText(chip, Qt.AlignmentFlag.AlignCenter, item.risk)
        painter.setPen(fg)
        painter.setFont(bold)
        painter.drawText(QRect(chip.right() + 8, r.top() + 5, r.width() - 140, 19),
                         Qt.AlignmentFlag.AlignVCenter,
                         painter.fontMetrics().elidedText(item.title, Qt.TextElideMode.ElideRight, r.width() - 140))
        left = item.remaining_s()
        if left is not None:
            painter.setFont(small)
            painter.drawText(QRect(r.right() - 90, r.top() + 5, 82, 19),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter,
                             "expired" if left <= 0 else f"{int(left) // 60}:{int(left) % 60:02d} left")

    @staticmethod
    def input_line(item: PendingApproval, fm: QFontMetrics, width: int) -> str:
        """The card's one line of input: cut with a visible "…" (the details card shows it whole)."""
        return fm.elidedText(call_headline(item.name, item.input), Qt.TextElideMode.ElideRight, width)

    @staticmethod
    def _paint_body(painter, option, item: PendingApproval, r: QRect, fg: QColor, small: QFont) -> None:
        """Line 2: the input; line 3: why it asks, muted."""
        x = r.left() + 8
        painter.setFont(option.font)
        text = InboxCardDelegate.input_line(item, painter.fontMetrics(), r.width() - 16)
        painter.drawText(QRect(x, r.top() + 23, r.width() - 16, 16), Qt.AlignmentFlag.AlignVCenter, text)
        painter.setFont(small)
        muted = QColor(fg)
        muted.setAlpha(170)
        painter.setPen(muted)
        why = painter.fontMetrics().elidedText(f"asks because {visible(item.why)}", Qt.TextElideMode.ElideRight,
                                               r.width() - 16)
        painter.drawText(QRect(x, r.top() + 38, r.width() - 16, 15), Qt.AlignmentFlag.AlignVCenter, why)
