"""file_changed: the project folder's changes that no tool made (the person's editor, a background process),
seen by the watchdog watcher, debounced, the control folders left out; the read-before-edit guard asks for a
fresh read of a file changed on the host. A real SQLite file, a real Docker sandbox, the fake Anthropic server."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from desktop_app.core import ToolCallState
from desktop_app.runtime import WorkspaceWatcher
from tests.fakes.anthropic_server import reply, text, tool_use


async def _changes(root: Path, act, *, writing: bool = False) -> list[tuple[list[str], list[str]]]:
    seen: list[tuple[list[str], list[str]]] = []
    got = asyncio.Event()

    def report(paths: list[str], kinds: list[str]) -> None:
        seen.append((paths, kinds))
        got.set()

    watcher = WorkspaceWatcher(root, report, tools_writing=lambda: writing, debounce_s=0.1)
    watcher.start()
    try:
        act()
        marker = root / "zz-marker"  # a last change of our own: once it is reported, all before it was
        marker.write_text("m")
        if not writing:
            while not any("zz-marker" in p for p, _ in seen):
                got.clear()
                await asyncio.wait_for(got.wait(), 10)
        else:
            await asyncio.sleep(0.5)  # nothing may come: there is no event to wait for
    finally:
        await watcher.stop()
    return seen


async def test_the_watcher_reports_a_burst_once_and_leaves_the_control_folders_out(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".agent-desk").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "old.txt").write_text("x")

    def act() -> None:
        for i in range(5):  # an editor's save: several writes of one file
            (tmp_path / "src" / "a.py").write_text(f"v{i}")
        (tmp_path / ".git" / "index").write_text("git")
        (tmp_path / ".agent-desk" / "rules.toml").write_text("")
        (tmp_path / "old.txt").rename(tmp_path / "new.txt")

    seen = await _changes(tmp_path, act)
    reported = {p: k for paths, kinds in seen for p, k in zip(paths, kinds, strict=True)}
    assert reported["src/a.py"] in ("created", "modified")
    assert reported["old.txt"] == "deleted" and reported["new.txt"] == "created"
    assert not any(p.startswith((".git", ".agent-desk")) for p in reported)
    assert sum("src/a.py" in paths for paths, _ in seen) == 1, "one burst, one report"


async def test_the_watcher_says_nothing_while_a_tool_writes(tmp_path: Path) -> None:
    seen = await _changes(tmp_path, lambda: (tmp_path / "a.txt").write_text("tool"), writing=True)
    assert seen == []


async def test_a_host_edit_during_a_session_is_file_changed_and_the_guard_wants_a_fresh_read(
        docker_runtime, server, workspace_dir: Path) -> None:
    target = workspace_dir / "greet.txt"

    def edit_on_host(req):
        target.write_text("hello from the editor\n")  # the person saves while the model thinks
        time.sleep(1.5)  # past the watcher's debounce: the desk has heard of it before the next call
        return reply(tool_use("fs_edit", {"path": "greet.txt", "old_string": "hello world",
                                          "new_string": "hello agent"}, id="toolu_edit"))

    server.add(
        reply(tool_use("fs_read", {"path": "greet.txt"}, id="toolu_read")),
        edit_on_host,
        reply(tool_use("fs_write", {"path": "own.txt", "content": "the agent's own"}, id="toolu_own")),
        lambda req: reply(text(req.last_tool_result_text())),
    )
    runtime = await docker_runtime("auto")
    session = await runtime.open_session()
    events: list = []
    runtime.bus.on("file_changed", events.append)
    result = await session.send("change the greeting")
    assert result.reason == "end_turn"
    records = {r.tool_use_id: r for r in await runtime.store.session_records(session.session.id)}
    edit = records["toolu_edit"]
    assert edit.is_error and "changed on the host" in edit.result["content"][0]["text"]
    assert target.read_text() == "hello from the editor\n", "the person's edit is kept"
    assert records["toolu_own"].state is ToolCallState.COMPLETED
    changed = [p for e in events for p in e.payload["paths"]]
    assert "greet.txt" in changed
    assert "own.txt" not in changed, "a tool's own write is not the host's change"
    assert all(e.session_id == session.session.id for e in events)
