"""Images in a prompt: what the desk accepts (PNG, JPEG, GIF, WebP, judged by their bytes), the limits the
Messages API sets, and the image block the model gets (a base64 source with its media type).

The limits (the API's "vision" limits): an image's base64 text at most 5 MiB, each side at most 8000 px, at
most 100 images in one request; a request with more than 20 images caps each side at 2000 px. Every request
re-sends the whole history, so the desk counts a session's images, and takes at most 20 per message.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._compaction import history_view
from ._errors import AgentDeskError

MEDIA_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
MAX_IMAGE_BASE64 = 5 * 1024 * 1024  # the API's cap on one image's base64 text
MAX_IMAGE_BYTES = MAX_IMAGE_BASE64 // 4 * 3  # 3,932,160 bytes: 5 MiB once base64-encoded
MAX_IMAGE_SIDE = 8000
MAX_IMAGES_PER_MESSAGE = 20  # above 20 in a request the API caps each side at 2000 px
MAX_IMAGES_PER_REQUEST = 100  # a session's images all go again with each request
MANY_IMAGES_SIDE = 2000
_MIB = 1024 * 1024


class ImageRefused(AgentDeskError):
    """An image the desk does not send; `str()` is one line that says why."""


@dataclass(frozen=True, slots=True)
class PromptImage:
    """One image of a prompt: its bytes, the media type its bytes say, its sha256 and its size in pixels."""

    data: bytes = b""
    media_type: str = ""
    sha256: str = ""
    width: int = 0
    height: int = 0
    name: str = ""  # where it came from (a file name, "pasted image"): for messages only, never stored

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def label(self) -> str:
        return self.name or f"image {self.sha256[:12]}"


def sniff_media_type(data: bytes) -> str | None:
    """The media type the bytes' magic number says (the file name is never asked), or None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def image_dimensions(data: bytes, media_type: str) -> tuple[int, int] | None:
    """(width, height) read from the image's header, or None when the header is not whole."""
    try:
        if media_type == "image/png":
            return struct.unpack(">II", data[16:24]) if data[12:16] == b"IHDR" else None
        if media_type == "image/gif":
            return struct.unpack("<HH", data[6:10])
        if media_type == "image/webp":
            return _webp_dimensions(data)
        if media_type == "image/jpeg":
            return _jpeg_dimensions(data)
    except struct.error:
        return None
    return None


def _webp_dimensions(data: bytes) -> tuple[int, int] | None:
    chunk = data[12:16]
    if chunk == b"VP8 " and data[23:26] == b"\x9d\x01\x2a":
        w, h = struct.unpack("<HH", data[26:30])
        return w & 0x3FFF, h & 0x3FFF
    if chunk == b"VP8L" and data[20:21] == b"\x2f":
        bits = struct.unpack("<I", data[21:25])[0]
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    if chunk == b"VP8X":
        w = int.from_bytes(data[24:27], "little") + 1
        h = int.from_bytes(data[27:30], "little") + 1
        return (w, h) if len(data) >= 30 else None
    return None


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers (not DHT, JPG, DAC)


def _jpeg_dimensions(data: bytes) -> tuple[int, int] | None:
    """The frame header's size: the segments after SOI are walked by their lengths up to the first SOFn."""
    i, n = 2, len(data)
    while i + 4 <= n:
        if data[i] != 0xFF:
            return None
        marker = data[i + 1]
        if marker == 0xFF:  # fill byte
            i += 1
            continue
        if marker in (0x01, *range(0xD0, 0xD8)):  # standalone markers carry no length
            i += 2
            continue
        length = struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker in _SOF:
            h, w = struct.unpack(">HH", data[i + 5 : i + 9])
            return w, h
        if marker == 0xDA or length < 2:  # scan data before any frame header: not a JPEG we can read
            return None
        i += 2 + length
    return None


def read_prompt_image(data: bytes, name: str = "") -> PromptImage:
    """`data` as an image the model may get, or ImageRefused saying why in one line."""
    label = name or "the image"
    media_type = sniff_media_type(data)
    if media_type is None:
        kind = "it is empty" if not data else "its bytes are not PNG, JPEG, GIF or WebP"
        raise ImageRefused(f"{label} was not attached: {kind}")
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageRefused(f"{label} was not attached: {len(data) / _MIB:.1f} MB is over the "
                           f"{MAX_IMAGE_BYTES / _MIB:.2f} MB an image may have (5 MB once base64-encoded)")
    dims = image_dimensions(data, media_type)
    if dims is None or 0 in dims:
        raise ImageRefused(f"{label} was not attached: its {media_type.split('/')[1].upper()} header is "
                           "damaged or cut short")
    w, h = dims
    if max(w, h) > MAX_IMAGE_SIDE:
        raise ImageRefused(f"{label} was not attached: {w}×{h} px is over the {MAX_IMAGE_SIDE} px a side "
                           "the model takes")
    return PromptImage(data=data, media_type=media_type, sha256=hashlib.sha256(data).hexdigest(),
                       width=w, height=h, name=name)


def check_prompt_images(images: Sequence[PromptImage], earlier: Iterable[tuple[int, int]] = ()) -> None:
    """ImageRefused when `images`, sent after the session's `earlier` images (their sizes), break a limit
    of one message or of the requests that will carry them all."""
    if len(images) > MAX_IMAGES_PER_MESSAGE:
        raise ImageRefused(f"{len(images)} images is more than the {MAX_IMAGES_PER_MESSAGE} a message may carry")
    before = list(earlier)
    total = len(before) + len(images)
    if total > MAX_IMAGES_PER_REQUEST:
        raise ImageRefused(f"the session would hold {total} images, more than the {MAX_IMAGES_PER_REQUEST} the "
                           "model takes in one request (each request sends them all): start a new session")
    if total > MAX_IMAGES_PER_MESSAGE:
        big = [img for img in images if max(img.width, img.height) > MANY_IMAGES_SIDE]
        if big or any(max(d) > MANY_IMAGES_SIDE for d in before):
            what = big[0].label if big else "an earlier image of the session"
            raise ImageRefused(f"{what} was not attached: with more than {MAX_IMAGES_PER_MESSAGE} images in a "
                               f"session each side may have at most {MANY_IMAGES_SIDE} px")


def image_block(image: PromptImage) -> dict[str, Any]:
    """The Messages-API image block: a base64 source with the media type the bytes said."""
    return {"type": "image", "source": {"type": "base64", "media_type": image.media_type,
                                        "data": base64.b64encode(image.data).decode("ascii")}}


def image_of_block(block: dict[str, Any]) -> PromptImage | None:
    """The image an image block of the history carries (its bytes decoded), or None for any other block."""
    source = block.get("source") if block.get("type") == "image" else None
    if not isinstance(source, dict) or source.get("type") != "base64":
        return None
    try:
        data = base64.b64decode(source.get("data") or "", validate=True)
    except (binascii.Error, ValueError):
        return None
    media_type = sniff_media_type(data) or str(source.get("media_type") or "")
    w, h = image_dimensions(data, media_type) or (0, 0)
    return PromptImage(data=data, media_type=media_type, sha256=hashlib.sha256(data).hexdigest(), width=w, height=h)


def history_image_sizes(messages: Sequence[Any]) -> list[tuple[int, int]]:
    """(width, height) of each image the requests will carry from these stored messages (after a compaction,
    those its summary kept): what `check_prompt_images` takes as `earlier`."""
    out = []
    for m in history_view(messages):
        for block in m.content if isinstance(m.content, list) else ():
            img = image_of_block(block) if block.get("type") == "image" else None
            if img is not None:
                out.append((img.width, img.height))
    return out
