"""The reason sentences: why a call asks, was denied, skipped, stopped or changed, and the one word a finished
call is shown with, built in one place so the timeline, the details, the history, the export and the model
read the same plain sentences."""

from __future__ import annotations

import difflib
import json
from typing import Any

from ._record import Outcome, Risk, ToolCallRecord, ToolCallState

PERSON = "user"  # who a front end answers as, unless it names someone
SKIPPED_AFTER_DENIAL = "skipped after a denial"  # the opening of a skipped call's note (older records hold it alone)
EDIT_NOTE_MAX_LINES = 40  # of the diff told to the model; the audit keeps both inputs whole


def plural(n: int, noun: str, many: str | None = None) -> str:
    """`1 record`, `2 records`, `1,000 entries` (`many` for an irregular plural)."""
    return f"{n:,} {noun if n == 1 else many or noun + 's'}"


def about(tool: str, why: str) -> str:
    """`why` (a risk's reason: "it only reads (ls)", "fs_edit writes a.py", "rm deletes files") as a clause
    about `tool`, naming it once: "bash_run only reads (ls)", "fs_edit writes a.py", "bash_run: rm deletes…"."""
    why = why.strip()
    if not why:
        return tool
    if why == tool or why.startswith(tool + " "):
        return why
    if why.startswith("it "):
        return f"{tool} {why[3:]}"
    return f"{tool}: {why}"


def mode_asks(tool: str, why: str, mode: str) -> str:
    """A mode asks about a call no rule decided."""
    if mode == "auto":
        return f"{about(tool, why)}, and mode auto asks before what is dangerous"
    return f"{about(tool, why)}, and mode {mode} asks before a call no rule allows"


def person_name(by: str) -> str:
    return "the user" if by in ("", PERSON) else by


def denied_by_person(by: str, note: str = "") -> str:
    """What a person's denial records and tells the model: their note, when they wrote one."""
    note = note.strip()
    return f"denied by {person_name(by)}: {note}" if note else f"denied by {person_name(by)}"


def skipped(denied_tool: str, by: str = PERSON) -> str:
    """A call of a batch after a denied one: it was never offered, nor judged, nor run."""
    what = f"{denied_tool}, an earlier call of this batch" if denied_tool else "an earlier call of this batch"
    return f"{SKIPPED_AFTER_DENIAL}: {person_name(by)} denied {what}, so this call did not run"


def skipped_shown(denied_tool: str) -> str:
    """How a skipped call is shown to the person."""
    return f"skipped after your denial of {denied_tool}" if denied_tool else "skipped after your denial"


# -- a call refused or failed before it ran, or failing while it ran ----------------------------------
APPROVAL_EXPIRED = "the approval expired"
TOOL_REPORTED_ERROR = "the tool reported an error"
LOST_SECRETS = ("this call's input held secrets, which are never stored, so it cannot run after the session "
                "was reopened")


def unknown_tool(name: str) -> str:
    return f"unknown tool {name!r}"


def not_offered(name: str, who: str, template: str = "") -> str:
    where = f" (template {template})" if template else ""
    return f"{name} is not available to {who}{where}: use only the tools you were given"


def not_json(tool: str, problem: str) -> str:
    return f"the input of {tool} is not valid JSON: {problem or 'missing'}"


def invalid_input(tool: str, problem: str) -> str:
    return f"invalid input for {tool}: {problem}"


def would_fail(tool: str, problem: str) -> str:
    return f"{tool} would fail, so nobody was asked: {problem}"


def timed_out(tool: str, limit_s: float) -> str:
    return f"{tool} timed out after {limit_s:g} s"


def tool_failed(tool: str, problem: str) -> str:
    return f"{tool} failed: {problem}"


def tool_raised(tool: str, kind: str, problem: str) -> str:
    return f"{tool} raised {kind}: {problem}" if problem else f"{tool} raised {kind}"


def unrecorded(problem: str) -> str:
    return f"the audit store could not record this call, so it was stopped: {problem}"


# -- a call stopped by the person or by a crash: one word, "interrupted" --------------------------------
STOPPED_RUNNING = "interrupted: you stopped it while it ran"
STOPPED_BEFORE_RUN = "interrupted before it ran: you stopped the turn"
STOPPED_WAITING = "interrupted while it waited for your approval: you stopped the turn"
STOPPED_CANCELLED = "interrupted: the turn was cancelled"

_WORDS: dict[ToolCallState, str] = {
    ToolCallState.PENDING: "pending",
    ToolCallState.APPROVAL_REQUIRED: "needs approval",
    ToolCallState.APPROVED: "approved",
    ToolCallState.EXECUTING: "running",
    ToolCallState.COMPLETED: "done",
    ToolCallState.FAILED: "failed",
    ToolCallState.DENIED: "denied",
    ToolCallState.SEALED: "interrupted",
}
_OUTCOME_WORDS: dict[str, str] = {
    Outcome.CANCELLED.value: "interrupted",
    Outcome.INTERRUPTED.value: "interrupted",
    Outcome.TIMEOUT.value: "timed out",
    Outcome.SKIPPED.value: "skipped",
    Outcome.EXPIRED.value: "expired",
}


def status_word(state: ToolCallState | str, outcome: Outcome | str | None = None) -> str:
    """The one word a call is shown and exported with: a call stopped by the person (Esc, Stop, "Stop running
    calls and quit") or by a crash is "interrupted" wherever it is shown; a call skipped after a denial is
    "skipped", never "denied"."""
    st = ToolCallState(state)
    word = _OUTCOME_WORDS.get(str(getattr(outcome, "value", outcome) or "")) if st.terminal else None
    return word or _WORDS[st]


def interrupted(state: ToolCallState | str, outcome: Outcome | str | None) -> bool:
    return status_word(state, outcome) == "interrupted"


def is_skipped(record: ToolCallRecord) -> bool:
    return record.outcome is Outcome.SKIPPED


def skipped_after(record: ToolCallRecord) -> str:
    """For a skipped call, how it is shown: "skipped after your denial of fs_write" (the tool from its trail)."""
    last = record.trail[-1].data if record.trail else {}
    return skipped_shown(str(last.get("after_denial_of") or ""))


def shown_risk(record: ToolCallRecord) -> Risk | None:
    """The risk a call is shown and exported with: none for a skipped call, which was never judged."""
    return None if is_skipped(record) else record.risk


# -- an input a person edited before allowing it --------------------------------------------------------
def edit_note(original: dict[str, Any], edited: dict[str, Any], by: str = PERSON) -> str:
    """What the model is told with the result of a call a person edited: that they changed its input, and
    how (each changed field: a short diff of a text, or the old and new values)."""
    lines = [f"Note: {person_name(by)} edited your input before allowing this call; it ran with their "
             "version, not yours. What they changed:"]
    for key in sorted(set(original) | set(edited)):
        old, new = original.get(key), edited.get(key)
        if old == new:
            continue
        if isinstance(old, str) and isinstance(new, str) and ("\n" in old or "\n" in new):
            diff = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"{key} (yours)",
                                             f"{key} (theirs)", lineterm="", n=1))
            if len(diff) > EDIT_NOTE_MAX_LINES:
                diff = [*diff[:EDIT_NOTE_MAX_LINES], f"… ({plural(len(diff) - EDIT_NOTE_MAX_LINES, 'more line')})"]
            lines.append("\n".join(diff))
        elif key not in edited:
            lines.append(f"- {key}: removed (was {_short(old)})")
        elif key not in original:
            lines.append(f"- {key}: added as {_short(new)}")
        else:
            lines.append(f"- {key}: {_short(old)} -> {_short(new)}")
    return "\n".join(lines)


def _short(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"
