"""Plugin tools from real entry points (a package folder and its .dist-info on sys.path, found by
importlib.metadata as pip would leave them): loaded, listed with package and version, refused when their name
is taken or looks like another, one notice for a plugin that breaks, switched off by a setting; and in a real
CLI session, judged and recorded like a built-in, with the desk's group and trust, not the plugin's claims."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from desktop_app.config import Settings
from desktop_app.core import Action, PermissionPolicy, ToolFacts
from desktop_app.runtime import tools_with_plugins
from tests.fakes.anthropic_server import reply, text, tool_use

ROOT = Path(__file__).resolve().parents[2]

PLUGIN = '''
from desktop_app.core import Risk, ToolContext, tool

@tool(read_only=True, group="group:fs", risk=Risk.LOW, version="0.9")
async def count_lines(path: str, ctx: ToolContext) -> str:
    """Count the lines of a file in the workspace."""
    text = await ctx.sandbox.read_text(path)
    return f"{text.count(chr(10))} lines"

def tools():
    return [count_lines]
'''


def install(site: Path, package: str, version: str, entries: dict[str, str], module: str = "") -> None:
    """A package as pip leaves it: its module and a dist-info with METADATA and entry_points.txt."""
    mod = package.replace("-", "_")
    (site / f"{mod}.py").write_text(textwrap.dedent(module))
    info = site / f"{mod}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n")
    lines = "".join(f"{name} = {target}\n" for name, target in entries.items())
    (info / "entry_points.txt").write_text(f"[agent_desk.tools]\n{lines}")


@pytest.fixture
def site(tmp_path: Path, monkeypatch) -> Path:
    folder = tmp_path / "site"
    folder.mkdir()
    install(folder, "desk-lines", "1.2.0", {"lines": "desk_lines:tools"}, PLUGIN)
    install(folder, "desk-broken", "0.1", {"broken": "desk_broken:tools"}, "raise ImportError('no numpy here')")
    install(folder, "desk-clash", "2.0", {"clash": "desk_clash:tools"}, PLUGIN.replace(
        "async def count_lines", "async def fs_read").replace("[count_lines]", "[fs_read]"))
    install(folder, "desk-lookalike", "3.0", {"lookalike": "desk_lookalike:tools"}, PLUGIN.replace(
        "async def count_lines", "async def Bash_Run").replace("[count_lines]", "[Bash_Run]"))
    install(folder, "desk-junk", "1.0", {"junk": "desk_junk:tools"}, "def tools():\n    return ['not a tool']\n")
    monkeypatch.syspath_prepend(str(folder))
    return folder


def test_plugins_load_with_their_package_and_the_bad_ones_are_named_and_left_out(site: Path) -> None:
    tools, plugins = tools_with_plugins(Settings())
    found = {p.entry: p for p in plugins.found}
    assert set(found) >= {"lines", "broken", "clash", "lookalike", "junk"}
    assert found["lines"].line() == "count_lines from desk-lines 1.2.0: on"
    assert found["broken"].problem == "loading it raised ImportError: no numpy here"
    assert "a tool named 'fs_read' exists already" in found["clash"].problem
    assert "looks like 'bash_run'" in found["lookalike"].problem
    assert "gives str, not agent-desk tools" in found["junk"].problem
    mine = [t for t in tools if t.name == "count_lines"]
    assert len(mine) == 1 and [t.name for t in tools].count("fs_read") == 1
    problems = plugins.problems()
    assert len(problems) == 4 and all(p.startswith("The plugin ") for p in problems)
    # the desk's trust, not the plugin's claims: group:plugin, never trusted as read-only
    counted = mine[0]
    assert counted.group == "group:plugin" and counted.read_only and not counted.trusted_read_only
    assert counted.metadata()["plugin"] == "desk-lines" and counted.metadata()["version"] == "0.9"
    facts = ToolFacts(counted.name, counted.group, counted.trusted_read_only, counted.risk)
    for mode in ("ask", "accept-edits", "read-only"):
        assert PermissionPolicy(mode).evaluate(facts, {"path": "a"}).action is not Action.ALLOW, mode


@pytest.mark.parametrize("off", ["count_lines", "lines", "desk-lines"])
def test_a_plugin_is_switched_off_by_its_tool_entry_or_package_name(site: Path, off: str) -> None:
    tools, plugins = tools_with_plugins(Settings(plugins_disabled=[off]))
    assert "count_lines" not in [t.name for t in tools]
    assert next(p for p in plugins.found if p.entry == "lines").line().endswith("off (plugins_disabled)")


def cli_env(site: Path, desk_env: Path, server) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), ANTHROPIC_API_KEY=server.api_key,
               ANTHROPIC_BASE_URL=server.url, AGENT_DESK_DB=f"sqlite:///{desk_env / 'desk.db'}")
    return env


def test_a_plugin_tool_runs_judged_and_recorded_in_a_real_session(site: Path, desk_env: Path, server) -> None:
    project = desk_env / "p"
    project.mkdir()
    (project / "a.txt").write_text("1\n2\n3\n")
    env = cli_env(site, desk_env, server)
    server.add(reply(tool_use("count_lines", {"path": "a.txt"})), reply(text("three")),
               reply(tool_use("count_lines", {"path": "a.txt"})), reply(text("asked")))
    run = [sys.executable, "-m", "desktop_app.cli", "run", "--project", str(project), "--sandbox", "local"]
    out = subprocess.run([*run, "--permission-mode", "auto", "count"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert server.requests[1].tool_results()[0]["content"][0]["text"] == "3 lines"
    assert "count_lines" in [t["name"] for t in server.requests[0].body["tools"]]
    # its group:fs claim does not pass accept-edits unasked: it asks, and the CLI's --on-ask deny answers
    subprocess.run([*run, "--permission-mode", "accept-edits", "again"], env=env, capture_output=True, timeout=120)
    with sqlite3.connect(desk_env / "desk.db") as conn:
        rows = conn.execute("SELECT state, sandbox FROM tool_calls WHERE name = 'count_lines' "
                            "ORDER BY created_at").fetchall()
    assert [r[0] for r in rows] == ["COMPLETED", "DENIED"]
    assert json.loads(rows[0][1]).get("kind") == "local"
    doctor = subprocess.run([sys.executable, "-m", "desktop_app.cli", "doctor"], env=env, capture_output=True,
                            text=True, timeout=120)
    assert "[ok]   Plugin: count_lines from desk-lines 1.2.0: on" in doctor.stdout
    broken = "[warn] Plugin: broken from desk-broken 0.1: refused: loading it raised ImportError: no numpy here"
    assert broken in doctor.stdout
    verify = [sys.executable, "-m", "desktop_app.cli", "audit", "verify"]
    assert subprocess.run(verify, env=env, capture_output=True).returncode == 0
