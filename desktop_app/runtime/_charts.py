"""The history's charts as SVG, written once (pygal) for both the history window (QtSvgWidgets) and the auditor's
report (inline, self-contained): no script, no remote style, scaled by its viewBox to a phone or an A4 page."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core import status_word

if TYPE_CHECKING:
    from ..store import ChartData

# the order and colour of each outcome word in the per-day chart (any other word follows, grey)
_OUTCOMES = (("done", "#2da44e"), ("failed", "#cf222e"), ("timed out", "#e16f24"), ("denied", "#8250df"),
             ("expired", "#bf8700"), ("skipped", "#a0a7b0"), ("interrupted", "#57606a"), ("in flight", "#54aeff"))
_IN_FLIGHT = frozenset({"pending", "needs approval", "approved", "running"})  # no outcome yet
_RISK_COLOURS = {"low": "#2da44e", "medium": "#d4a72c", "high": "#cf222e"}
_WAIT_LABELS = ("< 5 s", "5–30 s", "30 s–2 min", "2–10 min", "≥ 10 min")
DAY_S = 86_400
MAX_FILLED_DAYS = 120  # a longer period shows only the days that have calls
TOP_TOOLS = 10


_NS = "{http://www.w3.org/2000/svg}"


def _svg(chart: Any) -> str:
    """The chart's SVG, inert and plain: pygal's config script and credit comments left out, and the text anchors
    its stylesheet sets by compound selectors (which QtSvg does not read) written on the labels themselves."""
    import xml.etree.ElementTree as ET

    root = chart.render_tree()
    for parent in list(root.iter()):
        for child in list(parent):
            if child.tag in (f"{_NS}script", "script") or child.tag is ET.Comment:
                parent.remove(child)
    for g in root.iter():
        classes = (g.get("class") or "").split()
        if "axis" not in classes or not ({"x", "y"} & set(classes)):
            continue
        for label in g.iter():
            if label.tag.rsplit("}", 1)[-1] == "text" and not label.get("text-anchor"):
                rotated = label.get("transform") is not None
                label.set("text-anchor", ("start" if rotated else "middle") if "x" in classes else "end")
    ET.register_namespace("", "http://www.w3.org/2000/svg")
    return ET.tostring(root, encoding="unicode")


@dataclass(frozen=True, slots=True)
class Chart:
    key: str  # calls_per_day, refusals, risks, approval_waits, cost_per_day, cost_per_project, slowest_tools
    title: str
    svg: str


def _style(colours: tuple[str, ...]) -> Any:
    from pygal.style import Style

    return Style(background="white", plot_background="white", foreground="#1b1f24", foreground_strong="#1b1f24",
                 foreground_subtle="#d0d7de", guide_stroke_color="#d0d7de", major_guide_stroke_color="#8c959f",
                 font_family="system-ui, -apple-system, 'Segoe UI', sans-serif", title_font_size=17,
                 label_font_size=12, major_label_font_size=12, legend_font_size=13, value_font_size=12,
                 colors=colours or ("#0969da",))


def _config(colours: tuple[str, ...] = (), **kw: Any) -> dict[str, Any]:
    # js=[]: pygal's default pulls a tooltip script from the web; a report must not reach out, the window runs none
    return {"js": [], "disable_xml_declaration": True, "width": 760, "height": 340, "style": _style(colours),
            "legend_at_bottom": True, "legend_at_bottom_columns": 4, "print_values": False, "margin": 12,
            "truncate_legend": 40, "truncate_label": 40, **kw}


def day_label(day: int) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(day * DAY_S))


def _days(keys: set[int]) -> list[int]:
    if not keys:
        return []
    first, last = min(keys), max(keys)
    return list(range(first, last + 1)) if last - first < MAX_FILLED_DAYS else sorted(keys)


def _x_labels(chart: Any, days: list[int]) -> None:
    chart.x_labels = [day_label(d) for d in days]
    if len(days) > 16:  # a label every few days: the others are minor, hidden
        chart.x_labels_major_every = -(-len(days) // 12)
        chart.show_minor_x_labels = False
    chart.x_label_rotation = 30


def calls_per_day(data: ChartData) -> Chart:
    import pygal

    per_word: dict[str, dict[int, int]] = {}
    for (day, state, outcome), n in data.per_day.items():
        word = status_word(state, outcome)
        word = "in flight" if word in _IN_FLIGHT else word
        per_word.setdefault(word, {})
        per_word[word][day] = per_word[word].get(day, 0) + n
    known = [w for w, _ in _OUTCOMES]
    words = [w for w in known if w in per_word] + sorted(w for w in per_word if w not in known)
    colours = dict(_OUTCOMES)
    title = f"Calls per day by outcome ({data.calls:,} calls)"
    chart = pygal.StackedBar(**_config(tuple(colours.get(w, "#8c959f") for w in words), title=title))
    days = _days({d for counts in per_word.values() for d in counts})
    _x_labels(chart, days)
    for w in words:
        chart.add(w, [per_word[w].get(d, 0) for d in days])
    return Chart("calls_per_day", title, _svg(chart))


def refusals(data: ChartData) -> Chart:
    import pygal

    total = sum(data.refusals.values())
    title = f"Refusals by reason ({total:,} denied)"
    ranked = sorted(data.refusals.items(), key=lambda kv: (kv[1], kv[0]))
    chart = pygal.HorizontalBar(**_config(("#8250df",), title=title, show_legend=False, height=260,
                                          y_labels=_ticks(max([5, *(n for _, n in ranked)])),
                                          value_formatter=lambda v: "" if v is None else f"{v:,.0f}"))
    chart.x_labels = [reason for reason, _ in ranked]
    chart.add("calls", [n for _, n in ranked])
    return Chart("refusals", title, _svg(chart))


def risks(data: ChartData) -> Chart:
    import pygal

    order = [r for r in ("low", "medium", "high") if data.risks.get(r)] + sorted(
        r for r in data.risks if r not in _RISK_COLOURS and data.risks[r])
    title = "Risk mix (as each call was judged)"
    chart = pygal.Pie(**_config(tuple(_RISK_COLOURS.get(r, "#8c959f") for r in order), title=title,
                                inner_radius=0.45, height=300, legend_at_bottom=False))
    total = sum(data.risks.values()) or 1
    for r in order:
        chart.add(f"{r} risk ({100 * data.risks[r] / total:.1f} %)", data.risks[r])
    return Chart("risks", title, _svg(chart))


def _seconds(s: float | None) -> str:
    if s is None:
        return "—"
    return f"{s:.1f} s" if s < 120 else f"{s / 60:.1f} min"


def approval_waits(data: ChartData) -> Chart:
    import pygal

    title = (f"A person's approval waits: median {_seconds(data.wait_median_s)}, p95 {_seconds(data.wait_p95_s)} "
             f"({sum(data.waits):,} answered)")
    chart = pygal.Bar(**_config(("#0969da",), title=title, show_legend=False, height=280))
    chart.x_labels = list(_WAIT_LABELS[: len(data.waits)])
    chart.add("answered", list(data.waits) if any(data.waits) else [])
    return Chart("approval_waits", title, _svg(chart))


def cost_per_day(data: ChartData) -> Chart:
    import pygal

    total = sum(data.cost_per_day.values())
    title = f"Model cost per day (${total:,.2f})"
    chart = pygal.Bar(**_config(("#bf8700",), title=title, show_legend=False, value_formatter=_usd))
    days = _days(set(data.cost_per_day))
    _x_labels(chart, days)
    chart.add("USD", [round(data.cost_per_day.get(d, 0.0), 4) for d in days])
    return Chart("cost_per_day", title, _svg(chart))


def _usd(v: float | None) -> str:
    return "" if v is None else f"${v:,.2f}" if abs(v) >= 0.1 or v == 0 else f"${v:,.4f}"


def _ms(v: float | None) -> str:
    return "" if v is None else f"{v / 1000:,.1f} s" if v >= 1000 else f"{v:,.0f} ms"


def _ticks(top: float, n: int = 5) -> list[float]:
    """A few round values from 0 to just past `top`, for a value axis that must not crowd its labels."""
    if top <= 0:
        return [0.0]
    magnitude = 10 ** math.floor(math.log10(top / n))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude * n >= top)
    return [round(i * step, 10) for i in range(n + 1) if (i - 1) * step < top]


def cost_per_project(data: ChartData, names: dict[str, str]) -> Chart:
    import pygal

    title = "Model cost per project"
    ranked = sorted(data.cost_per_project.items(), key=lambda kv: (kv[1], kv[0]))[-TOP_TOOLS:]
    chart = pygal.HorizontalBar(**_config(("#bf8700",), title=title, show_legend=False, height=260,
                                          value_formatter=_usd,
                                          y_labels=_ticks(max((v for _, v in ranked), default=0))))
    chart.x_labels = [names.get(pid, pid) for pid, _ in ranked]
    chart.add("USD", [round(v, 4) for _, v in ranked])
    return Chart("cost_per_project", title, _svg(chart))


def slowest_tools(data: ChartData) -> Chart:
    import pygal

    title = "Slowest tools (mean duration; the longest call in the label)"
    ranked = sorted(data.tools.items(), key=lambda kv: (kv[1][1], kv[0]))[-TOP_TOOLS:]
    chart = pygal.HorizontalBar(**_config(("#57606a",), title=title, show_legend=False, height=300,
                                          value_formatter=_ms,
                                          y_labels=_ticks(max((m for _, (_n, m, _t) in ranked), default=0))))
    chart.x_labels = [f"{name} (max {top / 1000:,.1f} s, {n:,} calls)" for name, (n, _mean, top) in ranked]
    chart.add("mean ms", [round(mean, 1) for _, (_n, mean, _top) in ranked])
    return Chart("slowest_tools", title, _svg(chart))


def build_charts(data: ChartData, project_names: dict[str, str] | None = None) -> list[Chart]:
    """Every chart of `data`, in the order the window and the report show them (CPU-bound: run it off the
    GUI thread)."""
    return [calls_per_day(data), refusals(data), risks(data), approval_waits(data), cost_per_day(data),
            cost_per_project(data, project_names or {}), slowest_tools(data)]
