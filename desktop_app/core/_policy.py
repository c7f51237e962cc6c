"""Permission policy: rules (allow / ask / deny over a tool or group, with an argument pattern) and a mode.

Precedence is deny > ask > allow > mode. A shell command is judged sub-command by sub-command.
"""

from __future__ import annotations

import json
import posixpath
import re
import time
import tomllib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any

from ._errors import ConfigError
from ._glob import glob_regex
from ._record import Provenance, Risk
from ._sandbox import WORKSPACE
from ._shell import parse_command


class PermissionMode(StrEnum):
    ASK = "ask"
    ACCEPT_EDITS = "accept-edits"
    READ_ONLY = "read-only"
    AUTO = "auto"
    STRICT = "strict"


class Action(StrEnum):
    ALLOW = "allow"
    ASK = "ask"
    DENY = "deny"


_RANK = {Action.DENY: 3, Action.ASK: 2, Action.ALLOW: 1}
COMMAND_TOOLS = frozenset({"bash_run"})
HARMLESS_GROUPS = frozenset({"group:todo"})  # session state only: no files, no processes
_RULE_RE = re.compile(r"^\s*([A-Za-z0-9_:\-*]+)\s*(?:\((.*)\))?\s*$", re.S)


@dataclass(slots=True, frozen=True)
class ToolFacts:
    """What the policy needs to know of a tool: not the tool itself, so rules can be tested without one."""

    name: str
    group: str = "group:custom"
    read_only: bool = False


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
        return self.target in ("*", tool.name, tool.group)


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
        return cls._from_data(data, f"{source}:{path}", where=f"{path}: ")

    @classmethod
    def from_text(cls, text: str, source: str = "editor") -> RuleSet:
        """Rules from rules.toml text, e.g. the settings dialog's editor (ConfigError on bad input)."""
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"the rules are not valid TOML: {e}") from e
        return cls._from_data(data, source)

    @classmethod
    def _from_data(cls, data: dict[str, Any], source: str, *, where: str = "") -> RuleSet:
        """A `[permissions]` table, or its keys at the top level."""
        perms = data.get("permissions", data)
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


def project_rules_path(project_dir: str | Path) -> Path:
    return Path(project_dir) / ".agent-desk" / "rules.toml"


def load_rules(project_dir: str | Path | None, user_rules: str | Path | None = None) -> RuleSet:
    """Rules from the user's settings, then the project's `.agent-desk/rules.toml` (its mode wins)."""
    rs = RuleSet()
    if user_rules is not None:
        rs = rs.extend(RuleSet.from_toml(Path(user_rules), "user"))
    if project_dir is not None:
        rs = rs.extend(RuleSet.from_toml(project_rules_path(project_dir), "project"))
    return rs


def append_rule_to_file(path: str | Path, rule: Rule) -> None:
    """Add one rule to a rules.toml, keeping what is there."""
    path = Path(path)
    existing = RuleSet.from_toml(path, "project") if path.exists() else RuleSet()
    by_action: dict[str, list[str]] = {a.value: [] for a in Action}
    for r in existing.rules:
        by_action[r.action.value].append(r.text)
    if rule.text not in by_action[rule.action.value]:
        by_action[rule.action.value].append(rule.text)
    lines = ["# Agent Desk permission rules: deny > ask > allow > mode.", "[permissions]"]
    if existing.mode:
        lines.append(f"mode = {json.dumps(existing.mode.value)}")
    for action, texts in by_action.items():
        body = ", ".join(json.dumps(t, ensure_ascii=False) for t in texts)
        lines.append(f"{action} = [{body}]")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.replace(path)


# pattern matching ---------------------------------------------------------------------------------
# Rules glob the way fs_glob does (`*`, `?`, `[...]`, `**`, `{a,b}`): one translation for both.
_glob_re = lru_cache(maxsize=1024)(glob_regex)


def normalize_path(path: str) -> str | None:
    """Workspace-relative normal form of a tool's path, or None when it escapes the workspace."""
    p = path.strip()
    full = p if p.startswith("/") else posixpath.join(WORKSPACE, p)
    norm = posixpath.normpath(full)
    if norm == WORKSPACE:
        return "."
    if not norm.startswith(WORKSPACE + "/"):
        return None
    return norm[len(WORKSPACE) + 1 :]


def path_matches(pattern: str, path: str) -> bool:
    rel = normalize_path(path)
    if rel is None:
        return False
    pat = pattern[len(WORKSPACE) + 1 :] if pattern.startswith(WORKSPACE + "/") else pattern.lstrip("./") or "."
    return bool(_glob_re(pat).match(rel))


def command_matches(pattern: str, argv: list[str], text: str) -> bool:
    """`git status` matches exactly; `npm test *` (or `npm test:*`) matches that argv prefix."""
    pat = pattern.strip()
    if pat == "*":
        return True
    prefix = None
    if pat.endswith(":*"):
        prefix = pat[:-2]
    elif pat.endswith(" *"):
        prefix = pat[:-2]
    if prefix is None:
        return pat == text.strip() or (bool(argv) and _split(pat) == argv)
    want = _split(prefix)
    return bool(want) and argv[: len(want)] == want


def _split(s: str) -> list[str]:
    import shlex

    try:
        return shlex.split(s)
    except ValueError:
        return s.split()


def paths_of(input: dict[str, Any]) -> list[str]:
    if isinstance(input.get("path"), str):
        return [input["path"]]
    edits = input.get("edits")
    if isinstance(edits, list):
        return [e["path"] for e in edits if isinstance(e, dict) and isinstance(e.get("path"), str)]
    return []


def primary_argument(input: dict[str, Any]) -> str | None:
    for key in ("command", "path", "pattern", "process_id", "url"):
        if isinstance(input.get(key), str):
            return input[key]
    return None


# the policy ---------------------------------------------------------------------------------------
class PermissionPolicy:
    """Decides allow / ask / deny for one call, and says what decided it."""

    def __init__(self, mode: PermissionMode | str | None = None, rules: RuleSet | None = None) -> None:
        rules = rules or RuleSet()
        # An explicit mode (CLI flag, settings) wins over one named by a rules file.
        self.mode = PermissionMode(mode or rules.mode or PermissionMode.ASK)
        self.rules: list[Rule] = list(rules.rules)
        self._session_rules: dict[str, list[Rule]] = {}

    def add_rule(self, rule: Rule, *, session_id: str | None = None) -> None:
        if session_id is None:
            self.rules.append(rule)
        else:
            self._session_rules.setdefault(session_id, []).append(rule)

    def rules_for(self, session_id: str | None) -> list[Rule]:
        return self.rules + self._session_rules.get(session_id or "", [])

    def paths_to_resolve(self, tool: ToolFacts, input: dict[str, Any]) -> list[str]:
        """STUB for merge: the paths this call writes, to resolve in the sandbox before `evaluate`."""
        return [] if tool.read_only else paths_of(input)

    def evaluate(
        self, tool: ToolFacts, input: dict[str, Any], *, session_id: str | None = None,
        resolved: Any = None,
    ) -> PolicyDecision:
        t0 = time.perf_counter()
        if resolved and isinstance(input.get("path"), str) and input["path"] in resolved:  # STUB for merge
            input = {**input, "path": resolved[input["path"]]}
        decision = self._evaluate(tool, input, self.rules_for(session_id))
        decision.provenance.elapsed_ms = (time.perf_counter() - t0) * 1000.0
        return decision

    def resolve_ask(self, decision: PolicyDecision) -> PolicyDecision:
        """In modes with nobody to ask (strict, read-only), an ask becomes a deny."""
        if decision.action is Action.ASK and self.mode in (PermissionMode.STRICT, PermissionMode.READ_ONLY):
            return PolicyDecision(
                Action.DENY,
                Provenance("mode", self.mode.value, decision="deny"),
                f"{decision.reason}; mode {self.mode.value} does not ask, so it is denied",
                decision.risk,
            )
        return decision

    # -- internals
    def _evaluate(self, tool: ToolFacts, input: dict[str, Any], rules: list[Rule]) -> PolicyDecision:
        applicable = [r for r in rules if r.applies_to(tool)]
        if tool.name in COMMAND_TOOLS and isinstance(input.get("command"), str):
            ruled = self._judge_command(input["command"], applicable)
        else:
            ruled = self._judge_simple(tool, input, applicable)
        if ruled is not None:
            return ruled
        return self._by_mode(tool, input)

    @staticmethod
    def _rule_decision(rule: Rule, reason: str, risk: Risk = Risk.LOW) -> PolicyDecision:
        return PolicyDecision(
            rule.action,
            Provenance("rule", rule.text, source=rule.source, decision=rule.action.value),
            reason,
            risk,
        )

    def _judge_simple(
        self, tool: ToolFacts, input: dict[str, Any], rules: list[Rule]
    ) -> PolicyDecision | None:
        paths = paths_of(input)
        best: Rule | None = None
        for rule in rules:
            if rule.pattern is None:
                hit = True
            elif paths:
                # every path the call touches must match (deny/ask: any path is enough)
                hits = [path_matches(rule.pattern, p) for p in paths]
                hit = any(hits) if rule.action is not Action.ALLOW else all(hits)
            else:
                arg = primary_argument(input)
                hit = arg is not None and bool(_glob_re(rule.pattern).match(arg))
            if hit and (best is None or _RANK[rule.action] > _RANK[best.action]):
                best = rule
        if best is None:
            return None
        return self._rule_decision(best, f"rule {best.text} ({best.action.value})")

    def _judge_command(self, command: str, rules: list[Rule]) -> PolicyDecision | None:
        parsed = parse_command(command)
        if not rules:
            return None
        # A rule without a pattern, or an exact rule for the whole text, speaks for the whole command.
        strongest: tuple[Rule, str] | None = None

        def consider(rule: Rule, why: str) -> None:
            nonlocal strongest
            if strongest is None or _RANK[rule.action] > _RANK[strongest[0].action]:
                strongest = (rule, why)

        allowed_subs: list[Rule | None] = [None] * len(parsed.commands)
        for rule in rules:
            if rule.pattern is None or (rule.pattern.strip() == command.strip()):
                consider(rule, "whole command")
                if rule.action is Action.ALLOW:
                    allowed_subs = [rule] * len(parsed.commands)
                continue
            for idx, sub in enumerate(parsed.commands):
                if command_matches(rule.pattern, sub.argv, sub.text):
                    if rule.action is Action.ALLOW:
                        allowed_subs[idx] = allowed_subs[idx] or rule
                    else:
                        consider(rule, f"sub-command {sub.text!r}")
        if strongest is not None and strongest[0].action is not Action.ALLOW:
            rule, why = strongest
            return self._rule_decision(rule, f"rule {rule.text} ({rule.action.value}) matched {why}")
        whole_allow = strongest is not None and strongest[0].action is Action.ALLOW
        if whole_allow and (strongest[0].pattern is not None or parsed.prefix_safe):
            return self._rule_decision(strongest[0], f"rule {strongest[0].text} allows the command")
        if parsed.commands and all(allowed_subs):
            first = allowed_subs[0]
            assert first is not None
            if not parsed.prefix_safe:
                return PolicyDecision(
                    Action.ASK,
                    Provenance("rule", first.text, source=first.source, decision="ask"),
                    f"{', '.join(parsed.flags)} cannot be allowed by a prefix rule",
                    Risk.MEDIUM,
                )
            texts = sorted({r.text for r in allowed_subs if r is not None})
            return PolicyDecision(
                Action.ALLOW,
                Provenance("rule", "; ".join(texts), source=first.source, decision="allow"),
                "every sub-command is allowed by a rule",
            )
        return None

    def _by_mode(self, tool: ToolFacts, input: dict[str, Any]) -> PolicyDecision:
        mode = self.mode

        def by(action: Action, reason: str) -> PolicyDecision:
            return PolicyDecision(action, Provenance("mode", mode.value, decision=action.value), reason)

        if mode is PermissionMode.AUTO:
            return by(Action.ALLOW, "mode auto runs everything")
        if mode is PermissionMode.STRICT:
            return by(Action.DENY, "mode strict denies what no rule allows")
        if tool.read_only:
            return by(Action.ALLOW, "read-only tools run")
        if mode is PermissionMode.READ_ONLY:
            return by(Action.DENY, "mode read-only denies tools that change things")
        if tool.group in HARMLESS_GROUPS:
            return by(Action.ALLOW, f"{tool.group} touches no files")
        if mode is PermissionMode.ACCEPT_EDITS and tool.group == "group:fs":
            paths = paths_of(input)
            if paths and all(normalize_path(p) is not None for p in paths):
                return by(Action.ALLOW, "mode accept-edits runs file writes inside the workspace")
        return by(Action.ASK, f"{tool.name} can change things and mode {mode.value} asks first")


def suggest_rule(name: str, input: dict[str, Any], action: Action = Action.ALLOW) -> Rule:
    """The rule an "allow for this session" / "always allow" would add, for a person to preview."""
    if name in COMMAND_TOOLS and isinstance(input.get("command"), str):
        parsed = parse_command(input["command"])
        if len(parsed.commands) == 1 and parsed.prefix_safe:
            argv = parsed.commands[0].argv
            head = argv[:2] if len(argv) > 1 and not argv[1].startswith("-") and "/" not in argv[1] else argv[:1]
            if head:
                return Rule(action, name, " ".join(head) + " *")
        return Rule(action, name, input["command"].strip())
    paths = paths_of(input)
    if paths:
        rel = normalize_path(paths[0]) or paths[0]
        parent = posixpath.dirname(rel)
        return Rule(action, name, f"{parent}/**" if parent else rel)
    return Rule(action, name)


def rules_from_texts(texts: Iterable[tuple[str, str]], source: str) -> RuleSet:
    """Rules from (action, text) pairs, e.g. from CLI flags or a settings dialog."""
    return RuleSet([Rule.parse(t, a, source) for a, t in texts])
