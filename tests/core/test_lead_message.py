"""The model's message that asks for a batch of calls rides with the batch's first write (RecordWriter's lead):
what the batch's other calls and the turn see when that write is slow, cancelled under its call, or refused."""

from __future__ import annotations

import asyncio

import pytest

from desktop_app.core import AuditEntry, EventBus, MemoryStore, StoreError, ToolCallRecord, ToolCallState
from desktop_app.core._messages import StoredMessage
from desktop_app.core._recorder import RecordWriter


class SlowFirstStore(MemoryStore):
    """Holds the write that carries a lead until `go` is set (as a busy database would)."""

    def __init__(self) -> None:
        super().__init__()
        self.go = asyncio.Event()
        self.writing = asyncio.Event()

    async def append_message(self, message, transitions=(), *, first=False):
        if first:
            self.writing.set()
            await self.go.wait()
        return await super().append_message(message, transitions, first=first)


def _record(n: int) -> tuple[ToolCallRecord, AuditEntry]:
    rec = ToolCallRecord(name="echo", input={"n": n}, session_id="s1")
    return rec, rec.transition(ToolCallState.EXECUTING, actor="executor")


async def test_a_call_cancelled_while_it_carries_the_message_leaves_the_others_to_its_outcome() -> None:
    store = SlowFirstStore()
    writer = RecordWriter(store, EventBus(), lambda r: r.name)
    lead = writer.lead(StoredMessage(session_id="s1", role="assistant", content=[{"type": "text", "text": "go"}]))
    (a, ea), (b, eb) = _record(1), _record(2)
    first = asyncio.ensure_future(writer.persist(a, ea))
    await store.writing.wait()
    second = asyncio.ensure_future(writer.persist(b, eb))
    await asyncio.sleep(0)
    first.cancel()  # the call that carries the message is stopped while the write is on its way
    with pytest.raises(asyncio.CancelledError):
        await first
    assert not second.done()  # the other call waits for the write, not for the call that started it
    store.go.set()
    await second  # the write went through: the other call is written after it, and goes on
    await writer.settle(lead)
    assert lead.message.id == 1 and [e.record_id for e in store.entries] == [a.id, b.id]


async def test_a_refused_message_fails_every_call_of_its_batch_and_the_turn() -> None:
    store = MemoryStore()
    writer = RecordWriter(store, EventBus(), lambda r: r.name)
    lead = writer.lead(StoredMessage(session_id="s1", role="assistant", content=[{"type": "text", "text": "go"}]))
    store.fail_next = StoreError("the disk is full")
    (a, ea), (b, eb) = _record(1), _record(2)
    results = await asyncio.gather(writer.persist(a, ea), writer.persist(b, eb), return_exceptions=True)
    assert [str(r) for r in results] == ["the disk is full"] * 2
    with pytest.raises(StoreError, match="the disk is full"):
        await writer.settle(lead)
    assert store.entries == [] and await store.messages("s1") == []


async def test_a_batch_that_wrote_nothing_has_its_message_written_when_it_ends() -> None:
    store = MemoryStore()
    writer = RecordWriter(store, EventBus(), lambda r: r.name)
    lead = writer.lead(StoredMessage(session_id="s1", role="assistant", content=[{"type": "text", "text": "go"}]))
    await writer.settle(lead)
    assert [m.role for m in await store.messages("s1")] == ["assistant"]
    (a, ea) = _record(1)
    await writer.persist(a, ea)  # the next batch's writes no longer carry it
    assert len(await store.messages("s1")) == 1 and len(store.entries) == 1
