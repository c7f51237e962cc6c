"""Skills: folders with a SKILL.md (YAML front matter with a name and a description, as Claude Code's) in a
project's `.agent-desk/skills/` and in the user's skills folder. Their names and descriptions go into the
system prompt; the `skill` tool loads one's body on demand. A project skill's files are in the workspace
already (`/workspace/.agent-desk/skills/NAME/`, read-only like every control folder); a user skill's files
are copied into the sandbox's /tmp when it is loaded. A skill is text for the model: its `allowed-tools`
are not honoured, and every call it leads to is judged by the policy like any other."""

from __future__ import annotations

import base64
import os
import re
import stat
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import Field

from ..core import ConfigError, Tool, ToolContext, ToolInput, ToolResult, list_beneath, read_beneath
from ._common import BuiltinTool, Refusal

PROJECT_SKILLS = ".agent-desk/skills"
SKILL_FILE = "SKILL.md"
USER_SKILLS_IN_SANDBOX = "/tmp/agent-desk/skills"  # where a user skill's files are copied when it is loaded
MAX_SKILL_BYTES = 256 * 1024  # per file, SKILL.md included
MAX_SKILL_FILES = 64
MAX_COPY_BYTES = 4 * 1024 * 1024
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,63}$")
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
IGNORED_KEYS = ("allowed-tools", "allowed_tools", "permissions")


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its name and description (for the prompt), its body (for the `skill` tool), and where its
    files are on the host and in the sandbox."""

    name: str
    description: str
    body: str
    source: str  # project | user
    host_dir: str
    sandbox_dir: str
    files: tuple[str, ...] = ()  # paths relative to the skill's folder, SKILL.md excluded
    ignored: tuple[str, ...] = ()  # front-matter keys that would widen permissions: not honoured


def parse_skill(text: str, where: str) -> tuple[str, str, str, tuple[str, ...]]:
    """(name, description, body, ignored keys) of a SKILL.md; ConfigError naming `where` when it is wrong."""
    m = _FRONT.match(text)
    if m is None:
        raise ConfigError(f"{where}: SKILL.md must start with YAML front matter between --- lines",
                          hint="---\nname: my-skill\ndescription: what it is for and when to use it\n---")
    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError as e:
        raise ConfigError(f"{where}: the front matter is not valid YAML: {e}") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{where}: the front matter must be a mapping with name and description")
    name, desc = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(f"{where}: name must be lowercase letters, digits and hyphens (at most 64)")
    if not isinstance(desc, str) or not desc.strip() or len(desc) > 1024:
        raise ConfigError(f"{where}: description must be a non-empty string of at most 1024 characters")
    ignored = tuple(k for k in IGNORED_KEYS if k in meta)
    return name, " ".join(desc.split()), text[m.end():].strip(), ignored


@dataclass(slots=True)
class SkillCatalog:
    """The skills found, by name (a project's wins over the user's of the same name), and the problems."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def prompt(self) -> str:
        """The lines for the system prompt, or "" when there is no skill."""
        if not self.skills:
            return ""
        lines = ["Skills you can load with the skill tool when one fits the task (name: what it is for):"]
        lines += [f"- {s.name}: {s.description}" for s in sorted(self.skills.values(), key=lambda s: s.name)]
        return "\n".join(lines)

    def add_project(self, project_dir: str) -> None:
        for folder, body in self._folders(project_dir, PROJECT_SKILLS, "project"):
            self._add(body, folder, "project", os.path.join(project_dir, PROJECT_SKILLS, folder),
                      f"/workspace/{PROJECT_SKILLS}/{folder}", _project_files(project_dir, folder))

    def add_user(self, user_dir: str) -> None:
        parent, base = os.path.split(os.path.abspath(user_dir))
        for folder, body in self._folders(parent, base, "user"):
            host = os.path.join(parent, base, folder)
            self._add(body, folder, "user", host, f"{USER_SKILLS_IN_SANDBOX}/{folder}", _user_files(host))

    def _folders(self, root: str, rel: str, kind: str) -> list[tuple[str, str]]:
        found = []
        try:
            entries = list_beneath(root, rel) or []
        except (ConfigError, OSError) as e:
            self.problems.append(f"{kind} skills: {e}")
            return []
        for name, is_dir in entries:
            if not is_dir or name.startswith("."):
                continue
            try:
                data = read_beneath(root, f"{rel}/{name}/{SKILL_FILE}", limit=MAX_SKILL_BYTES)
            except ConfigError as e:
                self.problems.append(str(e))
                continue
            if data is not None:
                found.append((name, data.decode("utf-8", "replace")))
        return found

    def _add(self, text: str, folder: str, source: str, host_dir: str, sandbox_dir: str,
             files: tuple[str, ...]) -> None:
        try:
            name, desc, body, ignored = parse_skill(text, f"{source} skill {host_dir}/{SKILL_FILE}")
        except ConfigError as e:
            self.problems.append(str(e))
            return
        if source == "user" and name in self.skills:
            return  # the project's skill of the same name wins
        self.skills[name] = Skill(name, desc, body, source, host_dir, sandbox_dir, files, ignored)


def load_skills(project_dir: str | None, user_dir: str | None = None) -> SkillCatalog:
    """The project's skills, then the user's (blocking: call it off the event loop)."""
    catalog = SkillCatalog()
    if project_dir is not None:
        catalog.add_project(project_dir)
    if user_dir is not None and os.path.isdir(user_dir):
        catalog.add_user(user_dir)
    return catalog


def _project_files(project_dir: str, folder: str) -> tuple[str, ...]:
    out: list[str] = []

    def walk(rel: str, prefix: str) -> None:
        for name, is_dir in list_beneath(project_dir, rel) or []:
            if len(out) >= MAX_SKILL_FILES:
                return
            if is_dir:
                walk(f"{rel}/{name}", f"{prefix}{name}/")
            elif f"{prefix}{name}" != SKILL_FILE:
                out.append(f"{prefix}{name}")

    try:
        walk(f"{PROJECT_SKILLS}/{folder}", "")
    except (ConfigError, OSError):
        pass  # the listing is a courtesy: the files stay readable in the sandbox
    return tuple(out)


def _user_files(host_dir: str) -> tuple[str, ...]:
    """The regular files of a user skill, links left out (they could point anywhere on the host)."""
    out = []
    for dirpath, dirs, files in os.walk(host_dir, followlinks=False):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and not os.path.islink(os.path.join(dirpath, d)))
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, host_dir)
            if rel != SKILL_FILE and stat.S_ISREG(os.lstat(path).st_mode) and len(out) < MAX_SKILL_FILES:
                out.append(rel)
    return tuple(out)


def _read_user_file(host_dir: str, rel: str) -> bytes:
    fd = os.open(os.path.join(host_dir, rel), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{rel} is not a regular file")
        data = f.read(MAX_SKILL_BYTES + 1)
    if len(data) > MAX_SKILL_BYTES:
        raise OSError(f"{rel} is over {MAX_SKILL_BYTES} bytes")
    return data


_COPY = 'umask 022; mkdir -p -- "$(dirname -- "$1")" && printf %s "$2" | base64 -d > "$1" && chmod a-w -- "$1"'


class SkillInput(ToolInput):
    name: str = Field(min_length=1, max_length=64, description="The skill's name, as listed in the system prompt.")


class SkillTool(BuiltinTool, name="skill", group="group:skills", input_model=SkillInput, read_only=True):
    # read_only: it reads the skill and copies a user skill's files into the sandbox's own /tmp; nothing of
    # the person's changes, and no permission comes with a skill.
    description = "Load a skill by name: its instructions, and where its files are in the sandbox."

    def __init__(self, catalog: SkillCatalog) -> None:
        self.catalog = catalog

    async def _run(self, args: Any, ctx: ToolContext) -> ToolResult:
        skill = self.catalog.skills.get(args.name)
        if skill is None:
            names = ", ".join(sorted(self.catalog.skills)) or "none"
            raise Refusal(f"there is no skill {args.name!r}", [f"Skills: {names}"])
        copied = await self._copy(skill, ctx) if skill.source == "user" and skill.files else []
        lines = [f"# Skill {skill.name}", "", skill.body, ""]
        if skill.files:
            lines.append(f"Its files are in the sandbox at {skill.sandbox_dir}/: " + ", ".join(skill.files))
        if skill.ignored:
            lines.append(f"(Its {', '.join(skill.ignored)} is not honoured: a skill never changes permissions.)")
        return ToolResult.text("\n".join(lines).strip(), skill=skill.name, source=skill.source,
                               sandbox_dir=skill.sandbox_dir, files=list(skill.files), copied=copied,
                               ignored=list(skill.ignored))

    async def _copy(self, skill: Skill, ctx: ToolContext) -> list[str]:
        """Copy a user skill's files into the sandbox's /tmp (each file read without following a link)."""
        if ctx.sandbox is None:
            raise Refusal("no sandbox is attached, so the skill's files cannot be copied")
        copied, total = [], 0
        for rel in skill.files:
            try:
                data = _read_user_file(skill.host_dir, rel)
            except OSError as e:
                raise Refusal(f"cannot read the skill's file {rel}: {e}") from None
            total += len(data)
            if total > MAX_COPY_BYTES:
                raise Refusal(f"the skill's files are over {MAX_COPY_BYTES} bytes together")
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
