"""`agent-desk audit report` on a real CLI session (loopback Anthropic server, real SQLite file): the report
holds the prompt (redacted), each command with its status and exit code, the refusal and why, who decided,
tokens and cost, the chain's verify result and signed head; narrowed by session, project and period; a PDF
through Qt's printing; bad input refused clearly; a tampered database reported as such."""

from __future__ import annotations

import re
import sqlite3
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.fakes.anthropic_server import reply, text, tool_use

from .conftest import cli

pytestmark = pytest.mark.e2e

SECRET = "sk-ant-api03-" + "Q" * 40  # shaped like a key: the redactor's own pattern


def report_charts(page: str) -> dict[str, str]:
    """Each chart's SVG in the report, by its key."""
    return dict(re.findall(r"<figure class=chart id='chart-([a-z_]+)'[^>]*>(<svg.*?</svg>)</figure>", page, re.S))


def values(svg: str) -> list[float]:
    root = ET.fromstring(svg)
    return [float(re.sub(r"[^0-9.\-]", "", e.text)) for e in root.iter() if e.tag.endswith("desc")
            and e.get("class", "").split() == ["value"] and e.text]


def texts(svg: str) -> list[str]:
    return [e.text for e in ET.fromstring(svg).iter() if e.tag.endswith("text") and e.text]


def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli(*args), env=env, capture_output=True, text=True, timeout=180)


def a_session(env: dict[str, str], server, project: Path, prompt: str) -> str:
    server.add(reply(text("Looking."), tool_use("bash_run", {"command": "ls"})),
               reply(tool_use("bash_run", {"command": "echo broken >&2; exit 3"})),
               reply(tool_use("fs_write", {"path": "/etc/cron.d/evil", "content": "x"})),
               reply(tool_use("bash_run", {"command": "rm -rf ~/.ssh"})),  # high risk: asks, and --on-ask denies
               reply(text("Done.")))
    out = run(env, "run", "--project", str(project), "--sandbox", "local", "--permission-mode", "auto", prompt)
    assert out.returncode in (0, 1), out.stderr
    return out.stderr.split("session ", 1)[1].split()[0]


def test_the_report_tells_an_auditor_what_happened_and_how_to_check_it(env, server, tmp_path: Path) -> None:
    project = tmp_path / "shop"
    project.mkdir()
    (project / "a.txt").write_text("alpha\n")
    session = a_session(env, server, project, f"tidy up; my key is {SECRET}")
    report = tmp_path / "report.html"
    out = run(env, "audit", "report", "--session", session, "--out", str(report))
    assert out.returncode == 0, out.stderr
    assert "1 session(s), 4 tool call(s); the chain verifies" in out.stderr
    page = report.read_text()
    assert SECRET not in page and "tidy up; my key is" in page
    assert "<script" not in page and "http://" not in page.replace(server.url, "")  # self-contained
    for words in ("Agent Desk audit report", "shop", "bash_run", "echo broken &gt;&amp;2; exit 3",
                  "exit 3", "fs_write", "/etc/cron.d/evil", "Refusals and why", "verified",
                  "agent-desk audit verify", "signed head", "tokens in", session,
                  # each call as its tool's card says it: the label, then its fields and its result's
                  "<b>Run command</b>", "<b>Write file</b>", "Folder</span> /workspace", "Exit</span> 3"):
        assert words in page, words
    assert page.count("class='call ") == 4 and page.count("class='call failed'") == 3
    assert "failed: exit 3" in page and "rm -rf ~/.ssh" in page
    charts = report_charts(page)  # the history's charts, inline SVG over the report's scope
    assert list(charts) == ["calls_per_day", "refusals", "risks", "approval_waits", "cost_per_day",
                            "cost_per_project", "slowest_tools"]
    assert sum(values(charts["calls_per_day"])) == 4 and "(4 calls)" in page
    assert sum(values(charts["refusals"])) == 1 and sum(values(charts["risks"])) == 4
    assert values(charts["cost_per_project"]) and "shop" in texts(charts["cost_per_project"])
    assert {t.split(" (")[0] for t in texts(charts["slowest_tools"]) if "calls)" in t} == {"bash_run", "fs_write"}
    with sqlite3.connect(env["AGENT_DESK_DB"].removeprefix("sqlite:///")) as conn:  # redacted where it is stored
        [(title,)] = conn.execute("SELECT title FROM sessions").fetchall()
    assert title == "tidy up; my key is [REDACTED]"


def test_the_report_narrows_by_project_and_period_and_prints_a_pdf(env, server, tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir(), two.mkdir()
    a_session(env, server, one, "first project")
    a_session(env, server, two, "second project")
    report = tmp_path / "one.html"
    assert run(env, "audit", "report", "--project", str(one), "--out", str(report)).returncode == 0
    page = report.read_text()
    assert "first project" in page and "second project" not in page
    assert sum(values(report_charts(page)["calls_per_day"])) == 4  # the project's calls, not the other's
    later = tmp_path / "later.html"
    out = run(env, "audit", "report", "--since", "2999-01-01", "--out", str(later))
    assert out.returncode == 0 and "0 session(s), 0 tool call(s)" in out.stderr
    assert "No session has a prompt or a tool call in this period." in later.read_text()
    pdf = tmp_path / "all.pdf"
    out = run(env, "audit", "report", "--pdf", "--out", str(pdf))
    assert out.returncode == 0, out.stderr
    assert pdf.read_bytes().startswith(b"%PDF-") and pdf.stat().st_size > 5_000
    assert pdf.read_bytes().count(b"/Subtype /Image") >= 7  # Qt's rich text draws no SVG: the charts as images


def test_bad_input_is_refused_clearly_and_a_tampered_chain_is_reported(env, server, tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    a_session(env, server, project, "work")
    report = tmp_path / "r.html"
    for args, words in ((("--since", "last tuesday"), "--since 'last tuesday' is not a date or time"),
                        (("--since", "2026-02-01", "--until", "2026-01-01"), "--since must come before --until"),
                        (("--session", "ses_nope"), "there is no session 'ses_nope'"),
                        (("--project", str(tmp_path)), "is not a project of this audit database")):
        out = run(env, "audit", "report", *args, "--out", str(report))
        assert out.returncode == 2 and words in out.stderr and "Traceback" not in out.stderr, (args, out.stderr)
        assert not report.exists()
    db = env["AGENT_DESK_DB"].removeprefix("sqlite:///")
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE tool_calls SET input = replace(input, 'ls', 'rm -rf /')")
    out = run(env, "audit", "report", "--out", str(report))
    assert out.returncode == 1 and "the chain does NOT verify" in out.stderr
    assert "does NOT verify" in report.read_text()

