"""The `agent-desk` CLI as a subprocess against the fake server: a clear 401, an API error mid-stream,
and a process killed with SIGKILL in the middle of a long bash_run, then resumed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import StreamError, reply, text, tool_use

from .conftest import TEST_IMAGE, cli

pytestmark = pytest.mark.e2e


def run_cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), env=env, capture_output=True, text=True, timeout=timeout)


def test_401_gives_the_clear_message(env, server, tmp_path: Path) -> None:
    env = {**env, "ANTHROPIC_API_KEY": "sk-ant-wrong-key"}
    (tmp_path / "p").mkdir()
    out = run_cli(env, "run", "--project", str(tmp_path / "p"), "--sandbox", "local", "hello")
    assert out.returncode == 1
    assert "Check the API key" in out.stderr
    assert "Traceback" not in out.stderr
    assert "sk-ant-wrong-key" not in out.stderr + out.stdout


def test_api_error_mid_stream_fails_visibly_then_resume_retries(env, server, tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    server.add(StreamError(reply(text("half an answer, then")), after_events=4), reply(text("the whole answer")))
    out = run_cli(env, "run", "--project", str(tmp_path / "p"), "--sandbox", "local", "hello")
    assert out.returncode == 1 and "overloaded_error" in out.stderr
    session_id = out.stderr.split("session ", 1)[1].split()[0]
    again = run_cli(env, "sessions", "resume", session_id, "--sandbox", "local")
    assert again.returncode == 0, again.stderr
    assert "the whole answer" in again.stdout


def test_json_output_is_one_envelope_per_line(env, server, tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    (tmp_path / "p" / "a.txt").write_text("alpha\n")
    server.add(reply(tool_use("fs_read", {"path": "a.txt"})), reply(text("done")))
    out = run_cli(env, "run", "--project", str(tmp_path / "p"), "--sandbox", "local", "--json", "read")
    assert out.returncode == 0, out.stderr
    envs = [json.loads(line) for line in out.stdout.splitlines()]
    assert all(set(e) == {"seq", "channel", "type", "payload"} for e in envs)
    assert [envs[0]["type"], envs[-1]["type"]] == ["session_started", "totals"]  # the CLI's own, unnumbered
    envs = envs[1:-1]
    seqs = [e["seq"] for e in envs]
    assert seqs == sorted(seqs)
    assert envs[-1]["type"] == "done" and envs[-1]["payload"]["reason"] == "end_turn"
    audit = run_cli(env, "audit", "list")
    assert "fs_read" in audit.stdout and "COMPLETED" in audit.stdout
    assert run_cli(env, "audit", "verify").returncode == 0


@pytest.mark.docker
def test_sigkill_during_bash_run_then_resume_seals_the_call(env, server, docker_client, workspace_dir,
                                                            tmp_path: Path) -> None:
    server.add(
        reply(text("Running the long job."), tool_use("bash_run", {"command": "sleep 120"}, id="toolu_long")),
        lambda req: reply(text("After the crash: " + req.last_tool_result_text())),
    )
    proc = subprocess.Popen(
        cli("run", "--project", str(workspace_dir), "--image", TEST_IMAGE, "--permission-mode", "auto",
            "--json", "run the long job"),
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout is not None
        session_id = None
        for line in proc.stdout:  # wait on the CLI's own events, not a sleep
            env_ = json.loads(line)
            session_id = session_id or env_["payload"].get("session_id")
            if env_["type"] == "state_changed" and env_["payload"]["state"] == "EXECUTING":
                break
        else:
            pytest.fail(f"the call never started: {proc.stderr.read() if proc.stderr else ''}")
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()

    out = run_cli(env, "sessions", "resume", session_id, "--permission-mode", "auto")
    assert out.returncode == 0, out.stderr
    sealed = json.loads(server.requests[-1].last_tool_result_text())
    assert sealed["_autoSealed"] is True
    shown = run_cli(env, "audit", "show", "toolu_long")
    assert '"state": "SEALED"' in shown.stdout
    for c in docker_client.containers.list(all=True, filters={"label": "org.agent-desk.project"}):
        if str(workspace_dir) in json.dumps(c.attrs.get("Mounts", [])):
            c.remove(force=True)


def test_a_closed_stdout_stops_the_turn_rather_than_leaving_it_waiting(env, server, tmp_path: Path) -> None:
    """`agent-desk run … | head`: the reader goes away mid-turn. The turn used to hang for ever (the line
    announcing an approval failed to print, and with it the --on-ask answer); now it stops, as a pipe's writer
    does on SIGPIPE, says so on stderr, and nothing after the close runs unseen."""
    import threading

    (tmp_path / "p").mkdir()
    closed = threading.Event()

    def after_the_close(req):
        closed.wait(60)
        return reply(text("second step\n"), tool_use("bash_run", {"command": "echo after-the-close"}))

    server.add(reply(text("first step\n"), tool_use("bash_run", {"command": "echo before-the-close"})),
               after_the_close, reply(text("the end")))
    proc = subprocess.Popen(cli("run", "--project", str(tmp_path / "p"), "--sandbox", "local", "--on-ask", "allow",
                                "two steps"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == "first step\n"
        assert server.wait_for_requests(2, timeout=60)  # the first step's call ran; the second step is asked for
        proc.stdout.close()
        closed.set()
        code = proc.wait(timeout=60)  # a turn left waiting fails here rather than hanging the suite
        err = proc.stderr.read()
        assert code == 130, err  # the turn was stopped: interrupted
    finally:
        closed.set()
        if proc.poll() is None:
            proc.kill()
    assert "the output was closed before the turn ended, so the turn was stopped" in err
    assert "sessions resume ses_" in err and "Traceback" not in err and "BrokenPipe" not in err
    listed = run_cli(env, "audit", "list").stdout.splitlines()
    assert any("echo before-the-close" in line and " COMPLETED " in line for line in listed), listed
    assert not any("after-the-close" in line and " COMPLETED " in line for line in listed), listed  # never ran
    assert run_cli(env, "audit", "verify").returncode == 0
    session_id = err.split("sessions resume ", 1)[1].split("`")[0]
    again = run_cli(env, "sessions", "resume", session_id, "--sandbox", "local")  # what stderr said to run
    assert again.returncode == 0 and "the end" in again.stdout, again.stderr


@pytest.mark.docker
def test_run_says_before_the_turn_that_the_sandbox_cannot_write_a_root_owned_folder(env, server, docker_client,
                                                                                  tmp_path: Path) -> None:
    folder = tmp_path / "rooted"
    folder.mkdir(mode=0o755)
    if os.geteuid() != 0:
        pytest.skip("the folder must belong to root: the suite runs as root in CI")
    server.add(reply(text("nothing to do")))
    out = run_cli(env, "run", "--project", str(folder), "--image", TEST_IMAGE, "hello")
    assert out.returncode == 0, out.stderr
    warning = next(line for line in out.stderr.splitlines() if line.startswith("agent-desk: warning: Folder"))
    assert "Folder owned by root: the sandbox (uid 1000) cannot write in it" in warning
    assert f"chown -R 1000:1000 {folder}" in warning  # root's own uid would change nothing
    # a folder the sandbox can write: not a word
    server.add(reply(text("nothing to do")))
    ok = tmp_path / "theirs"
    ok.mkdir()
    os.chown(ok, 1000, 1000)
    out = run_cli(env, "run", "--project", str(ok), "--image", TEST_IMAGE, "hello")
    assert out.returncode == 0 and "warning" not in out.stderr, out.stderr


def test_each_call_line_tells_its_truth(env, server, tmp_path: Path) -> None:
    """As the window's card does: a command that exits 1 is `✗ exit 1`, never a green "done"; a call that
    failed says why in words (not the JSON body the model gets)."""
    (tmp_path / "p").mkdir()
    server.add(reply(tool_use("bash_run", {"command": "echo fine"}), tool_use("bash_run", {"command": "exit 3"}),
                     tool_use("fs_read", {"path": "missing.txt"})), reply(text("done")))
    out = run_cli(env, "run", "--project", str(tmp_path / "p"), "--sandbox", "local", "--on-ask", "allow", "go")
    assert out.returncode == 0, out.stderr
    ends = [line for line in out.stdout.splitlines() if line.startswith("  ")]
    assert len(ends) == 3, out.stdout
    assert ends[0].startswith("  ✓ bash_run exit 0 ")
    assert ends[1].startswith("  ✗ bash_run exit 3 ")
    assert ends[2].startswith("  ✗ fs_read failed ") and ends[2].endswith(" ms: missing.txt does not exist")
    assert '{"ok"' not in out.stdout
