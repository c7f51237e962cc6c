"""A coloured unified diff as HTML, for the details panes of the timeline, the history and the inbox."""

from __future__ import annotations

import html

e = html.escape


def diff_html(diff: str) -> str:
    out = []
    for line in diff.splitlines():
        colour = ""
        if line.startswith("+") and not line.startswith("+++"):
            colour = "#2f9e44"
        elif line.startswith("-") and not line.startswith("---"):
            colour = "#d9363e"
        elif line.startswith("@@"):
            colour = "#3b82c4"
        esc = e(line)
        out.append(f"<span style='color:{colour}'>{esc}</span>" if colour else esc)
    return "<pre>" + "\n".join(out) + "</pre>"
