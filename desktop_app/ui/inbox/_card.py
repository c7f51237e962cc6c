"""The HTML of the inbox's details card: the call, why it asks, its expiry, diff preview and provenance."""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING

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
        f"<p style='margin:2px 0'><small>session {e(item.session_title or item.session_id[-8:])}"
        f" · asks because <b>{e(item.why)}</b></small></p>",
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
    if item.name.startswith("bash") and isinstance(item.input.get("command"), str):
        parts = ["<p style='margin:4px 0'><b>Command</b></p>",
                 f"<pre style='background:rgba(127,127,127,40)'>$ {e(item.input['command'])}</pre>"]
        rest = {k: v for k, v in item.input.items() if k != "command"}
        if rest:
            parts.append(f"<pre>{e(json.dumps(rest, ensure_ascii=False))}</pre>")
        return parts
    return ["<p style='margin:4px 0'><b>Input</b></p>",
            f"<pre>{e(json.dumps(item.input, indent=2, ensure_ascii=False)[:4000])}</pre>"]
