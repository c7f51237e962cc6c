"""Agent templates as data: the TOML shape and its errors, where they come from (built in, the user's, the
project's), and NarrowedPolicy on top of a real PermissionPolicy."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from desktop_app.core import (
    BUILTIN_TEMPLATES,
    Action,
    ConfigError,
    NarrowedPolicy,
    PermissionMode,
    PermissionPolicy,
    RuleSet,
    ToolFacts,
    load_templates,
    rules_from_texts,
    template_from_text,
)

BASH = ToolFacts("bash_run", "group:runtime")
WRITE = ToolFacts("fs_write", "group:fs")
READ = ToolFacts("fs_read", "group:fs", read_only=True)

FULL = '''
description = "Checks the tests"
system_prompt = "Run the tests and say what fails."
tools = ["fs_read", "group:runtime"]
model = "claude-haiku-4-5"
[permissions]
mode = "ask"
deny = ["bash_run(rm *)"]
ask = ["fs_read(secrets/**)"]
always_ask = ["bash_run"]
'''


def test_a_template_file_is_read_whole() -> None:
    t = template_from_text(FULL, "tester", "project:/p/.agent-desk/templates/tester.toml")
    assert (t.name, t.model, t.mode) == ("tester", "claude-haiku-4-5", PermissionMode.ASK)
    assert t.tools == frozenset({"fs_read", "group:runtime"})
    assert {(r.action, r.text) for r in t.rules} == {
        (Action.DENY, "bash_run(rm *)"), (Action.ASK, "fs_read(secrets/**)"), (Action.ASK, "bash_run")}
    assert t.system_prompt.startswith("Run the tests")
    assert "tools: fs_read, group:runtime" in t.summary()


@pytest.mark.parametrize(("text", "says"), [
    ('[permissions]\nallow = ["bash_run"]', "cannot allow: it only narrows"),
    ('[permissions]\nmode = "yolo"', "unknown permission mode 'yolo'"),
    ('colour = "red"', "unknown template key(s): colour"),
    ('tools = "fs_read"', "tools must be a list"),
    ('profile = "everything"', "unknown tool profile"),
    ('tools = ["fs_read"]\nprofile = "minimal"', "tools or profile, not both"),
    ('[permissions]\nalways_ask = ["bash_run(ls)"]', "always_ask names whole tools"),
    ('[permissions]\ndeny = [1]', "permissions.deny must be a list of strings"),
    ('name = ', "not valid TOML"),
    ("a = " + "[" * 3000 + "]" * 3000, "not valid TOML"),
])
def test_a_bad_template_says_what_is_wrong_and_where(text: str, says: str) -> None:
    with pytest.raises(ConfigError) as exc:
        template_from_text(text, "bad", "project:/p/bad.toml")
    assert says in str(exc.value) and "/p/bad.toml" in str(exc.value)


def test_user_replaces_built_in_and_project_only_adds(tmp_path: Path) -> None:
    user = tmp_path / "cfg" / "templates"
    user.mkdir(parents=True)
    (user / "explore.toml").write_text('description = "my explore"\ntools = ["fs_read"]')
    (user / "mine.toml").write_text('description = "mine"')
    project = tmp_path / "project"
    (project / ".agent-desk" / "templates").mkdir(parents=True)
    (project / ".agent-desk" / "templates" / "mine.toml").write_text('description = "the project\'s"')
    (project / ".agent-desk" / "templates" / "broken.toml").write_text('[permissions]\nallow = ["*"]')
    (project / ".agent-desk" / "templates" / "notes.md").write_text("not a template")
    catalog = load_templates(project, user)
    assert catalog.get("explore").description == "my explore" and catalog.get("explore").source.startswith("user:")
    # a project's template never replaces the person's (nor a built-in one): it is said, and ignored
    assert catalog.get("mine").description == "mine" and catalog.get("mine").source.startswith("user:")
    assert any("ignored: it would replace the user:" in p for p in catalog.problems)
    assert catalog.get("read-only review") is BUILTIN_TEMPLATES["read-only review"]
    assert catalog.get(None).name == "coding"
    assert "broken" not in catalog.names and any("cannot allow" in p for p in catalog.problems)
    with pytest.raises(ConfigError, match="no agent template 'nope'") as exc:
        catalog.get("nope")
    assert "explore" in exc.value.hint


def test_a_linked_templates_folder_is_refused_not_followed(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "evil.toml").write_text('description = "from outside"')
    project = tmp_path / "project"
    (project / ".agent-desk").mkdir(parents=True)
    os.symlink(elsewhere, project / ".agent-desk" / "templates")
    catalog = load_templates(project)
    assert "evil" not in catalog.names and any("symbolic link" in p for p in catalog.problems)


def test_a_linked_template_file_is_refused(tmp_path: Path) -> None:
    project = tmp_path / "project"
    folder = project / ".agent-desk" / "templates"
    folder.mkdir(parents=True)
    (tmp_path / "outside.toml").write_text('description = "outside"')
    os.symlink(tmp_path / "outside.toml", folder / "linked.toml")
    catalog = load_templates(project)
    assert "linked" not in catalog.names and any("symbolic link" in p for p in catalog.problems)


def test_narrowing_adds_the_templates_asks_and_mode() -> None:
    person = PermissionPolicy("auto", rules_from_texts([("allow", "bash_run(npm test)")], "user"))
    tester = template_from_text(FULL, "tester", "test")
    policy = NarrowedPolicy(person, tester)
    assert person.evaluate(BASH, {"command": "npm test"}).action is Action.ALLOW
    decided = policy.evaluate(BASH, {"command": "npm test"})
    assert decided.action is Action.ASK and "template tester" in decided.reason
    assert policy.evaluate(BASH, {"command": "rm -r x"}).action is Action.DENY
    assert policy.evaluate(READ, {"path": "src/a.py"}).action is Action.ALLOW
    assert policy.evaluate(READ, {"path": "secrets/k"}).action is Action.ASK


def test_the_read_only_mode_of_explore_denies_what_the_person_would_be_asked() -> None:
    policy = NarrowedPolicy(PermissionPolicy("ask"), BUILTIN_TEMPLATES["explore"])
    asked = policy.evaluate(WRITE, {"path": "a.txt", "content": "x"})
    assert policy.resolve_ask(asked).action is Action.DENY
    assert policy.evaluate(READ, {"path": "a.txt"}).action is Action.ALLOW


def test_session_rules_go_to_the_persons_policy() -> None:
    person = PermissionPolicy("ask")
    policy = NarrowedPolicy(person, template_from_text('[permissions]\ndeny = ["fs_write(secret*)"]', "t", "t"))
    from desktop_app.core import Rule

    policy.add_rule(Rule.parse("fs_write", Action.ALLOW, "session"), session_id="child")
    assert person.rules_for("child") and policy.evaluate(WRITE, {"path": "a"}, session_id="child").allowed
    assert policy.evaluate(WRITE, {"path": "secret.txt"}, session_id="child").action is Action.DENY
    assert not policy.evaluate(WRITE, {"path": "a"}, session_id="other").allowed


def test_nested_narrowing_keeps_both() -> None:
    person = PermissionPolicy("auto", RuleSet())
    outer = NarrowedPolicy(person, template_from_text('[permissions]\ndeny = ["bash_run(curl *)"]', "o", "o"))
    inner = NarrowedPolicy(outer, template_from_text('[permissions]\nask = ["fs_write"]', "i", "i"))
    assert inner.evaluate(BASH, {"command": "curl x"}).action is Action.DENY
    assert inner.evaluate(WRITE, {"path": "a"}).action is Action.ASK
    assert inner.evaluate(BASH, {"command": "ls"}).action is Action.ALLOW
