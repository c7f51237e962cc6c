"""The CLI's side of issue 16 as a subprocess against the fake server: `--on-ask prompt` puts the model's
question and plan to the terminal (stdin here: the process has no controlling terminal), `--on-ask deny`
tells the model nobody will answer, `--json` carries the question as an event, and `sessions status`
prints the agent's state as the store last recorded it."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import reply, text, tool_use

from .conftest import cli

pytestmark = pytest.mark.e2e


def run_cli(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    # A new session: no /dev/tty, so the question is answered from stdin, as in a pipeline.
    return subprocess.run(cli(*args), env=env, capture_output=True, text=True, timeout=120, input=stdin,
                          start_new_session=True)


def _project(tmp_path: Path) -> str:
    (tmp_path / "p").mkdir()
    return str(tmp_path / "p")


def test_a_question_is_asked_at_the_terminal_and_the_answer_reaches_the_model(env, server, tmp_path) -> None:
    server.add(reply(tool_use("ask_user", {"question": "Which db?", "choices": ["sqlite", "postgres"]})),
               lambda req: reply(text(req.last_tool_result_text())))
    out = run_cli(env, "run", "--project", _project(tmp_path), "--sandbox", "local", "--on-ask", "prompt",
                  "set it up", stdin="2\n")
    assert out.returncode == 0, out.stderr
    assert "The agent asks: Which db?" in out.stderr and "2. postgres" in out.stderr
    assert "The person answered: postgres" in out.stdout
    audit = run_cli(env, "audit", "list")
    assert "ask_user" in audit.stdout and "COMPLETED" in audit.stdout


def test_with_on_ask_deny_the_model_is_told_no_answer_will_come_and_json_carries_the_question(
        env, server, tmp_path) -> None:
    server.add(reply(tool_use("ask_user", {"question": "Delete the cache?"})),
               lambda req: reply(text(req.last_tool_result_text())))
    out = run_cli(env, "run", "--project", _project(tmp_path), "--sandbox", "local", "--json", "go")
    assert out.returncode == 0, out.stderr
    envs = [json.loads(line) for line in out.stdout.splitlines()]
    [asked] = [e for e in envs if e["type"] == "question_asked"]
    [answered] = [e for e in envs if e["type"] == "question_answered"]
    assert asked["payload"]["text"] == "Delete the cache?" and answered["payload"]["answered"] is False
    agent = [e["payload"]["state"] for e in envs
             if e["type"] == "state_changed" and e["payload"].get("scope") == "agent"]
    assert agent == ["WORKING", "READY"]
    assert "No answer will come" in server.requests[1].last_tool_result_text()


def test_a_plan_approved_at_the_terminal_switches_the_mode_and_the_write_runs(env, server, tmp_path) -> None:
    folder = _project(tmp_path)
    server.add(reply(tool_use("fs_write", {"path": "early.txt", "content": "x"})),
               reply(tool_use("exit_plan_mode", {"plan": "1. write `a.txt`"})),
               reply(tool_use("fs_write", {"path": "a.txt", "content": "planned"})),
               reply(text("done")))
    out = run_cli(env, "run", "--project", folder, "--sandbox", "local", "--permission-mode", "plan",
                  "--on-ask", "prompt", "plan then write", stdin="a auto\n")
    assert out.returncode == 0, out.stderr
    assert "The agent's plan:" in out.stderr and "write `a.txt`" in out.stderr
    assert "plan mode" in server.requests[1].last_tool_result_text()
    assert not (tmp_path / "p" / "early.txt").exists()
    assert (tmp_path / "p" / "a.txt").read_text() == "planned"


def test_sessions_status_prints_the_recorded_state_and_json(env, server, tmp_path) -> None:
    server.add(reply(tool_use("fs_write", {"path": "x.txt", "content": "x"})))
    out = run_cli(env, "run", "--project", _project(tmp_path), "--sandbox", "local", "--permission-mode", "ask",
                  "--on-ask", "deny", "write")
    session_id = out.stderr.split("session ", 1)[1].split()[0]
    shown = run_cli(env, "sessions", "status", session_id)
    assert shown.returncode == 0, shown.stderr
    assert "state     STOPPED" in shown.stdout or "state     READY" in shown.stdout
    assert "(as last recorded)" in shown.stdout
    data = json.loads(run_cli(env, "sessions", "status", session_id, "--json").stdout)
    assert data["session_id"] == session_id and data["live"] is False
    assert data["state"] in ("READY", "STOPPED") and data["pending_approvals"] == []
    assert data["steps"] >= 1 and data["cursor"] > 0
    missing = run_cli(env, "sessions", "status", "ses_nope")
    assert missing.returncode != 0 and "There is no session" in missing.stderr
