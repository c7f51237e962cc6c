"""Syntax highlighting in a text editor: pygments' tokens painted by a QSyntaxHighlighter, line by line."""

from __future__ import annotations

from functools import cache

from PySide6.QtGui import QColor, QFont, QSyntaxHighlighter, QTextCharFormat, QTextDocument

from ._theme import is_dark


def lexer_for(filename: str = "", language: str = ""):
    """A pygments lexer for `language`, or else guessed from `filename`; plain text when neither is known.
    Built so that it keeps every character (no newline stripped or added)."""
    from pygments.lexers import TextLexer, get_lexer_by_name, get_lexer_for_filename
    from pygments.util import ClassNotFound

    opts = {"stripnl": False, "ensurenl": False}
    try:
        if language:
            return get_lexer_by_name(language, **opts)
        if filename:
            return get_lexer_for_filename(filename, **opts)
    except ClassNotFound:
        pass
    return TextLexer(**opts)


@cache
def _formats(style_name: str) -> dict:
    """pygments' style as QTextCharFormats, one per token type."""
    from pygments.styles import get_style_by_name

    out = {}
    for token, spec in get_style_by_name(style_name):
        fmt = QTextCharFormat()
        if spec["color"]:
            fmt.setForeground(QColor(f"#{spec['color']}"))
        if spec["bold"]:
            fmt.setFontWeight(QFont.Weight.Bold)
        if spec["italic"]:
            fmt.setFontItalic(True)
        out[token] = fmt
    return out


class PygmentsHighlighter(QSyntaxHighlighter):
    """Highlights each line of `document` with a pygments lexer. A line is lexed alone: a string or comment
    that spans lines may be painted as code, which is fine for reading an edit (nothing is hidden)."""

    MAX_LINE = 4_000  # a longer line is left plain: lexing it on every keystroke would lag the editor

    def __init__(self, document: QTextDocument, lexer) -> None:
        super().__init__(document)
        self.lexer = lexer
        self.formats = _formats("monokai" if is_dark() else "friendly")

    def highlightBlock(self, text: str) -> None:
        if not text or len(text) > self.MAX_LINE:
            return
        pos = 0
        for token, value in self.lexer.get_tokens(text):
            fmt = self._format(token)
            if fmt is not None:
                self.setFormat(pos, len(value), fmt)
            pos += len(value)

    def _format(self, token) -> QTextCharFormat | None:
        while token is not None:
            fmt = self.formats.get(token)
            if fmt is not None and (fmt.foreground().style() or fmt.fontWeight() > 400 or fmt.fontItalic()):
                return fmt
            token = token.parent
        return None
