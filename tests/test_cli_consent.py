"""The CLI's one verb family for consent, through real processes: `consent list|approve|revoke` over the rules
file, the hooks file and each MCP server, and the older `rules trust` / `hooks grant` / `mcp grant` as the same."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RULES = '[permissions]\ndeny = ["bash_run(curl *)"]\n'
HOOKS = '[[PreToolUse]]\nmatcher = "bash_run"\ncommand = "echo no >&2; exit 2"\n'
MCP = {"mcpServers": {"tool": {"command": "true", "run": "host"}}}


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    values = {"AGENT_DESK_CONFIG_DIR": str(tmp_path / "cfg"), "AGENT_DESK_DATA_DIR": str(tmp_path / "data"),
              "AGENT_DESK_LOG_DIR": str(tmp_path / "log"), "AGENT_DESK_NO_KEYRING": "1", "PYTHONPATH": str(ROOT)}
    return {**{k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "AGENT_DESK_"))}, **values}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    (p / ".agent-desk").mkdir(parents=True)
    (p / ".agent-desk/rules.toml").write_text(RULES)
    (p / ".agent-desk/hooks.toml").write_text(HOOKS)
    (p / ".agent-desk/mcp.json").write_text(json.dumps(MCP))
    return p


def cli(env: dict[str, str], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    # a new session: no controlling terminal, so the question is answered on stdin
    return subprocess.run([sys.executable, "-m", "desktop_app.cli", *args], env=env, input=stdin,
                          capture_output=True, text=True, timeout=120, start_new_session=True)


def listed(env: dict[str, str], project: Path, *more: str) -> list[str]:
    out = cli(env, "consent", "list", "--project", str(project), *more)
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_consent_lists_approves_and_revokes_every_kind(env, project: Path) -> None:
    assert listed(env, project) == ["rules\t-\tnew", "hooks\t-\tnew", "mcp\ttool\tnew"]
    refused = cli(env, "consent", "approve", "--project", str(project), stdin="n\nn\nn\n")
    assert refused.returncode == 1 and "+deny" in refused.stdout and "Approve the project's rules?" in refused.stderr
    assert listed(env, project) == ["rules\t-\tnew", "hooks\t-\tnew", "mcp\ttool\tnew"]
    one = cli(env, "consent", "approve", "--kind", "mcp", "tool", "--project", str(project), "--yes")
    assert one.returncode == 0 and "approved: the project's mcp server tool." in one.stderr
    assert cli(env, "consent", "approve", "--project", str(project), "--yes").returncode == 0
    assert listed(env, project) == ["rules\t-\tapproved", "hooks\t-\tapproved", "mcp\ttool\tapproved"]
    (project / ".agent-desk/hooks.toml").write_text(HOOKS + "# edited\n")
    assert listed(env, project, "--kind", "hooks") == ["hooks\t-\tchanged"]
    revoked = cli(env, "consent", "revoke", "--kind", "rules", "--project", str(project))
    assert revoked.returncode == 0 and "revoked: the project's rules." in revoked.stderr
    assert listed(env, project) == ["rules\t-\tnew", "hooks\t-\tchanged", "mcp\ttool\tapproved"]


def test_the_older_verbs_approve_the_same_consent(env, project: Path) -> None:
    assert cli(env, "rules", "trust", str(project), "--yes").returncode == 0
    assert cli(env, "hooks", "grant", "--project", str(project), "--yes").returncode == 0
    assert cli(env, "mcp", "grant", "tool", "--project", str(project)).returncode == 0
    assert listed(env, project) == ["rules\t-\tapproved", "hooks\t-\tapproved", "mcp\ttool\tapproved"]
