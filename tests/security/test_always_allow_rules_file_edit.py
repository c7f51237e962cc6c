""""Always allow" edits the rules file with tomlkit: the person's comments, odd formatting and tables the
desk does not know survive, the rule lands where the file keeps its rules, and an edit that would mean
anything but one rule more is refused rather than written."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from desktop_app.config import trusted_rules
from desktop_app.core import ConfigError, ConsentStatus, Rule, RuleSet, append_project_rule, load_rules, rules_text_with
from desktop_app.runtime import append_trusted_rule, project_rules_trust, write_project_rules

RULE = Rule.parse("bash_run(npm test *)", "allow")

ODD = """\
# My rules — hand-written, keep this comment.
# deny first, always.

[permissions]   # the table the desk reads
mode   =   'ask'     # trailing comment on the mode
allow = [
    "fs_read(**)",      # reading is fine
    'bash_run(ls *)',   # literal string, odd spacing
]   # after the array
deny=["bash_run(curl *)"]

  # an indented comment between tables

[team]            # a table the desk does not know
owner = "ops@example.com"
reviewers = ["a", "b"]   # keep me
[team.nested]
when = 2024-01-02T03:04:05Z
"""


@pytest.fixture
def project(tmp_path: Path, desk_env: Path) -> Path:
    p = tmp_path / "project"
    (p / ".agent-desk").mkdir(parents=True)
    return p


def _rules(project: Path) -> Path:
    return project / ".agent-desk" / "rules.toml"


def _lines_kept(old: str, new: str) -> None:
    """Every line of the old text is still there, in order (the edit only adds)."""
    it = iter(new.splitlines())
    for line in old.splitlines():
        assert any(line == n for n in it), f"lost or reordered: {line!r}\n---\n{new}"


def test_always_allow_keeps_comments_formatting_and_unknown_tables(project):
    write_project_rules(project, ODD)  # the settings dialog: written as the person typed it, trusted
    assert _rules(project).read_text() == ODD
    append_trusted_rule(project, RULE)
    new = _rules(project).read_text()
    _lines_kept(ODD, new)
    assert "# My rules — hand-written, keep this comment." in new and "# keep me" in new
    data = tomllib.loads(new)
    assert data["team"] == tomllib.loads(ODD)["team"]  # the unknown table, its nested table and datetime
    assert data["permissions"]["allow"] == ["fs_read(**)", "bash_run(ls *)", "bash_run(npm test *)"]
    assert data["permissions"]["mode"] == "ask" and data["permissions"]["deny"] == ["bash_run(curl *)"]
    assert project_rules_trust(project).status is ConsentStatus.APPROVED and trusted_rules(project).text == new
    # the same rule again changes nothing, not even a byte
    append_trusted_rule(project, RULE)
    assert _rules(project).read_text() == new


@pytest.mark.parametrize("text, where", [
    ('allow = ["a"]  # top level\n\n[other]\nallow = ["not rules"]\n', ()),
    ('mode = "ask"\n# no allow yet\n[other]\nx = 1\n', ()),
    ('permissions = { allow = ["a"] }  # inline\n[z]\nk = 1\n', ("permissions",)),
    ('permissions.mode = "ask"  # dotted\n[x]\ny = 2\n', ("permissions",)),
    ('[permissions]\nmode = "ask"\n[other]\nx = 1\n[permissions.sub]\nq = 1\n', ("permissions",)),
    ('[permissions.sub]  # only a sub-table\nq = 1\n', ("permissions",)),
    ('[permissions]\r\nallow = ["a"]  # crlf\r\ndeny = []\r\n', ("permissions",)),
    ('[permissions]\nallow = [\n  "a",\n  "b"\n]  # no trailing comma\n', ("permissions",)),
    ("[permissions]\nallow = ['fs_read(C:\\\\dir)']  # literal\n", ("permissions",)),
])
def test_the_rule_lands_where_the_file_keeps_its_rules_and_nothing_else_moves(text, where):
    old, new = tomllib.loads(text), tomllib.loads(rules_text_with(text, RULE))
    table_old, table_new = old, new
    for key in where:
        table_old, table_new = table_old.get(key, {}), table_new[key]
    assert table_new["allow"] == [*table_old.get("allow", []), RULE.text]
    table_new["allow"] = table_old.get("allow", [])
    if "allow" not in table_old:
        del table_new["allow"]
    if where and "permissions" not in old:
        old["permissions"] = {}
    assert new == old  # the rest, unknown tables and the lookalike [other].allow included, is untouched
    comments = [ln for ln in text.splitlines() if "#" in ln]
    assert all(c.split("#", 1)[1] in rules_text_with(text, RULE) for c in comments)


@pytest.mark.parametrize("text", [
    "permissions = 1\n", "permissions = []\n", "[[permissions]]\nallow = []\n", 'allow = "bash_run(*)"\n',
    "allow = [1]\n", "[permissions\nallow = [", 'mode = "yolo"\n',
    "x = " + "[" * 5000 + "]" * 5000 + "\n",  # nested past the recursion limit
])
def test_a_file_that_is_not_a_rules_file_is_refused_not_rewritten(project, text):
    _rules(project).write_text(text)
    with pytest.raises(ConfigError):
        append_project_rule(project, RULE)
    assert _rules(project).read_text() == text
    with pytest.raises(ConfigError):  # loading says the same, instead of a traceback
        load_rules(project)


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40))
def test_any_pattern_round_trips_through_the_file(pattern):
    rule = Rule.parse(f"bash_run({pattern})", "deny")
    text = rules_text_with(ODD, rule)
    rules = RuleSet.from_text(text).rules
    assert [(r.action, r.text) for r in rules][-1] == (rule.action, rule.text)
    assert "[team]            # a table the desk does not know" in text


def test_a_new_file_is_made_with_the_header_and_the_three_lists(project):
    text = append_project_rule(project, Rule.parse("fs_write(src/**)", "ask"))
    assert text.startswith("# Agent Desk permission rules")
    assert tomllib.loads(text) == {"permissions": {"allow": [], "ask": ["fs_write(src/**)"], "deny": []}}
