"""The event bus: monotonic seq, persisted envelopes, replay-then-follow subscriptions, callbacks."""

import asyncio

from desktop_app.core import Channel, Done, EventBus, MemoryStore, PermissionRequired, TextChunk, TokenUsage


async def test_seq_is_monotonic_and_envelopes_are_persisted():
    store = MemoryStore()
    bus = EventBus(store)
    a = bus.publish(TextChunk(session_id="s", text="a"))
    b = bus.publish(Done(session_id="s"))
    assert (a.seq, b.seq) == (1, 2)
    assert [e.seq for e in store.events] == [1, 2]
    assert b.channel is Channel.PROGRESS and isinstance(b.event, Done)
    reopened = await EventBus.open(store)
    assert reopened.publish(TextChunk(text="c")).seq == 3


async def test_subscribe_replays_then_follows_live_without_gaps_or_duplicates():
    store = MemoryStore()
    bus = EventBus(store)
    for i in range(3):
        bus.publish(TextChunk(session_id="s", text=str(i)))
    bus.publish(PermissionRequired(session_id="s", call_id="c"))
    got = []

    async def reader():
        async for env in bus.subscribe([Channel.PROGRESS], since=1):
            got.append(env)
            if len(got) == 4:
                return

    task = asyncio.ensure_future(reader())
    await asyncio.sleep(0.01)
    bus.publish(TextChunk(session_id="s", text="live1"))
    bus.publish(TokenUsage(session_id="s"))  # monitor: filtered out
    bus.publish(TextChunk(session_id="s", text="live2"))
    await asyncio.wait_for(task, 1)
    assert [e.payload["text"] for e in got] == ["1", "2", "live1", "live2"]
    assert [e.seq for e in got] == sorted(e.seq for e in got)


async def test_subscribe_without_since_follows_live_only_and_close_ends_it():
    bus = EventBus(None)
    bus.publish(TextChunk(text="old"))
    got = []

    async def reader():
        async for env in bus.subscribe():
            got.append(env.payload.get("text"))

    task = asyncio.ensure_future(reader())
    await asyncio.sleep(0)
    bus.publish(TextChunk(text="new"))
    await asyncio.sleep(0)
    bus.close()
    await asyncio.wait_for(task, 1)
    assert got == ["new"]


async def test_on_handlers_and_a_broken_handler_does_not_break_publishing():
    bus = EventBus(None)
    seen = []
    bus.on("text_chunk", lambda e: seen.append(e.payload["text"]))
    bus.on("text_chunk", lambda e: 1 / 0)
    off = bus.on("*", lambda e: seen.append(e.type))
    bus.publish(TextChunk(text="x"))
    off()
    bus.publish(TextChunk(text="y"))
    assert seen == ["x", "text_chunk", "y"]
