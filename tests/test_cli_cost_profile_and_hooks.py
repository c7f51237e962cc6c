"""The CLI's reach, as a subprocess against the fake Anthropic server: `run` ends with the turn's tokens and
cost and the session's, `--profile` chooses the tools offered, and `hooks list|grant` shows and grants a
project's hooks file (an ungranted one is warned about and does not run)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit.cli import server_cli_environ

COST_LINE = re.compile(r"^tokens: ([\d,]+) in, ([\d,]+) out; cost \$([\d.]+) this turn, \$([\d.]+) this session$")


@pytest.fixture
def env(tmp_path: Path, server: AnthropicServer) -> dict[str, str]:
    return server_cli_environ(tmp_path, server)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "p"
    (folder / ".agent-desk").mkdir(parents=True)
    return folder


def run_cli(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desktop_app.cli", *args], env=env, capture_output=True,
                          text=True, timeout=120, input=stdin)


def cost_line(stderr: str) -> tuple[int, int, float, float]:
    last = stderr.strip().splitlines()[-1]
    m = COST_LINE.match(last)
    assert m, f"no cost line at the end of: {stderr!r}"
    return int(m[1].replace(",", "")), int(m[2].replace(",", "")), float(m[3]), float(m[4])


def test_run_prints_the_turns_tokens_and_cost_then_the_sessions(env, server, project: Path) -> None:
    server.add(reply(tool_use("fs_glob", {"pattern": "*"}), usage={"input_tokens": 50_000, "output_tokens": 800}),
               reply(text("done"), usage={"input_tokens": 60_000, "output_tokens": 200}))
    first = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "list the files")
    assert first.returncode == 0, first.stderr
    tin, tout, turn, session = cost_line(first.stderr)
    assert tout == 1_000 and tin >= 110_000 and turn > 0 and session == turn
    sid = first.stderr.split("session ", 1)[1].split()[0]
    server.add(reply(text("again"), usage={"input_tokens": 10_000, "output_tokens": 100}))
    second = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "--session", sid, "more")
    assert second.returncode == 0, second.stderr
    _, out2, turn2, session2 = cost_line(second.stderr)
    assert out2 == 100 and 0 < turn2 < turn and abs(session2 - (turn + turn2)) < 0.0002
    assert "tokens:" not in second.stdout  # the answer on stdout stays clean


def test_json_output_has_no_cost_line(env, server, project: Path) -> None:
    server.add(reply(text("done")))
    out = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "--json", "hi")
    assert out.returncode == 0 and "tokens:" not in out.stdout + out.stderr


def test_profile_chooses_the_tools_offered(env, server, project: Path) -> None:
    server.add(reply(text("done")))
    out = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "--profile", "read-only", "hi")
    assert out.returncode == 0, out.stderr
    offered = {t["name"] for t in server.requests[-1].body["tools"]}
    assert "fs_read" in offered and not offered & {"bash_run", "fs_write", "fs_edit"}
    bad = run_cli(env, "run", "--project", str(project), "--profile", "everything", "hi")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


HOOKS = '[[PreToolUse]]\nmatcher = "bash_run"\ncommand = "echo no >&2; exit 2"\n'


def test_hooks_are_listed_warned_granted_and_revoked(env, server, project: Path) -> None:
    (project / ".agent-desk/hooks.toml").write_text(HOOKS)
    listed = run_cli(env, "hooks", "list", "--project", str(project))
    assert listed.returncode == 0 and listed.stdout == "" and "never granted" in listed.stderr
    server.add(reply(text("done")))
    ran = run_cli(env, "run", "--project", str(project), "--sandbox", "local", "hi")
    assert "hooks grant" in ran.stderr  # the warning names the way to grant
    refused = run_cli(env, "hooks", "grant", "--project", str(project), stdin="n\n")
    assert refused.returncode == 1 and HOOKS in refused.stdout
    granted = run_cli(env, "hooks", "grant", "--project", str(project), "--yes")
    assert granted.returncode == 0, granted.stderr
    listed = run_cli(env, "hooks", "list", "--project", str(project))
    assert listed.stdout.startswith("PreToolUse\tbash_run\techo no >&2; exit 2\t") and listed.stderr == ""
    (project / ".agent-desk/hooks.toml").write_text(HOOKS + "# edited\n")
    assert "changed since you granted" in run_cli(env, "hooks", "list", "--project", str(project)).stderr
    revoked = run_cli(env, "hooks", "grant", "--project", str(project), "--revoke")
    assert revoked.returncode == 0 and "revoked" in revoked.stderr


def test_granting_a_broken_hooks_file_is_refused(env, project: Path) -> None:
    (project / ".agent-desk/hooks.toml").write_text('[[PreToolUse]]\nmatcher = "x"\n')
    out = run_cli(env, "hooks", "grant", "--project", str(project), "--yes")
    assert out.returncode == 2 and "'command' must be" in out.stderr and "Traceback" not in out.stderr
