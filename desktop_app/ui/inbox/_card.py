"""The HTML of the inbox's details card: the call, why it asks, its expiry, diff preview and provenance."""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING

from ...core import visible
from .._html import diff_html
from .._mcp import where_html
from .._theme import RISK_COLOURS

if TYPE_CHECKING:
    from ._items import PendingApproval

e = html.escape


def render_card(item: PendingApproval) -> str:
    """HTML for the inbox's details card: the call, why it asks, its expiry, diff and provenance."""
    colour = RISK_COLOURS.get(item.risk, "#8a8f98")
    title = e(item.name) if item.mcp is None else e(visible(item.mcp.tool))
    parts = [
        f"<h3 style='margin:0'>{title} <span style='color:{colour}'>· {e(item.risk)} risk</span></h3>",
        *_mcp_parts(item),
        f"<p style='margin:2px 0'><small>session {e(item.session_title or item.session_id[-8:])}</small></p>",
        *_subagent_parts(item),
        f"<p style='margin:2px 0'>Risk <b style='color:{colour}'>{e(item.risk)}</b>: it asks because "
        f"<b>{e(visible(item.why))}</b></p>",
    ]
    left = item.remaining_s()
    if left is not None:
        parts.append(f"<p style='color:#d4890b'>{'Expired' if left <= 0 else f'Expires in {int(left)} s'}</p>")
    parts += _input_parts(item)
    if item.name in ("fs_write", "fs_edit"):
        parts.append("<p style='margin:4px 0'><b>Diff preview</b></p>")
        if item.preview is None:
            parts.append("<p><i>computing…</i></p>")
        else:
            parts.append(diff_html(item.preview) if item.preview else "<p><i>no changes</i></p>")
    if item.provenance:
        parts.append("<p style='margin:4px 0'><b>Provenance</b></p><ul style='margin:0'>")
        for p in item.provenance:
            src = f" ({e(p.get('source', ''))})" if p.get("source") else ""
            parts.append(f"<li>{e(p.get('decision', ''))} by {e(p.get('kind', ''))}: "
                         f"<code>{e(str(p.get('detail', '')))}</code>{src}</li>")
        parts.append("</ul>")
    return "".join(parts)


def _subagent_parts(item: PendingApproval) -> list[str]:
    """A sub-agent's call: who asks, from which template (its permissions are never wider than its parent's)."""
    if not item.subagent:
        return []
    template = item.meta.get("template")
    of = f" (template {e(visible(str(template)))})" if template else ""
    return [f"<p style='margin:2px 0; color:#6f42c1'>Asked by the sub-agent <b>{e(item.subagent)}</b>{of}, "
            "started by a task_run call of the session</p>"]


def _mcp_parts(item: PendingApproval) -> list[str]:
    """An MCP call: its server, where that runs, and the tool's hints (which set its risk)."""
    m = item.mcp
    if m is None:
        return []
    where = where_html(m.where) if m.where else "<i>not reported yet</i>"
    hints = "destructive" if m.destructive else "read-only" if m.read_only else ""
    return [f"<p style='margin:2px 0'>MCP tool of server <b>{e(visible(m.server))}</b>"
            + (f" <small>({e(visible(m.version))})</small>" if m.version else "")
            + f" · runs: {where}" + (f" · hint: <b>{hints}</b>" if hints else "") + "</p>",
            f"<p style='margin:2px 0'><small><code>{e(item.name)}</code></small></p>"]


def _value_html(value: object) -> str:
    if isinstance(value, str):
        return f"<span style='white-space:pre-wrap'>{e(visible(value))}</span>"
    if isinstance(value, (dict, list)):
        return f"<pre style='margin:0'>{e(visible(json.dumps(value, indent=2, ensure_ascii=False)))}</pre>"
    return f"<code>{e(json.dumps(value))}</code>"


def _arguments_parts(item: PendingApproval) -> list[str]:
    """An MCP call's arguments as a key/value table (every value whole), then the raw JSON."""
    rows = "".join(f"<tr><td valign='top'><b>{e(visible(str(k)))}</b></td><td>{_value_html(v)}</td></tr>"
                   for k, v in item.input.items())
    raw = visible(json.dumps(item.input, indent=2, ensure_ascii=False))
    return ["<p style='margin:4px 0'><b>Arguments</b></p>",
            f"<table cellspacing='0' cellpadding='3' border='1' style='border-collapse:collapse'>{rows}</table>"
            if rows else "<p><i>no arguments</i></p>",
            "<p style='margin:4px 0'><small>as JSON</small></p>", f"<pre style='white-space:pre-wrap'>{e(raw)}</pre>"]


def _input_parts(item: PendingApproval) -> list[str]:
    """The whole input, never cut; characters that would not show as themselves are written as escapes."""
    if item.mcp is not None:
        return _arguments_parts(item)
    command = item.input.get("command")
    if item.name.startswith("bash") and isinstance(command, str):
        lines = command.count("\n") + 1
        parts = [f"<p style='margin:4px 0'><b>Command</b> <small>(the whole command: {len(command)} characters,"
                 f" {lines} line{'s' if lines != 1 else ''})</small></p>",
                 f"<pre style='background:rgba(127,127,127,40); white-space:pre-wrap'>$ {e(visible(command))}</pre>"]
        rest = {k: v for k, v in item.input.items() if k != "command"}
        if rest:
            parts.append(f"<pre>{e(visible(json.dumps(rest, ensure_ascii=False)))}</pre>")
        return parts
    text = visible(json.dumps(item.input, indent=2, ensure_ascii=False))
    return ["<p style='margin:4px 0'><b>Input</b></p>", f"<pre style='white-space:pre-wrap'>{e(text)}</pre>"]
