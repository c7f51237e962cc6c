"""A call's label and one-line summary for the window's lists (the timeline, the history, the inbox): the
tool's own card (runtime's `tool_labels`), made visible (no control character shown raw). A row's Tool column
says the label ("Run command"), its Input column the card's headline; the tool's name stays in the tooltip."""

from __future__ import annotations

import html
from typing import Any

from ..core import CallField, CallSummary, summarize_input, visible
from ..runtime import tool_labels


def call_label(name: str) -> str:
    return visible(tool_labels().label(name))


def live_tool(name: str) -> bool:
    """Whether a tool of this name is known now (built in, or of an open runtime), not only by its name."""
    return tool_labels().find(name) is not None


def call_card(name: str, raw: dict[str, Any] | None, result: dict[str, Any] | None = None) -> CallSummary:
    return tool_labels().summary(name, raw, result, visible)


def headline(card: CallSummary) -> str:
    """The card's title without its label: what this call does, in a line."""
    prefix = f"{card.label}: "
    return card.title[len(prefix):] if card.title.startswith(prefix) else ""


def call_headline(name: str, raw: dict[str, Any] | None) -> str:
    """What the call does in a line, as its tool says it (the input's summary if the tool says nothing)."""
    try:  # one line of a list: only it is made visible, not every field (a list builds many)
        line = headline(tool_labels().summary(name, raw))
    except Exception:  # a card never breaks a list: the input's own summary stands in
        line = ""
    return visible(line or summarize_input(raw if isinstance(raw, dict) else {}))


def fields_html(fields: tuple[CallField, ...], *, skip: tuple[str, ...] = ()) -> str:
    """The fields as a small table, in the tool's order: a diff coloured, code and JSON as blocks, the rest
    inline; every value escaped (the card made them visible already)."""
    from ._html import diff_html

    rows = []
    for f in fields:
        if f.kind in skip:
            continue
        if f.kind == "diff":
            value = diff_html(f.value) if f.value else "<i>no change</i>"
        elif f.kind in ("code", "json") or "\n" in f.value:
            value = f"<pre style='white-space:pre-wrap;margin:0'>{html.escape(f.value)}</pre>"
        else:
            value = f"<code>{html.escape(f.value)}</code>" if f.kind in ("path", "url") else html.escape(f.value)
        rows.append(f"<tr><td valign='top'><b>{html.escape(f.name)}</b></td><td>{value}</td></tr>")
    return f"<table cellspacing='0' cellpadding='2'>{''.join(rows)}</table>" if rows else ""
