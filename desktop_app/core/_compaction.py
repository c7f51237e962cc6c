"""Compaction of a conversation near the model's context limit, in the way of Claude Code's /compact.

The older turns are summarised by the same model; the summary is stored as a message of its own (marked),
and the history sent from then on starts with it, followed by the turns kept whole. Nothing is deleted: the
store and its hash chain keep every original message, and the audit can always show them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._events import Event, TokenUsage
from ._llm import Emit, ModelClient, ModelRequest
from ._messages import StoredMessage, normalize

DEFAULT_CONTEXT_TOKENS = 200_000  # Claude's context window; a project's model may set another
DEFAULT_COMPACT_AT = 0.8  # share of the window past which the next step compacts first
# Older turns of less than this share of the limit free nothing worth a model call: the context is full of the
# turn in progress (a large tool input), which compaction keeps whole anyway. A person may still compact by hand.
MIN_OLDER_SHARE = 0.02
CHARS_PER_TOKEN = 4  # a token count estimate when no usage was reported yet (a reopened session)
SUMMARY_MAX_TOKENS = 4_096
COMPACTION_KEY = "agent_desk_compaction"  # marks the stored summary; stripped before anything is sent

SUMMARY_INSTRUCTIONS = (
    "The conversation above is being compacted because it nears the context limit. Write a summary that lets "
    "you continue the work without it: the user's goals and requests in their own words where it matters, "
    "decisions made and why, the files read or changed (paths) and what changed in them, commands run and "
    "their outcomes, errors met and how they were fixed, what the user denied or asked to do differently, "
    "and the work still to do. Be specific and complete; do not call tools; answer with the summary only."
)
SUMMARY_HEADER = "Summary of the earlier conversation (compacted; the audit keeps the original messages):"


@dataclass(frozen=True, slots=True)
class CompactionSettings:
    """When a session compacts: past `compact_at` of `context_tokens` (0 turns automatic compaction off)."""

    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    compact_at: float = DEFAULT_COMPACT_AT

    @property
    def limit(self) -> int:
        return int(self.context_tokens * self.compact_at) if self.compact_at > 0 else 0

    def worth_it(self, older: Sequence[StoredMessage]) -> bool:
        """Whether summarising `older` frees enough of the context to be worth a model call."""
        return estimate_tokens(older) >= self.limit * MIN_OLDER_SHARE


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """The messages to summarise (the start of the history as sent) and the turns kept whole."""

    older: list[StoredMessage]
    kept: list[StoredMessage]


def is_summary(message: StoredMessage) -> bool:
    return any(isinstance(b, dict) and COMPACTION_KEY in b for b in message.content)


def compaction_facts(message: StoredMessage) -> dict[str, Any]:
    """What a stored summary records of its compaction: messages summarised, kept_from, tokens, manual."""
    for b in message.content:
        if isinstance(b, dict) and isinstance(b.get(COMPACTION_KEY), dict):
            return dict(b[COMPACTION_KEY])
    return {}


def history_view(messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    """The history as the model sees it: after the last summary, that summary, then the messages from the
    one it kept whole onwards (earlier summaries and everything it summarised left out); all of it when the
    session was never compacted."""
    last = next((i for i in range(len(messages) - 1, -1, -1) if is_summary(messages[i])), None)
    if last is None:
        return list(messages)
    kept_from = compaction_facts(messages[last]).get("kept_from")
    start = next((i for i, m in enumerate(messages) if m.id == kept_from), last + 1)
    return [messages[last], *(m for m in messages[start:] if not is_summary(m))]


def sendable(messages: Sequence[StoredMessage]) -> list[dict[str, Any]]:
    """The Messages-API history of `history_view`, the summary's marker removed (the API refuses it)."""
    return normalize(sent_view(messages))


def sent_view(messages: Sequence[StoredMessage]) -> list[StoredMessage]:
    """The stored messages `sendable` sends: `history_view`, the summary's marker removed."""
    return [StoredMessage(m.session_id, m.role, [_unmarked(b) for b in m.content], m.id, m.created_at)
            if is_summary(m) else m for m in history_view(messages)]


def _unmarked(block: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in block.items() if k != COMPACTION_KEY}


def estimate_tokens(messages: Sequence[StoredMessage]) -> int:
    """A rough token count of `messages` (characters / 4), for a session whose last usage is unknown."""
    return sum(_block_chars(b) for m in messages for b in m.content) // CHARS_PER_TOKEN


IMAGE_TOKENS = 1_600  # what the API bills an image at its largest (1.15 megapixels); its base64 is not text


def _block_chars(block: dict[str, Any]) -> int:
    if block.get("type") == "image":
        return IMAGE_TOKENS * CHARS_PER_TOKEN
    return len(json.dumps(block, ensure_ascii=False)) + 1


def _turn_start(message: StoredMessage) -> bool:
    """A person's message that opens a turn: user text, no tool results (a cut there keeps pairs whole)."""
    kinds = {b.get("type") for b in message.content}
    return message.role == "user" and not is_summary(message) and "text" in kinds and "tool_result" not in kinds


def plan(view: Sequence[StoredMessage]) -> CompactionPlan | None:
    """Split the history as sent at the start of its last turn: the older turns are summarised, the last
    one is kept whole (so every tool_use keeps its tool_result). None when there is nothing older."""
    cut = next((i for i in range(len(view) - 1, 0, -1) if _turn_start(view[i])), None)
    if cut is None:
        return None
    older, kept = list(view[:cut]), list(view[cut:])
    if len(older) == 1 and is_summary(older[0]):
        return None  # only the last summary is older: compacting again would summarise a summary
    return CompactionPlan(older, kept)


def summary_request(system: str, older: Sequence[StoredMessage], tools: list[dict[str, Any]]) -> ModelRequest:
    """The request that asks the model for the summary: the older turns, then the instructions. The tools are
    sent as declared, since the history holds tool_use blocks (the API refuses them without tools)."""
    messages = sendable(older)
    ask = {"type": "text", "text": SUMMARY_INSTRUCTIONS}
    if messages and messages[-1]["role"] == "user":
        messages[-1] = {"role": "user", "content": [*messages[-1]["content"], ask]}
    else:
        messages.append({"role": "user", "content": [ask]})
    return ModelRequest(system=system, messages=messages, tools=tools, max_tokens=SUMMARY_MAX_TOKENS)


def summary_message(session_id: str, summary: str, plan_: CompactionPlan, *, tokens_before: int,
                    manual: bool) -> StoredMessage:
    """The stored summary: a user message the next requests start with, marked with what it replaced."""
    facts = {"summarised": len(plan_.older), "kept_from": plan_.kept[0].id, "tokens_before": tokens_before,
             "manual": manual, "first_id": plan_.older[0].id, "last_id": plan_.older[-1].id}
    text = f"{SUMMARY_HEADER}\n\n{summary.strip()}"
    return StoredMessage(session_id=session_id, role="user",
                         content=[{"type": "text", "text": text, COMPACTION_KEY: facts}])


async def summarise(client: ModelClient, request: ModelRequest, *, emit: Emit, session_id: str) -> str:
    """Ask the model for the summary. Only its token usage reaches `emit` (the cost counts); its text is not
    streamed into the conversation as an answer."""

    def usage_only(event: Event) -> None:
        if isinstance(event, TokenUsage):
            emit(event)

    reply = await client.stream(request, emit=usage_only, session_id=session_id)
    return reply.text
