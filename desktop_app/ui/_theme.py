"""Colours, state icons and the system/dark theme: one place so every view agrees on what a state looks like."""

from __future__ import annotations

from functools import cache

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QFont, QGuiApplication, QIcon, QPainter, QPalette, QPixmap

from ..core import ToolCallState, status_word

# (colour, glyph) per state: colour carries the meaning, the glyph keeps it readable without colour.
STATE_STYLE: dict[ToolCallState, tuple[str, str]] = {
    ToolCallState.PENDING: ("#8a8f98", "…"),
    ToolCallState.APPROVAL_REQUIRED: ("#d4890b", "?"),
    ToolCallState.APPROVED: ("#3b82c4", "✓"),
    ToolCallState.EXECUTING: ("#3b82c4", "▶"),
    ToolCallState.COMPLETED: ("#2f9e44", "✓"),
    ToolCallState.FAILED: ("#d9363e", "✕"),
    ToolCallState.DENIED: ("#b5475f", "⊘"),
    ToolCallState.SEALED: ("#7d6bb0", "■"),
}

# the one word per state, from core (a SEALED call was left open by a process that ended: "interrupted")
STATE_LABEL: dict[ToolCallState, str] = {s: status_word(s) for s in ToolCallState}

RISK_COLOURS = {"low": "#2f9e44", "medium": "#d4890b", "high": "#d9363e"}
SKIPPED_STYLE = ("#8a8f98", "–")  # never offered nor run: not a denial of its own


def status_style(state: ToolCallState | str, outcome: str | None = None) -> tuple[str, str]:
    """(colour, glyph) of a call as shown: by its word (core's status_word), so a call the person stopped looks
    like one a crash stopped (interrupted), and a skipped call not like a denied one."""
    word = status_word(state, outcome)
    if word == "interrupted":
        return STATE_STYLE[ToolCallState.SEALED]
    if word == "skipped":
        return SKIPPED_STYLE
    return STATE_STYLE[ToolCallState(state)]


def state_colour(state: ToolCallState | str, outcome: str | None = None) -> QColor:
    return QColor(status_style(state, outcome)[0])


def state_icon(state: ToolCallState | str, size: int = 16, outcome: str | None = None) -> QIcon:
    """A filled circle with a glyph, painted once per look (needs a QGuiApplication)."""
    return _icon(*status_style(state, outcome), size)


def glyph_icon(colour: str, glyph: str, size: int = 16) -> QIcon:
    """The state icon's look for any (colour, glyph): a command's red "✗" as well as a state's."""
    return _icon(colour, glyph, size)


@cache
def _icon(colour: str, glyph: str, size: int) -> QIcon:
    pm = QPixmap(size * 2, size * 2)  # 2x for hi-dpi
    pm.setDevicePixelRatio(2.0)
    pm.fill(Qt.GlobalColor.transparent)
    p = QPainter(pm)
    p.setRenderHint(QPainter.RenderHint.Antialiasing)
    p.setPen(Qt.PenStyle.NoPen)
    p.setBrush(QColor(colour))
    p.drawEllipse(QRectF(1, 1, size - 2, size - 2))
    p.setPen(QColor("white"))
    f = QFont()
    f.setPixelSize(int(size * 0.62))
    f.setBold(True)
    p.setFont(f)
    p.drawText(QRectF(0, 0, size, size), Qt.AlignmentFlag.AlignCenter, glyph)
    p.end()
    return QIcon(pm)


def is_dark() -> bool:
    app = QGuiApplication.instance()
    if app is None:
        return False
    hints = app.styleHints()
    if hasattr(hints, "colorScheme"):  # Qt 6.5+
        scheme = hints.colorScheme()
        if scheme != Qt.ColorScheme.Unknown:
            return scheme == Qt.ColorScheme.Dark
    return app.palette().color(QPalette.ColorRole.Window).lightness() < 128


def dark_palette() -> QPalette:
    pal = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#1f2125",
        QPalette.ColorRole.WindowText: "#e6e6e6",
        QPalette.ColorRole.Base: "#17181b",
        QPalette.ColorRole.AlternateBase: "#23262b",
        QPalette.ColorRole.ToolTipBase: "#2b2e33",
        QPalette.ColorRole.ToolTipText: "#e6e6e6",
        QPalette.ColorRole.Text: "#e6e6e6",
        QPalette.ColorRole.Button: "#2a2d32",
        QPalette.ColorRole.ButtonText: "#e6e6e6",
        QPalette.ColorRole.BrightText: "#ff6b6b",
        QPalette.ColorRole.Link: "#6cb0ff",
        QPalette.ColorRole.Highlight: "#3b6fb6",
        QPalette.ColorRole.HighlightedText: "#ffffff",
        QPalette.ColorRole.PlaceholderText: "#8a8f98",
    }
    for role, colour in roles.items():
        pal.setColor(role, QColor(colour))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
        pal.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6b6f76"))
    return pal


def apply_theme(theme: str = "system") -> None:
    """`system` follows the platform (and its later changes); `dark`/`light` force one."""
    app = QGuiApplication.instance()
    if app is None:
        return
    hints = app.styleHints()
    if theme == "dark":
        app.setPalette(dark_palette())
    elif theme == "light":
        app.setPalette(app.style().standardPalette() if hasattr(app, "style") else QPalette())
    else:
        if hasattr(hints, "colorScheme") and hints.colorScheme() == Qt.ColorScheme.Dark:
            app.setPalette(dark_palette())
        else:
            app.setPalette(app.style().standardPalette() if hasattr(app, "style") else QPalette())


def format_duration(ms: float | None) -> str:
    if ms is None:
        return ""
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    return f"{int(ms // 60000)}m{int(ms % 60000 / 1000):02d}s"


def bring_to_front(widget) -> None:
    """show + raise, except on platforms without a window manager (offscreen warns on raise())."""
    widget.show()
    if QGuiApplication.platformName() not in ("offscreen", "minimal"):
        widget.raise_()
        widget.activateWindow()
