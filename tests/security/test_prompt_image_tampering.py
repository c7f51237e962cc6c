"""Claim: an image a person sent reaches the model as its exact bytes, and stays so in the store. Redaction
never rewrites an image's base64 (even where it looks like a key); bytes altered, deleted or swapped in the
audit file make verify fail, and the model is never sent bytes other than those the chain names."""

from __future__ import annotations

import asyncio
import base64
import shutil
import sqlite3
from pathlib import Path

import pytest

from desktop_app.core import StoredMessage, image_block, read_prompt_image
from desktop_app.store import SqlStore
from tests.fakes.anthropic_server import AnthropicServer, reply
from tests.fakes.anthropic_server import text as say
from tests.kit import Rig
from tests.kit.pictures import jpeg, png

AWS_LIKE = "/AKIAIOSFODNN7EXAMPLE/AA"  # 24 base64 characters that read as an AWS access key id


def _key_shaped_png() -> bytes:
    """A real PNG whose base64 holds an AWS-key-shaped run (trailing bytes after IEND, which decoders ignore)."""
    head = png(6, 6)
    head += b"\0" * (-len(head) % 3)  # aligned: the tail's base64 is its own
    data = head + base64.b64decode(AWS_LIKE)
    assert AWS_LIKE in base64.b64encode(data).decode()
    return data


async def _session_with_images(server, path: Path, *images: bytes) -> tuple[str, list]:
    server.add(reply(say("seen")))
    store = await SqlStore.open(path)
    try:
        rig = Rig(server, store=store)
        session = await rig.open(title="look")
        imgs = [read_prompt_image(d) for d in images]
        result = await session.send("AKIAIOSFODNN7EXAMPLE is my key; look at these", imgs)
        assert result.ok, result.message
        return session.session.id, imgs
    finally:
        await store.close()


async def test_redaction_redacts_the_text_and_never_the_image(server, tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    sid, [img] = await _session_with_images(server, path, _key_shaped_png())
    sent = server.requests[0].messages[0]["content"]
    assert {k: v for k, v in sent[0].items() if k != "cache_control"} == image_block(img)
    assert "AKIAIOSFODNN7EXAMPLE" not in sent[1]["text"]  # the text's key is redacted, as before
    store = await SqlStore.open(path)
    try:
        [msg] = [m for m in await store.messages(sid) if m.role == "user"]
        assert msg.content[0] == image_block(img)
    finally:
        await store.close()


def _attack(path: Path, sql: str, *params) -> None:
    con = sqlite3.connect(path)
    con.execute(sql, params)
    con.commit()
    con.close()


@pytest.fixture(scope="module")
def two_images(tmp_path_factory) -> tuple[Path, str, list]:
    """One audit file with a session whose prompt carried two images, made once; each attack works on a copy."""
    path = tmp_path_factory.mktemp("images") / "audit.db"
    with AnthropicServer() as server:
        sid, imgs = asyncio.run(_session_with_images(server, path, png(30, 20), jpeg(9, 9)))
    return path, sid, imgs


@pytest.mark.parametrize("attack", ["flip-a-byte", "other-image-bytes", "truncate", "delete", "media-type"])
async def test_an_altered_image_fails_verify_and_is_never_sent(two_images, tmp_path: Path, attack: str) -> None:
    original, sid, [shot, other] = two_images
    path = tmp_path / "audit.db"
    shutil.copyfile(original, path)
    if attack == "flip-a-byte":
        tampered = bytearray(shot.data)
        tampered[-20] ^= 0xFF
        _attack(path, "UPDATE prompt_images SET data = ? WHERE digest = ?", bytes(tampered), shot.sha256)
    elif attack == "other-image-bytes":
        _attack(path, "UPDATE prompt_images SET data = ? WHERE digest = ?", other.data, shot.sha256)
    elif attack == "truncate":
        _attack(path, "UPDATE prompt_images SET data = substr(data, 1, 40) WHERE digest = ?", shot.sha256)
    elif attack == "delete":
        _attack(path, "DELETE FROM prompt_images WHERE digest = ?", shot.sha256)
    else:  # the row's media type lies: what is sent is the type the chain names
        _attack(path, "UPDATE prompt_images SET media_type = 'image/gif' WHERE digest = ?", shot.sha256)
    store = await SqlStore.open(path)
    try:
        checked = await store.verify()
        [msg] = [m for m in await store.messages(sid) if m.role == "user"]
    finally:
        await store.close()
    if attack == "media-type":
        assert checked.ok, checked.message
        assert msg.content[0] == image_block(shot)
        return
    assert not checked.ok
    assert checked.problem == ("image-missing" if attack == "delete" else "image-edited")
    assert shot.sha256 in checked.message
    # what would go to the model: a line that names the digest, never other bytes
    assert msg.content[0] == {"type": "text", "text": f"[image sha256:{shot.sha256} is "
                              f"{'missing from' if attack == 'delete' else 'altered in'} the audit store]"}
    assert msg.content[1] == image_block(other)


async def test_pointing_a_message_at_another_image_breaks_the_chain(two_images, tmp_path: Path) -> None:
    original, _sid, [shot, other] = two_images
    path = tmp_path / "audit.db"
    shutil.copyfile(original, path)
    con = sqlite3.connect(path)
    [(mid, content)] = con.execute("SELECT id, content FROM messages WHERE role = 'user'").fetchall()
    con.execute("UPDATE messages SET content = ? WHERE id = ?", (content.replace(shot.sha256, other.sha256), mid))
    con.commit()
    con.close()
    store = await SqlStore.open(path)
    try:
        checked = await store.verify()
    finally:
        await store.close()
    assert not checked.ok and checked.problem == "row-edited" and checked.field == "content", checked


async def test_a_message_stored_with_images_by_hand_is_the_same_as_one_sent(tmp_path: Path) -> None:
    """The store takes any user message with image blocks (the window stores the prompt before the turn)."""
    from desktop_app.core import ProjectInfo, SessionInfo

    img = read_prompt_image(_key_shaped_png())
    store = await SqlStore.open(tmp_path / "a.db")
    try:
        await store.save_project(ProjectInfo(id="p", name="p", path="/tmp/p"))
        await store.save_session(SessionInfo(id="s", project_id="p"))
        await store.append_message(StoredMessage("s", "user", [image_block(img), {"type": "text", "text": "x"}]))
        [msg] = await store.messages("s")
        assert msg.content[0] == image_block(img)
        assert (await store.verify()).ok
    finally:
        await store.close()
