"""An MCP server's start and stop are recorded events, bound into the audit chain: where it ran (the sandbox, or
the host, marked unsandboxed) and the consent digest it ran under (the digest of the entry the person granted,
"" for the person's own servers). Rewriting one of those events fails verify, naming it."""

from __future__ import annotations

from pathlib import Path

from desktop_app.core import Channel, McpServerState
from desktop_app.mcp_client import load_servers
from desktop_app.store import SqlStore
from tests.kit import raw_sql


async def test_a_servers_start_and_stop_are_recorded_with_where_and_consent(desk_for, project: Path, py_bin: Path,
                                                                          tmp_path: Path) -> None:
    clock = str(py_bin / "mcp-server-time")
    desk = await desk_for({"repo_clock": {"command": clock}}, mcp_servers={"my_clock": {"command": clock,
                                                                                       "run": "host"}})
    await desk.rt.mcp.wait_started()
    assert {i.name: i.state for i in desk.rt.mcp_servers()} == {"repo_clock": McpServerState.READY,
                                                                "my_clock": McpServerState.READY}
    granted = {e.name: e.digest() for e in load_servers(project, {}) if e.name == "repo_clock"}
    await desk.rt.close()
    db = tmp_path / "desk.db"
    reader = await SqlStore.open(db)
    try:
        lives = [e.payload for e in await reader.events_since(0, [Channel.CONTROL]) if e.type == "mcp:life"]
        assert (await reader.verify()).ok
    finally:
        await reader.close()
    by = {(p["server"], p["what"]): p for p in lives}
    assert set(by) == {("repo_clock", "started"), ("repo_clock", "stopped"), ("my_clock", "started"),
                       ("my_clock", "stopped")}, lives
    repo, mine = by[("repo_clock", "started")], by[("my_clock", "started")]
    assert repo["source"] == "project" and repo["where"] == "sandbox"
    assert repo["consent_digest"] == granted["repo_clock"]
    assert mine["source"] == "user" and mine["consent_digest"] == ""
    assert mine["where"] == "host" and mine["unsandboxed"]
    assert by[("repo_clock", "stopped")]["reason"] == "closed"
    seq = raw_sql(db, "SELECT seq FROM events WHERE type = 'mcp:life' ORDER BY seq LIMIT 1")[0][0]
    raw_sql(db, f"UPDATE events SET payload = replace(payload, '\"consent_digest\":\"', '\"consent_digest\":\"0') "
                f"WHERE seq = {seq}")
    reader = await SqlStore.open(db)
    try:
        result = await reader.verify()
    finally:
        await reader.close()
    assert not result.ok and any(f"event {seq} (mcp:life" in p and "rewritten" in p for p in result.problems)
