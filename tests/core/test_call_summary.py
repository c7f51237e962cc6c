"""Each tool's label and card (core/_call_summary.py, Tool.card): every built-in's title and fields in its
own order, and what its result says; the default any other tool gets (a plugin's, labelled or not, and one whose
own builder breaks); an MCP call the desk has no live tool for; and the catalogue that finds the tool."""

from __future__ import annotations

import pytest

from desktop_app.core import (
    CallField,
    ToolCallRecord,
    ToolLabels,
    ToolRegistry,
    default_summary,
    label_from_name,
    tool,
)
from desktop_app.runtime import tool_labels
from desktop_app.runtime._plugins import PluginTool
from desktop_app.tools import BUILTIN_TOOLS

EDIT = {"path": "src/app.py", "old_string": "x = 1", "new_string": "x = 2\ny = 3"}
# tool name -> (its input, its label, the title, the fields' names in order)
BUILTINS = {
    "bash_run": ({"command": "pytest -q\nruff check", "timeout_ms": 5000}, "Run command",
                 "Run command: pytest -q ruff check", ["Command", "Folder", "Time limit"]),
    "bash_logs": ({"process_id": "p7"}, "Read process output", "Read process output: p7", ["Process"]),
    "bash_kill": ({"process_id": "p7"}, "Stop process", "Stop process: p7", ["Process"]),
    "fs_read": ({"path": "a.py", "offset": 10, "limit": 5}, "Read file", "Read file: a.py", ["Path", "Lines"]),
    "fs_write": ({"path": "a.py", "content": "a\nb\n"}, "Write file", "Write file: a.py", ["Path", "Size", "Content"]),
    "fs_edit": (EDIT, "Edit file", "Edit file: src/app.py", ["Path", "Diff"]),
    "fs_multi_edit": ({"edits": [EDIT, {**EDIT, "path": "b.py"}]}, "Edit files", "Edit files: src/app.py, b.py",
                      ["Files", "Edits", "Diff"]),
    "fs_glob": ({"pattern": "**/*.py"}, "Find files", "Find files: **/*.py", ["Pattern", "Folder"]),
    "fs_grep": ({"pattern": "TODO", "glob": "*.py", "ignore_case": True}, "Search files", "Search files: TODO",
                ["Pattern", "Folder", "Files", "Case"]),
    "notebook_edit": ({"path": "n.ipynb", "edit_mode": "insert", "index": 2, "new_source": "print(1)"},
                      "Edit notebook", "Edit notebook: n.ipynb", ["Notebook", "Action", "Source"]),
    "todo_read": ({}, "Read todo list", "Read todo list", []),
    "todo_write": ({"todos": [{"id": "1", "content": "tests", "status": "pending"},
                              {"id": "2", "content": "docs", "status": "completed"}]},
                   "Update todo list", "Update todo list: 2: 1 pending, 1 completed", ["Items", "List"]),
    "web_fetch": ({"url": "https://docs.example.org:8443/a?b=1", "format": "markdown"}, "Fetch web page",
                  "Fetch web page: https://docs.example.org:8443/a?b=1", ["URL", "Domain", "As"]),
    "ask_user": ({"question": "Which one?", "choices": ["a", "b"]}, "Ask you", "Ask you: Which one?",
                 ["Question", "Choices"]),
    "exit_plan_mode": ({"plan": "# Plan\n1. tests"}, "Propose a plan", "Propose a plan: # Plan 1. tests", ["Plan"]),
    "git_commit": ({"message": "Fix the parser", "paths": ["a.py", "b.py"]}, "Commit changes",
                   "Commit changes: Fix the parser", ["Message", "Files"]),
    "task_run": ({"task": "Find the bug", "template": "explore"}, "Start a sub-agent",
                 "Start a sub-agent: Find the bug", ["Task", "Template"]),
    "skill": ({"name": "pdf"}, "Load a skill", "Load a skill: pdf", ["Skill"]),
}


def test_every_built_in_tool_has_a_label_and_its_own_card() -> None:
    labels = tool_labels()
    assert {t.name for t in BUILTIN_TOOLS} | {"git_commit", "task_run", "skill"} == set(BUILTINS)
    for name, (raw, label, title, fields) in BUILTINS.items():
        card = labels.summary(name, raw)
        assert (card.label, card.title, [f.name for f in card.fields]) == (label, title, fields), name
        assert labels.label(name) == label and card.outcome == ()
    bash = labels.summary("bash_run", BUILTINS["bash_run"][0])
    assert bash.value("Command") == "pytest -q\nruff check" and bash.value("Folder") == "/workspace"
    assert bash.value("Time limit") == "5 s" and bash.fields[0].kind == "code"
    edit = labels.summary("fs_edit", EDIT)
    assert edit.fields[1].kind == "diff" and "-x = 1\n+x = 2\n+y = 3\n" in edit.value("Diff")
    assert "a/src/app.py" in edit.value("Diff")
    web = labels.summary("web_fetch", BUILTINS["web_fetch"][0])
    assert web.value("Domain") == "docs.example.org" and web.fields[0].kind == "url"
    assert labels.summary("git_commit", {"message": "m"}).value("Files") == "every change"
    assert labels.summary("fs_read", {"path": "a.py", "limit": 3}).value("Lines") == "1-3"
    # a card is built on the window's thread: a huge edit is described, not diffed there
    huge = labels.summary("fs_edit", {"path": "big.txt", "old_string": "a\n" * 40_000, "new_string": "b\n" * 40_001})
    assert huge.value("Diff") == ("a large edit of big.txt: 40000 lines replaced by 40001 (the raw input and the "
                                  "dry run's diff hold it whole)")


def test_a_result_adds_what_the_tool_says_of_it() -> None:
    labels = tool_labels()
    ran = {"content": [{"type": "text", "text": "exit 2"}], "is_error": False,
           "details": {"exit_code": 2, "cwd": "/workspace", "stdout": "a\nb\n", "stderr": "E: no such file\n"}}
    card = labels.summary("bash_run", {"command": "ls x"}, ran)
    assert [(f.name, f.value) for f in card.outcome] == [
        ("Exit", "2"), ("Folder", "/workspace"), ("Error", "E: no such file"), ("Output", "3 lines")]
    timed = {**ran, "details": {**ran["details"], "exit_code": None, "timed_out": True}}
    assert labels.summary("bash_run", {"command": "sleep 9"}, timed).value("Exit") == "timed out"
    diff = "--- a/x\n+++ b/x\n@@ -1 +1,2 @@\n-a\n+b\n+c\n"
    edited = labels.summary("fs_edit", EDIT, {"content": [{"type": "text", "text": "ok"}], "details": {"diff": diff}})
    assert edited.value("Changed") == "+2 -1 lines" and edited.outcome[1] == CallField("Diff", diff, "diff")
    fetched = {"content": [{"type": "text", "text": "HTTP 200"}], "details": {"status": 200, "url": "https://x.org/",
                                                                            "bytes": 12345}}
    assert [f.value for f in labels.summary("web_fetch", {"url": "http://x.org"}, fetched).outcome] == [
        "200", "https://x.org/", "12,345 bytes"]
    committed = {"content": [], "details": {"commit": "0123456789abcdef", "branch": "main", "files": ["a.py"]}}
    assert labels.summary("git_commit", {"message": "m"}, committed).value("Commit") == "0123456789ab on main"
    refused = {"content": [{"type": "text", "text": '{"ok": false, "error": "no such file: a.py"}'}],
               "is_error": True}
    assert labels.summary("fs_read", {"path": "a.py"}, refused).outcome == (CallField("Error", "no such file: a.py"),)
    plain = {"content": [{"type": "text", "text": "\nfirst\nsecond"}]}
    assert labels.summary("fs_glob", {"pattern": "*"}, plain).value("Result") == "3 lines: first"


@tool(read_only=True)
async def word_count(path: str, min_length: int = 1) -> str:
    """Count words."""
    return "0"


@tool(label="Count lines")
async def line_tally(path: str) -> str:
    """Count lines."""
    return "0"


def test_a_plugins_tool_gets_a_label_from_its_name_or_its_own_and_a_default_card() -> None:
    plain, labelled = PluginTool(word_count, "wc-plugin", "1.0"), PluginTool(line_tally, "lt-plugin", "2.0")
    assert plain.display_label == "Word count" and labelled.display_label == "Count lines"
    card = plain.card({"min_length": 3, "path": "a.txt"})  # the schema's order, not the model's
    assert card.title == "Word count: a.txt"
    assert [(f.name, f.value) for f in card.fields] == [("Path", "a.txt"), ("Min length", "3")]
    assert labelled.card({"path": "b"}).title == "Count lines: b"
    for taken in ("Run command", "read FILE"):  # a desk tool's label: the plugin's own name goes beside it
        impostor = tool(label=taken)(word_count._fn)
        assert PluginTool(impostor, "evil", "6.6").display_label == f"{taken} (plugin word_count)"

    def boom(raw):
        raise RuntimeError("a plugin's card builder that breaks")

    line_tally.card_fields = boom  # the plugin's own builder fails: the card falls back, never missing
    broken = PluginTool(line_tally, "lt-plugin", "2.0").card({"path": "b"}, {"content": [], "is_error": False})
    assert broken.title == "Count lines: b" and broken.value("Result") == "nothing"
    registry = ToolRegistry([plain])
    labels = ToolLabels()
    labels.watch(registry)
    assert labels.label("word_count") == "Word count" and labels.find("word_count") is plain
    del registry
    import gc

    gc.collect()
    assert labels.find("word_count") is None  # a closed runtime's tools leave with it


@pytest.mark.parametrize(("name", "label"), [
    ("mcp__github__create_issue", "Create issue (github)"), ("mcp__my_notes__appendNote", "Append note (my_notes)"),
    ("word-count", "Word count"), ("x", "X"), ("mcp__broken", "Mcp broken")])
def test_a_label_from_a_name(name: str, label: str) -> None:
    assert label_from_name(name) == label


def test_an_mcp_call_without_its_live_tool_names_its_server_tool_and_arguments() -> None:
    card = default_summary("mcp__db__run_query", {"sql": "select 1", "limit": 5, "opts": {"a": [1]}})
    assert card.label == "Run query (db)" and card.title == "Run query (db): select 1"
    assert [(f.name, f.kind) for f in card.fields] == [("Server", "name"), ("Tool", "name"), ("Sql", "text"),
                                                      ("Limit", "text"), ("Opts", "json")]
    assert card.value("Server") == "db" and card.value("Tool") == "run_query" and card.value("Limit") == "5"
    assert tool_labels().summary("mcp__db__run_query", {}).title == "Run query (db)"
    rec = ToolCallRecord(name="mcp__db__run_query", input="not a dict")  # type: ignore[arg-type]
    assert tool_labels().summary(rec.name, rec.input).fields[:2] == card.fields[:2]
