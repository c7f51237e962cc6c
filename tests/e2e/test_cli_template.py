"""`agent-desk run --template`: the CLI's session takes the template's tools and narrowing, a project's
template is found, and an unknown one fails at once with the names there are."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import reply, text, tool_use

from .conftest import cli

pytestmark = pytest.mark.e2e


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), env=env, capture_output=True, text=True, timeout=120)


def test_run_with_the_explore_template_writes_nothing(env, server, tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    server.add(reply(tool_use("fs_write", {"path": "w.txt", "content": "x"})), lambda req: reply(text("ok")))
    out = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "--permission-mode", "auto",
                  "--template", "explore", "write w.txt")
    assert out.returncode == 0, out.stderr
    assert not (project / "w.txt").exists()
    assert "fs_write is not available" in server.requests[1].last_tool_result_text()
    assert "You are an explorer" in str(server.requests[0].body["system"])


def test_a_project_template_and_an_unknown_one(env, server, tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".agent-desk" / "templates").mkdir(parents=True)
    (project / ".agent-desk" / "templates" / "tester.toml").write_text(
        'system_prompt = "Only run the tests."\ntools = ["bash_run"]\n[permissions]\nalways_ask = ["bash_run"]\n')
    (project / ".agent-desk" / "templates" / "bad.toml").write_text('[permissions]\nallow = ["*"]\n')
    waiting = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "--template", "tester", "hi")
    assert waiting.returncode != 0 and "'tester' is not approved" in waiting.stderr  # a repository's: asked first
    assert "agent-desk consent approve --kind template tester" in waiting.stderr and not server.requests
    shown = run_cli(env, "consent", "approve", "tester", "--kind", "template", "--project", str(project), "--yes")
    assert shown.returncode == 0, shown.stderr
    assert "# tools: bash_run" in shown.stdout and "# rule: ask bash_run" in shown.stdout  # what it changes
    server.add(reply(tool_use("bash_run", {"command": "true"})), lambda req: reply(text("ok")))
    out = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "--permission-mode", "auto",
                  "--template", "tester", "--on-ask", "deny", "test")
    assert out.returncode == 0, out.stderr
    assert "a template cannot allow" in out.stderr  # the bad one is said, the good one used
    assert "Only run the tests." in str(server.requests[0].body["system"])
    assert [t["name"] for t in server.requests[0].body["tools"]] == ["bash_run"]
    assert "denied" in server.requests[1].last_tool_result_text()  # always_ask, even in auto
    bad = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "--template", "nope", "hi")
    assert bad.returncode != 0 and "no agent template 'nope'" in bad.stderr and "tester" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_sub_agents_approval_is_answered_by_the_cli(env, server, tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    server.add(reply(tool_use("task_run", {"task": "make x", "template": "coding", "name": "maker"})),
               reply(tool_use("bash_run", {"command": "touch x"})),
               lambda req: reply(text(f"child: {req.last_tool_result_text()[:60]}")),
               lambda req: reply(text("parent done")))
    out = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "--on-ask", "deny", "go")
    assert out.returncode == 0, out.stderr
    assert "parent done" in out.stdout and "touch x" in out.stdout  # the child's call is shown, and denied
    assert "denied" in server.requests[2].last_tool_result_text() and not (project / "x").exists()
    assert "child:" in server.requests[3].last_tool_result_text()
