"""The model stream's events redacted before they reach the bus, and a message's blocks redacted as stored."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ._anthropic import PREVIEW_PARSE_CHARS, input_preview, json_head
from ._events import Event, TextChunk, ThinkingChunk, ToolStart
from ._redaction import Redactor, StreamRedactor

MODEL_LINE_HOLD = 1_024  # the model's lines are long (a tool's input JSON is one): shown with less delay
_SIGNED = {"thinking", "redacted_thinking"}  # the API checks these blocks' signatures: they go as received
_AS_SENT = _SIGNED | {"image"}  # an image's base64 is bytes, not words: redaction never rewrites it


_TEXT_FIELDS = ("text",)
_TOOL_FIELDS = ("partial_json", "input")


def redacted_blocks(redactor: Redactor, content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A message's blocks with every secret redacted: text, tool_use input, tool_result content."""
    return [b if b.get("type") in _AS_SENT else redactor.redact_value(b) for b in content]


class RedactingEmit:
    """The model stream's events, redacted before they reach the bus: the text, the thinking and each
    tool's input JSON go through a StreamRedactor of their own (a secret split across deltas waits until
    it is whole). Any other event ends a block, so what the other streams hold goes out before it, in
    order; `flush()` publishes the rest once the stream ends. The fields it redacted are named to `publish`
    (EventBus.publish), which then does not redact them again."""

    def __init__(self, publish: Callable[..., Any], redactor: Redactor) -> None:
        self.publish = publish
        self.redactor = redactor
        self.streams: dict[tuple[str, str], StreamRedactor] = {}
        self.events: dict[tuple[str, str], Event] = {}  # the last event of each stream, to repeat its shape
        self.json: dict[str, str] = {}  # the head of each tool's input JSON as published, redacted

    def __call__(self, event: Event) -> None:
        if isinstance(event, TextChunk | ThinkingChunk):
            self._chunk((event.type, event.message_id), event, event.text)
        elif isinstance(event, ToolStart) and event.partial and event.partial_json:
            self._chunk(("tool", event.call_id), event, event.partial_json)
        else:
            self.flush()
            self.publish(event)

    def _chunk(self, key: tuple[str, str], event: Event, text: str) -> None:
        sr = self.streams.get(key)
        if sr is None:
            self.flush()  # a new block: the previous one is whole
            sr = self.streams[key] = StreamRedactor(self.redactor, line_hold=MODEL_LINE_HOLD, tail_hold=256)
        self.events[key] = event
        self._send(key, sr.feed(text))

    def _send(self, key: tuple[str, str], text: str) -> None:
        if not text:
            return
        event = self.events[key]
        if isinstance(event, ToolStart):
            head = self.json.get(event.call_id, "")
            if len(head) <= PREVIEW_PARSE_CHARS:  # the preview reads the head alone: no more is kept
                head = self.json[event.call_id] = json_head([head, text])
            preview = self.redactor.redact_value(input_preview(head))  # decoded: a secret the escapes hid
            self.publish(replace(event, partial_json=text, input=preview), redacted=_TOOL_FIELDS, by=self.redactor)
        else:
            self.publish(replace(event, text=text), redacted=_TEXT_FIELDS, by=self.redactor)

    def flush(self) -> None:
        for key, sr in self.streams.items():
            self._send(key, sr.flush())
        self.streams.clear()
