"""The auditor's report: one self-contained HTML file of a session, a project or a period — every prompt, every
call with its command or diff, decision, decider, risk, outcome and where it ran, the refusals and why, cost and
tokens, and the chain's signed head with the result of `verify` when the report was made. It is read by people
who never open the desk, so it says everything in words and carries the command that checks it again."""

from __future__ import annotations

import asyncio
import getpass
import html
import json
import socket
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import (
    Channel,
    ProjectInfo,
    SessionInfo,
    TokenUsage,
    ToolCallRecord,
    ToolCallState,
    error_words,
    image_of_block,
)
from ._charts import Chart, build_charts

if TYPE_CHECKING:
    from ..store import ChartData, SqlStore, VerifyResult


@dataclass(frozen=True, slots=True)
class ReportScope:
    """Which part of the log a report covers; every field narrows (since <= t < until, epoch seconds)."""

    session_id: str | None = None
    project_id: str | None = None
    since: float | None = None
    until: float | None = None

    def holds(self, at: float) -> bool:
        return (self.since is None or at >= self.since) and (self.until is None or at < self.until)

    def words(self) -> str:
        start = _when(self.since) if self.since is not None else "the first record"
        end = _when(self.until) if self.until is not None else "the report"
        return f"from {start} until {end}"


@dataclass(slots=True)
class SessionPart:
    info: SessionInfo
    project: ProjectInfo | None
    prompts: list[tuple[float, str]] = field(default_factory=list)
    calls: list[ToolCallRecord] = field(default_factory=list)
    usage: list[float] = field(default_factory=lambda: [0, 0, 0.0])  # tokens in, out, cost (USD)


@dataclass(slots=True)
class AuditReport:
    scope: ReportScope
    made_at: float
    made_by: str
    database: str
    sessions: list[SessionPart]
    verify: VerifyResult
    head: dict[str, Any] | None
    charts: list[Chart] = field(default_factory=list)  # the history's charts over the same scope

    def calls(self) -> list[ToolCallRecord]:
        return [c for s in self.sessions for c in s.calls]

    def totals(self) -> list[float]:
        return [sum(s.usage[i] for s in self.sessions) for i in range(3)]


async def build_report(store: SqlStore, scope: ReportScope, *, database: str) -> AuditReport:
    """Read what the scope covers: sessions, their prompts, calls, usage; then verify the whole chain."""
    from ..store import AuditQuery

    projects = {p.id: p for p in await store.list_projects()}
    if scope.session_id is not None:
        one = await store.get_session(scope.session_id)
        sessions = [one] if one is not None else []
    else:
        sessions = await store.list_sessions(scope.project_id)
    parts = []
    for info in sorted(sessions, key=lambda s: s.created_at):
        q = AuditQuery(session_id=info.id, since=scope.since, until=scope.until, limit=None)
        part = SessionPart(info, projects.get(info.project_id), calls=sorted(await store.query(q),
                                                                             key=lambda r: r.created_at))
        part.prompts = [(m.created_at, t) for m in await store.messages(info.id) if m.role == "user"
                        and scope.holds(m.created_at) for t in _texts(m.content)]
        for env in await store.events_since(0, [Channel.MONITOR], session_id=info.id, types=[TokenUsage.type]):
            if scope.holds(env.time):
                _add_usage(part.usage, env.event)
        if part.calls or part.prompts:
            parts.append(part)
    return AuditReport(scope, time.time(), f"{getpass.getuser()}@{socket.gethostname()}", database, parts,
                       await store.verify(), await store.signed_head(), await _charts(store, scope, projects))


async def _charts(store: SqlStore, scope: ReportScope, projects: dict[str, ProjectInfo]) -> list[Chart]:
    """The history's charts over the report's scope (aggregated by the store; the SVG written off the loop), their
    labels redacted as the rest of the report is."""
    from ..core import Redactor
    from ..store import AuditQuery

    q = AuditQuery(session_id=scope.session_id, project_id=scope.project_id, since=scope.since, until=scope.until,
                   limit=None)
    data = await store.chart_data(q)
    red = Redactor()
    return await asyncio.to_thread(build_charts, _redacted(data, red), {k: red.redact(p.name)
                                                                        for k, p in projects.items()})


def _redacted(data: ChartData, red: Any) -> ChartData:
    data.tools = {red.redact(name): v for name, v in data.tools.items()}
    return data


def _texts(content: list[dict[str, Any]]) -> list[str]:
    """A prompt's text, and each of its images named by digest (as the audit keeps them)."""
    out = []
    for b in content:
        if b.get("type") == "text" and isinstance(b.get("text"), str):
            out.append(b["text"])
        elif b.get("type") == "image" and (img := image_of_block(b)) is not None:
            out.append(f"[image sha256:{img.sha256} {img.media_type}, {img.size} bytes, {img.width}×{img.height} px]")
    return out


def _add_usage(into: list[float], ev: Any) -> None:
    into[0] += ev.input_tokens + ev.cache_creation_input_tokens + ev.cache_read_input_tokens
    into[1] += ev.output_tokens
    into[2] += ev.cost_usd


def _when(at: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at)) if at else "—"


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def decider(record: ToolCallRecord) -> str:
    """Who decided, in words: the person (named), or the rule, mode, hook or expiry that did."""
    by = record.approval.decided_by
    if by and by.startswith("cli:"):  # the CLI's standing answer (--on-ask), not a person's
        return f"CLI option {by[4:].split()[0]}"
    if by:
        return f"person ({by})"
    for p in reversed(record.provenance):
        if p.kind in ("rule", "session-rule"):
            return f"rule {p.detail}" + (f" ({p.source})" if p.source else "")
        if p.kind in ("mode", "hook", "expiry"):
            return f"{p.kind} {p.detail}".strip()
    return "—"


def what_ran(record: ToolCallRecord) -> str:
    """The command, or the diff, or the input: what a reader needs to judge the call."""
    details = (record.result or {}).get("details") or {}
    if isinstance(details.get("diff"), str) and details["diff"]:
        return details["diff"]
    command = record.input.get("command")
    if isinstance(command, str):
        return command
    return json.dumps(record.input, indent=1, ensure_ascii=False, default=str)


def where_ran(record: ToolCallRecord) -> str:
    sb = record.sandbox or {}
    parts = [str(sb[k]) for k in ("kind", "image", "image_digest", "container", "network") if sb.get(k)]
    return " · ".join(parts) or "did not run"


def why(record: ToolCallRecord) -> str:
    """Why a call was refused or failed, in the words the model was told (a result's JSON error unpacked)."""
    return error_words(record.error or "") or record.approval.note


def exit_code(record: ToolCallRecord) -> int | None:
    code = ((record.result or {}).get("details") or {}).get("exit_code")
    return code if isinstance(code, int) else None


def refusal_reasons(report: AuditReport) -> Counter[str]:
    return Counter(why(c)[:200] or str(c.outcome or "refused") for c in report.calls()
                   if c.state is ToolCallState.DENIED)
