"""What a person reads of a tool call (OpenClaw's `label`, Sema's `getDisplayTitle`): the tool's human label, a
title, and the fields that matter in order (a command and its folder, a path and its diff, a URL and its
domain), before it runs and, with its result, after. Each tool builds its own (`Tool.card`); a call of a tool
the desk does not know any more (an MCP server gone, a plugin removed) gets one built from its name and input.
The timeline, the approval cards, the history and the audit report all show these."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal

from ._mcp import split_mcp_tool_name

FieldKind = Literal["text", "code", "diff", "path", "url", "json", "name"]  # name: who answers (an MCP server)
MAX_TITLE = 120
MAX_VALUE = 20_000  # characters of one field: a card shows what matters, the raw input holds the rest


@dataclass(frozen=True, slots=True)
class CallField:
    """One thing a card shows: its name ("Command"), its value as text, and how to show it."""

    name: str
    value: str
    kind: FieldKind = "text"

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "value": self.value, "kind": self.kind}


@dataclass(frozen=True, slots=True)
class CallSummary:
    """A call as a person reads it: `label` names the tool, `title` says what this call does in a line,
    `fields` what matters before it runs, `outcome` what matters of its result (empty before it ends)."""

    label: str
    title: str
    fields: tuple[CallField, ...] = ()
    outcome: tuple[CallField, ...] = ()

    def value(self, name: str) -> str | None:
        """The value of the field called `name`, before or after the call, or None."""
        return next((f.value for f in (*self.fields, *self.outcome) if f.name == name), None)

    def redacted(self, redact: Callable[[str], str]) -> CallSummary:
        """Every text of the summary through `redact` (a `Redactor.redact`): what it shows, the log may hold."""
        def each(fields: tuple[CallField, ...]) -> tuple[CallField, ...]:
            return tuple(replace(f, name=redact(f.name), value=redact(f.value)) for f in fields)
        return CallSummary(redact(self.label), redact(self.title), each(self.fields), each(self.outcome))

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "title": self.title, "fields": [f.to_dict() for f in self.fields],
                "outcome": [f.to_dict() for f in self.outcome]}


def label_from_name(name: str) -> str:
    """A label for a tool that gives none: `mcp__github__create_issue` -> "Create issue (github)",
    `word_count` -> "Word count"."""
    split = split_mcp_tool_name(name)
    words = _words(split[1] if split else name) or name
    return f"{words} ({split[0]})" if split else words


def _words(name: str) -> str:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", name)  # camelCase -> camel Case
    text = " ".join(re.split(r"[\s_\-.]+", spaced)).strip()
    return text[:1].upper() + text[1:].lower() if text else ""


def one_line(text: str, limit: int = MAX_TITLE) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def value_text(value: Any) -> str:
    """A field's value as text: a string as it is, anything else as JSON."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1, default=str)
    return text if len(text) <= MAX_VALUE else text[: MAX_VALUE - 1] + "…"


def input_fields(raw: dict[str, Any], order: Iterable[str] = ()) -> tuple[CallField, ...]:
    """Every input field, in `order` first (a schema's properties), then as the model sent them; a key's
    name made readable ("old_string" -> "Old string")."""
    keys = [k for k in order if k in raw] + [k for k in raw if k not in set(order)]
    return tuple(CallField(_words(str(k)) or str(k), value_text(raw[k]),
                           "json" if isinstance(raw[k], dict | list) else "text") for k in keys)


def result_text(result: dict[str, Any] | None) -> str:
    """The text blocks of a stored result (`ToolResult.to_dict()`)."""
    return "\n".join(b.get("text", "") for b in (result or {}).get("content") or [] if b.get("type") == "text")


def error_words(text: str) -> str:
    """What went wrong, in words (the window's card, the CLI, the history, the report): the message of the desk's
    own error body (`ToolResult.error`: the model gets the whole body, advice and all), else the text as it came
    (an MCP server's, a hook's). Records stored before 2026-11-28 keep the body in their `error`: unpacked here."""
    if text.startswith("{"):
        try:
            body = json.loads(text)
        except ValueError:
            return text
        if isinstance(body, dict) and isinstance(body.get("error"), str) and body["error"].strip():
            return body["error"]
    return text


def outcome_fields(result: dict[str, Any] | None) -> tuple[CallField, ...]:
    """What any call's result says, shortly: its error, or how much it gave back and its first line."""
    if not result:
        return ()
    text = result_text(result)
    if result.get("is_error"):
        return (CallField("Error", one_line(error_words(text), 300)),)
    lines = text.count("\n") + 1 if text else 0
    first = next((s for s in text.splitlines() if s.strip()), "")
    size = f"{lines} line{'s' if lines != 1 else ''}" if lines else "nothing"
    return (CallField("Result", f"{size}: {one_line(first, 200)}" if first else size),)


def summary_of(label: str, raw: dict[str, Any], fields: Iterable[CallField], result: dict[str, Any] | None,
               outcome: Iterable[CallField] = ()) -> CallSummary:
    """A summary from its parts; the title is the label and the first field's value on one line."""
    fields = tuple(fields)
    head = next((f.value for f in fields if f.value.strip() and f.kind not in ("diff", "name")), "")
    title = f"{label}: {one_line(head)}" if head else label
    return CallSummary(label, title, fields, tuple(outcome) or outcome_fields(result))


def mcp_fields(server: str, tool: str, raw: dict[str, Any], order: Iterable[str] = ()) -> tuple[CallField, ...]:
    """An MCP call: its server, its tool by the server's own name, then its arguments."""
    return (CallField("Server", server, "name"), CallField("Tool", tool, "name"), *input_fields(raw, order))


def default_summary(name: str, raw: dict[str, Any] | None, result: dict[str, Any] | None = None,
                    label: str = "") -> CallSummary:
    """The summary of a call of a tool the desk has no instance of: built from the name and the input."""
    raw = raw if isinstance(raw, dict) else {}
    label = label or label_from_name(name)
    split = split_mcp_tool_name(name)
    return summary_of(label, raw, mcp_fields(*split, raw) if split else input_fields(raw), result)
