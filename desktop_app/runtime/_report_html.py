"""The auditor's report as one self-contained HTML file: no script, no remote font or image, readable at A4
(print rules) and on a phone (one column under 700 px). Every text is escaped and redacted once more."""

from __future__ import annotations

import json
from collections import Counter

from ..core import CallField, CallSummary, Redactor, ToolCallRecord, shown_risk, status_word
from ._report import (
    AuditReport,
    SessionPart,
    _e,
    _when,
    decider,
    exit_code,
    refusal_reasons,
    where_ran,
    why,
)
from ._tool_labels import tool_labels

_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1100px;padding:16px;
color:#1b1f24;background:#fff}
h1{font-size:1.6em;margin:.2em 0}h2{font-size:1.25em;margin-top:1.6em;border-bottom:1px solid #ccd}
h3{font-size:1.05em;margin:1.2em 0 .4em}
table{border-collapse:collapse;width:100%;margin:.4em 0}th,td{border:1px solid #d0d7de;padding:4px 6px;
text-align:left;vertical-align:top}th{background:#f3f5f8}
pre{white-space:pre-wrap;overflow-wrap:anywhere;margin:0;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}
.ok{color:#116329;font-weight:600}.bad{color:#b3261e;font-weight:600}.muted{color:#57606a}
.call{border:1px solid #d0d7de;border-radius:6px;margin:.6em 0;padding:.5em .7em;break-inside:avoid}
.call.failed,.call.denied{border-left:4px solid #b3261e}.call.done{border-left:4px solid #2da44e}
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(170px,1fr));gap:2px 12px;font-size:.9em}
.prompt{background:#f6f8fa;border-radius:6px;padding:.4em .7em;margin:.3em 0}
@media (max-width:700px){body{padding:8px;font-size:14px}td,th{display:block;width:auto}tr{display:block;
margin-bottom:6px}}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(320px,1fr));gap:10px}
.charts figure{margin:0;break-inside:avoid;border:1px solid #d0d7de;border-radius:6px;padding:4px}
.charts svg{width:100%;height:auto;display:block}
@page{size:A4;margin:16mm}@media print{body{max-width:none;padding:0}a{color:inherit}}
"""


def report_html(report: AuditReport, redactor: Redactor | None = None) -> str:
    """The whole report. Stored text is redacted already; `redactor` (the default patterns when None) runs
    over every value once more, as the export does, so a report never carries what the log does not."""
    red = redactor or Redactor()
    parts = [_head(report), _chain(report), _summary(report, red), _charts(report)]
    parts += [_session(s, red) for s in report.sessions]
    if not report.sessions:
        parts.append("<p>No session has a prompt or a tool call in this period.</p>")
    return ("<!DOCTYPE html><html lang=en><head><meta charset=utf-8>"
            "<meta name=viewport content='width=device-width,initial-scale=1'>"
            f"<title>Agent Desk audit report</title><style>{_CSS}</style></head><body>"
            + "\n".join(parts) + "</body></html>\n")


def _head(r: AuditReport) -> str:
    projects = sorted({s.project.name + " (" + s.project.path + ")" for s in r.sessions if s.project})
    return (f"<h1>Agent Desk audit report</h1><p class=muted>Made {_e(_when(r.made_at))} by {_e(r.made_by)} "
            f"from {_e(r.database)}.</p><table><tr><th>Period</th><td>{_e(r.scope.words())}</td></tr>"
            f"<tr><th>Projects</th><td>{_e(', '.join(projects) or '—')}</td></tr>"
            f"<tr><th>Sessions</th><td>{len(r.sessions)}</td></tr>"
            f"<tr><th>Tool calls</th><td>{len(r.calls())}</td></tr></table>")


def _chain(r: AuditReport) -> str:
    v = r.verify
    verdict = (f"<span class=ok>verified</span>: {_e(v.message or f'{v.count} entries')}" if v.ok else
               f"<span class=bad>does NOT verify ({_e(v.problem)})</span>: {_e(v.message)}")
    head = r.head
    db = _e(r.database if r.database.startswith("/") else "DATABASE-URL")
    signed = ("no head is signed yet" if head is None else
              f"entry {head['seq']} of {head['count']}, hash <code>{_e(head['hash'])}</code>, signed "
              f"{_e(_when(head.get('signed_at')))} by key <code>{_e(head['key_id'])}</code>")
    return ("<h2>The audit chain</h2><table>"
            f"<tr><th>verify, when this report was made</th><td>{verdict}</td></tr>"
            f"<tr><th>signed head</th><td>{signed}</td></tr>"
            f"<tr><th>check it again</th><td><pre>agent-desk audit verify --db {db}\n"
            f"agent-desk audit export --signed --out audit.jsonl --db {db}\n"
            "agent-desk audit verify-export audit.jsonl</pre>"
            "<span class=muted>The signed head above must be the export's head, or a later one.</span></td></tr>"
            "</table>")


def _summary(r: AuditReport, red: Redactor) -> str:
    calls = r.calls()
    words = Counter("failed" if exit_code(c) not in (None, 0) else status_word(c.state, c.outcome) for c in calls)
    risks = Counter(str(shown_risk(c) or "none") for c in calls)
    deciders = Counter(decider(c).split(" (")[0] for c in calls if c.state.terminal)
    tin, tout, cost = r.totals()
    rows = [("Outcomes", words), ("Risk", risks), ("Decided by", deciders)]
    body = "".join(f"<tr><th>{name}</th><td>{_e(', '.join(f'{k}: {n}' for k, n in c.most_common()) or '—')}"
                   "</td></tr>" for name, c in rows)
    refusals = refusal_reasons(r)
    ref = "".join(f"<tr><td>{n}</td><td>{_e(red.redact(reason))}</td></tr>" for reason, n in refusals.most_common())
    return (f"<h2>Summary</h2><table>{body}<tr><th>Tokens and cost</th><td>{int(tin):,} in, {int(tout):,} out; "
            f"${cost:.4f}</td></tr></table>"
            + (f"<h3>Refusals and why</h3><table><tr><th>calls</th><th>reason</th></tr>{ref}</table>" if ref else ""))


_SVG_NS = ' xmlns="http://www.w3.org/2000/svg"'  # inline SVG in HTML needs no namespace (and names no URL)


def _charts(r: AuditReport) -> str:
    """The charts inline (SVG written by pygal with no script and no remote link): the file stays self-contained."""
    if not r.charts:
        return ""
    figures = "".join(f"<figure class=chart id='chart-{c.key}' aria-label='{_e(c.title)}'>"
                      f"{c.svg.replace(_SVG_NS, '', 1)}</figure>" for c in r.charts)
    return ("<h2>Charts</h2><p class=muted>Days are UTC days; the cost is the model's, over the same sessions and "
            f"period.</p><div class=charts>{figures}</div>")


def _session(s: SessionPart, red: Redactor) -> str:
    project = f"{s.project.name} ({s.project.path})" if s.project else s.info.project_id
    title = red.redact(s.info.title or s.info.id)
    head = (f"<h2>Session {_e(title)}</h2><p class=muted>{_e(s.info.id)} · {_e(project)} · "
            f"model {_e(s.info.model or '—')} · opened {_e(_when(s.info.created_at))} · "
            f"{int(s.usage[0]):,} tokens in, {int(s.usage[1]):,} out, ${s.usage[2]:.4f}</p>")
    prompts = "".join(f"<div class=prompt><span class=muted>{_e(_when(at))}</span><pre>{_e(red.redact(t))}</pre>"
                      "</div>" for at, t in s.prompts)
    return head + (f"<h3>Prompts</h3>{prompts}" if prompts else "") + "".join(_call(c, red) for c in s.calls)


def _call(c: ToolCallRecord, red: Redactor) -> str:
    word, code = status_word(c.state, c.outcome), exit_code(c)
    status = f"failed: exit {code}" if code not in (None, 0) else word  # a command that exits 1 did not work
    kind = "failed" if word in ("failed", "denied", "interrupted") or code not in (None, 0) else "done"
    facts = [("state", status), ("risk", shown_risk(c) or "not judged"), ("decided by", decider(c)),
             ("at", _when(c.created_at)), ("took", f"{c.duration_ms:.0f} ms" if c.duration_ms else "—"),
             ("ran in", where_ran(c)), ("call", c.id)]
    reason = why(c)
    original = next((e.data["original_input"] for e in c.trail if "original_input" in (e.data or {})), None)
    edited = c.approval.edited_input is not None
    card = tool_labels().summary(c.name, c.input, c.result, red.redact)  # the tool's own card, redacted
    return (f"<div class='call {kind}'><b>{_e(card.label)}</b> <span class=muted>{_e(c.name)}</span> "
            f"<span class={'bad' if kind == 'failed' else 'ok'}>{_e(status)}</span><div class=facts>"
            + "".join(f"<div><span class=muted>{k}</span> {_e(red.redact(str(v)))}</div>" for k, v in facts)
            + "</div>" + (f"<p><b>Why:</b> {_e(red.redact(reason))}</p>" if reason else "")
            + _card_fields(card)
            + ("<p class=muted>The person edited the model's input before allowing it (above: what ran). "
               + (f"The model asked for:</p><pre>{_e(red.redact(json.dumps(original, indent=1, default=str)))}"
                  "</pre>" if original is not None else "</p>") if edited else "")
            + "</div>")


def _card_fields(card: CallSummary) -> str:
    """The call's fields as its tool orders them (the command and its folder, the path and the diff…), then what
    its result says: long or code-like values as blocks, the rest as facts."""
    def one(f: CallField) -> str:
        if f.kind in ("code", "diff", "json") or "\n" in f.value:
            return f"<div><span class=muted>{_e(f.name)}</span><pre>{_e(f.value)}</pre></div>"
        return f"<div><span class=muted>{_e(f.name)}</span> {_e(f.value)}</div>"
    before = "".join(one(f) for f in card.fields)
    after = "".join(one(f) for f in card.outcome)
    return before + (f"<div class=muted>Result</div>{after}" if after else "")
