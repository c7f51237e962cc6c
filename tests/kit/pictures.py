"""Real picture files for the prompt-image tests: PNG, JPEG and WebP written by Qt's own encoders, GIF and the
WebP variants Qt does not write put together byte by byte (each decodes in Qt)."""

from __future__ import annotations

import struct

from PySide6.QtCore import QBuffer, QByteArray, QIODevice
from PySide6.QtGui import QColor, QImage


def encoded(fmt: str, width: int = 32, height: int = 24, colour: str = "#3b82c4", quality: int = -1) -> bytes:
    """A `width`×`height` picture of one colour with a white corner, in Qt's `fmt` ("PNG", "JPEG", "WEBP")."""
    img = QImage(width, height, QImage.Format.Format_RGB32)
    img.fill(QColor(colour))
    img.setPixelColor(0, 0, QColor("white"))
    ba = QByteArray()
    buf = QBuffer(ba)
    buf.open(QIODevice.OpenModeFlag.WriteOnly)
    assert img.save(buf, fmt, quality), f"Qt could not write {fmt}"
    return bytes(ba.data())


def png(width: int = 32, height: int = 24, colour: str = "#3b82c4") -> bytes:
    return encoded("PNG", width, height, colour)


def jpeg(width: int = 32, height: int = 24, colour: str = "#3b82c4") -> bytes:
    return encoded("JPEG", width, height, colour)


def webp(width: int = 32, height: int = 24, colour: str = "#3b82c4") -> bytes:
    return encoded("WEBP", width, height, colour)


def gif(width: int = 1, height: int = 1) -> bytes:
    """A GIF whose logical screen is `width`×`height` (one white pixel drawn in its corner)."""
    return (b"GIF89a" + struct.pack("<HH", width, height) + b"\x80\x00\x00\xff\xff\xff\x00\x00\x00"
            b"!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;")


def webp_vp8x(width: int, height: int) -> bytes:
    """The head of an extended WebP (VP8X) that says `width`×`height`."""
    body = b"\x00\x00\x00\x00" + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return b"RIFF" + struct.pack("<I", 4 + 8 + len(body)) + b"WEBPVP8X" + struct.pack("<I", len(body)) + body
