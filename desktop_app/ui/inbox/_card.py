"""The HTML of the inbox's details card, diff first: what will happen (the command, highlighted, or the diff),
then the risk and why, then the raw input and the provenance, folded behind a disclosure."""

from __future__ import annotations

import html
import json
from typing import TYPE_CHECKING

from ...core import visible
from .._call_labels import call_card, fields_html
from .._html import diff_html
from .._mcp import where_html
from .._theme import RISK_COLOURS, is_dark

if TYPE_CHECKING:
    from ._items import PendingApproval

e = html.escape
FILE_TOOLS = ("fs_write", "fs_edit", "fs_multi_edit", "notebook_edit")
TOGGLE_RAW = "agent-desk:toggle-raw"  # the disclosure's link: the dock folds and unfolds the raw input
_H = "<p style='margin:8px 0 2px 0'><b>{}</b></p>"
MAX_HIGHLIGHT_CHARS = 20_000  # a longer command is shown plain: pygments takes its time, the text is the same


def shell_html(command: str, dark: bool) -> str:
    """`command` (already made visible) as highlighted HTML, every character kept: no newline stripped or
    added, as pygments' lexers do by default."""
    if len(command) > MAX_HIGHLIGHT_CHARS:
        return e(command)
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import BashLexer

    fmt = HtmlFormatter(noclasses=True, nowrap=True, style="monokai" if dark else "friendly")
    return highlight(command, BashLexer(stripnl=False, ensurenl=False), fmt)


def render_card(item: PendingApproval, *, raw_open: bool = False) -> str:
    """HTML for the inbox's details card; `raw_open` unfolds the raw input and the provenance."""
    return "".join([*_header(item), *_what_happens(item), *_why(item), *_raw(item, raw_open)])


def _header(item: PendingApproval) -> list[str]:
    colour = RISK_COLOURS.get(item.risk, "#8a8f98")
    # the tool's label; a built-in's own name beside it (an MCP tool's is in the server line below)
    title = e(item.label) + ("" if item.mcp is not None else f" <small><code>{e(item.name)}</code></small>")
    left = item.remaining_s()
    expiry = "" if left is None else (" · <span style='color:#d4890b'>"
                                      f"{'Expired' if left <= 0 else f'Expires in {int(left)} s'}</span>")
    return [f"<p style='margin:0'><b style='font-size:large'>{title}</b> "
            f"<b style='color:{colour}'>· {e(item.risk)} risk</b>{expiry} <small>· session "
            f"{e(visible(item.session_title or item.session_id[-8:]))}</small></p>", *_mcp_parts(item),
            *_subagent_parts(item)]


def _what_happens(item: PendingApproval) -> list[str]:
    """What the call will do, whole: a command, a file change as its diff, an MCP call's arguments."""
    command = item.input.get("command")
    if item.name.startswith("bash") and isinstance(command, str):
        return _command_parts(item, command)
    if item.name in FILE_TOOLS:
        return _change_parts(item)
    if item.mcp is not None:
        return _arguments_parts(item)
    card = call_card(item.name, item.input)  # the tool's own fields, in its order (the raw input is below)
    table = fields_html(card.fields)
    return [_H.format(e(card.title)), table or "<p><i>no input</i></p>"]


def _command_parts(item: PendingApproval, command: str) -> list[str]:
    lines = command.count("\n") + 1
    code = shell_html(visible(command), is_dark())
    parts = [_H.format("Runs") + f"<p style='margin:0'><small>the whole command: {len(command)} characters, "
             f"{lines} line{'s' if lines != 1 else ''}</small></p>",
             f"<pre style='background:rgba(127,127,127,40); white-space:pre-wrap; margin:2px 0'>$ {code}</pre>"]
    folder = call_card(item.name, item.input).value("Folder")
    if folder:
        parts.append(f"<p style='margin:0'><small>in</small> <code>{e(visible(folder))}</code></p>")
    rest = {k: v for k, v in item.input.items() if k != "command"}
    if rest:  # a timeout or a folder changes what runs: shown beside it, never only in the folded input
        parts.append(f"<p style='margin:0'><small>with</small> <code>{e(visible(json.dumps(rest)))}</code></p>")
    return parts


def _change_parts(item: PendingApproval) -> list[str]:
    """The file change as the dry run found it against the file as it is now."""
    paths = _paths(item)
    parts = [_H.format(f"Changes {e(visible(', '.join(paths)))}" if paths else "Changes files")]
    omitted = item.meta.get("diff_omitted")
    if item.meta.get("dry_run"):  # the dry run could not tell: the person is told, the raw input is shown
        parts.append(f"<p style='color:#d4890b;margin:0'>{e(visible(str(item.meta['dry_run'])))}</p>")
    if omitted:
        parts.append(f"<p><i>{e(visible(str(omitted)))}: unfold the raw input below to read it whole</i></p>")
    elif item.preview is None:
        parts.append("<p><i>computing the diff…</i></p>")
    else:
        diff = diff_html(visible(item.preview)).replace("<pre>", "<pre style='white-space:pre-wrap;margin:0'>", 1)
        parts.append(diff if item.preview else "<p><i>no changes</i></p>")
    return parts


def _paths(item: PendingApproval) -> list[str]:
    if isinstance(item.input.get("path"), str):
        return [item.input["path"]]
    edits = item.input.get("edits")
    found = [x.get("path") for x in edits if isinstance(x, dict)] if isinstance(edits, list) else []
    return list(dict.fromkeys(str(p) for p in found if p))


def _why(item: PendingApproval) -> list[str]:
    colour = RISK_COLOURS.get(item.risk, "#8a8f98")
    return [_H.format("Why it asks"),
            f"<p style='margin:0'>Risk <b style='color:{colour}'>{e(item.risk)}</b>: it asks because "
            f"<b>{e(visible(item.why))}</b></p>"]


def _raw(item: PendingApproval, raw_open: bool) -> list[str]:
    """The disclosure: the raw input as the model sent it (every character shown) and the provenance."""
    arrow = "▾" if raw_open else "▸"
    parts = [f"<p style='margin:10px 0 2px 0'><a href='{TOGGLE_RAW}'>{arrow} Raw input and provenance</a></p>"]
    if not raw_open:
        return parts
    raw = visible(json.dumps(item.input, indent=2, ensure_ascii=False))
    parts.append(f"<pre style='white-space:pre-wrap;margin:0'>{e(raw)}</pre>")
    if item.provenance:
        parts.append("<ul style='margin:0'>")
        for p in item.provenance:
            src = f" ({e(p.get('source', ''))})" if p.get("source") else ""
            parts.append(f"<li>{e(p.get('decision', ''))} by {e(p.get('kind', ''))}: "
                         f"<code>{e(visible(str(p.get('detail', ''))))}</code>{src}</li>")
        parts.append("</ul>")
    return parts


def _subagent_parts(item: PendingApproval) -> list[str]:
    """A sub-agent's call: who asks (the desk's label: template and number), for which task (its permissions
    are never wider than its parent's)."""
    if not item.subagent:
        return []
    template = item.meta.get("template")
    of = f" (template {e(visible(str(template)))})" if template else ""
    task = f", task: <i>{e(visible(str(item.meta['task'])))}</i>" if item.meta.get("task") else ""
    return [f"<p style='margin:2px 0; color:#6f42c1'>Asked by the sub-agent <b>{e(item.subagent)}</b>{of}{task}, "
            "started by a task_run call of the session</p>"]


def _mcp_parts(item: PendingApproval) -> list[str]:
    """An MCP call: its server, where that runs, and the tool's hints (which set its risk)."""
    m = item.mcp
    if m is None:
        return []
    where = where_html(m.where) if m.where else "<i>not reported yet</i>"
    hints = "destructive" if m.destructive else "read-only" if m.read_only else ""
    return [f"<p style='margin:2px 0'>MCP tool <b>{e(visible(m.tool))}</b> of server <b>{e(visible(m.server))}</b>"
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
    """An MCP call's arguments as a key/value table, every value whole."""
    rows = "".join(f"<tr><td valign='top'><b>{e(visible(str(k)))}</b></td><td>{_value_html(v)}</td></tr>"
                   for k, v in item.input.items())
    return [_H.format("Arguments"),
            f"<table cellspacing='0' cellpadding='3' border='1' style='border-collapse:collapse'>{rows}</table>"
            if rows else "<p><i>no arguments</i></p>"]
