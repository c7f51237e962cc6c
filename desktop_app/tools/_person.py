"""The tools that talk to the person: ask_user (a question, optionally with choices) and exit_plan_mode
(the plan, for the person to approve into a mode or reject with a note). Both wait in the inbox or at the
CLI's prompt; with nobody to answer, the model is told so at once."""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from ..core import (
    NO_PERSON,
    PERSON_GROUP,
    Answer,
    CallField,
    PermissionMode,
    Risk,
    ToolContext,
    ToolInput,
    ToolResult,
    value_text,
)
from ._common import BuiltinTool, Refusal

# A person may take a while: the question's own expiry (the approval expiry) decides, not a tool timeout.
PERSON_TIMEOUT_S = 7 * 24 * 3600.0


def _no_answer(answer: Answer, what: str) -> ToolResult:
    note = answer.note or NO_PERSON
    return ToolResult.text(
        f"No answer will come to this {what}: {note}. Do not ask again; go on with the most careful choice "
        "and say in your answer what you assumed.", answered=False, note=note)


class AskUserInput(ToolInput):
    question: str = Field(min_length=1, max_length=4000, description="The question, in a sentence or two.")
    choices: list[str] = Field(default_factory=list, max_length=10,
                               description="Optional answers to pick from; the person may also write their own.")

    @field_validator("question")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("the question is blank")
        return v

    @field_validator("choices")
    @classmethod
    def _short_choices(cls, v: list[str]) -> list[str]:
        if any(not c.strip() or len(c) > 200 for c in v):
            raise ValueError("each choice is a non-blank text of at most 200 characters")
        return v


def _person(ctx: ToolContext) -> Any:
    if ctx.person is None:
        raise Refusal(NO_PERSON, ["go on with the most careful choice and say what you assumed"])
    return ctx.person


class AskUser(BuiltinTool, name="ask_user", group=PERSON_GROUP, input_model=AskUserInput, read_only=True,
              timeout_s=PERSON_TIMEOUT_S, risk=Risk.LOW):
    label = "Ask you"
    description = (
        "Ask the person a question when you cannot go on without their decision (which of two designs, "
        "whether to touch a file they care about). Give choices when the answers are few. The answer comes "
        "back as the result; if nobody can answer, the result says so."
    )

    async def _run(self, args: AskUserInput, ctx: ToolContext) -> ToolResult:
        answer = await _person(ctx).ask(ctx.session_id, ctx.call_id, "question", args.question,
                                        choices=args.choices, abort=ctx.abort, meta=ctx.labels)
        if not answer.answered:
            return _no_answer(answer, "question")
        return ToolResult.text(f"The person answered: {answer.text}", answered=True, answer=answer.text,
                               by=answer.by)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        fields = [CallField("Question", value_text(raw.get("question", "")))]
        if isinstance(raw.get("choices"), list) and raw["choices"]:
            fields.append(CallField("Choices", value_text(" · ".join(map(str, raw["choices"])))))
        return tuple(fields)

    def summarize(self, raw: dict[str, Any]) -> str:
        q = str(raw.get("question", ""))
        return f"ask_user: {q[:80]}"


class ExitPlanModeInput(ToolInput):
    plan: str = Field(min_length=1, max_length=100_000,
                      description="The plan in Markdown: what you will change, in which files, and how you "
                                  "will check it.")


class ExitPlanMode(BuiltinTool, name="exit_plan_mode", group=PERSON_GROUP, input_model=ExitPlanModeInput,
                   read_only=True, timeout_s=PERSON_TIMEOUT_S, risk=Risk.LOW):
    label = "Propose a plan"
    description = (
        "In plan mode, when your plan is ready: send it (Markdown) for the person to review. If they approve "
        "it, the session leaves plan mode and you carry it out; if they reject it, their note comes back."
    )

    async def _run(self, args: ExitPlanModeInput, ctx: ToolContext) -> ToolResult:
        if ctx.labels.get("subagent"):  # never offered to a child; refused here too
            raise Refusal("a sub-agent cannot leave plan mode: only the session that started it can, with the "
                          "person's approval", ["report your findings as your final answer"])
        person = _person(ctx)
        if person.policy.mode_for(ctx.session_id) is not PermissionMode.PLAN:
            raise Refusal("the session is not in plan mode, so there is no plan to approve",
                          ["go on with the work; ask_user if you need the person's decision"])
        answer = await person.ask(ctx.session_id, ctx.call_id, "plan", args.plan, abort=ctx.abort, meta=ctx.labels)
        if not answer.answered:
            return _no_answer(answer, "plan")
        if answer.approved:
            return ToolResult.text(f"The person approved the plan; the session is now in mode {answer.mode}. "
                                   "Carry it out." + (f" Their note: {answer.note}" if answer.note else ""),
                                   approved=True, mode=answer.mode)
        return ToolResult.text(
            "The person rejected the plan; you are still in plan mode. Their note: "
            f"{answer.note or '(none)'}. Revise the plan and send it again with exit_plan_mode.",
            approved=False, note=answer.note)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        return (CallField("Plan", value_text(raw.get("plan", ""))),)

    def summarize(self, raw: dict[str, Any]) -> str:
        first = str(raw.get("plan", "")).strip().splitlines()
        return f"exit_plan_mode: {first[0][:80]}" if first else "exit_plan_mode"
