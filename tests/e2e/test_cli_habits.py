"""`agent-desk run` with the habits of Claude Code and Codex, as a subprocess against the fake server: the
current folder is the project, `-` or a pipe is the prompt, --json opens with session_started and ends with
totals, a failed call carries its reason, ANTHROPIC_MODEL and ANTHROPIC_AUTH_TOKEN are honoured, the database is
made by `run` (and said), and a turn the loop guard paused exits 3 ("paused"), not as if an approval waited."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from desktop_app.cli import EXIT_OK, EXIT_PAUSED
from tests.fakes.anthropic_server import reply, text, tool_use

from .conftest import cli

pytestmark = pytest.mark.e2e


def _run(env: dict[str, str], *args: str, stdin: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), env=env, input=stdin, capture_output=True, text=True, timeout=120, cwd=cwd)


def test_a_turn_from_stdin_in_the_current_folder_as_json(env, server, tmp_path: Path) -> None:
    project = tmp_path / "here"
    project.mkdir()
    db = tmp_path / "new" / "desk.db"
    env = {**env, "AGENT_DESK_DB": str(db), "ANTHROPIC_MODEL": "claude-from-env",
           "ANTHROPIC_AUTH_TOKEN": server.api_key}
    del env["ANTHROPIC_API_KEY"]
    # the same read failing three times: the loop guard pauses the turn
    server.add(*(reply(tool_use("fs_read", {"path": "missing.txt"}, id=f"toolu_{i}")) for i in range(3)))
    out = _run(env, "run", "--sandbox", "local", "--json", "-", stdin="read missing.txt\n", cwd=project)
    assert out.returncode == EXIT_PAUSED, out.stderr
    assert f"creating the audit database {db}" in out.stderr and db.exists()
    lines = [json.loads(x) for x in out.stdout.splitlines()]
    started, totals = lines[0], lines[-1]
    assert started["type"] == "session_started"
    facts = started["payload"]
    assert (facts["model"], facts["project"], facts["sandbox"]) == ("claude-from-env", str(project.resolve()),
                                                                   "local")
    assert facts["session_id"].startswith("ses_") and facts["mode"] and facts["image"]
    ends = [x["payload"] for x in lines if x["type"] == "tool:end"]
    assert len(ends) == 3 and all(e["state"] == "FAILED" and "missing.txt" in e["reason"] for e in ends), ends
    assert totals["type"] == "totals"
    t = totals["payload"]
    assert t["calls"] == {"failed": 3} and t["reason"] == "paused" and t["exit_code"] == EXIT_PAUSED
    assert t["input_tokens"] > 0 and t["output_tokens"] > 0 and t["duration_s"] > 0
    assert t["session_id"] == facts["session_id"]
    first = server.requests[0]
    assert first.body["model"] == "claude-from-env"
    assert first.headers.get("authorization") == f"Bearer {server.api_key}" and "x-api-key" not in first.headers
    assert first.body["messages"][0]["content"][0]["text"] == "read missing.txt\n"

    # a pipe with no prompt at all is the prompt; the flag beats ANTHROPIC_MODEL; the database exists: no notice
    server.add(reply(text("hello back")))
    again = _run(env, "run", "--sandbox", "local", "--model", "claude-from-flag", stdin="hello from a pipe",
                 cwd=project)
    assert again.returncode == EXIT_OK, again.stderr
    assert "hello back" in again.stdout and "creating" not in again.stderr
    assert server.requests[-1].body["model"] == "claude-from-flag"
    assert server.requests[-1].body["messages"][-1]["content"][0]["text"] == "hello from a pipe"


def test_an_empty_prompt_from_stdin_is_refused(env, server, tmp_path: Path) -> None:
    out = _run(env, "run", "--sandbox", "local", "-", stdin="  \n", cwd=tmp_path)
    assert out.returncode == 2 and "The prompt read from stdin is empty" in out.stderr
    assert "Traceback" not in out.stderr and not server.requests
