"""`agent-desk sessions compact ID` as a subprocess against the fake server: the older turns summarised, the
summary printed, `sessions show` marks it, and the next turn starts from it; the audit chain still verifies."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import reply, text

from .conftest import cli

pytestmark = pytest.mark.e2e


def run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), env=env, capture_output=True, text=True, timeout=120)


def test_sessions_compact_summarises_and_the_next_turn_starts_from_the_summary(env, server, tmp_path: Path):
    (tmp_path / "p").mkdir()
    server.add(reply(text("first answer")), reply(text("second answer")),
               reply(text("SUMMARY: asked twice, answered twice")), reply(text("third answer")))
    project = ["--project", str(tmp_path / "p"), "--sandbox", "local"]
    out = run_cli(env, "run", *project, "first question")
    assert out.returncode == 0, out.stderr
    sid = out.stderr.split("session ", 1)[1].split()[0]
    assert run_cli(env, "run", *project, "--session", sid, "second question").returncode == 0
    done = run_cli(env, "sessions", "compact", sid, "--sandbox", "local")
    assert done.returncode == 0, done.stderr
    assert "compacted: 2 messages summarised" in done.stderr and "SUMMARY: asked twice" in done.stdout
    assert run_cli(env, "run", *project, "--session", sid, "third question").returncode == 0
    sent = json.dumps(server.requests[-1].body["messages"])
    assert "SUMMARY: asked twice" in sent and "first question" not in sent and "agent_desk_compaction" not in sent
    shown = run_cli(env, "sessions", "show", sid).stdout
    assert "first question" in shown and "SUMMARY: asked twice" in shown  # the audit keeps the originals
    assert run_cli(env, "audit", "verify").returncode == 0
