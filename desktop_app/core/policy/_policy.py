"""Permission policy: rules (allow / ask / deny over a tool or group, with an argument pattern) and a mode.

Precedence is deny > ask > allow > mode. A shell command is judged by what really runs: every simple
command (through wrappers and `sh -c`), its environment and the files its redirections write.
"""

from __future__ import annotations

import posixpath
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from .._reasons import mode_asks
from .._record import Provenance, Risk
from ._control import control_targets
from ._evaluators import unanalysable
from ._matching import (
    allow_matches,
    analysed,
    block_matches,
    command_pattern,
    glob_re,
    mentioned_names,
    normalize_path,
    path_matches,
    paths_of,
    primary_argument,
    write_spellings,
)
from ._paths import control_dir, control_reason
from ._plan_mode import plan_denial, plan_mode_blocker, talks_to_person
from ._programs import judge_program, widening_adds_only_reads
from ._risk import INTERPRETERS, assess_command, assess_risk
from ._rules import (
    ACTION_RANK,
    COMMAND_TOOLS,
    HARMLESS_GROUPS,
    Action,
    PermissionMode,
    PolicyDecision,
    Rule,
    RuleSet,
    ToolFacts,
)
from ._shell import AUTO_ALLOW_LIMIT
from ._shell_model import ShellAnalysis, SimpleCommand


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
_SWITCH = "switch this session to mode ask, accept-edits or auto"
_TO_ALLOW = f"to allow it: {_SWITCH}"
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
        # Told the session's id when its own mode changes (the runtime switches its sandbox at once).
        self.mode_listeners: list[Callable[[str], None]] = []

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
        for listener in list(self.mode_listeners):
            listener(session_id)

    def plan_refusal(self, tool: ToolFacts, input: dict[str, Any], session_id: str | None) -> PolicyDecision | None:
        """In plan mode, the denial of a call that could change something; None when it may go on."""
        if self.mode_for(session_id) is not PermissionMode.PLAN:
            return None
        why = plan_mode_blocker(tool, input)
        return None if why is None else plan_denial(why)

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
            a = analysed(command)
            changed = [*a.writes, *control_targets(a)[0]]
            return write_spellings(a, {}, dict.fromkeys(changed))[0]
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
                f"{decision.reason}; mode {mode.value} does not ask, so it is denied ({_TO_ALLOW})",
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
                return plan_denial(why)
            mode = PermissionMode.ASK  # what may run while planning is judged as in mode ask
        if talks_to_person(tool) and not any(r.action is Action.DENY for r in applicable):
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
            if what is not None and (best is None or ACTION_RANK[rule.action] > ACTION_RANK[best[0].action]):
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
        return tool.name if arg is not None and glob_re(rule.pattern).match(arg) else None

    def _judge_command(self, command: str, rules: list[Rule], all_rules: list[Rule],
                       resolved: Mapping[str, str], mode: PermissionMode) -> PolicyDecision:
        a = analysed(command)
        risk, why = assess_command(a)
        fs_rules = [r for r in all_rules if r.target in _FS_RULE_TARGETS and r.pattern is not None]
        writes, unknown_dir = write_spellings(a, resolved)
        blocked = _blocking_rule(command, a, rules, fs_rules, writes, risk)
        if blocked is not None:
            return blocked
        blockers = [unanalysable(a)] if not a.analysable else []
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
        auto_asks = _auto_blockers(a, writes) if mode is PermissionMode.AUTO else []
        if auto_asks:  # what auto asks about on purpose (README, Permissions); a rule above may allow it
            return PolicyDecision(Action.ASK, Provenance("mode", mode.value, decision="ask"), auto_asks[0], risk)
        return self._by_mode(ToolFacts("bash_run", "group:runtime"), {}, risk, why, resolved, mode)

    def _by_mode(self, tool: ToolFacts, input: dict[str, Any], risk: Risk, why: str,
                 resolved: Mapping[str, str], mode: PermissionMode) -> PolicyDecision:
        def by(action: Action, reason: str) -> PolicyDecision:
            return PolicyDecision(action, Provenance("mode", mode.value, decision=action.value), reason, risk)

        if mode is PermissionMode.AUTO and risk is Risk.HIGH:
            return by(Action.ASK, mode_asks(tool.name, why, mode.value))
        if mode is PermissionMode.AUTO:
            return by(Action.ALLOW, "mode auto runs everything that is analysable and not dangerous")
        if mode is PermissionMode.STRICT:
            return by(Action.DENY, f"mode strict denies what no rule allows (to allow it: an allow rule, or {_SWITCH})")
        if tool.read_only:
            return by(Action.ALLOW, "read-only tools run")
        if mode is PermissionMode.READ_ONLY:
            return by(Action.DENY, f"mode read-only denies tools that change things ({_TO_ALLOW})")
        if tool.group in HARMLESS_GROUPS:
            return by(Action.ALLOW, f"{tool.group} touches no files")
        if mode is PermissionMode.ACCEPT_EDITS and tool.group == "group:fs":
            paths = paths_of(input)
            spelled = [s for p in paths for s in _spellings(p, resolved)]
            if paths and all(normalize_path(p) is not None for p in spelled):
                return by(Action.ALLOW, "mode accept-edits runs file writes inside the workspace")
        return by(Action.ASK, mode_asks(tool.name, why, mode.value))


def _auto_blockers(a: ShellAnalysis, writes: list[str]) -> list[str]:
    """What `auto` asks about although it is analysable and not dangerous: a redirection outside the
    workspace or into a hidden configuration path (`.git/`, `.agent-desk/`, `~/.bashrc`), and a command
    substitution whose commands are not known reads (the table of programs)."""
    out: list[str] = []
    for w in writes:
        rel = normalize_path(w)
        if rel is None or w.startswith("~"):
            out.append(f"it writes {w}, outside /workspace, and mode auto asks first")
            break
        if any(part.startswith(".") and part not in (".", "..") for part in rel.split("/")):
            out.append(f"it writes {w}, a hidden configuration path, and mode auto asks first")
            break
    for c in a.commands:
        if c.parent is None or not c.argv:
            continue
        if judge_program(c.argv, c.kinds, c.open_args, c.program_path).effect != "read":
            out.append(f"it substitutes the output of {c.program}, which is not a known read, and mode auto "
                       "asks first")
            break
    return out


def _control_denial(tool: ToolFacts, input: dict[str, Any], resolved: Mapping[str, str]) -> PolicyDecision | None:
    """A change to a control folder (`.agent-desk`, `.git`) is denied in every mode and over every rule:
    a file tool's path, a file a command writes, deletes, moves or links, as written, after each cd and
    as the container resolved it."""
    command = input.get("command")
    certain: list[str] = []
    if tool.name in COMMAND_TOOLS and isinstance(command, str):
        a = analysed(command)
        changed, certain = control_targets(a)
        spelled = write_spellings(a, resolved, dict.fromkeys([*a.writes, *changed]))[0]
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
        if what is not None and (best is None or ACTION_RANK[rule.action] > ACTION_RANK[best[0].action]):
            best = (rule, what)
    for rule in fs_rules:
        if rule.action is Action.ALLOW or rule.pattern is None:
            continue
        hit = next((w for w in writes if path_matches(rule.pattern, w)), None)
        if hit is not None and (best is None or ACTION_RANK[rule.action] > ACTION_RANK[best[0].action]):
            best = (rule, f"writing {hit}")
    return None if best is None else _rule_decision(best[0], best[1], risk)


def _command_hit(rule: Rule, command: str, a: ShellAnalysis) -> str | None:
    if rule.pattern is None or rule.pattern.strip() == command.strip():
        return "this command"
    cmd = next((c for c in a.commands if block_matches(rule.pattern, c)), None)
    if cmd is not None:
        return _what(cmd)
    if not a.analysable:
        words = [w for w in command_pattern(rule.pattern).words if not any(ch in w for ch in "*?[")]
        tokens = mentioned_names(command)
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
    everything = next((r for r in allow if r.pattern is None or command_pattern(r.pattern).everything), None)
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
    """The rule an "allow for this session" / "always allow" would add, for a person to preview: the exact
    command, unless the table of programs proves that `PROGRAM [SUBCOMMAND] *` adds only reads."""
    command = input.get("command")
    if name in COMMAND_TOOLS and isinstance(command, str):
        head = _suggested_head(analysed(command))
        head = head[:2] if head[:1] == ["git"] else head[:1]
        wide = bool(head) and widening_adds_only_reads(head)
        return Rule(action, name, " ".join(head) + " *" if wide else command.strip())
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


def _what(cmd: SimpleCommand) -> str:
    if not cmd.argv:
        return f"setting {', '.join(e.split('=', 1)[0] for e in cmd.env)}"
    if cmd.deletes and cmd.program != "rm":
        return f"deleting files with {cmd.program}"
    return f"running {cmd.program}"
