"""The model stream's events are redacted once: the emitter's stream redactor, and not the bus again when the
bus has the same redactor; a bus with another redactor (one that knows more) still redacts them itself."""

from __future__ import annotations

from collections import Counter

from desktop_app.core import EventBus, Redactor
from desktop_app.core._events import TextChunk, ToolStart
from desktop_app.core._stream_redaction import RedactingEmit

SECRET = "hunter2-the-configured-api-key"


class CountingRedactor(Redactor):
    """A Redactor that counts the texts it is asked to redact."""

    def __init__(self, literals=()) -> None:
        super().__init__(literals)
        self.seen: Counter[str] = Counter()

    def redact(self, text: str) -> str:
        self.seen[text] += 1
        return super().redact(text)


def _stream(bus: EventBus, redactor: Redactor) -> list:
    got: list = []
    bus.on("*", got.append)
    emit = RedactingEmit(bus.publish, redactor)
    for piece in ("Hello there,\n", f"the key is {SECRET[:9]}", f"{SECRET[9:]} and more\n"):
        emit(TextChunk(session_id="s1", text=piece, message_id="m1"))
    emit(ToolStart(session_id="s1", tool_use_id="tu1", name="echo", partial=True,
                   partial_json='{"text": "' + SECRET + '"}'))
    emit.flush()
    return got


def test_each_streamed_text_is_redacted_once_and_no_secret_reaches_the_bus() -> None:
    redactor = CountingRedactor([SECRET])
    bus = EventBus(redactor=redactor)
    got = _stream(bus, redactor)
    texts = [e.payload["text"] for e in got if e.type == "text_chunk"]
    assert "".join(texts) == "Hello there,\nthe key is [REDACTED] and more\n"
    assert redactor.seen["Hello there,\n"] == 1  # the stream redactor's pass; the bus trusts it
    tool = next(e.payload for e in got if e.type == "tool:start")
    assert SECRET not in repr(tool) and "[REDACTED]" in tool["partial_json"]
    assert all(SECRET not in repr(e.payload) for e in got)


def test_a_bus_with_another_redactor_still_redacts_the_stream() -> None:
    stream_side = Redactor()  # does not know the key
    bus = EventBus(redactor=Redactor([SECRET]))  # the bus's last net does
    got = _stream(bus, stream_side)
    assert all(SECRET not in repr(e.payload) for e in got)
    assert "[REDACTED]" in "".join(e.payload["text"] for e in got if e.type == "text_chunk")


def test_fields_not_named_as_redacted_are_still_redacted_by_the_bus() -> None:
    redactor = Redactor([SECRET])
    bus = EventBus(redactor=redactor)
    got: list = []
    bus.on("*", got.append)
    bus.publish(TextChunk(session_id="s1", text="clean", message_id=SECRET), redacted=("text",), by=redactor)
    assert got[0].payload["message_id"] == "[REDACTED]" and got[0].payload["text"] == "clean"
