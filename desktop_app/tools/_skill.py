"""The `skill` tool: loads one skill's body on demand (the catalog is core's `SkillCatalog`, read by the
runtime), and copies a user skill's files into the sandbox's /tmp; a project skill's files are already in
the workspace's read-only control folder. No permission comes with a skill."""

from __future__ import annotations

import base64
from typing import Any

from pydantic import Field

from ..core import CallField, Skill, SkillCatalog, Tool, ToolContext, ToolInput, ToolResult, value_text
from ._common import BuiltinTool, Refusal

_COPY = 'umask 022; mkdir -p -- "$(dirname -- "$1")" && printf %s "$2" | base64 -d > "$1" && chmod a-w -- "$1"'


class SkillInput(ToolInput):
    name: str = Field(min_length=1, max_length=64, description="The skill's name, as listed in the system prompt.")


class SkillTool(BuiltinTool, name="skill", group="group:skills", input_model=SkillInput, read_only=True):
    # read_only: it reads the skill and copies a user skill's files into the sandbox's own /tmp; nothing of
    # the person's changes, and no permission comes with a skill.
    label = "Load a skill"
    description = "Load a skill by name: its instructions, and where its files are in the sandbox."

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        return (CallField("Skill", value_text(raw.get("name", "?"))),)

    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog

    async def _run(self, args: Any, ctx: ToolContext) -> ToolResult:
        skill = self.catalog.skills.get(args.name)
        if skill is None:
            names = ", ".join(sorted(self.catalog.skills)) or "none"
            raise Refusal(f"there is no skill {args.name!r}", [f"Skills: {names}"])
        copied = await _copy(skill, ctx) if skill.contents else []
        lines = [f"# Skill {skill.name}", "", skill.body, ""]
        if skill.files:
            lines.append(f"Its files are in the sandbox at {skill.sandbox_dir}/: " + ", ".join(skill.files))
        if skill.ignored:
            lines.append(f"(Its {', '.join(skill.ignored)} is not honoured: a skill never changes permissions.)")
        return ToolResult.text("\n".join(lines).strip(), skill=skill.name, source=skill.source,
                               sandbox_dir=skill.sandbox_dir, files=list(skill.files), copied=copied,
                               ignored=list(skill.ignored))


async def _copy(skill: Skill, ctx: ToolContext) -> list[str]:
    """Write a user skill's files (read by the runtime) into the sandbox's /tmp, read-only."""
    if ctx.sandbox is None:
        raise Refusal("no sandbox is attached, so the skill's files cannot be copied")
    copied = []
    for rel, data in zip(skill.files, skill.contents, strict=True):
        dest = f"{skill.sandbox_dir}/{rel}"
        res = await ctx.sandbox.exec(["sh", "-c", _COPY, "sh", dest, base64.b64encode(data).decode()],
                                     timeout=ctx.remaining(30.0))
        if res.exit_code != 0:
            raise Refusal(f"cannot copy {rel} into the sandbox: {(res.stderr or res.stdout).strip()[:200]}")
        copied.append(dest)
    return copied


def skill_tools(catalog: SkillCatalog) -> list[Tool]:
    """The `skill` tool over `catalog`, or nothing when there is no skill to load."""
    return [SkillTool(catalog)] if catalog.skills else []
