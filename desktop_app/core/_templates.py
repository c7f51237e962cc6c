"""Agent templates: a named system prompt, tool list, permission narrowing and model, and the policy that
applies one on top of the person's (`NarrowedPolicy`). A template only ever narrows: no allow rules, and its
mode is judged beside the person's mode, the stricter decision winning.

A template file is TOML, `.agent-desk/templates/NAME.toml` in a project or `NAME.toml` in the user's templates
folder:

    description = "Read the code and answer; change nothing"
    system_prompt = "You explore the code base ..."
    tools = ["@read_only"]            # tool names, groups (group:fs), @read_only or "*"; or profile = "minimal"
    model = "claude-haiku-4-5"        # optional; default: the desk's model
    [permissions]
    mode = "read-only"                # optional; judged beside the project's mode, never instead of it
    deny = ["bash_run(curl *)"]
    ask = ["fs_write(src/**)"]
    always_ask = ["bash_run"]         # tools that always need a person's approval
"""

from __future__ import annotations

import hashlib
import os
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._errors import ConfigError
from ._names import name_refusal
from ._record import Provenance, highest_risk
from ._registry import PROFILES
from ._safe_files import list_beneath, read_beneath
from ._tool import Tool
from .policy import ACTION_RANK, Action, PermissionMode, PermissionPolicy, PolicyDecision, Rule, RuleSet, ToolFacts

PROJECT_TEMPLATES = ".agent-desk/templates"  # relative to the project folder
TEMPLATE_SUFFIX = ".toml"
MAX_TEMPLATE_BYTES = 64 * 1024
DEFAULT_TEMPLATE = "coding"
_KEYS = {"name", "description", "system_prompt", "tools", "profile", "model", "permissions"}
_PERMISSION_KEYS = {"mode", "deny", "ask", "always_ask"}


@dataclass(frozen=True, slots=True)
class AgentTemplate:
    """What an agent is made of besides its conversation. `tools` is a profile's spec (names, groups,
    `@read_only`, `*`); `rules` are deny and ask rules only; `mode` narrows, it never replaces."""

    name: str
    description: str = ""
    system_prompt: str = ""
    tools: frozenset[str] = frozenset({"*"})
    mode: PermissionMode | None = None
    rules: tuple[Rule, ...] = ()
    model: str = ""
    source: str = "built-in"  # built-in | user:<path> | project:<path>

    def admits(self, tool: Tool) -> bool:
        """Whether this template offers `tool` (the runtime's own profile has already chosen among all)."""
        spec = self.tools
        return ("*" in spec or tool.name in spec or tool.group in spec
                or ("@read_only" in spec and tool.trusted_read_only))

    @property
    def narrows(self) -> bool:
        return self.mode is not None or bool(self.rules)

    def summary(self) -> str:
        """One line for a picker: what it offers and how it narrows."""
        tools = ", ".join(sorted(self.tools))
        mode = f"; mode {self.mode.value}" if self.mode else ""
        rules = f"; {len(self.rules)} rule(s)" if self.rules else ""
        return f"{self.description or self.name} (tools: {tools}{mode}{rules})"


EXPLORE_PROMPT = (
    "You are an explorer: search and read the project to answer the task you were given. Change nothing. "
    "Report what you found concisely, with the paths and line numbers that matter."
)
REVIEW_PROMPT = (
    "You are a reviewer: read the code the task names and report bugs, risks and unclear parts, most "
    "important first, each with its path and line. Change nothing."
)

BUILTIN_TEMPLATES: dict[str, AgentTemplate] = {
    t.name: t for t in (
        # every tool the project offers (its profile chose them), under the project's permissions as they are
        AgentTemplate("coding", "Reads, edits and runs commands, asking as the project's permissions say"),
        AgentTemplate("read-only review", "Reviews code and reports findings; changes nothing",
                      system_prompt=REVIEW_PROMPT, tools=frozenset({"@read_only"}), mode=PermissionMode.READ_ONLY),
        AgentTemplate("explore", "Searches and reads the project to answer a question; changes nothing",
                      system_prompt=EXPLORE_PROMPT, tools=frozenset({"@read_only"}), mode=PermissionMode.READ_ONLY),
    )
}


def template_from_text(text: str, name: str, source: str) -> AgentTemplate:
    """A template from its TOML text; ConfigError says what is wrong, naming `source`."""
    where = f"{source}: "
    try:
        data = tomllib.loads(text)
    except (tomllib.TOMLDecodeError, RecursionError) as e:
        raise ConfigError(f"{where}the template is not valid TOML: {e}") from None
    unknown = set(data) - _KEYS
    if unknown:
        raise ConfigError(f"{where}unknown template key(s): {', '.join(sorted(unknown))}",
                          hint=f"a template may set {', '.join(sorted(_KEYS))}")
    perms = data.get("permissions", {})
    if not isinstance(perms, dict):
        raise ConfigError(f"{where}permissions must be a table")
    return AgentTemplate(
        name=_text(data, "name", where) or name,
        description=_text(data, "description", where),
        system_prompt=_text(data, "system_prompt", where),
        tools=_tools(data, where),
        mode=_mode(perms, where),
        rules=_rules(perms, source, where),
        model=_text(data, "model", where),
        source=source,
    )


def _text(data: Mapping[str, Any], key: str, where: str) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise ConfigError(f"{where}{key} must be a string")
    return value.strip() if key not in ("system_prompt", "name") else value  # a name is judged as written


def _tools(data: Mapping[str, Any], where: str) -> frozenset[str]:
    if "tools" in data and "profile" in data:
        raise ConfigError(f"{where}set tools or profile, not both")
    if "profile" in data:
        profile = data["profile"]
        if profile not in PROFILES:
            raise ConfigError(f"{where}unknown tool profile {profile!r}", hint=f"one of {', '.join(PROFILES)}")
        return PROFILES[profile]
    tools = data.get("tools", ["*"])
    if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
        raise ConfigError(f"{where}tools must be a list of tool names, groups, \"@read_only\" or \"*\"")
    return frozenset(tools)


def _mode(perms: Mapping[str, Any], where: str) -> PermissionMode | None:
    unknown = set(perms) - _PERMISSION_KEYS
    if "allow" in unknown:
        raise ConfigError(f"{where}a template cannot allow: it only narrows the project's permissions",
                          hint="use deny, ask or always_ask; allow rules belong in your own rules")
    if unknown:
        raise ConfigError(f"{where}unknown permissions key(s): {', '.join(sorted(unknown))}",
                          hint=f"one of {', '.join(sorted(_PERMISSION_KEYS))}")
    mode = perms.get("mode")
    if mode is None:
        return None
    try:
        return PermissionMode(mode)
    except ValueError:
        raise ConfigError(f"{where}unknown permission mode {mode!r}",
                          hint=f"one of {', '.join(m.value for m in PermissionMode)}") from None


def _rules(perms: Mapping[str, Any], source: str, where: str) -> tuple[Rule, ...]:
    rules = RuleSet._from_data({"deny": perms.get("deny", []), "ask": perms.get("ask", [])},
                               f"template:{source}", where=where).rules
    always = perms.get("always_ask", [])
    if not isinstance(always, list) or not all(isinstance(t, str) and t.strip() for t in always):
        raise ConfigError(f"{where}always_ask must be a list of tool names")
    for name in always:
        if "(" in name:
            raise ConfigError(f"{where}always_ask names whole tools: {name!r}", hint="put patterns in ask")
        rules.append(Rule.parse(name, Action.ASK, f"template:{source}"))
    return tuple(rules)


@dataclass(frozen=True, slots=True)
class TemplateFile:
    """One template file as read: where it is (relative to the folder's root), its bytes and the template."""

    rel: str
    data: bytes
    template: AgentTemplate

    @property
    def digest(self) -> str:
        """What a project template's approval is bound to: the file's bytes."""
        return template_digest(self.data)


def template_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_template_folder(root: str | os.PathLike[str], rel: str, kind: str) -> tuple[list[TemplateFile], list[str]]:
    """Every NAME.toml of `root/rel`, read without following links, and the problems (each file fails alone)."""
    try:
        entries = list_beneath(root, rel) or []
    except (ConfigError, OSError) as e:
        return [], [f"{kind} templates: {e}"]
    found, problems = [], []
    for entry, is_dir in sorted(entries):
        if is_dir or not entry.endswith(TEMPLATE_SUFFIX) or entry.startswith("."):
            continue
        path = f"{rel}/{entry}"
        try:
            data = read_beneath(root, path, limit=MAX_TEMPLATE_BYTES)
            if data is None:
                continue
            t = template_from_text(data.decode("utf-8"), entry[: -len(TEMPLATE_SUFFIX)],
                                   f"{kind}:{os.path.join(root, path)}")
        except (ConfigError, UnicodeDecodeError) as e:
            problems.append(str(e))
            continue
        found.append(TemplateFile(path, data, t))
    return found, problems


@dataclass(slots=True)
class TemplateCatalog:
    """Built-in, user and project templates by name (the user's replaces the built-in one of the same name; a
    project's only adds, it never replaces one), and what could not be read (each template fails alone). A
    project template is offered only once the person approved its file as it is: until then it is `waiting`
    (named, never picked nor run); one whose name is refused (core/_names.py) is not loaded at all."""

    templates: dict[str, AgentTemplate] = field(default_factory=lambda: dict(BUILTIN_TEMPLATES))
    problems: list[str] = field(default_factory=list)
    waiting: dict[str, AgentTemplate] = field(default_factory=dict)

    def get(self, name: str | None) -> AgentTemplate:
        name = name or DEFAULT_TEMPLATE
        if name in self.waiting:
            raise ConfigError(f"the project template {name!r} is not approved (new, or changed since you approved "
                              f"it): it is not offered", hint=f"review it in the window's banner, or run: "
                              f"agent-desk consent approve --kind template {name}")
        try:
            return self.templates[name]
        except KeyError:
            raise ConfigError(f"there is no agent template {name!r}",
                              hint=f"choose one of: {', '.join(sorted(self.templates))}") from None

    @property
    def names(self) -> list[str]:
        return sorted(self.templates)

    def add_folder(self, root: str | os.PathLike[str], rel: str, kind: str,
                   approved: Mapping[str, str] | None = None) -> None:
        """Read every NAME.toml of `root/rel` without following links; a bad one is a problem, not a failure.
        A project template is added when `approved` (name -> the digest the person approved) matches its file,
        else it waits."""
        found, problems = read_template_folder(root, rel, kind)
        self.problems += problems
        for f in found:
            t = f.template
            if kind == "project":
                why = self.project_refusal(t)
                if why is not None:
                    self.problems.append(f"{t.source}: {why}")
                elif (approved or {}).get(t.name) == f.digest:
                    self.templates[t.name] = t
                else:
                    self.waiting[t.name] = t
                    self.problems.append(f"{t.source}: the project template {t.name!r} is not approved (new, or "
                                         f"changed since you approved it): not offered; review it with: agent-desk "
                                         f"consent approve --kind template {t.name}")
                continue
            self.templates[t.name] = t

    def project_refusal(self, t: AgentTemplate) -> str | None:
        """Why a project template is not loaded, or None: a refused name, a name taken, a second of a name."""
        if t.name in self.templates:
            # workspace content may add templates, never replace the person's or a built-in one silently
            return (f"ignored: it would replace the {self.templates[t.name].source} template {t.name!r}; give it "
                    f"another name")
        if t.name in self.waiting:
            return f"ignored: a second project template named {t.name!r}"
        return name_refusal(t.name, self.templates, what="template name")


def load_templates(project_dir: str | os.PathLike[str] | None,
                   user_dir: str | os.PathLike[str] | None = None,
                   approved: Mapping[str, str] | None = None) -> TemplateCatalog:
    """The built-in templates, then the user's folder, then the project's `.agent-desk/templates/` (those the
    person approved, by name -> digest of the file; the others wait)."""
    catalog = TemplateCatalog()
    if user_dir is not None and os.path.isdir(user_dir):
        parent, name = os.path.split(os.path.abspath(user_dir))  # list_beneath takes a root and a folder
        catalog.add_folder(parent, name, "user")
    if project_dir is not None:
        catalog.add_folder(project_dir, PROJECT_TEMPLATES, "project", approved)
    return catalog


# the policy a template narrows ---------------------------------------------------------------------------
_STRICTER_MODES = (PermissionMode.STRICT, PermissionMode.READ_ONLY)  # modes with nobody to ask


class NarrowedPolicy:
    """The person's policy with a template on top. Every call is judged twice, by the person's policy as it
    is and by the same rules plus the template's deny/ask rules under the template's mode (the person's when
    it names none); the stricter decision wins, so the result is never wider than the person's. Rules
    added while it runs ("allow for this session") go to the person's policy."""

    def __init__(self, base: PermissionPolicy | NarrowedPolicy, template: AgentTemplate) -> None:
        self.base = base
        self.template = template

    @property
    def mode(self) -> PermissionMode:
        return self.base.mode

    @property
    def rules(self) -> list[Rule]:
        return [*self.base.rules, *self.template.rules]

    def rules_for(self, session_id: str | None) -> list[Rule]:
        return [*self.base.rules_for(session_id), *self.template.rules]

    def add_rule(self, rule: Rule, *, session_id: str | None = None) -> None:
        self.base.add_rule(rule, session_id=session_id)

    def mode_for(self, session_id: str | None) -> PermissionMode:
        return self.base.mode_for(session_id)

    def set_session_mode(self, session_id: str, mode: PermissionMode | str | None) -> None:
        self.base.set_session_mode(session_id, mode)

    def plan_refusal(self, tool: ToolFacts, input: dict[str, Any], session_id: str | None) -> PolicyDecision | None:
        """Plan mode is the person's (the session's own mode): a template never lifts it."""
        return self.base.plan_refusal(tool, input, session_id)

    def judges_inline(self, input: dict[str, Any]) -> bool:
        return False  # judged twice, with a policy built per call: a worker thread's work

    def paths_to_resolve(self, tool: ToolFacts, input: dict[str, Any]) -> list[str]:
        return self.base.paths_to_resolve(tool, input)

    def evaluate(self, tool: ToolFacts, input: dict[str, Any], *, session_id: str | None = None,
                 resolved: Mapping[str, str] | None = None) -> PolicyDecision:
        person = self.base.evaluate(tool, input, session_id=session_id, resolved=resolved)
        mode = self.template.mode or self.mode_for(session_id)
        mine = PermissionPolicy(mode, RuleSet(self.rules_for(session_id)))
        narrowed = mine.evaluate(tool, input, session_id=None, resolved=resolved)
        if ACTION_RANK[narrowed.action] <= ACTION_RANK[person.action]:
            return person
        prov = narrowed.provenance
        tagged = Provenance(prov.kind, prov.detail, source=prov.source or f"template {self.template.name}",
                            decision=prov.decision, elapsed_ms=prov.elapsed_ms)
        return PolicyDecision(narrowed.action, tagged, f"{narrowed.reason} (template {self.template.name})",
                              highest_risk(person.risk, narrowed.risk))

    def resolve_ask(self, decision: PolicyDecision, session_id: str | None = None) -> PolicyDecision:
        """An ask is a deny where either the person's mode (the session's own) or the template's asks nobody."""
        decision = self.base.resolve_ask(decision, session_id)
        if self.template.mode in _STRICTER_MODES:
            return PermissionPolicy(self.template.mode).resolve_ask(decision)
        return decision


def effective_tools(template: AgentTemplate, offered: Iterable[Tool]) -> list[Tool]:
    """The tools an agent of `template` is offered: those both the runtime offers and the template admits."""
    return [t for t in offered if template.admits(t)]
