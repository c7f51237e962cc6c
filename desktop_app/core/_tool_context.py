"""The context a running tool gets (`ToolContext`): its streamed output redacted before it is published, its
custom events capped, its todo list published, and what the streams still hold flushed once it ends."""

from __future__ import annotations

import json
from typing import Any

from ._bus import EventBus
from ._events import ToolCustom, ToolUpdate
from ._redaction import Redactor, StreamRedactor
from ._run import CallJob
from ._tool import ToolContext

MAX_CUSTOM_EVENTS = 1_000  # per call
MAX_CUSTOM_DATA_CHARS = 16_000


def tool_context(job: CallJob, bus: EventBus, redactor: Redactor, person: Any) -> ToolContext:
    """The context of the job's tool; `person` answers the tools that ask (a core.PendingQuestions)."""
    sid, cid, run, streams = job.record.session_id, job.record.id, job.run, job.streams

    def update(text: str, stream: str = "stdout") -> None:
        # Redacted before it is published (the bus persists it): a secret split across chunks waits
        # in the stream's carry-over until it is whole.
        sr = streams.get(stream)
        if sr is None:
            sr = streams[stream] = StreamRedactor(redactor)
        text = sr.feed(text)
        if text:
            bus.publish(ToolUpdate(session_id=sid, call_id=cid, stream=stream, text=text))

    def emit(name: str, data: dict[str, Any]) -> None:  # the bus redacts every payload it publishes
        job.emitted += 1
        if job.emitted > MAX_CUSTOM_EVENTS:
            if job.emitted == MAX_CUSTOM_EVENTS + 1:  # said once; a tool in a loop cannot flood the audit
                bus.publish(ToolCustom(session_id=sid, call_id=cid, tool=job.known.name, name="dropped",
                                       data={"reason": f"more than {MAX_CUSTOM_EVENTS} events"}))
            return
        bus.publish(ToolCustom(session_id=sid, call_id=cid, tool=job.known.name, name=name,
                               data=_custom_data(data)))

    return ToolContext(call_id=cid, session_id=sid, sandbox=run.sandbox, abort=run.abort, state=run.state,
                       project_id=run.project_id, _update=update, _emit=emit, _publish=bus.publish, person=person,
                       host_changed=run.host_changed, subagents=run.subagents,
                       labels=dict(run.labels))


def flush_updates(job: CallJob, bus: EventBus) -> None:
    """What the streams still hold, redacted: the tool has ended."""
    record = job.record
    for stream, sr in job.streams.items():
        rest = sr.flush()
        if rest:
            bus.publish(ToolUpdate(session_id=record.session_id, call_id=record.id, stream=stream, text=rest))


def _custom_data(data: dict[str, Any]) -> dict[str, Any]:
    """`data` as JSON would carry it (what is not JSON becomes its str), or a note when it is too large."""
    text = json.dumps(data, ensure_ascii=False, default=str)
    if len(text) > MAX_CUSTOM_DATA_CHARS:
        return {"truncated": True, "preview": text[:1_000]}
    return json.loads(text)
