"""Images a person sent, stored once by digest: a message's image block keeps the sha256 of the bytes, their
media type and size (what its chain entry covers), and `prompt_images` keeps the bytes. Read back, the block
is the Messages-API block again (a base64 source), so the model and the window get what was sent."""

from __future__ import annotations

import base64
import hashlib
import json
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from sqlalchemy import text
from sqlalchemy.engine import Connection

from desktop_app.core import StoredMessage, image_of_block

from ._tables import PromptImageRow, columns
from .integrity import VerifyResult

STORED_SOURCE = "sha256"  # the source type of an image block as stored (the API's is "base64")
_COLS = columns(PromptImageRow)
INSERT_IMAGE = text(f"INSERT INTO prompt_images ({', '.join(_COLS)}) VALUES ({', '.join(':' + c for c in _COLS)}) "
                    "ON CONFLICT (digest) DO NOTHING")
_CHUNK = 500


def has_images(message: StoredMessage) -> bool:
    return isinstance(message.content, list) and any(
        isinstance(b, dict) and b.get("type") == "image" for b in message.content)


def split_images(message: StoredMessage) -> tuple[StoredMessage, list[dict[str, Any]]]:
    """The message as stored (each base64 image replaced by its digest, media type and size) and the rows of
    `prompt_images` it needs. The media type is the one the bytes say. Done off the event loop (it hashes)."""
    rows: dict[str, dict[str, Any]] = {}
    content = []
    for block in message.content:
        img = image_of_block(block) if isinstance(block, dict) and block.get("type") == "image" else None
        if img is not None:
            rows[img.sha256] = {"digest": img.sha256, "media_type": img.media_type, "size": img.size,
                                "width": img.width, "height": img.height, "data": img.data, "created_at": time.time()}
            block = {**{k: v for k, v in block.items() if k != "source"},
                     "source": {"type": STORED_SOURCE, "sha256": img.sha256, "media_type": img.media_type,
                                "size": img.size}}
        content.append(block)
    stored = StoredMessage(message.session_id, message.role, content, message.id, message.created_at)
    return stored, list(rows.values())


def insert_images(rows: list[dict[str, Any]]) -> Callable[[Connection], None]:
    """What the writer runs (in its transaction) to store `rows` once each."""
    def run(conn: Connection) -> None:
        if rows:
            conn.execute(INSERT_IMAGE, rows)
    return run


def stored_ref(block: Any) -> dict[str, Any] | None:
    """The digest, media type and size an image block names as stored, or None for any other block."""
    if isinstance(block, dict) and block.get("type") == "image":
        source = block.get("source")
        if isinstance(source, dict) and source.get("type") == STORED_SOURCE:
            return source
    return None


def image_rows(conn: Connection, digests: Iterable[str]) -> dict[str, tuple[str, bytes]]:
    """(media type, bytes) of each stored image among `digests`."""
    want = sorted(set(digests))
    out: dict[str, tuple[str, bytes]] = {}
    for i in range(0, len(want), _CHUNK):
        params = {f"d{k}": d for k, d in enumerate(want[i : i + _CHUNK])}
        keys = ", ".join(":" + k for k in params)
        sql = f"SELECT digest, media_type, data FROM prompt_images WHERE digest IN ({keys})"
        for digest, media_type, data in conn.execute(text(sql), params):
            out[digest] = (media_type, bytes(data))
    return out


def restore_images(conn: Connection, messages: list[StoredMessage]) -> None:
    """Put back, in place, each stored image block as the API block it was sent as. An image whose bytes are
    missing, or do not hash to its digest, becomes a text block that says so (the model is never sent
    bytes other than those the chain names)."""
    refs = [(m, i, ref) for m in messages if isinstance(m.content, list)
            for i, b in enumerate(m.content) if (ref := stored_ref(b)) is not None]
    if not refs:
        return
    found = image_rows(conn, (str(ref.get("sha256")) for _, _, ref in refs))
    for m, i, ref in refs:
        digest = str(ref.get("sha256"))
        row = found.get(digest)
        if row is None or hashlib.sha256(row[1]).hexdigest() != digest:
            why = "missing from" if row is None else "altered in"
            m.content[i] = {"type": "text", "text": f"[image sha256:{digest} is {why} the audit store]"}
            continue
        # the media type the message names (its chain entry covers it), not the image row's
        m.content[i] = {"type": "image", "source": {"type": "base64", "media_type": str(ref.get("media_type")),
                                                    "data": base64.b64encode(row[1]).decode("ascii")}}


def image_problems(conn: Connection) -> list[str]:
    """Each image a message names whose bytes are missing or do not hash to its digest (verify's check)."""
    named: dict[str, list[int]] = {}
    for mid, content in conn.execute(text("SELECT id, content FROM messages WHERE CAST(content AS TEXT) LIKE :p"),
                                     {"p": f'%"type":"{STORED_SOURCE}"%'}):
        blocks = content if isinstance(content, list) else _json_list(content)
        for b in blocks:
            ref = stored_ref(b)
            if ref is not None:
                named.setdefault(str(ref.get("sha256")), []).append(int(mid))
    found = image_rows(conn, named)
    out = []
    for digest, mids in sorted(named.items()):
        row = found.get(digest)
        if row is None:
            out.append(f"image sha256:{digest} of message {mids[0]} is missing")
        elif hashlib.sha256(row[1]).hexdigest() != digest:
            out.append(f"image sha256:{digest} of message {mids[0]}: its bytes were altered")
    return out


def with_image_check(result: VerifyResult, problems: list[str]) -> VerifyResult:
    """`result` of the chain's walk, failed when an image a message names is missing or altered ("image-missing",
    "image-edited": the message's entry covers the digest, so bytes that no longer hash to it show)."""
    if not problems:
        return result
    kind = "image-missing" if problems[0].endswith("missing") else "image-edited"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    message = f"{problems[0]}{more}" + (f"; {result.message}" if result.message and not result.ok else "")
    return replace(result, ok=False, problem=result.problem or kind, message=message,
                   problems=(*result.problems, *problems))


def _json_list(value: Any) -> list[Any]:
    try:
        out = json.loads(value)
    except (TypeError, ValueError):
        return []
    return out if isinstance(out, list) else []
