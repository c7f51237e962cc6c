"""What a tool call's card in the conversation says: its status in colour (an exit code, not a state, for a
command), why it was refused or failed in one sentence, and its output with the head and tail of long output;
questions, plans and sub-agents read as what they are."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core import ToolCallRecord, ToolCallState, error_words, skipped_after, status_word, summarize_input
from ._theme import STATE_LABEL, STATE_STYLE, format_duration, status_style

if TYPE_CHECKING:
    from PySide6.QtGui import QTextTable

RED, GREEN, AMBER, GREY, BLUE = "#d9363e", "#2f9e44", "#d4890b", "#8a8f98", "#3b82c4"
HEAD_LINES = 4  # long output shows its first and last lines; the whole of it is one click away
TAIL_LINES = 4
MAX_LINE = 160  # characters of one output line on the card


@dataclass
class ToolCard:
    """A tool card in the conversation: where it is, what it shows, and the truth it has so far (state, record,
    output)."""

    table: QTextTable
    name: str
    summary: str
    duration: str = ""
    state: str = "PENDING"
    record: ToolCallRecord | None = None
    output: list[str] = field(default_factory=list)
    exit_code: int | None = None
    full: bool = False  # the whole output shown, not its head and tail

    def take(self, rec: ToolCallRecord) -> None:
        """The call's full record, and its state and duration with it."""
        self.record = rec
        self.state = rec.state.value
        self.duration = format_duration(rec.duration_ms) or self.duration


def input_summary(data: dict[str, Any] | None) -> str:
    """The card's one line of input; a call whose input has not arrived yet says so, not `{}`."""
    return summarize_input(data, 90) if data else "(input arriving…)"


@dataclass(frozen=True)
class CardTruth:
    """What a card shows beside the tool's name and input."""

    colour: str
    glyph: str
    label: str  # "✗ exit 1", "done", "denied"…
    reason: str = ""  # one sentence: why it failed or was refused, or a command's first error line
    output: str = ""  # what the call gave back, shown folded under the card
    title: str = ""  # replaces name + input for the person tools ("Question → you answered …")


def sentence(text: str) -> str:
    """The first line of `text` as a sentence: a capital first letter and a closing full stop."""
    line = next((s.strip() for s in (text or "").splitlines() if s.strip()), "")
    if not line:
        return ""
    line = line[0].upper() + line[1:]
    return line if line[-1] in ".!?…:" else line + "."


def _text_of(result: dict[str, Any] | None) -> str:
    return "\n".join(b.get("text", "") for b in (result or {}).get("content") or [] if b.get("type") == "text")


def _command_truth(details: dict[str, Any], state: ToolCallState, streamed: str) -> CardTruth:
    out = "\n".join(s.rstrip("\n") for s in (details.get("stdout"), details.get("stderr")) if s) or streamed
    err_line = sentence(_first_error(details.get("stderr") or ""))
    code = details.get("exit_code")
    if details.get("timed_out"):
        return CardTruth(RED, "✗", "✗ timed out", "The command ran past its time limit and was killed.", out)
    if details.get("oom_killed"):
        return CardTruth(RED, "✗", "✗ out of memory", "The sandbox's memory limit was reached.", out)
    if details.get("cancelled") or (code is None and state is not ToolCallState.COMPLETED):
        return CardTruth(GREY, "■", "■ interrupted", "The command was stopped before it ended.", out)
    if code is None:
        sig = details.get("killed_signal")
        return CardTruth(RED, "✗", "✗ killed", f"The process was killed{f' by signal {sig}' if sig else ''}.", out)
    if code != 0:
        return CardTruth(RED, "✗", f"✗ exit {code}", err_line or sentence(_last_line(out)), out)
    return CardTruth(GREEN, "✓", "✓ exit 0", "", out)


def _first_error(stderr: str) -> str:
    """A command's first stderr line; of a Python traceback its last line (the error, not the header)."""
    lines = [s for s in stderr.splitlines() if s.strip()]
    if lines and lines[0].startswith("Traceback (most recent call last)"):
        return next((s for s in reversed(lines) if not s.startswith(" ")), lines[-1])
    return lines[0] if lines else ""


def _last_line(text: str) -> str:
    lines = [s for s in text.splitlines() if s.strip()]
    return lines[-1] if lines else ""


def _person_truth(name: str, rec: ToolCallRecord) -> CardTruth | None:
    """ask_user, exit_plan_mode and task_run once they ended well: what the person or the sub-agent said."""
    details = (rec.result or {}).get("details") or {}
    e = html.escape
    if name == "ask_user":
        question = str(rec.input.get("question", ""))
        if details.get("answered"):
            return CardTruth(GREEN, "✓", "answered", "", "",
                             f"Question: {e(question)} → you answered <b>“{e(str(details.get('answer', '')))}”</b>")
        return CardTruth(AMBER, "–", "no answer", sentence(str(details.get("note", ""))), "",
                         f"Question: {e(question)} → no answer")
    if name == "exit_plan_mode":
        first = next((s.strip("# ") for s in str(rec.input.get("plan", "")).splitlines() if s.strip()), "")
        if details.get("approved"):
            return CardTruth(GREEN, "✓", "approved", "", "",
                             f"Plan approved → <b>{e(str(details.get('mode', '')))}</b> · {e(first)}")
        if details.get("approved") is False:
            return CardTruth(AMBER, "↺", "rejected", "", "",
                             f"Plan rejected: <b>{e(str(details.get('note') or 'no note'))}</b> · {e(first)}")
        return CardTruth(AMBER, "–", "no answer", sentence(str(details.get("note", ""))), "",
                         f"Plan: {e(first)} → no answer")
    if name == "task_run" and details.get("subagent"):
        steps = details.get("steps")
        label = f"answered{f' in {steps} steps' if steps else ''}"
        return CardTruth(GREEN, "✓", label, "", _text_of(rec.result),
                         f"Sub-agent <b>{e(str(details['subagent']))}</b> ({e(str(details.get('template', '')))})"
                         f": {e(str(rec.input.get('task', '')))}")
    return None


def card_truth(name: str, state: str, rec: ToolCallRecord | None = None, streamed: str = "",
               exit_code: int | None = None) -> CardTruth:
    """The truth of a call's card from its state, its full record when there is one, and its streamed output."""
    st = ToolCallState(state)
    colour, glyph = STATE_STYLE.get(st, (GREY, "•"))
    label = STATE_LABEL.get(st, state.lower())
    details = ((rec.result or {}).get("details") or {}) if rec is not None else {}
    if rec is not None and "exit_code" in details and st in (ToolCallState.COMPLETED, ToolCallState.FAILED):
        return _command_truth(details, st, streamed)
    if st is ToolCallState.COMPLETED and exit_code not in (None, 0):  # the end event, before the record
        return CardTruth(RED, "✗", f"✗ exit {exit_code}", "", streamed)
    if rec is None:
        return CardTruth(colour, glyph, label, "", streamed)
    if st is ToolCallState.COMPLETED:
        person = _person_truth(name, rec)
        if person is not None:
            return person
        return CardTruth(colour, glyph, label, "", _text_of(rec.result) or streamed)
    word = status_word(st, rec.outcome)  # the one word the timeline, the history and the export say
    if word == "skipped":
        return CardTruth(GREY, "–", "skipped", sentence(skipped_after(rec)), "")
    if word == "interrupted":
        return CardTruth(GREY, "■", "interrupted", sentence(_why(rec)),
                         streamed or _text_of(rec.result))
    if st is ToolCallState.DENIED:
        return CardTruth(colour, glyph, label, sentence(_why(rec)), "")
    if st in (ToolCallState.FAILED, ToolCallState.SEALED):
        return CardTruth(RED if st is ToolCallState.FAILED else colour, glyph, label,
                         sentence(_why(rec)), streamed or _told(rec.result))
    return CardTruth(colour, glyph, label, "", streamed)


def _told(result: dict[str, Any] | None) -> str:
    """What a failed call gave the model, under the reason the card already shows: the advice of the desk's error
    body (`{"ok": false, "error", "recommendations"}`), one line each, rather than the body again; other text
    (a tool's own output, an MCP server's error) as it came."""
    text = _text_of(result)
    if error_words(text) == text:
        return text
    advice = json.loads(text).get("recommendations") or []
    return "\n".join(f"→ {a}" for a in advice if isinstance(a, str))


def _why(rec: ToolCallRecord) -> str:
    return error_words(rec.error or "") or _last_note(rec)


def _last_note(rec: ToolCallRecord) -> str:
    return next((t.note for t in reversed(rec.trail) if t.note), "")


def folded(output: str, full: bool = False) -> tuple[str, int]:
    """(the lines to show, how many lines were left out): the whole output, or its head and tail."""
    lines = output.rstrip("\n").splitlines()
    lines = [s if len(s) <= MAX_LINE else s[: MAX_LINE - 1] + "…" for s in lines]
    if full or len(lines) <= HEAD_LINES + TAIL_LINES + 1:
        return "\n".join(lines), 0
    hidden = len(lines) - HEAD_LINES - TAIL_LINES
    return "\n".join([*lines[:HEAD_LINES], f"… {hidden} more lines …", *lines[-TAIL_LINES:]]), hidden


def card_html(call_id: str, name: str, summary: str, truth: CardTruth, duration: str, *, full: bool = False,
              dark: bool = False) -> str:
    """The card's HTML: one line with the status, the reason in one sentence, the output folded under it."""
    e = html.escape
    extra = f" · {e(duration)}" if duration else ""
    what = truth.title or f"<b>{e(name)}</b></a>&nbsp; <code>{e(summary)}</code>"
    link = f"<a href='call:{e(call_id)}' style='text-decoration:none'>"
    head = (f"<span style='color:{truth.colour}; font-weight:bold'>{truth.glyph}</span>&nbsp;"
            f"{link}{what}{'</a>' if truth.title else ''} &nbsp;"
            f"<span style='color:{truth.colour}; font-weight:bold'>{e(truth.label)}</span>{extra}")
    parts = [head]
    if truth.reason:
        parts.append(f"<br><span style='color:{truth.colour}'>{e(truth.reason)}</span>")
    if truth.output.strip():
        shown, hidden = folded(truth.output, full)
        bg = "#1e1f22" if dark else "#f4f5f7"
        body = e(shown).replace("\n", "<br>")
        parts.append(f"<br><span style='font-family:monospace; font-size:small; white-space:pre-wrap; "
                     f"background:{bg}'>{body}</span>")
        total = len(truth.output.rstrip("\n").splitlines())
        if hidden:
            parts.append(f"<br><a href='output:{e(call_id)}'>⤢ show all {total} lines</a>")
        elif full and total > HEAD_LINES + TAIL_LINES + 1:
            parts.append(f"<br><a href='output:{e(call_id)}'>⤡ fold</a>")
    return "".join(parts)


_PERSON_TOOLS = ("ask_user", "exit_plan_mode", "task_run")


def shown_status(name: str, state: ToolCallState, outcome: str | None, rec: ToolCallRecord | None = None,
                 exit_code: int | None = None) -> tuple[str, str, str]:
    """(word, colour, glyph) of a call in a list (the timeline's State column): the state's one word, except
    where the card says more — a command that exited non-zero is "exit N" in red (never "done"), a plan reads
    "approved" or "rejected", a question "answered" or "no answer"."""
    if state is ToolCallState.COMPLETED and (exit_code not in (None, 0) or (rec is not None and (
            "exit_code" in ((rec.result or {}).get("details") or {}) or name in _PERSON_TOOLS))):
        truth = card_truth(name, state.value, rec, exit_code=exit_code)
        word = truth.label.removeprefix(truth.glyph).strip()
        if word != "exit 0":  # a command that succeeded is simply "done", like any call that did
            return word, truth.colour, truth.glyph
    colour, glyph = status_style(state, outcome)
    return status_word(state, outcome), colour, glyph
