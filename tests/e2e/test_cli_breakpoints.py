"""`agent-desk run --break`: a breakpoint asks at the terminal, and a bad spec is refused clearly."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import reply, text, tool_use

from .conftest import cli

pytestmark = pytest.mark.e2e


def test_run_break_stops_before_the_tool_and_asks_at_the_terminal(env, server, tmp_path: Path) -> None:
    """`--break bash_run` asks at the terminal even under --on-ask deny (a person set it); the answer runs it."""
    project = tmp_path / "p"
    project.mkdir()
    server.add(reply(tool_use("fs_read", {"path": "a"})), reply(tool_use("bash_run", {"command": "echo hi"})),
               reply(text("Done.")))
    (project / "a").write_text("x\n")
    out = subprocess.run(cli("run", "--project", str(project), "--sandbox", "local", "--permission-mode", "auto",
                             "--break", "bash_run", "go"), env=env, input="y\n", capture_output=True, text=True,
                         timeout=180, start_new_session=True)  # no terminal: the answer comes on stdin
    assert out.returncode == 0, out.stderr
    assert "breakpoint: before bash_run" in out.stderr
    assert server.requests[2].tool_results()[0]["content"][0]["text"] == "exit code: 0\nstdout:\nhi"
    bad = subprocess.run(cli("run", "--project", str(project), "--sandbox", "local", "--break", "rm -rf", "go"),
                         env=env, capture_output=True, text=True, timeout=180)
    assert bad.returncode == 2 and "'rm -rf' is not a breakpoint" in bad.stderr and "Traceback" not in bad.stderr
