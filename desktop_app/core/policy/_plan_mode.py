"""Plan mode's judgement: while planning only what reads runs (a trusted read-only tool, the person's tools,
the todo list, a command every part of which only reads)."""

from __future__ import annotations

from typing import Any

from .._record import Provenance, Risk
from ._control import control_targets
from ._evaluators import unanalysable
from ._matching import analysed
from ._risk import assess_command
from ._rules import (
    COMMAND_TOOLS,
    HARMLESS_GROUPS,
    PERSON_GROUP,
    PERSON_TOOLS,
    Action,
    PermissionMode,
    PolicyDecision,
    ToolFacts,
)
from ._shell_model import ShellAnalysis


def plan_denial(why: str) -> PolicyDecision:
    return PolicyDecision(Action.DENY, Provenance("mode", PermissionMode.PLAN.value, decision="deny"),
                          f"plan mode: only read-only tools run, and {why}. Finish the plan with "
                          "exit_plan_mode(plan); the person decides when changes start", Risk.MEDIUM)


_PLAN_NEVER = frozenset({"env", "command", "printenv"})  # leak the environment; what writes or runs is in the table


def talks_to_person(tool: ToolFacts) -> bool:
    """ask_user and exit_plan_mode: another tool that calls its group group:person gains nothing by it."""
    return tool.group == PERSON_GROUP and tool.name in PERSON_TOOLS


def plan_mode_blocker(tool: ToolFacts, input: dict[str, Any]) -> str | None:
    """Why `tool` may not run while planning ("" never: None when it may). A tool runs when it is trusted
    to only read, talks to the person, or keeps the session's todo list; a command when every part of it
    only reads, writes no file, sets no variable and uses no option that writes or runs."""
    if talks_to_person(tool) or tool.group in HARMLESS_GROUPS:
        return None
    command = input.get("command")
    if tool.name in COMMAND_TOOLS and isinstance(command, str):
        return _plan_command_blocker(analysed(command))
    if tool.read_only:
        return None
    return f"{tool.name} can change things"


def _plan_command_blocker(a: ShellAnalysis) -> str | None:
    if not a.analysable:
        return unanalysable(a)
    risk, why = assess_command(a)
    if risk is not Risk.LOW:
        return f"the command {why}"
    if a.writes or control_targets(a)[0]:
        return "the command writes a file"
    for c in a.commands:
        if c.env:
            return f"the command sets {c.env[0].split('=', 1)[0]}"
        if c.background:
            return "the command runs in the background"
        if c.program in _PLAN_NEVER:
            return f"{c.program} is not run while planning"
    return None
