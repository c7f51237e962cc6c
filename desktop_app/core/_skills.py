"""Skills as data: folders with a SKILL.md (YAML front matter with a name and a description, as Claude Code's)
in a project's `.agent-desk/skills/` and in the user's skills folder, read without following links. A project
skill's files are in the workspace already (`/workspace/.agent-desk/skills/NAME/`); a user skill's files are
read here (bounded) so that the `skill` tool can copy them into the sandbox. A skill is text for the model: its
`allowed-tools` is not honoured."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass, field

import yaml

from ._errors import ConfigError
from ._names import name_refusal
from ._safe_files import list_beneath, read_beneath

PROJECT_SKILLS = ".agent-desk/skills"
SKILL_FILE = "SKILL.md"
USER_SKILLS_IN_SANDBOX = "/tmp/agent-desk/skills"  # where a user skill's files are copied when it is loaded
MAX_SKILL_BYTES = 256 * 1024  # per file, SKILL.md included
MAX_SKILL_FILES = 64
MAX_COPY_BYTES = 4 * 1024 * 1024  # a user skill's files together
_NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,63}")
DEFAULT_MAX_SKILLS = 50  # skills named in the system prompt (Settings.skills_max)
DEFAULT_MAX_PROMPT_BYTES = 64 * 1024  # their lines in the system prompt together (Settings.skills_max_prompt_bytes)
_NAMED_LEFT_OUT = 100  # skills named in the notice of those left out; the rest are counted
_FRONT = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.S)
IGNORED_KEYS = ("allowed-tools", "allowed_tools", "permissions")


@dataclass(frozen=True, slots=True)
class Skill:
    """One skill: its name and description (for the prompt), its body (for the `skill` tool), where its files
    are in the sandbox, and (a user skill's) their bytes to copy there."""

    name: str
    description: str
    body: str
    source: str  # project | user
    host_dir: str
    sandbox_dir: str
    files: tuple[str, ...] = ()  # paths relative to the skill's folder, SKILL.md excluded
    ignored: tuple[str, ...] = ()  # front-matter keys that would widen permissions: not honoured
    contents: tuple[bytes, ...] = field(default=(), repr=False)  # a user skill's files, as `files` orders them


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
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(f"{where}: name must be lowercase letters, digits and hyphens (at most 64)")
    if not isinstance(desc, str) or not desc.strip() or len(desc) > 1024:
        raise ConfigError(f"{where}: description must be a non-empty string of at most 1024 characters")
    ignored = tuple(k for k in IGNORED_KEYS if k in meta)
    return name, " ".join(desc.split()), text[m.end():].strip(), ignored


@dataclass(frozen=True, slots=True)
class SkillSet:
    """A project's skills as read, for the one approval that covers them all: each folder's SKILL.md text,
    what could not be read, and the digest the approval is bound to (None: no skill folder)."""

    folders: tuple[tuple[str, str], ...]  # (folder, SKILL.md text), by folder name
    problems: tuple[str, ...] = ()

    @property
    def digest(self) -> str | None:
        if not self.folders:
            return None
        h = hashlib.sha256()
        for folder, text in self.folders:
            h.update(folder.encode() + b"\0" + hashlib.sha256(text.encode()).hexdigest().encode() + b"\0")
        return h.hexdigest()

    def text(self) -> str:
        """What the person reviews: every SKILL.md, each under its folder's name."""
        return "".join(f"# ---- {PROJECT_SKILLS}/{folder}/{SKILL_FILE} ----\n{body.rstrip()}\n"
                       for folder, body in self.folders)


def read_project_skills(project_dir: str) -> SkillSet:
    """The project's `.agent-desk/skills/*/SKILL.md`, read without following links (blocking)."""
    catalog = SkillCatalog()
    folders = catalog._folders(project_dir, PROJECT_SKILLS, "project")
    return SkillSet(tuple(sorted(folders)), tuple(catalog.problems))


@dataclass(slots=True)
class SkillCatalog:
    """The skills found, by name (a project's never replaces the user's of the same name), and the problems.
    The project's are added only when the person approved the set as it is (`waiting` counts them until
    then); `limit` keeps what the prompt may name and `left_out` names the rest."""

    skills: dict[str, Skill] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    waiting: int = 0  # project skills not approved (new, or changed since the approval)
    left_out: list[str] = field(default_factory=list)  # skills over the prompt's limits, not offered

    def prompt(self) -> str:
        """The lines for the system prompt, or "" when there is no skill."""
        if not self.skills:
            return ""
        return "\n".join([_PROMPT_HEAD, *(_prompt_line(s) for s in sorted(self.skills.values(),
                                                                              key=lambda s: s.name))])

    def add_project(self, project_dir: str, approved: str | None = None) -> None:
        """Add the project's skills when `approved` is the digest of the set as it is now; else they wait."""
        found = read_project_skills(project_dir)
        self.problems += found.problems
        if found.digest is None:
            return
        if found.digest != approved:
            self.waiting = len(found.folders)
            self.problems.append(f"the project's {self.waiting} skill(s) in {project_dir}/{PROJECT_SKILLS} are not "
                                 f"approved (new, or changed since you approved them): not offered; review them "
                                 f"with: agent-desk consent approve --kind skills")
            return
        mine = list(self.skills)
        for folder, text in found.folders:
            why = name_refusal(folder, mine, what="skill folder")
            if why is not None:
                self.problems.append(f"project skill {project_dir}/{PROJECT_SKILLS}/{folder}: {why}")
                continue
            files = _files(project_dir, f"{PROJECT_SKILLS}/{folder}")
            self._add(text, "project", os.path.join(project_dir, PROJECT_SKILLS, folder),
                      f"/workspace/{PROJECT_SKILLS}/{folder}", files, (), mine)

    def limit(self, max_skills: int = DEFAULT_MAX_SKILLS, max_bytes: int = DEFAULT_MAX_PROMPT_BYTES) -> None:
        """Keep the skills the prompt may name: the person's first, then the project's, by name, up to
        `max_skills` and `max_bytes` of prompt lines; the others are left out (not offered) and named."""
        kept: dict[str, Skill] = {}
        size = len(_PROMPT_HEAD.encode()) + 1
        for s in sorted(self.skills.values(), key=lambda s: (s.source != "user", s.name)):
            line = len(_prompt_line(s).encode()) + 1
            if len(kept) < max_skills and size + line <= max_bytes:
                kept[s.name] = s
                size += line
            else:
                self.left_out.append(s.name)
        self.skills = kept
        if self.left_out:
            named = ", ".join(self.left_out[:_NAMED_LEFT_OUT])
            more = f" and {len(self.left_out) - _NAMED_LEFT_OUT} more" if len(self.left_out) > _NAMED_LEFT_OUT else ""
            self.problems.append(
                f"{len(self.left_out)} skill(s) left out of the prompt, over the limit of {max_skills} skills and "
                f"{max_bytes} bytes (settings skills_max, skills_max_prompt_bytes): {named}{more}")

    def add_user(self, user_dir: str) -> None:
        parent, base = os.path.split(os.path.abspath(user_dir))
        for folder, text in self._folders(parent, base, "user"):
            rel = f"{base}/{folder}"
            try:
                files = _files(parent, rel)
                contents = _contents(parent, rel, files)
            except ConfigError as e:
                self.problems.append(str(e))
                continue
            self._add(text, "user", os.path.join(parent, rel), f"{USER_SKILLS_IN_SANDBOX}/{folder}", files, contents)

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

    def _add(self, text: str, source: str, host_dir: str, sandbox_dir: str, files: tuple[str, ...],
             contents: tuple[bytes, ...], mine: list[str] | None = None) -> None:
        try:
            name, desc, body, ignored = parse_skill(text, f"{source} skill {host_dir}/{SKILL_FILE}")
        except ConfigError as e:
            self.problems.append(str(e))
            return
        why = name_refusal(name, mine, what="skill name") if mine is not None else None
        if why is not None:
            self.problems.append(f"{host_dir}: {why}")
            return
        if source == "project" and name in self.skills:  # workspace content adds, never replaces yours
            self.problems.append(f"{host_dir}: ignored: it would replace your skill {name!r}")
            return
        self.skills[name] = Skill(name, desc, body, source, host_dir, sandbox_dir, files, ignored, contents)


def load_skills(project_dir: str | None, user_dir: str | None = None, approved: str | None = None, *,
                max_skills: int = DEFAULT_MAX_SKILLS, max_bytes: int = DEFAULT_MAX_PROMPT_BYTES) -> SkillCatalog:
    """The user's skills, then the project's when `approved` is the digest of their set as it is now, within
    the prompt's limits (blocking: call it off the event loop)."""
    catalog = SkillCatalog()
    if user_dir is not None and os.path.isdir(user_dir):
        catalog.add_user(user_dir)
    if project_dir is not None:
        catalog.add_project(project_dir, approved)
    catalog.limit(max_skills, max_bytes)
    return catalog


_PROMPT_HEAD = "Skills you can load with the skill tool when one fits the task (name: what it is for):"


def _prompt_line(s: Skill) -> str:
    return f"- {s.name}: {s.description}"


def _files(root: str, rel: str) -> tuple[str, ...]:
    """A skill folder's regular files (links and dot-files left out), at most MAX_SKILL_FILES."""
    out: list[str] = []

    def walk(sub: str, prefix: str) -> None:
        for name, is_dir in list_beneath(root, sub) or []:
            if len(out) >= MAX_SKILL_FILES or name.startswith("."):
                continue
            if is_dir:
                walk(f"{sub}/{name}", f"{prefix}{name}/")
            elif f"{prefix}{name}" != SKILL_FILE and os.path.isfile(os.path.join(root, sub, name)) \
                    and not os.path.islink(os.path.join(root, sub, name)):
                out.append(f"{prefix}{name}")

    try:
        walk(rel, "")
    except OSError:
        pass  # the listing is a courtesy: a project skill's files stay readable in the sandbox
    return tuple(out)


def _contents(root: str, rel: str, files: tuple[str, ...]) -> tuple[bytes, ...]:
    """A user skill's files, each read without following a link; ConfigError past MAX_COPY_BYTES."""
    out, total = [], 0
    for f in files:
        data = read_beneath(root, f"{rel}/{f}", limit=MAX_SKILL_BYTES) or b""
        total += len(data)
        if total > MAX_COPY_BYTES:
            raise ConfigError(f"the user skill {os.path.join(root, rel)} is over {MAX_COPY_BYTES} bytes")
        out.append(data)
    return tuple(out)
