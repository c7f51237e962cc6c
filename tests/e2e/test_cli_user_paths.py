"""The CLI as a new user meets it: no API key, terminal approvals (`--on-ask prompt`), image commands."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import reply, text, tool_use

from .conftest import cli

pytestmark = pytest.mark.e2e


def run_with_stdin(env: dict[str, str], stdin: str, *args: str) -> subprocess.CompletedProcess[str]:
    # A new session has no controlling terminal, so the question is answered from stdin.
    return subprocess.run(cli(*args), env=env, input=stdin, capture_output=True, text=True, timeout=120,
                          start_new_session=True)


def echo_result(req):
    return reply(text(f"the tool said: {req.last_tool_result_text()}"))


@pytest.mark.parametrize(("answer", "written"), [("y\n", True), ("n not that file, use notes/\n", False)])
def test_on_ask_prompt_asks_at_the_terminal(env, server, tmp_path: Path, answer, written) -> None:
    project = tmp_path / "p"
    project.mkdir()
    server.add(reply(tool_use("fs_write", {"path": "x.txt", "content": "hi\n"})), echo_result)
    out = run_with_stdin(env, answer, "run", "--project", str(project), "--sandbox", "local",
                         "--on-ask", "prompt", "write x.txt")
    assert out.returncode == 0, out.stderr
    assert "Allow fs_write" in out.stderr
    assert (project / "x.txt").exists() is written
    seen_by_model = server.requests[-1].last_tool_result_text()
    if written:
        assert "x.txt" in seen_by_model
    else:
        assert "not that file, use notes/" in seen_by_model


def test_on_ask_prompt_shows_the_whole_command_with_its_risk(env, server, tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    command = "echo " + "padding-" * 60 + "\r\x1b[2K ; touch pwned.txt"
    server.add(reply(tool_use("bash_run", {"command": command})), echo_result)
    out = run_with_stdin(env, "n\n", "run", "--project", str(project), "--sandbox", "local",
                         "--on-ask", "prompt", "run it")
    assert out.returncode == 0, out.stderr
    question = out.stderr[out.stderr.index("Allow bash_run? risk "):]
    # Past the old 200-character cut, and with what would hide it on a terminal written out.
    assert "padding-" * 60 + "\\r\\x1b[2K ; touch pwned.txt" in question
    assert f"the whole command: {len(command)} characters" in question
    assert "\r" not in question and "\x1b" not in question
    assert not (project / "pwned.txt").exists()


@pytest.mark.docker
def test_images_list_and_build_show_status_and_progress(env, docker_client) -> None:
    listed = subprocess.run(cli("images", "list"), env=env, capture_output=True, text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    rows = {line.split()[0]: line for line in listed.stdout.splitlines()}
    assert {"minimal", "python", "node"} <= set(rows)
    assert "built" in rows["minimal"]
    built = subprocess.run(cli("images", "build", "minimal"), env=env, capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    assert "Step 1/" in built.stderr  # the build's progress, streamed
    assert built.stdout.startswith("built agent-desk/minimal:latest")


def test_images_build_of_an_unknown_image_is_a_clear_error(env) -> None:
    out = subprocess.run(cli("images", "build", "nosuch"), env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "nosuch" in out.stderr and "Traceback" not in out.stderr


def test_run_without_an_api_key_says_so_before_doing_anything(env, tmp_path: Path) -> None:
    env = {k: v for k, v in env.items() if k != "ANTHROPIC_API_KEY"}
    (tmp_path / "p").mkdir()
    db = tmp_path / "fresh.db"
    out = subprocess.run(cli("run", "--project", str(tmp_path / "p"), "--db", str(db), "hello"),
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert "No Anthropic API key is set" in out.stderr and "ANTHROPIC_API_KEY" in out.stderr
    assert "Traceback" not in out.stderr
    assert not db.exists()  # nothing was started or recorded
