"""The HTML of a tool call's details pane (timeline and history): input, output, result, diff, the audit
trail with provenance, and where it ran."""

from __future__ import annotations

import html
import json
import time
from typing import TYPE_CHECKING

from ...core import ToolCallRecord, error_words, shown_risk, skipped_after, visible
from .._call_labels import call_card, fields_html
from .._html import diff_html
from .._mcp import where_html
from .._theme import RISK_COLOURS, format_duration
from .._tool_card import shown_status

if TYPE_CHECKING:
    from ._model import TimelineRow

e = html.escape


def render_call_details(row: TimelineRow, output: str = "", rec: ToolCallRecord | None = None) -> str:
    """HTML for the details pane: input, output, result, diff, audit trail with provenance, sandbox."""
    rec = rec or row.record
    word, colour, _glyph = shown_status(row.name, row.state, row.outcome, rec, row.exit_code)  # as the timeline
    label = f"{e(row.label)} <small><code>{e(row.name)}</code></small>" if row.label else e(row.name)
    parts = [
        f"<h3>{label} <span style='color:{colour}'>{e(word)}</span></h3>",
        f"<p><small>call {e(row.call_id)}"
        + (f" · {e(format_duration(row.duration_ms))}" if row.duration_ms is not None else "")
        + (f" · exit {row.exit_code}" if row.exit_code is not None else "")
        + "</small></p>",
        "<h4>Input</h4>",
        f"<pre>{e(json.dumps(row.input, indent=2, ensure_ascii=False))}</pre>",
    ]
    original = rec.model_input if rec is not None else None
    if original is not None:  # a person edited it before allowing: what ran is theirs, beside the model's
        parts[2] = "<h4>Input, as the person edited it (what ran)</h4>"
        parts += ["<h4>The model's input</h4>", f"<pre>{e(json.dumps(original, indent=2, ensure_ascii=False))}</pre>"]
    parts += _card_parts(row, rec)  # after what ran: the tool's own summary of it, and of its result
    if output:
        parts += ["<h4>Output</h4>", f"<pre>{e(output[-20_000:])}</pre>"]
    parts[2:2] = _mcp_parts(row, rec)
    if rec is not None:
        parts.insert(2, _risk_part(rec))
        parts += _result_parts(rec) + _provenance_parts(rec) + _network_parts(rec) + _trail_parts(rec)
        parts += _sandbox_parts(rec)
    return "".join(parts)


def _card_parts(row: TimelineRow, rec: ToolCallRecord | None) -> list[str]:
    """The call as its tool summarises it: the fields that matter, and what its result says (a diff is shown
    once, below, from the result)."""
    if not row.label:  # a host change is not a call
        return []
    card = call_card(row.name, row.input, rec.result if rec is not None else None)
    table = fields_html(card.fields, skip=("diff",)) + fields_html(card.outcome, skip=("diff",))
    return [f"<h4>Summary: {e(card.title)}</h4>", table]


def _mcp_parts(row: TimelineRow, rec: ToolCallRecord | None) -> list[str]:
    """An MCP call: its server, the server's version and where it ran, as the result recorded them."""
    if row.server is None:
        return []
    details = ((rec.result or {}).get("details") or {}) if rec is not None else {}
    version = str(details.get("mcp_server_version") or "")
    where = str(details.get("mcp_where") or "")
    version_part = f" <small>{e(visible(version))}</small>" if version else ""
    return [f"<p>MCP server <b>{e(visible(row.server))}</b>{version_part}"
            + (f" · ran: {where_html(where)}" if where else "") + "</p>"]


def _risk_part(rec: ToolCallRecord) -> str:
    """The call's risk, and why it asked when it did (the same words the inbox and the CLI showed); a skipped
    call was never judged, so it has none."""
    if shown_risk(rec) is None:
        return f"<p>{e(skipped_after(rec))}: it was not judged, offered or run.</p>"
    reason = str((rec.approval.meta or {}).get("reason") or "")
    why = f": it asked because <b>{e(visible(reason))}</b>" if reason else ""
    colour = RISK_COLOURS.get(rec.risk, "#8a8f98")
    return f"<p>Risk <b style='color:{colour}'>{e(rec.risk)}</b>{why}</p>"


def _result_parts(rec: ToolCallRecord) -> list[str]:
    parts: list[str] = []
    result = rec.result or {}
    diff = (result.get("details") or {}).get("diff")
    if diff:
        parts += ["<h4>Diff</h4>", diff_html(diff)]
    text = "\n".join(b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text")
    if text:
        parts += ["<h4>Result" + (" (error)" if rec.is_error else "") + "</h4>", f"<pre>{e(text[:20_000])}</pre>"]
    if rec.error:
        parts += ["<h4>Error</h4>", f"<pre>{e(error_words(rec.error))}</pre>"]
    return parts


def _provenance_parts(rec: ToolCallRecord) -> list[str]:
    if not rec.provenance:
        return []
    parts = ["<h4>Why it was allowed or asked</h4><ul>"]
    for p in rec.provenance:
        src = f" ({e(p.source)})" if p.source else ""
        parts.append(f"<li><b>{e(p.decision or '?')}</b> by {e(p.kind)}: <code>{e(p.detail)}</code>{src}</li>")
    parts.append("</ul>")
    return parts


def _network_parts(rec: ToolCallRecord) -> list[str]:
    """The connections the sandbox made through the desk's proxy while this call ran (its trail's evidence)."""
    conns = [t.data["network"] for t in rec.trail if t.actor == "network" and isinstance(t.data.get("network"), dict)]
    if not conns:
        return []
    parts = ["<h4>Network</h4><table cellspacing='0' cellpadding='2'>"]
    for c in conns:
        start, end = float(c.get("started_at") or 0), float(c.get("ended_at") or 0)
        span = time.strftime("%H:%M:%S", time.localtime(start)) + (f" +{(end - start) * 1000:.0f} ms" if end else "")
        colour = "#2e7d32" if c.get("verdict") == "allowed" else "#c62828"
        parts.append(
            f"<tr><td>{e(span)}</td><td><b>{e(visible(str(c.get('domain'))))}:{e(str(c.get('port')))}</b></td>"
            f"<td style='color:{colour}'>{e(str(c.get('verdict')))}</td><td>{e(visible(str(c.get('reason'))))}</td>"
            f"<td>{int(c.get('bytes_up') or 0):,} B up, {int(c.get('bytes_down') or 0):,} B down</td>"
            f"<td><small>{e(str(c.get('attribution') or ''))}</small></td></tr>")
    parts.append("</table>")
    return parts


def _trail_parts(rec: ToolCallRecord) -> list[str]:
    if not rec.trail:
        return []
    parts = ["<h4>Audit trail</h4><table cellspacing='0' cellpadding='2'>"]
    for t in rec.trail:
        when = time.strftime("%H:%M:%S", time.localtime(t.at)) + f".{int(t.at % 1 * 1000):03d}"
        parts.append(
            f"<tr><td>{when}</td><td><b>{e(t.state.value)}</b></td><td>{e(t.actor)}</td>"
            f"<td>{e(t.note)}</td></tr>"
        )
    parts.append("</table>")
    return parts


def _sandbox_parts(rec: ToolCallRecord) -> list[str]:
    sb = rec.sandbox
    if not sb:
        return []
    unsafe = " <b style='color:#d9363e'>UNSANDBOXED</b>" if sb.get("unsandboxed") else ""

    def val(k: str) -> str:
        return e(str(sb.get(k, "")))

    # records written before the sandbox kind had its own name stored it as "engine"

    return [
        "<h4>Where it ran</h4>",
        f"<p>{val('kind') or val('engine')}{unsafe} · container <code>{val('container_id')[:12]}</code>"
        f"<br>image <code>{val('image')}</code><br>digest <code>{val('image_digest')}</code>"
        f"<br>network {val('network')}" + (f"<br>{val('where')}" if sb.get("where") else "") + "</p>",
    ]
