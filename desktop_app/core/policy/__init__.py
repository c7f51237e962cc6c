"""The permission policy: rules and modes, the shell analysis it judges commands by, a command's risk, the
control folders no call may change, plan mode, and the project's rules file."""

from ._glob import glob_regex
from ._matching import command_matches, path_matches
from ._paths import container_path, control_dir, control_reason
from ._plan_mode import plan_mode_blocker
from ._policy import PermissionPolicy, Policy, suggest_rule
from ._risk import assess_command, assess_risk
from ._rules import (
    ACTION_RANK,
    COMMAND_TOOLS,
    PERSON_GROUP,
    Action,
    PermissionMode,
    PolicyDecision,
    Rule,
    RuleSet,
    ToolFacts,
    load_rules,
    project_rules_path,
    read_project_rules,
    rules_from_texts,
)
from ._rules_file import append_project_rule, rules_text_with
from ._shell import analyse_command
from ._shell_model import Redirect, ShellAnalysis, SimpleCommand

__all__ = [
    "ACTION_RANK",
    "COMMAND_TOOLS",
    "PERSON_GROUP",
    "Action",
    "PermissionMode",
    "PermissionPolicy",
    "Policy",
    "PolicyDecision",
    "Redirect",
    "Rule",
    "RuleSet",
    "ShellAnalysis",
    "SimpleCommand",
    "ToolFacts",
    "analyse_command",
    "append_project_rule",
    "assess_command",
    "assess_risk",
    "command_matches",
    "container_path",
    "control_dir",
    "control_reason",
    "glob_regex",
    "load_rules",
    "path_matches",
    "plan_mode_blocker",
    "project_rules_path",
    "read_project_rules",
    "rules_from_texts",
    "rules_text_with",
    "suggest_rule",
]
