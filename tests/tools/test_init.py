"""The package surface: BUILTIN_TOOLS, their flags and schemas, summaries, preview_diff."""

from __future__ import annotations

import pytest

from desktop_app.tools import BUILTIN_TOOLS, builtin_tools, preview_diff

EXPECTED = {
    # name: (read_only, group)
    "fs_read": (True, "group:fs"),
    "fs_write": (False, "group:fs"),
    "fs_edit": (False, "group:fs"),
    "fs_multi_edit": (False, "group:fs"),
    "fs_glob": (True, "group:fs"),
    "fs_grep": (True, "group:fs"),
    "notebook_edit": (False, "group:fs"),
    "bash_run": (False, "group:runtime"),
    "bash_logs": (True, "group:runtime"),
    "bash_kill": (False, "group:runtime"),
    "todo_read": (True, "group:todo"),
    "todo_write": (False, "group:todo"),
    "web_fetch": (True, "group:web"),
    "ask_user": (True, "group:person"),
    "exit_plan_mode": (True, "group:person"),
}

INPUT_FIELDS = {
    "fs_read": {"path", "offset", "limit"},
    "fs_write": {"path", "content"},
    "fs_edit": {"path", "old_string", "new_string", "replace_all"},
    "fs_multi_edit": {"edits"},
    "fs_glob": {"pattern", "path", "include_ignored", "newest_first"},
    "fs_grep": {"pattern", "path", "glob", "ignore_case", "max_results", "include_ignored"},
    "notebook_edit": {"path", "edit_mode", "cell_id", "index", "new_source", "cell_type"},
    "bash_run": {"command", "timeout_ms", "background"},
    "bash_logs": {"process_id"},
    "bash_kill": {"process_id"},
    "todo_read": set(),
    "todo_write": {"todos"},
    "web_fetch": {"url", "format", "max_bytes"},
    "ask_user": {"question", "choices"},
    "exit_plan_mode": {"plan"},
}


def test_the_builtin_tools_have_the_fixed_names_flags_and_inputs():
    tools = {t.name: t for t in builtin_tools()}
    assert len(tools) == len(BUILTIN_TOOLS) == len(EXPECTED)
    for name, (read_only, group) in EXPECTED.items():
        t = tools[name]
        assert (t.read_only, t.group) == (read_only, group), name
        assert t.description and t.timeout_s and t.risk in ("low", "medium", "high")
        schema = t.input_schema()
        assert set(schema.get("properties", {})) == INPUT_FIELDS[name], name
        assert schema.get("additionalProperties") is False, name
        api = t.to_api()
        assert api["name"] == name and api["input_schema"]["type"] == "object"
    assert tools["bash_run"].timeout_s > 600  # the sandbox's 600 s cap must fire first
    assert builtin_tools() is not BUILTIN_TOOLS


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("bash_run", {"command": "git status"}, "bash_run: git status"),
        ("bash_run", {"command": "make\nmake test"}, "bash_run: make …"),
        ("bash_run", {"command": "npm start", "background": True}, "bash_run: npm start (background)"),
        ("fs_edit", {"path": "src/app.py", "old_string": "a\n", "new_string": "b\nc\nd\n"},
         "fs_edit src/app.py (+3 -1)"),
        ("fs_read", {"path": "a.py"}, "fs_read a.py"),
        ("fs_read", {"path": "a.py", "offset": 10, "limit": 5}, "fs_read a.py (lines 10-14)"),
        ("fs_write", {"path": "n.txt", "content": "1\n2\n"}, "fs_write n.txt (2 lines)"),
        ("fs_multi_edit", {"edits": [{"path": "a", "old_string": "x", "new_string": "y"},
                                     {"path": "b", "old_string": "x", "new_string": "y\nz"}]},
         "fs_multi_edit 2 edits in a, b (+3 -2)"),
        ("fs_glob", {"pattern": "**/*.py", "path": "src"}, "fs_glob **/*.py in src"),
        ("fs_grep", {"pattern": "TODO", "glob": "*.py"}, "fs_grep 'TODO' (*.py)"),
        ("bash_logs", {"process_id": "p1"}, "bash_logs p1"),
        ("bash_kill", {"process_id": "p1"}, "bash_kill p1"),
        ("todo_read", {}, "todo_read"),
        ("todo_write", {"todos": [{"status": "completed"}, {"status": "in_progress"}]},
         "todo_write: 2 todos (1 done, 1 in progress)"),
        ("web_fetch", {"url": "https://pypi.org/simple/x/"}, "web_fetch: https://pypi.org/simple/x/"),
    ],
)
def test_summaries(name, raw, expected):
    tool = {t.name: t for t in BUILTIN_TOOLS}[name]
    assert tool.summarize(raw) == expected


def test_summaries_survive_partial_input():
    # The input may still be streaming in as partial JSON.
    for t in BUILTIN_TOOLS:
        line = t.summarize({})
        assert line.startswith(t.name) and "\n" not in line
        t.summarize({"edits": "not a list", "todos": None, "command": None, "old_string": 3})


async def test_preview_diff_shows_what_would_change_without_writing(sandbox):
    await sandbox.write_file("a.py", b"x = 1\ny = 2\n")
    diff = await preview_diff("fs_edit", {"path": "a.py", "old_string": "x = 1", "new_string": "x = 9"}, sandbox)
    assert diff == "--- a/a.py\n+++ b/a.py\n@@ -1,2 +1,2 @@\n-x = 1\n+x = 9\n y = 2\n"
    # No read in any session was needed, and nothing was written.
    assert await sandbox.read_file("a.py") == b"x = 1\ny = 2\n"

    created = await preview_diff("fs_write", {"path": "new/b.txt", "content": "hi\n"}, sandbox)
    assert created == "--- /dev/null\n+++ b/new/b.txt\n@@ -0,0 +1 @@\n+hi\n"
    assert await sandbox.stat("new/b.txt") is None

    replaced = await preview_diff("fs_write", {"path": "a.py", "content": "x = 1\n"}, sandbox)
    assert "-y = 2\n" in replaced

    both = await preview_diff(
        "fs_multi_edit",
        {"edits": [{"path": "a.py", "old_string": "y = 2", "new_string": "y = 3"},
                   {"path": "a.py", "old_string": "y = 3", "new_string": "y = 4"}]},
        sandbox,
    )
    assert "-y = 2\n+y = 4\n" in both


async def test_preview_diff_none_for_other_tools_and_bad_input(sandbox):
    await sandbox.write_file("a.py", b"x\n")
    assert await preview_diff("bash_run", {"command": "ls"}, sandbox) is None
    assert await preview_diff("fs_edit", {"path": "a.py"}, sandbox) is None
    assert await preview_diff("fs_edit", {"path": "a.py", "old_string": "zz", "new_string": "y"}, sandbox) is None
    assert await preview_diff("fs_write", {"path": "../out", "content": "x"}, sandbox) is None


def test_no_tool_module_imports_the_host_filesystem_or_processes():
    # A tool never touches the host: it asks ctx.sandbox.
    import ast
    import pathlib

    import desktop_app.tools as pkg

    banned = {"os", "subprocess", "shutil", "pathlib", "glob", "tempfile", "docker", "PySide6"}
    for py in pathlib.Path(pkg.__file__).parent.glob("*.py"):
        tree = ast.parse(py.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            assert not (set(names) & banned), f"{py.name} imports {names}"
        assert "open(" not in py.read_text(), py.name
