"""The rules and their vocabulary: a mode, an action, what the policy knows of a tool, a decision; a rule's
parsing; loading the user's rules and the project's `.agent-desk/rules.toml`."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from .._record import Provenance, Risk
from .._safe_files import read_beneath


class PermissionMode(StrEnum):
    ASK = "ask"
    ACCEPT_EDITS = "accept-edits"
    READ_ONLY = "read-only"
    AUTO = "auto"
    STRICT = "strict"
    PLAN = "plan"  # only read-only tools run, until the person approves the model's plan (exit_plan_mode)


class Action(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


ACTION_RANK = {Action.DENY: 3, Action.ASK: 2, Action.ALLOW: 1}
COMMAND_TOOLS = frozenset({"bash_run"})
HARMLESS_GROUPS = frozenset({"group:todo"})  # session state only: no files, no processes
# Tools that only talk to the person (ask_user, exit_plan_mode): the person is their gate, in every mode.
PERSON_GROUP = "group:person"
PERSON_TOOLS = frozenset({"ask_user", "exit_plan_mode"})  # the group counts only with these names
_RULE_RE = re.compile(r"^\s*([A-Za-z0-9_:\-*]+)\s*(?:\((.*)\))?\s*$", re.S)


@dataclass(slots=True, frozen=True)
class ToolFacts:
    """What the policy needs to know of a tool: not the tool itself, so rules can be tested without one."""

    name: str
    group: str = "group:custom"
    read_only: bool = False
    risk: Risk = Risk.LOW  # the tool's own floor: an MCP tool its server marks destructive is high


@dataclass(slots=True, frozen=True)
class Rule:
    action: Action
    target: str  # a tool name, a group ("group:fs") or "*"
    pattern: str | None = None
    source: str = ""  # e.g. "project:/path/.agent-desk/rules.toml", "user:...", "session", "cli"

    @classmethod
    def parse(cls, text: str, action: Action | str, source: str = "") -> Rule:
        m = _RULE_RE.match(text)
        if not m:
            raise ConfigError(
                f"cannot read the rule {text!r}",
                hint="write TOOL, TOOL(pattern) or group:NAME(pattern), e.g. bash_run(npm test *)",
            )
        pattern = m.group(2)
        if pattern is not None:
            pattern = pattern.strip()
        return cls(Action(action), m.group(1), pattern or None, source)

    @property
    def text(self) -> str:
        return f"{self.target}({self.pattern})" if self.pattern is not None else self.target

    def applies_to(self, tool: ToolFacts) -> bool:
        """The tool by name or group, every tool (`*`), or tools by name prefix (`mcp__server__*`)."""
        if self.target in ("*", tool.name, tool.group):
            return True
        return len(self.target) > 1 and self.target.endswith("*") and tool.name.startswith(self.target[:-1])


@dataclass(slots=True)
class PolicyDecision:
    action: Action
    provenance: Provenance
    reason: str
    risk: Risk = Risk.LOW

    @property
    def allowed(self) -> bool:
        return self.action is Action.ALLOW


@dataclass(slots=True)
class RuleSet:
    rules: list[Rule] = field(default_factory=list)
    mode: PermissionMode | None = None  # a mode named by a rules file, if any

    def extend(self, other: RuleSet) -> RuleSet:
        return RuleSet(self.rules + other.rules, other.mode or self.mode)

    @classmethod
    def from_toml(cls, path: Path, source: str) -> RuleSet:
        """The rules file at `path` (no file: no rules). ConfigError names the file and what is wrong."""
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return cls()
        except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read permission rules from {path}: {e}") from e
        except RecursionError:  # arrays nested thousands deep: a file the sandbox wrote must not crash the desk
            raise ConfigError(f"cannot read permission rules from {path}: nested too deeply") from None
        return cls._from_data(data, f"{source}:{path}", where=f"{path}: ")

    @classmethod
    def from_text(cls, text: str, source: str = "editor", *, where: str = "") -> RuleSet:
        """Rules from rules.toml text, e.g. the settings dialog's editor (ConfigError on bad input)."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"{where}the rules are not valid TOML: {e}") from e
        except RecursionError:
            raise ConfigError(f"{where}the rules are not valid TOML: nested too deeply") from None
        return cls._from_data(data, source, where=where)

    @classmethod
    def _from_data(cls, data: dict[str, Any], source: str, *, where: str = "") -> RuleSet:
        """A `[permissions]` table, or its keys at the top level."""
        perms = data.get("permissions", data)
        if not isinstance(perms, dict):
            raise ConfigError(f"{where}permissions must be a table, e.g. [permissions] allow = [...]")
        rules: list[Rule] = []
        for action in Action:
            entries = perms.get(action.value, [])
            if not isinstance(entries, list) or not all(isinstance(x, str) for x in entries):
                raise ConfigError(f"{where}permissions.{action.value} must be a list of strings")
            rules += [Rule.parse(t, action, source) for t in entries]
        mode = perms.get("mode")
        try:
            return cls(rules, PermissionMode(mode) if mode else None)
        except ValueError:
            raise ConfigError(
                f"{where}unknown permission mode {mode!r}",
                hint=f"one of {', '.join(m.value for m in PermissionMode)}",
            ) from None


PROJECT_RULES = ".agent-desk/rules.toml"  # relative to the project folder


def project_rules_path(project_dir: str | Path) -> Path:
    return Path(project_dir) / PROJECT_RULES


def read_project_rules(project_dir: str | Path) -> str | None:
    """The text of the project's rules file, or None when there is none. A link at the file, at
    `.agent-desk` or a FIFO there is refused (ConfigError): the sandbox can plant those."""
    data = read_beneath(project_dir, PROJECT_RULES)
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ConfigError(f"cannot read permission rules from {project_rules_path(project_dir)}: {e}") from e


def load_rules(project_dir: str | Path | None, user_rules: str | Path | None = None) -> RuleSet:
    """Rules from the user's settings, then the project's `.agent-desk/rules.toml` (its mode wins). The
    project's file is read without following links; whether it is trusted is the caller's question."""
    rs = RuleSet()
    if user_rules is not None:
        rs = rs.extend(RuleSet.from_toml(Path(user_rules), "user"))
    if project_dir is not None:
        text = read_project_rules(project_dir)
        if text is not None:
            path = project_rules_path(project_dir)
            rs = rs.extend(RuleSet.from_text(text, f"project:{path}", where=f"{path}: "))
    return rs



def rules_from_texts(texts: Iterable[tuple[str, str]], source: str) -> RuleSet:
    """Rules from (action, text) pairs, e.g. from CLI flags or a settings dialog."""
    return RuleSet([Rule.parse(t, a, source) for a, t in texts])
