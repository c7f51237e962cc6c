"""Writing a rules.toml: one more rule added with tomlkit, so the person's comments, formatting and any
table the desk does not know stay as they were; the result is checked to mean exactly one rule more."""

from __future__ import annotations

import copy
import json
import tomllib
from pathlib import Path
from typing import Any

import tomlkit
from tomlkit.exceptions import TOMLKitError

from .._errors import ConfigError
from .._safe_files import write_beneath
from ._rules import PROJECT_RULES, Action, Rule, RuleSet, read_project_rules

HEADER = "# Agent Desk permission rules: deny > ask > allow > mode."


def rules_text_with(text: str | None, rule: Rule) -> str:
    """rules.toml text with one more rule, keeping everything that is there: rules, mode, comments, layout
    and unknown tables. The rule goes where the file keeps its rules (a `[permissions]` table, inline or
    dotted, else the top level). Text that already has the rule comes back unchanged. ConfigError when
    the text is not a rules file, or when the edit would mean anything but that one rule more."""
    if not text or not text.strip():
        return _new_file(rule)
    RuleSet.from_text(text, "project")  # the same checks, and the same errors, as loading it
    if rule.text in _texts(tomllib.loads(text), rule.action):
        return text
    try:
        doc = tomlkit.parse(text)
        perms = doc["permissions"] if "permissions" in doc else doc
        if rule.action.value in perms:
            perms[rule.action.value].append(rule.text)
        else:
            perms[rule.action.value] = [rule.text]
        new = tomlkit.dumps(doc)
    except (TOMLKitError, KeyError, TypeError, ValueError) as e:
        raise ConfigError(f"cannot add the rule {rule.text!r} to the rules file: {e}",
                          hint="add it by hand in the project's rules") from e
    _check_one_more(text, new, rule)
    return new


def append_project_rule(project_dir: str | Path, rule: Rule) -> str:
    """Add one rule to the project's rules file, keeping what is there; returns the text written. Read and
    written without following links (a random O_EXCL temp file, renamed in place)."""
    text = rules_text_with(read_project_rules(project_dir), rule)
    write_beneath(project_dir, PROJECT_RULES, text)
    return text


def _new_file(rule: Rule) -> str:
    lines = [HEADER, "[permissions]"]
    for action in Action:
        body = json.dumps(rule.text, ensure_ascii=False) if action is rule.action else ""
        lines.append(f"{action.value} = [{body}]")
    return "\n".join(lines) + "\n"


def _rules_table(data: dict[str, Any]) -> dict[str, Any]:
    return data.get("permissions", data)


def _texts(data: dict[str, Any], action: Action) -> list[str]:
    return list(_rules_table(data).get(action.value, []))


def _check_one_more(old: str, new: str, rule: Rule) -> None:
    """The written text must read as the old one plus this rule, and nothing else: a rule that landed in
    another table, a changed mode or a lost key would be a silent change of policy."""
    expected = copy.deepcopy(tomllib.loads(old))
    _rules_table(expected).setdefault(rule.action.value, []).append(rule.text)
    try:
        got = tomllib.loads(new)
    except tomllib.TOMLDecodeError:
        got = None
    if got != expected:
        raise ConfigError(f"adding the rule {rule.text!r} would change more of the rules file than that rule",
                          hint="add it by hand in the project's rules")
