"""Typed run events, their envelopes, and the bus that persists and fans them out."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ._store import RecordStore

log = logging.getLogger(__name__)


class Channel(StrEnum):
    PROGRESS = "progress"
    CONTROL = "control"
    MONITOR = "monitor"


EVENT_TYPES: dict[str, type[Event]] = {}


@dataclass(slots=True)
class Event:
    """Base of every event; subclasses name their channel and wire type."""

    channel: ClassVar[Channel]
    type: ClassVar[str]
    session_id: str = ""

    def __init_subclass__(cls, **kw: Any) -> None:
        # No zero-arg super(): slots=True rebuilds the class, so its __class__ cell would be stale.
        super(Event, cls).__init_subclass__(**kw)
        if "type" in cls.__dict__:
            EVENT_TYPES[cls.type] = cls

    def payload(self) -> dict[str, Any]:
        # Shallow on purpose: an event is not changed after it is published, and a deep copy per event
        # is the largest cost on the dispatch path.
        return {name: getattr(self, name) for name in _field_names(type(self))}


@functools.cache
def _field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in dataclasses.fields(cls))


# progress ---------------------------------------------------------------------------------------
@dataclass(slots=True)
class TextChunk(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "text_chunk"
    text: str = ""
    message_id: str = ""


@dataclass(slots=True)
class ThinkingChunk(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "thinking_chunk"
    text: str = ""
    message_id: str = ""


@dataclass(slots=True)
class ToolStart(Event):
    """A tool_use block appeared. While its input streams in (`partial`), `partial_json` is the JSON added
    since the previous event (concatenated, the whole input) and `input` a preview of the object so far."""

    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "tool:start"
    call_id: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    partial_json: str = ""
    partial: bool = False


@dataclass(slots=True)
class ToolUpdate(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "tool:update"
    call_id: str = ""
    stream: str = "stdout"
    text: str = ""


@dataclass(slots=True)
class ToolEnd(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "tool:end"
    call_id: str = ""
    name: str = ""
    state: str = ""
    outcome: str | None = None
    is_error: bool = False
    duration_ms: float | None = None
    summary: str = ""


@dataclass(slots=True)
class ToolError(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "tool:error"
    call_id: str = ""
    name: str = ""
    error: str = ""


@dataclass(slots=True)
class Done(Event):
    channel: ClassVar[Channel] = Channel.PROGRESS
    type: ClassVar[str] = "done"
    reason: str = "end_turn"  # end_turn | interrupted | paused | error | max_steps
    message: str = ""


# control ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class PermissionRequired(Event):
    channel: ClassVar[Channel] = Channel.CONTROL
    type: ClassVar[str] = "permission_required"
    call_id: str = ""
    name: str = ""
    input: dict[str, Any] = field(default_factory=dict)
    risk: str = "low"
    reason: str = ""
    provenance: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    expires_at: float | None = None


@dataclass(slots=True)
class PermissionDecided(Event):
    channel: ClassVar[Channel] = Channel.CONTROL
    type: ClassVar[str] = "permission_decided"
    call_id: str = ""
    decision: str = ""  # allow | deny
    decided_by: str = ""
    note: str = ""
    edited: bool = False


# monitor ----------------------------------------------------------------------------------------
@dataclass(slots=True)
class ToolExecuted(Event):
    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "tool_executed"
    call_id: str = ""
    name: str = ""
    state: str = ""
    outcome: str | None = None
    duration_ms: float | None = None
    sandbox: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class ErrorEvent(Event):
    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "error"
    source: str = ""
    message: str = ""
    retrying: bool = False
    attempt: int = 0


@dataclass(slots=True)
class StateChanged(Event):
    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "state_changed"
    call_id: str = ""
    name: str = ""
    state: str = ""
    previous: str = ""
    actor: str = ""
    note: str = ""


@dataclass(slots=True)
class TokenUsage(Event):
    channel: ClassVar[Channel] = Channel.MONITOR
    type: ClassVar[str] = "token_usage"
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cost_usd: float = 0.0


@dataclass(slots=True, frozen=True)
class Envelope:
    """What travels and is persisted: a bookmark (`seq`), a channel, a type, a time and a payload."""

    seq: int
    channel: Channel
    type: str
    time: float
    payload: dict[str, Any]
    session_id: str = ""

    @property
    def event(self) -> Event:
        cls = EVENT_TYPES[self.type]
        names = set(_field_names(cls))
        return cls(**{k: v for k, v in self.payload.items() if k in names})

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "channel": self.channel.value,
            "type": self.type,
            "time": self.time,
            "session_id": self.session_id,
            "payload": self.payload,
        }


Handler = Callable[[Envelope], Any]
_CLOSED = object()


class EventBus:
    """One bus, three channels. Envelopes get a monotonic seq, are persisted, then fanned out.

    `subscribe(channels, since=seq)` replays persisted envelopes after `since` and then follows live.
    """

    def __init__(self, store: RecordStore | None = None, *, start_seq: int = 0) -> None:
        self._store = store
        self._seq = start_seq
        self._subscribers: list[tuple[frozenset[Channel], asyncio.Queue[Any]]] = []
        self._handlers: dict[str, list[Handler]] = {}
        self._handler_tasks: set[asyncio.Future[Any]] = set()

    @classmethod
    async def open(cls, store: RecordStore | None) -> EventBus:
        start = await store.last_event_seq() if store is not None else 0
        return cls(store, start_seq=start)

    @property
    def seq(self) -> int:
        return self._seq

    def publish(self, event: Event) -> Envelope:
        """Stamp, persist (queued on the store's writer, in order) and deliver one event."""
        self._seq += 1
        env = Envelope(
            seq=self._seq,
            channel=event.channel,
            type=event.type,
            time=time.time(),
            payload=event.payload(),
            session_id=event.session_id,
        )
        if self._store is not None:
            self._store.append_event(env)
        for channels, queue in self._subscribers:
            if env.channel in channels:
                queue.put_nowait(env)
        for key in (env.type, "*"):
            for handler in self._handlers.get(key, ()):
                try:
                    res = handler(env)
                    if asyncio.iscoroutine(res):
                        task = asyncio.ensure_future(res)
                        self._handler_tasks.add(task)
                        task.add_done_callback(self._handler_tasks.discard)
                except Exception:  # a broken listener must not break the run
                    log.exception("event handler for %s failed", env.type)
        return env

    def on(self, type_: str, handler: Handler) -> Callable[[], None]:
        """Call `handler(envelope)` for every event of `type_` ("*" for all); returns an unsubscribe."""
        self._handlers.setdefault(type_, []).append(handler)
        return lambda: self._handlers.get(type_, []).remove(handler)

    async def subscribe(
        self,
        channels: Iterable[Channel | str] | None = None,
        *,
        since: int | None = None,
        session_id: str | None = None,
    ) -> AsyncIterator[Envelope]:
        chans = frozenset(Channel(c) for c in channels) if channels else frozenset(Channel)
        queue: asyncio.Queue[Any] = asyncio.Queue()
        entry = (chans, queue)
        self._subscribers.append(entry)
        try:
            last = since if since is not None else self._seq
            if since is not None and self._store is not None:
                upto = self._seq
                await self._store.flush()
                for env in await self._store.events_since(since, chans, upto=upto, session_id=session_id):
                    last = env.seq
                    yield env
            while True:
                env = await queue.get()
                if env is _CLOSED:
                    return
                if env.seq <= last or (session_id and env.session_id != session_id):
                    continue
                last = env.seq
                yield env
        finally:
            with contextlib.suppress(ValueError):
                self._subscribers.remove(entry)

    def close(self) -> None:
        """End every live subscription."""
        for _, queue in self._subscribers:
            queue.put_nowait(_CLOSED)
