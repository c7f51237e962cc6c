"""Permission policy: rules (allow / ask / deny over a tool or group, with an argument pattern) and a mode.

Precedence is deny > ask > allow > mode. A shell command is judged by what really runs: every simple
command (through wrappers and `sh -c`), its environment and the files its redirections write.
"""

from __future__ import annotations

import posixpath
import re
import shlex
import time
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import re2

from ._control import control_targets
from ._errors import ConfigError
from ._glob import glob_regex
from ._paths import control_dir, control_reason, workspace_relative
from ._record import Provenance, Risk
from ._risk import INTERPRETERS, assess_command, assess_risk
from ._safe_files import read_beneath
from ._shell import AUTO_ALLOW_LIMIT, ShellAnalysis, SimpleCommand, analyse_command


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


_RANK = {Action.DENY: 3, Action.ASK: 2, Action.ALLOW: 1}
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


# pattern matching ---------------------------------------------------------------------------------
# Rules glob the way fs_glob does (`*`, `?`, `[...]`, `**`, `{a,b}`): one translation for both, run by
# RE2 so that matching stays linear in the path's length.
@lru_cache(maxsize=1024)
def _glob_re(pattern: str) -> Any:
    return re2.compile(glob_regex(pattern).pattern.replace("\\Z", "\\z"))


def normalize_path(path: str) -> str | None:
    """Workspace-relative normal form of a tool's path, or None when it escapes the workspace. Nothing is
    stripped: the tool writes the path it is given."""
    return workspace_relative(path)


def _pattern_path(pattern: str) -> str:
    if pattern.startswith("/"):
        rel = workspace_relative(pattern)
        return pattern if rel is None else rel
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern or "."


def path_matches(pattern: str, path: str) -> bool:
    rel = normalize_path(path)
    if rel is None:
        return False
    return bool(_glob_re(_pattern_path(pattern)).match(rel))


@dataclass(slots=True, frozen=True)
class _CommandPattern:
    """A bash_run rule's pattern: NAME=value words it names, the words, and whether it ends in ` *`."""

    env: tuple[str, ...]
    words: tuple[str, ...]
    prefix: bool
    everything: bool = False


@lru_cache(maxsize=1024)
def _command_pattern(pattern: str) -> _CommandPattern:
    pat = pattern.strip()
    if pat in ("*", ""):
        return _CommandPattern((), (), True, everything=True)
    prefix = pat.endswith((" *", ":*"))
    body = pat[:-2] if prefix else pat
    words = _split(body)
    env: list[str] = []
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        env.append(words.pop(0))
    return _CommandPattern(tuple(env), tuple(words), prefix)


def _argv_matches(pat: _CommandPattern, argv: tuple[str, ...], open_args: bool = False) -> bool:
    if pat.everything:
        return True
    if not pat.words:
        return not argv and not pat.prefix
    if pat.prefix:
        return argv[: len(pat.words)] == pat.words
    return not open_args and argv == pat.words


def command_matches(pattern: str, argv: list[str], text: str) -> bool:
    """`git status` matches exactly; `npm test *` (or `npm test:*`) matches that argv prefix."""
    pat = _command_pattern(pattern)
    return pattern.strip() == text.strip() or _argv_matches(pat, tuple(argv))


_SYSTEM_BIN = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/usr/local/sbin/")


def allow_matches(pattern: str, cmd: SimpleCommand) -> bool:
    """An allow rule proves a simple command when it names the program that really runs (a path outside
    the system folders must be spelled as written), its arguments, and exactly its NAME=value words."""
    pat = _command_pattern(pattern)
    if pat.everything:
        return True
    if sorted(pat.env) != sorted(cmd.env):
        return False
    argv = cmd.argv
    if "/" in cmd.program_path and not cmd.program_path.startswith(_SYSTEM_BIN):
        argv = (cmd.program_path, *argv[1:])
    return _argv_matches(pat, argv, cmd.open_args)


def block_matches(pattern: str, cmd: SimpleCommand) -> bool:
    """A deny or ask rule meets a simple command under any of its spellings: each wrapper's argv, the
    program by basename or as written, and for a delete (unlink, rmdir, shred, find -delete) also `rm`."""
    pat = _command_pattern(pattern)
    if pat.everything:
        return True
    if not set(pat.env) <= set(cmd.env):
        return False
    candidates = [cmd.argv]
    for layer in cmd.layers:
        if layer:
            candidates += [layer, (layer[0].rsplit("/", 1)[-1], *layer[1:])]
    if cmd.deletes:
        candidates.append(("rm", *cmd.argv[1:]))
    return any(_argv_matches(pat, tuple(c)) for c in candidates)


def _split(s: str) -> list[str]:
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


@lru_cache(maxsize=64)
def _analysed(command: str) -> ShellAnalysis:
    return analyse_command(command)


def _tokens(text: str) -> set[str]:
    """The runs of name characters in a text (no regex): what an un-analysable command mentions."""
    out: set[str] = set()
    cur: list[str] = []
    for ch in text:
        if ch.isalnum() or ch in "_.-/":
            cur.append(ch)
        elif cur:
            out.add("".join(cur))
            cur = []
    if cur:
        out.add("".join(cur))
    return out | {t.rsplit("/", 1)[-1] for t in out}


def _cd_dirs(a: ShellAnalysis) -> tuple[list[str], bool]:
    """The literal folders `cd`/`pushd` go to in the command, and whether one is only known when it runs."""
    dirs, unknown = [], False
    for c in a.commands:
        if c.program in ("cd", "pushd", "popd"):
            ops = [x for x, k in zip(c.argv[1:], c.kinds[1:], strict=False) if not x.startswith("-")]
            kinds = [k for x, k in zip(c.argv[1:], c.kinds[1:], strict=False) if not x.startswith("-")]
            if c.program == "popd" or not ops or kinds[0] != "lit" or ops[0].startswith("~"):
                unknown = True
            else:
                dirs.append(ops[0])
    return dirs, unknown


def _write_spellings(a: ShellAnalysis, resolved: Mapping[str, str],
                     targets: Iterable[str] | None = None) -> tuple[list[str], bool]:
    """Every spelling of every file the command's redirections (or `targets`) write (after each cd, and as
    the container resolved it), and whether a relative write follows a cd to a folder only known at run time."""
    dirs, unknown = _cd_dirs(a)
    out: list[str] = []
    relative_after_unknown = False
    for t in a.writes if targets is None else targets:
        spellings = [t]
        if not t.startswith(("/", "~")):
            spellings += [posixpath.join(d, t) for d in dirs]
            relative_after_unknown = relative_after_unknown or unknown
        out += spellings + [resolved[x] for x in spellings if x in resolved]
    return list(dict.fromkeys(out)), relative_after_unknown


def _what(cmd: SimpleCommand) -> str:
    if not cmd.argv:
        return f"setting {', '.join(e.split('=', 1)[0] for e in cmd.env)}"
    if cmd.deletes and cmd.program != "rm":
        return f"deleting files with {cmd.program}"
    return f"running {cmd.program}"



class Policy(Protocol):
    """What judges a session's calls: the person's `PermissionPolicy`, or a template's `NarrowedPolicy` on it."""

    @property
    def mode(self) -> PermissionMode: ...

    @property
    def rules(self) -> list[Rule]: ...

    def rules_for(self, session_id: str | None) -> list[Rule]: ...

    def add_rule(self, rule: Rule, *, session_id: str | None = None) -> None: ...

    def mode_for(self, session_id: str | None) -> PermissionMode: ...

    def set_session_mode(self, session_id: str, mode: PermissionMode | str | None) -> None: ...

    def judges_inline(self, input: dict[str, Any]) -> bool:
        """Whether judging `input` is bounded work, so that a small input may be judged on the event loop
        (a thread hop costs more); any other judgement runs on a worker thread under the deadline."""
        ...

    def paths_to_resolve(self, tool: ToolFacts, input: dict[str, Any]) -> list[str]: ...

    def evaluate(self, tool: ToolFacts, input: dict[str, Any], *, session_id: str | None = None,
                 resolved: Mapping[str, str] | None = None) -> PolicyDecision: ...

    def resolve_ask(self, decision: PolicyDecision, session_id: str | None = None) -> PolicyDecision: ...

    def plan_refusal(self, tool: ToolFacts, input: dict[str, Any],
                     session_id: str | None) -> PolicyDecision | None: ...


# the policy ---------------------------------------------------------------------------------------
_FS_RULE_TARGETS = ("fs_write", "group:fs")


def _spellings(path: str, resolved: Mapping[str, str]) -> list[str]:
    return [path, resolved[path]] if path in resolved and resolved[path] != path else [path]


class PermissionPolicy:
    """Decides allow / ask / deny for one call, says what decided it, and carries the call's risk."""

    def __init__(self, mode: PermissionMode | str | None = None, rules: RuleSet | None = None) -> None:
        rules = rules or RuleSet()
        # An explicit mode (CLI flag, settings) wins over one named by a rules file.
        self.mode = PermissionMode(mode or rules.mode or PermissionMode.ASK)
        self.rules: list[Rule] = list(rules.rules)
        self._session_rules: dict[str, list[Rule]] = {}
        self._session_modes: dict[str, PermissionMode] = {}

    def mode_for(self, session_id: str | None) -> PermissionMode:
        """The session's own mode (a plan approved into another mode, a session put in plan mode), else
        the policy's."""
        return self._session_modes.get(session_id or "", self.mode)

    def set_session_mode(self, session_id: str, mode: PermissionMode | str | None) -> None:
        """Give one session its own mode (None: back to the policy's)."""
        if mode is None:
            self._session_modes.pop(session_id, None)
        else:
            self._session_modes[session_id] = PermissionMode(mode)

    def plan_refusal(self, tool: ToolFacts, input: dict[str, Any], session_id: str | None) -> PolicyDecision | None:
        """In plan mode, the denial of a call that could change something; None when it may go on."""
        if self.mode_for(session_id) is not PermissionMode.PLAN:
            return None
        why = plan_mode_blocker(tool, input)
        return None if why is None else _plan_denial(why)

    def add_rule(self, rule: Rule, *, session_id: str | None = None) -> None:
        if session_id is None:
            self.rules.append(rule)
        else:
            self._session_rules.setdefault(session_id, []).append(rule)

    def rules_for(self, session_id: str | None) -> list[Rule]:
        return self.rules + self._session_rules.get(session_id or "", [])

    def judges_inline(self, input: dict[str, Any]) -> bool:
        """The built-in policy's judgement is linear in the input and bounded; a subclass (a test's scripted
        policy, say) may do anything, so it is judged on a worker thread."""
        return type(self) is PermissionPolicy

    def paths_to_resolve(self, tool: ToolFacts, input: dict[str, Any]) -> list[str]:
        """Every path the policy will judge for this call (a file tool's paths, the files a command's
        redirections write), for the executor to resolve in the container and pass back as `resolved`."""
        command = input.get("command")
        if tool.name in COMMAND_TOOLS and isinstance(command, str):
            a = _analysed(command)
            changed = [*a.writes, *control_targets(a)[0]]
            return _write_spellings(a, {}, dict.fromkeys(changed))[0]
        return paths_of(input)

    def evaluate(
        self, tool: ToolFacts, input: dict[str, Any], *, session_id: str | None = None,
        resolved: Mapping[str, str] | None = None,
    ) -> PolicyDecision:
        """`resolved` maps a raw path to its container-resolved path: both spellings are judged."""
        t0 = time.perf_counter()
        mode = self.mode_for(session_id)
        decision = self._evaluate(tool, input, self.rules_for(session_id), resolved or {}, mode)
        decision.provenance.elapsed_ms = (time.perf_counter() - t0) * 1000.0
        return decision

    def resolve_ask(self, decision: PolicyDecision, session_id: str | None = None) -> PolicyDecision:
        """In modes with nobody to ask (strict, read-only), an ask becomes a deny."""
        mode = self.mode_for(session_id)
        if decision.action is Action.ASK and mode in (PermissionMode.STRICT, PermissionMode.READ_ONLY):
            return PolicyDecision(
                Action.DENY,
                Provenance("mode", mode.value, decision="deny"),
                f"{decision.reason}; mode {mode.value} does not ask, so it is denied",
                decision.risk,
            )
        return decision

    # -- internals
    def _evaluate(self, tool: ToolFacts, input: dict[str, Any], rules: list[Rule],
                  resolved: Mapping[str, str], mode: PermissionMode) -> PolicyDecision:
        applicable = [r for r in rules if r.applies_to(tool)]
        command = input.get("command")
        control = _control_denial(tool, input, resolved)
        if control is not None:
            return control
        if mode is PermissionMode.PLAN:  # before any rule: no allow rule makes a write run while planning
            why = plan_mode_blocker(tool, input)
            if why is not None:
                return _plan_denial(why)
            mode = PermissionMode.ASK  # what may run while planning is judged as in mode ask
        if _talks_to_person(tool) and not any(r.action is Action.DENY for r in applicable):
            return PolicyDecision(Action.ALLOW, Provenance("mode", mode.value, decision="allow"),
                                  f"{tool.name} only talks to the person", Risk.LOW)
        if tool.name in COMMAND_TOOLS and isinstance(command, str):
            return self._judge_command(command, applicable, rules, resolved, mode)
        risk, why = assess_risk(tool.name, tool.group, tool.read_only, input)
        if tool.risk is Risk.HIGH and not tool.read_only:
            risk, why = Risk.HIGH, f"{tool.name} is marked destructive"
        ruled = self._judge_simple(tool, input, applicable, resolved, risk)
        return ruled if ruled is not None else self._by_mode(tool, input, risk, why, resolved, mode)

    def _judge_simple(self, tool: ToolFacts, input: dict[str, Any], rules: list[Rule],
                      resolved: Mapping[str, str], risk: Risk) -> PolicyDecision | None:
        paths = paths_of(input)
        best: tuple[Rule, str] | None = None
        for rule in rules:
            what = self._simple_hit(rule, tool, input, paths, resolved)
            if what is not None and (best is None or _RANK[rule.action] > _RANK[best[0].action]):
                best = (rule, what)
        if best is None:
            return None
        return _rule_decision(best[0], best[1], risk)

    @staticmethod
    def _simple_hit(rule: Rule, tool: ToolFacts, input: dict[str, Any], paths: list[str],
                    resolved: Mapping[str, str]) -> str | None:
        """What of the call the rule speaks for ("fs_write of secrets/k"), or None."""
        if rule.pattern is None:
            return tool.name
        if paths:
            spelled = [(p, _spellings(p, resolved)) for p in paths]
            if rule.action is Action.ALLOW:  # every spelling of every path must match
                ok = all(path_matches(rule.pattern, s) for _, sp in spelled for s in sp)
                return tool.name if ok else None
            hit = next((p for p, sp in spelled if any(path_matches(rule.pattern, s) for s in sp)), None)
            return None if hit is None else f"{tool.name} of {hit}"
        arg = primary_argument(input)
        return tool.name if arg is not None and _glob_re(rule.pattern).match(arg) else None

    def _judge_command(self, command: str, rules: list[Rule], all_rules: list[Rule],
                       resolved: Mapping[str, str], mode: PermissionMode) -> PolicyDecision:
        a = _analysed(command)
        risk, why = assess_command(a)
        fs_rules = [r for r in all_rules if r.target in _FS_RULE_TARGETS and r.pattern is not None]
        writes, unknown_dir = _write_spellings(a, resolved)
        blocked = _blocking_rule(command, a, rules, fs_rules, writes, risk)
        if blocked is not None:
            return blocked
        blockers = [f"it cannot be analysed: {a.problems[0]}"] if not a.analysable else []
        if len(command) > AUTO_ALLOW_LIMIT:
            blockers.append(f"it is longer than {AUTO_ALLOW_LIMIT} characters, too long to allow without a person")
        if unknown_dir:
            blockers.append("it writes a relative path after a cd to a folder only known when it runs")
        if risk is Risk.HIGH:
            blockers.append(f"it is dangerous: {why}")
        if blockers:
            strict = mode is PermissionMode.STRICT
            action = Action.DENY if strict else Action.ASK
            detail = "high risk" if risk is Risk.HIGH else "not analysable"
            reason = "; ".join(blockers) + ("; mode strict denies it" if strict else "")
            return PolicyDecision(action, Provenance("policy", detail, decision=action.value), reason, risk)
        allowed = _allowed_by_rules(command, a, rules, fs_rules, writes)
        if allowed is not None:
            return PolicyDecision(
                Action.ALLOW, Provenance("rule", "; ".join(sorted({r.text for r in allowed})),
                                         source=allowed[0].source, decision="allow"),
                "every part is allowed by a rule", risk)
        return self._by_mode(ToolFacts("bash_run", "group:runtime"), {}, risk, why, resolved, mode)

    def _by_mode(self, tool: ToolFacts, input: dict[str, Any], risk: Risk, why: str,
                 resolved: Mapping[str, str], mode: PermissionMode) -> PolicyDecision:
        def by(action: Action, reason: str) -> PolicyDecision:
            return PolicyDecision(action, Provenance("mode", mode.value, decision=action.value), reason, risk)

        if mode is PermissionMode.AUTO and risk is Risk.HIGH:
            return by(Action.ASK, f"{why}, and mode auto asks before what is dangerous")
        if mode is PermissionMode.AUTO:
            return by(Action.ALLOW, "mode auto runs everything that is analysable and not dangerous")
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
            spelled = [s for p in paths for s in _spellings(p, resolved)]
            if paths and all(normalize_path(p) is not None for p in spelled):
                return by(Action.ALLOW, "mode accept-edits runs file writes inside the workspace")
        return by(Action.ASK, f"{tool.name} {why} and mode {mode.value} asks first")


def _plan_denial(why: str) -> PolicyDecision:
    return PolicyDecision(Action.DENY, Provenance("mode", PermissionMode.PLAN.value, decision="deny"),
                          f"plan mode: only read-only tools run, and {why}. Finish the plan with "
                          "exit_plan_mode(plan); the person decides when changes start", Risk.MEDIUM)


# Read-only programs with an option that writes a file or runs another program: refused while planning.
_PLAN_WRITING_OPTIONS = {
    "tree": ("-o",),
    "less": ("-o", "-O", "--log-file", "--LOG-FILE", "+", "--lesskey"),
    "more": ("-o", "-O", "--log-file", "+"),
    "sort": ("--compress-program",),
    "file": ("-C", "--compile"),
    "git": ("-O", "--open-files-in-pager", "--output", "--ext-diff", "--textconv"),
}
_PLAN_NEVER = frozenset({"ldd", "date", "hostname", "env", "command", "printenv"})  # run, set, or leak


def _talks_to_person(tool: ToolFacts) -> bool:
    """ask_user and exit_plan_mode: another tool that calls its group group:person gains nothing by it."""
    return tool.group == PERSON_GROUP and tool.name in PERSON_TOOLS


def plan_mode_blocker(tool: ToolFacts, input: dict[str, Any]) -> str | None:
    """Why `tool` may not run while planning ("" never: None when it may). A tool runs when it is trusted
    to only read, talks to the person, or keeps the session's todo list; a command when every part of it
    only reads, writes no file, sets no variable and uses no option that writes or runs."""
    if _talks_to_person(tool) or tool.group in HARMLESS_GROUPS:
        return None
    command = input.get("command")
    if tool.name in COMMAND_TOOLS and isinstance(command, str):
        return _plan_command_blocker(_analysed(command))
    if tool.read_only:
        return None
    return f"{tool.name} can change things"


def _plan_command_blocker(a: ShellAnalysis) -> str | None:
    if not a.analysable:
        return f"the command cannot be analysed ({a.problems[0]})"
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
        bad = _PLAN_WRITING_OPTIONS.get(c.program, ())
        hit = next((x for x in c.argv[1:] for o in bad if x == o or x.startswith(o)), None)
        if hit is not None:
            return f"{c.program} {hit} writes a file or runs a program"
    return None


def _control_denial(tool: ToolFacts, input: dict[str, Any], resolved: Mapping[str, str]) -> PolicyDecision | None:
    """A change to a control folder (`.agent-desk`, `.git`) is denied in every mode and over every rule:
    a file tool's path, a file a command writes, deletes, moves or links, as written, after each cd and
    as the container resolved it."""
    command = input.get("command")
    certain: list[str] = []
    if tool.name in COMMAND_TOOLS and isinstance(command, str):
        a = _analysed(command)
        changed, certain = control_targets(a)
        spelled = _write_spellings(a, resolved, dict.fromkeys([*a.writes, *changed]))[0]
    elif tool.read_only:
        return None
    else:
        spelled = [s for p in paths_of(input) for s in _spellings(p, resolved)]
    hit = next(((s, d) for s in spelled if (d := control_dir(s)) is not None), None)
    if hit is None and not certain:
        return None
    reason = control_reason(hit[0], hit[1]) if hit is not None else (
        f"{certain[0]}; the control folders .agent-desk/ and .git/ may be read but never changed, in any mode")
    return PolicyDecision(Action.DENY, Provenance("policy", "control folder", decision="deny"), reason, Risk.HIGH)


def _rule_decision(rule: Rule, what: str, risk: Risk) -> PolicyDecision:
    """A rule's decision. The reason names what was refused or allowed, never the rule's pattern (the
    model must not learn which spelling to avoid); the provenance keeps the rule for the person."""
    reason = {
        Action.DENY: f"a deny rule refuses {what}",
        Action.ASK: f"a rule asks before {what}",
        Action.ALLOW: f"a rule allows {what}",
    }[rule.action]
    return PolicyDecision(rule.action, Provenance("rule", rule.text, source=rule.source,
                                                  decision=rule.action.value), reason, risk)


def _blocking_rule(command: str, a: ShellAnalysis, rules: list[Rule], fs_rules: list[Rule],
                   writes: list[str], risk: Risk) -> PolicyDecision | None:
    """The strongest deny or ask rule that meets any part of the command, or a file it writes."""
    best: tuple[Rule, str] | None = None
    for rule in rules:
        if rule.action is Action.ALLOW:
            continue
        what = _command_hit(rule, command, a)
        if what is not None and (best is None or _RANK[rule.action] > _RANK[best[0].action]):
            best = (rule, what)
    for rule in fs_rules:
        if rule.action is Action.ALLOW or rule.pattern is None:
            continue
        hit = next((w for w in writes if path_matches(rule.pattern, w)), None)
        if hit is not None and (best is None or _RANK[rule.action] > _RANK[best[0].action]):
            best = (rule, f"writing {hit}")
    return None if best is None else _rule_decision(best[0], best[1], risk)


def _command_hit(rule: Rule, command: str, a: ShellAnalysis) -> str | None:
    if rule.pattern is None or rule.pattern.strip() == command.strip():
        return "this command"
    cmd = next((c for c in a.commands if block_matches(rule.pattern, c)), None)
    if cmd is not None:
        return _what(cmd)
    if not a.analysable:
        words = [w for w in _command_pattern(rule.pattern).words if not any(ch in w for ch in "*?[")]
        tokens = _tokens(command)
        if words and all(w in tokens for w in words):
            return f"a command that cannot be analysed and mentions {' '.join(words)}"
    return None


def _allowed_by_rules(command: str, a: ShellAnalysis, rules: list[Rule], fs_rules: list[Rule],
                      writes: list[str]) -> list[Rule] | None:
    """The allow rules that prove every part of the command and every file it writes, or None."""
    allow = [r for r in rules if r.action is Action.ALLOW]
    whole = next((r for r in allow if r.pattern is not None and r.pattern.strip() == command.strip()), None)
    if whole is not None:
        return [whole]
    everything = next((r for r in allow if r.pattern is None or _command_pattern(r.pattern).everything), None)
    used: list[Rule] = []
    for c in a.commands:
        if c.runs_script or c.calls_function:
            continue
        rule = everything or next((r for r in allow if r.pattern is not None and allow_matches(r.pattern, c)), None)
        if rule is None:
            return None
        used.append(rule)
    fs_allow = [r for r in fs_rules if r.action is Action.ALLOW and r.pattern is not None]
    for w in writes:
        rule = next((r for r in fs_allow if path_matches(r.pattern or "", w)), None)
        if rule is None and everything is not None and normalize_path(w) is not None:
            rule = everything
        if rule is None:
            return None
        used.append(rule)
    return used or None


_SUBCOMMAND_PROGRAMS = frozenset({"git", "npm", "npx", "yarn", "pnpm", "cargo", "go", "docker", "kubectl",
                                  "pip", "pip3", "uv", "poetry", "apt", "apt-get", "brew", "systemctl", "make",
                                  "gh", "helm", "terraform", "dotnet", "mvn", "gradle", "bundle", "gem"})
_PLAIN_WORD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:@+,=")


def suggest_rule(name: str, input: dict[str, Any], action: Action = Action.ALLOW) -> Rule:
    """The rule an "allow for this session" / "always allow" would add, for a person to preview: never
    wider than the call's program plus its subcommand; for interpreters and shells, the exact command."""
    command = input.get("command")
    if name in COMMAND_TOOLS and isinstance(command, str):
        head = _suggested_head(_analysed(command))
        return Rule(action, name, " ".join(head) + " *" if head else command.strip())
    paths = paths_of(input)
    if paths:
        rel = normalize_path(paths[0]) or paths[0]
        parent = posixpath.dirname(rel)
        return Rule(action, name, f"{parent}/**" if parent else rel)
    return Rule(action, name)


def _suggested_head(a: ShellAnalysis) -> list[str]:
    """The program (and subcommand) a prefix rule may name, or [] for "only this exact command"."""
    if not a.analysable or len(a.commands) != 1 or a.writes or len(a.source) > AUTO_ALLOW_LIMIT:
        return []
    c = a.commands[0]
    if c.env or len(c.layers) > 1 or c.program_path != c.program or not c.argv:
        return []
    prog = c.program
    if prog in INTERPRETERS or any(not set(w) <= _PLAIN_WORD for w in c.argv[:2]) or "lit" != c.kinds[0]:
        return []
    if len(c.argv) == 1:
        return [prog]
    first = c.argv[1]
    if first.startswith("-"):
        return [] if prog in _SUBCOMMAND_PROGRAMS else [prog]
    if c.kinds[1] != "lit" or "/" in first or "=" in first:
        return [prog]
    return [prog, first]


def rules_from_texts(texts: Iterable[tuple[str, str]], source: str) -> RuleSet:
    """Rules from (action, text) pairs, e.g. from CLI flags or a settings dialog."""
    return RuleSet([Rule.parse(t, a, source) for a, t in texts])
