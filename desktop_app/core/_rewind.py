"""Rewinding a session's files to before one of its calls: the plan (what is restored, removed, and what the
person changed since, kept unless confirmed), its application beneath the project without following a link,
and its record in the chain (a `rewind` record: who, when, from which checkpoint, which files)."""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ._bus import EventBus
from ._checkpoints import Checkpoint, CheckpointError, Entry, ShadowStore, changed_between
from ._errors import AgentDeskError, ConfigError
from ._messages import ToolCall
from ._record import Outcome, ToolCallRecord, ToolCallState
from ._recorder import RecordWriter
from ._safe_files import remove_beneath, set_mode_beneath, symlink_beneath, write_beneath
from ._store import RecordStore
from ._tool import ToolResult

REWIND_TOOL = "rewind"  # the name of a rewind's record in the chain (no tool of the model's)
CHECKPOINT_KEY = "checkpoint"  # in a call's EXECUTING entry: the workspace before it ran
AFTER_KEY = "checkpoint_after"  # in its last entry: the workspace once it ended


class RewindError(AgentDeskError):
    """A rewind that cannot be planned or done; nothing was changed unless the message says so."""


@dataclass(slots=True)
class CallCheckpoints:
    """One call's checkpoints: before it ran and (when it ended normally) after."""

    record: ToolCallRecord
    before: str
    after: str | None
    not_kept: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class RewindPlan:
    """What a rewind to `checkpoint` (before call `call_id`) changes on disk."""

    session_id: str
    project_id: str
    call_id: str
    checkpoint: str
    now: Checkpoint
    restore: list[str] = field(default_factory=list)  # changed or removed since: written back
    remove: list[str] = field(default_factory=list)  # made since: removed
    mine: list[str] = field(default_factory=list)  # changed by the person since: kept unless confirmed
    not_kept: dict[str, str] = field(default_factory=dict)  # not in the checkpoint: left alone
    target: dict[str, Entry] = field(default_factory=dict)
    note: str = ""

    @property
    def empty(self) -> bool:
        return not (self.restore or self.remove or self.mine)

    def lines(self) -> list[str]:
        """The diff in words, one line per file, for the CLI and the window."""
        out = [f"rewind files to before call {self.call_id} (checkpoint {self.checkpoint[:12]})"] if self.checkpoint \
            else []
        if self.note:
            out.append(self.note)
        out += [f"  restore  {p}" for p in self.restore]
        out += [f"  remove   {p}" for p in self.remove]
        out += [f"  yours    {p}  (changed by you since: kept unless you confirm)" for p in self.mine]
        out += [f"  not kept {p}  ({why}: left as it is)" for p, why in sorted(self.not_kept.items())[:20]]
        if self.empty:
            out.append("  nothing to change: the files are as they were")
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"before_call": self.call_id, "checkpoint": self.checkpoint, "checkpoint_now": self.now.id,
                "restore": self.restore, "remove": self.remove, "changed_by_person": self.mine}


@dataclass(slots=True)
class RewindDone:
    restored: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)


def call_checkpoints(records: Iterable[ToolCallRecord]) -> list[CallCheckpoints]:
    """The calls (and rewinds) that recorded a checkpoint, in the order they ran."""
    out = []
    for r in sorted(records, key=lambda r: (r.started_at or r.created_at, r.created_at)):
        before = next((e.data[CHECKPOINT_KEY] for e in r.trail
                       if e.state is ToolCallState.EXECUTING and isinstance(e.data.get(CHECKPOINT_KEY), dict)), None)
        if before is None or not isinstance(before.get("id"), str):
            continue
        after = next((e.data[AFTER_KEY].get("id") for e in reversed(r.trail)
                      if isinstance(e.data.get(AFTER_KEY), dict)), None)
        out.append(CallCheckpoints(r, before["id"], after, dict(before.get("not_kept") or {})))
    return out


def plan_rewind(store: ShadowStore, records: list[ToolCallRecord], call_id: str) -> RewindPlan:
    """What rewinding to before `call_id` changes (blocking: run it off the event loop). The person's own
    changes are those made between the desk's calls: after one call ended and before the next began."""
    target = next((r for r in records if r.id == call_id), None)
    if target is None:
        raise RewindError(f"There is no call {call_id!r} in this session.",
                          hint="`agent-desk audit list --session SESSION_ID` shows its calls.")
    points = call_checkpoints(records)
    start = next((i for i, c in enumerate(points) if c.record.id == call_id), None)
    note = ""
    if start is None:  # a read-only call: the files before it are those before the next call that may write
        after = (target.started_at or target.created_at)
        start = next((i for i, c in enumerate(points) if (c.record.started_at or c.record.created_at) >= after), None)
        if start is None:
            raise RewindError(f"No call from {call_id} on may have changed a file: there is nothing to rewind.",
                              hint="Only calls that may write have checkpoints (read-only ones change nothing).")
        note = f"(call {call_id} only read; the checkpoint is that of the next call that may write)"
    base = points[start]
    try:
        files = store.files(base.before)
        now = store.take()
        mine: set[str] = set()
        later = points[start:]
        for cur, nxt in zip(later, [*later[1:], None], strict=True):
            if cur.after is None:
                continue  # a call that did not end normally: what changed until the next call is the desk's
            mine |= changed_between(store, cur.after, nxt.before if nxt is not None else now.id)
        differ = changed_between(store, base.before, now.id)
    except CheckpointError as e:
        raise RewindError(f"Cannot rewind: {e}", hint="Nothing was changed.") from e
    skip = {**base.not_kept, **now.not_kept}
    plan = RewindPlan(target.session_id, target.project_id, call_id, base.before, now, target=files, note=note)
    plan.not_kept = skip  # named, so nobody takes them for rewound
    for p in sorted(differ):
        if p in skip or any(p.startswith(k + "/") for k in skip):
            continue
        if p in mine:
            plan.mine.append(p)
        elif p in files:
            plan.restore.append(p)
        else:
            plan.remove.append(p)
    return plan


def apply_rewind(store: ShadowStore, plan: RewindPlan, *, include_mine: bool = False) -> RewindDone:
    """Do `plan` beneath the workspace (blocking). Every byte needed is read and checked first: a missing or
    corrupt checkpoint changes nothing. Links are never followed: a link on the way is refused."""
    writes = [*plan.restore, *(p for p in plan.mine if p in plan.target)] if include_mine else list(plan.restore)
    removes = [*plan.remove, *(p for p in plan.mine if p not in plan.target)] if include_mine else list(plan.remove)
    try:
        data = store.blobs({plan.target[p].blob for p in writes})
    except CheckpointError as e:
        raise RewindError(f"Cannot rewind: {e}", hint="Nothing was changed.") from e
    root, done = store.workspace, RewindDone(kept=[] if include_mine else list(plan.mine))
    kept_dirs = {p.rsplit("/", i)[0] for p in plan.target for i in range(1, p.count("/") + 1)}
    for p in sorted(removes, key=lambda x: -x.count("/")):
        try:
            remove_beneath(root, p)
            done.removed.append(p)
        except ConfigError as e:
            done.failed[p] = str(e)
    for folder in sorted({p.rsplit("/", i)[0] for p in removes for i in range(1, p.count("/") + 1)} - kept_dirs,
                         key=lambda x: -x.count("/")):
        try:  # a folder the removed files leave empty, that the checkpoint did not have: removed too
            remove_beneath(root, folder)
        except ConfigError:
            pass  # not empty (the person's or ignored files in it): it stays
    for p in writes:
        entry = plan.target[p]
        try:
            _write_entry(root, p, entry, data[entry.blob])
            done.restored.append(p)
        except ConfigError as e:
            done.failed[p] = str(e)
    return done


def _write_entry(root: os.PathLike[str], rel: str, entry: Entry, body: bytes) -> None:
    if entry.mode == "120000":
        symlink_beneath(root, rel, os.fsdecode(body))
        return
    mode = 0o755 if entry.mode == "100755" else 0o644
    write_beneath(root, rel, body, mode=mode)  # durable: each file and its folder synced
    set_mode_beneath(root, rel, mode)


async def record_rewind(store: RecordStore, bus: EventBus, plan: RewindPlan, done: RewindDone | None, *,
                        actor: str, error: str = "", after: Checkpoint | None = None,
                        session_id: str = "") -> ToolCallRecord:
    """The rewind in the chain, as a record of its own in the session (or in `session_id`, the branch the
    conversation was rewound to): who asked, which checkpoint, which files. `done` None with `error`: it
    failed before changing anything."""
    writer = RecordWriter(store, bus, lambda r: f"rewind to before {plan.call_id}")
    record = ToolCallRecord(name=REWIND_TOOL, input={"before_call": plan.call_id, "checkpoint": plan.checkpoint},
                            session_id=session_id or plan.session_id, project_id=plan.project_id)
    writer.create(record, ToolCall("", REWIND_TOOL, record.input))
    await writer.move(record, ToolCallState.APPROVED, actor=actor, note="the person confirmed the rewind")
    await writer.move(record, ToolCallState.EXECUTING, actor="desk", data={CHECKPOINT_KEY: plan.now.to_dict(),
                                                                          "plan": plan.to_dict()})
    if done is None or done.failed:
        reasons = error or "; ".join(f"{p}: {why}" for p, why in (done.failed if done else {}).items())
        data = {"restored": done.restored, "removed": done.removed} if done else {}
        record.result = ToolResult.error(reasons).to_dict()
        record.error, record.is_error = reasons, True
        await writer.move(record, ToolCallState.FAILED, actor="desk", note=reasons[:2000], outcome=Outcome.ERROR,
                          data={**data, **({AFTER_KEY: after.to_dict()} if after else {})})
        return record
    summary = (f"restored {len(done.restored)}, removed {len(done.removed)}, kept {len(done.kept)} "
               f"changed by the person")
    record.result = ToolResult.text(summary).to_dict()
    await writer.move(record, ToolCallState.COMPLETED, actor="desk", note=summary, outcome=Outcome.OK,
                      data={"restored": done.restored, "removed": done.removed, "kept": done.kept,
                            **({AFTER_KEY: after.to_dict()} if after else {})})
    writer.publish_end(record)
    return record
