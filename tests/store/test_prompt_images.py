"""Images in the prompt through a real session on each database: the exact block the model got, the bytes once
by digest beside the message, the digest in the chain (verify passes), and the same blocks after a reopen."""

from __future__ import annotations

import hashlib
import json

from sqlalchemy import create_engine, text

from desktop_app.core import image_block, read_prompt_image
from desktop_app.store import SqlStore
from tests.fakes.anthropic_server import reply
from tests.fakes.anthropic_server import text as say
from tests.kit import Rig
from tests.kit.pictures import gif, jpeg, png


def _sent(messages: list[dict]) -> list[dict]:
    """The messages as the desk built them: the model client marks the last block for prompt caching."""
    return [{**m, "content": [{k: v for k, v in b.items() if k != "cache_control"} for b in m["content"]]}
            for m in messages]


def _rows(url: str, sql: str) -> list[tuple]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(text(sql))]
    finally:
        engine.dispose()


async def test_images_reach_the_model_are_stored_by_digest_and_come_back_after_a_reopen(server, store_url) -> None:
    shot, photo = read_prompt_image(png(40, 30), "shot.png"), read_prompt_image(jpeg(20, 10), "photo.jpeg")
    server.add(reply(say("A blue square and a small photo.")), reply(say("Still the same two.")),
               reply(say("And a GIF.")))
    store = await SqlStore.open(store_url)
    rig = Rig(server, store=store)
    session = await rig.open(title="what is this")
    result = await session.send("what is in these?", [shot, photo])
    assert result.ok, result.message
    sid = session.session.id
    # what the model got: the images (base64, the media type the bytes said), then the text
    assert _sent(server.requests[0].messages) == [{"role": "user", "content": [
        image_block(shot), image_block(photo), {"type": "text", "text": "what is in these?"}]}]
    # the same image again, in a later message: stored once
    assert (await session.send("the first again", [shot])).ok
    await store.close()

    # the message row names digest, media type and size; the bytes are in prompt_images, once each
    contents = [json.loads(c) if isinstance(c, str) else c
                for (c,) in _rows(store_url, "SELECT content FROM messages WHERE role = 'user' ORDER BY id")]
    assert contents[0][:2] == [
        {"type": "image", "source": {"type": "sha256", "sha256": shot.sha256, "media_type": "image/png",
                                     "size": shot.size}},
        {"type": "image", "source": {"type": "sha256", "sha256": photo.sha256, "media_type": "image/jpeg",
                                     "size": photo.size}}]
    assert "base64" not in json.dumps(contents)
    stored = {d: bytes(b) for d, b in _rows(store_url, "SELECT digest, data FROM prompt_images")}
    assert stored == {shot.sha256: shot.data, photo.sha256: photo.data}
    assert all(hashlib.sha256(b).hexdigest() == d for d, b in stored.items())

    # reopened (as after a restart): verify passes, and the next request carries the very same blocks
    store = await SqlStore.open(store_url)
    try:
        checked = await store.verify()
        assert checked.ok, checked.message
        rig = Rig(server, store=store)
        session = await rig.open(session_id=sid)
        history = await session.history()
        assert history[0].content[:2] == [image_block(shot), image_block(photo)]
        third = read_prompt_image(gif(3, 2), "anim.gif")
        assert (await session.send("and this one?", [third])).ok
        last = _sent(server.requests[-1].messages)
        assert last[0]["content"][:2] == [image_block(shot), image_block(photo)]
        assert last[2]["content"] == [image_block(shot), {"type": "text", "text": "the first again"}]
        assert last[-1]["content"] == [image_block(third), {"type": "text", "text": "and this one?"}]
        assert (await store.verify()).ok
    finally:
        await store.close()
