"""The HTML of the inbox's details card: the call, why it asks, its expiry, diff preview and provenance."""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING

from ...core import visible
from .._html import diff_html
from .._theme import RISK_COLOURS

if TYPE_CHECKING:
    from ._items import PendingApproval

e = html.escape


def render_card(item: PendingApproval) -> str:
    """HTML for the inbox's details card: the call, why it asks, its expiry, diff and provenance."""
    colour = RISK_COLOURS.get(item.risk, "#8a8f98")
    parts = [
        f"<h3 style='margin:0'>{e(item.name)} <span style='color:{colour}'>· {e(item.risk)} risk</span></h3>",
        f"<p style='margin:2px 0'><small>session {e(item.session_title or item.session_id[-8:])}</small></p>",
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


def _input_parts(item: PendingApproval) -> list[str]:
    """The whole input, never cut; characters that would not show as themselves are written as escapes."""
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
