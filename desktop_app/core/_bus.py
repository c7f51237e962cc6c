"""The event bus: envelopes get a monotonic seq, are persisted through the record store, then fanned out."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any

from ._events import Channel, Envelope, Event
from ._redaction import DEFAULT_REDACTOR, Redactor

if TYPE_CHECKING:
    from ._store import RecordStore

log = logging.getLogger(__name__)


Handler = Callable[[Envelope], Any]
_CLOSED = object()


class EventBus:
    """One bus, three channels. Envelopes get a monotonic seq, are persisted, then fanned out.

    `subscribe(channels, since=seq)` replays persisted envelopes after `since` and then follows live.
    Every payload is redacted before it is persisted or delivered (`redactor`; the runtime adds the
    configured API key): the publishers redact streams and inputs themselves, this is the last net.
    A store numbers the events it keeps in its own write transaction: with one process on a database
    those numbers are the envelopes' seq; with several, each bus counts its own and the stored order
    (which a replay follows) interleaves them.
    """

    def __init__(self, store: RecordStore | None = None, *, start_seq: int = 0,
                 redactor: Redactor = DEFAULT_REDACTOR) -> None:
        self._store = store
        self.redactor = redactor
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

    def publish(self, event: Event, *, redacted: tuple[str, ...] = (), by: Redactor | None = None) -> Envelope:
        """Stamp, persist (queued on the store's writer, in order) and deliver one event. `redacted`: fields of
        the event its publisher redacted already with `by`; when that is this bus's redactor, they are not
        redacted twice (the other fields are)."""
        self._seq += 1
        payload = event.payload()
        if redacted and by is self.redactor:
            payload = {k: v if k in redacted else self.redactor.redact_value(v) for k, v in payload.items()}
        else:
            payload = self.redactor.redact_value(payload)
        env = Envelope(
            seq=self._seq,
            channel=event.channel,
            type=event.type,
            time=time.time(),
            payload=payload,
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
