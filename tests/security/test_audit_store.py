"""The audit store under other processes and a failing disk, on real SQLite files: a write the store
refuses (locked by another process past the busy timeout, the disk full, a read-only database) fails the
call visibly and the CLI exits non-zero; two processes publishing events on one file lose none; a call is
found by the model's tool_use id only where that id names one call."""

from __future__ import annotations

import asyncio
import itertools
import os
import sqlite3
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from desktop_app.core import (
    EventBus,
    Executor,
    MemoryStore,
    Outcome,
    PermissionPolicy,
    RunContext,
    ToolCall,
    ToolCallState,
    ToolRegistry,
    tool,
)
from desktop_app.core._messages import tool_result_block
from desktop_app.store import SqlStore
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit.cli import server_cli_environ

ROOT = Path(__file__).resolve().parents[2]

# Holds BEGIN EXCLUSIVE on the file until its stdin closes: another process locking the database.
LOCKER = textwrap.dedent("""
    import sqlite3, sys
    con = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
    con.execute("BEGIN EXCLUSIVE")
    print("locked", flush=True)
    sys.stdin.read()
    con.execute("ROLLBACK")
""")


@tool(read_only=True)
async def echo(text: str) -> str:
    """Return the text."""
    return text


def _locker(db: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", LOCKER, str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
    return proc


def _release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(10) == 0


class Rig:
    """An executor on a real SqlStore; every event it publishes is kept."""

    def __init__(self, store: SqlStore) -> None:
        self.store = store
        self.bus = EventBus(store)
        self.events: list = []
        self.bus.on("*", self.events.append)
        self.executor = Executor(ToolRegistry([echo]), PermissionPolicy("auto"), bus=self.bus, store=store)
        self.run = RunContext(session_id="ses_1", project_id="prj_1")

    async def call(self, text_: str, tool_use_id: str = "toolu_1"):
        [rec] = await self.executor.run_batch([ToolCall(tool_use_id, "echo", {"text": text_})], self.run)
        return rec

    def assert_failed_visibly(self, rec, *words: str) -> None:
        assert rec.state is ToolCallState.FAILED and rec.outcome is Outcome.ERROR and rec.is_error
        body = tool_result_block(rec)["content"][0]["text"]
        for w in ("audit store", *words):
            assert w in rec.error and w in body, (w, rec.error)
        types = {(e.type, e.payload.get("state")) for e in self.events if e.payload.get("call_id") == rec.id}
        assert ("tool:error", None) in types and ("tool:end", "FAILED") in types
        assert self.run.store_error is not None  # the agent ends the turn on it


def _stored_state(db: Path, record_id: str) -> str | None:
    con = sqlite3.connect(db)
    try:
        row = con.execute("SELECT state FROM tool_calls WHERE id = ?", (record_id,)).fetchone()
        return row[0] if row else None
    finally:
        con.close()


async def test_a_database_locked_by_another_process_fails_the_call_visibly(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    store = await SqlStore.open(db, busy_timeout_ms=300)
    rig = Rig(store)
    try:
        ok = await rig.call("before")
        assert ok.state is ToolCallState.COMPLETED
        locker = _locker(db)
        try:
            t0 = time.monotonic()
            rec = await rig.call("while locked", "toolu_2")
            assert time.monotonic() - t0 < 10  # the busy timeout, not a hang
        finally:
            _release(locker)
        rig.assert_failed_visibly(rec, "locked")
        assert _stored_state(db, rec.id) is None  # nothing of it was written, and nothing pretends it was
        after = await rig.call("after", "toolu_3")
        assert after.state is ToolCallState.COMPLETED  # the store works again once the lock goes
        result = await store.verify()
        assert result.ok, result.message
    finally:
        await store.close()
    assert _stored_state(db, ok.id) == "COMPLETED"


async def test_a_full_disk_fails_the_call_visibly(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await (await SqlStore.open(db)).close()
    pages = sqlite3.connect(db).execute("PRAGMA page_count").fetchone()[0]
    # SQLITE_FULL, as on a full disk: the file may not grow past its size now
    store = await SqlStore.open(db, sqlite_pragmas={"max_page_count": pages})
    rig = Rig(store)
    try:
        rec = await rig.call("x" * 200_000)
        rig.assert_failed_visibly(rec, "full")
    finally:
        await store.close()
    assert _stored_state(db, rec.id) is None


async def test_a_read_only_database_is_refused_at_open_with_its_cause(tmp_path: Path) -> None:
    from desktop_app.core import StoreError

    db = tmp_path / "audit.db"
    await (await SqlStore.open(db)).close()
    # A file this process may not write (query_only: what a chmod cannot show to root) never gets as far
    # as a call: the store takes its write lock at open, and says why it cannot.
    with pytest.raises(StoreError, match="readonly"):
        await SqlStore.open(db, sqlite_pragmas={"query_only": 1})


async def test_the_agent_ends_the_turn_when_a_call_was_not_recorded() -> None:
    from desktop_app.core import StoreError

    from ..core.test_agent import Rig as AgentRig

    store = MemoryStore()
    original = store.save_transition

    async def refuse_completed(record, entry):
        if entry.state is ToolCallState.COMPLETED:
            raise StoreError("database is locked (waited 5000 ms)")
        await original(record, entry)

    store.save_transition = refuse_completed
    with AnthropicServer() as server:
        server.add(reply(tool_use("echo", {"text": "hi"})), reply(text("never asked")))
        rig = AgentRig(server, store=store)
        session = await rig.open()
        result = await session.send("go")
    assert result.reason == "error" and "audit store" in result.message and "locked" in result.message
    assert len(server.requests) == 1  # nothing more ran, and the model was not asked again
    assert rig.dones()[-1]["reason"] == "error"


def _cli_env(tmp_path: Path, server: AnthropicServer) -> dict[str, str]:
    return server_cli_environ(tmp_path, server)


def _cli(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "desktop_app.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_the_cli_exits_non_zero_when_another_process_locks_the_database_mid_call(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    db = tmp_path / "desk.db"
    # The command asks the test (through a file) to lock the database, and returns once it is locked:
    # its output event and its COMPLETED write then each wait the CLI's busy timeout (5 s) and are
    # refused; the lock goes before the turn's tool_result message is written.
    command = "touch lock-now; while [ ! -f locked ]; do sleep 0.05; done; echo ran"
    held: list[subprocess.Popen[str]] = []

    def lock_on_request() -> None:
        deadline = time.monotonic() + 60
        while not (project / "lock-now").exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        held.append(_locker(db))
        (project / "locked").touch()
        time.sleep(12)  # past two busy timeouts
        _release(held[0])

    with AnthropicServer() as server:
        server.add(reply(tool_use("bash_run", {"command": command})), reply(text("never asked")))
        env = _cli_env(tmp_path, server)
        locker = threading.Thread(target=lock_on_request, daemon=True)
        locker.start()
        out = _cli(env, "run", "--project", str(project), "--sandbox", "local", "--permission-mode", "auto",
                   "go")
        locker.join(30)
        assert len(server.requests) == 1, out.stderr
    assert held, "the command never asked for the lock"
    assert out.returncode == 1, (out.returncode, out.stdout, out.stderr)
    assert "audit" in out.stderr and "locked" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    listed = _cli(env, "audit", "list")
    assert "bash_run" in listed.stdout and "COMPLETED" not in listed.stdout
    verified = _cli(env, "audit", "verify")
    assert verified.returncode == 0, verified.stderr


# events from two processes ------------------------------------------------------------------------------
PUBLISHER = textwrap.dedent("""
    import asyncio, sys
    from desktop_app.core import EventBus, ErrorEvent
    from desktop_app.store import SqlStore

    async def main(path, tag, n):
        store = await SqlStore.open(path, busy_timeout_ms=30000)
        bus = await EventBus.open(store)  # each process counts from the newest seq it saw at open
        for i in range(n):
            bus.publish(ErrorEvent(session_id=f"ses_{tag}", source=tag, message=str(i)))
            if i % 100 == 0:
                await asyncio.sleep(0)
        await store.flush()
        await store.close()
        print("done", tag)

    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
""")


async def test_two_processes_publishing_events_on_one_file_lose_none(tmp_path: Path) -> None:
    db = tmp_path / "audit.db"
    await (await SqlStore.open(db)).close()
    n = 3000
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [await asyncio.create_subprocess_exec(sys.executable, "-c", PUBLISHER, str(db), tag, str(n), env=env,
                                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for tag in ("win", "cli")]
    outs = await asyncio.wait_for(asyncio.gather(*(p.communicate() for p in procs)), 300)
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0, err[-2000:].decode()
        assert out.startswith(b"done") and b"could not be saved" not in err, err[-2000:].decode()
    con = sqlite3.connect(db)
    rows = con.execute("SELECT seq, session_id, json_extract(payload, '$.message') FROM events ORDER BY seq")
    rows = rows.fetchall()
    con.close()
    assert [r[0] for r in rows] == list(range(1, 2 * n + 1))  # one order, no gap, no collision
    for tag in ("win", "cli"):
        assert [int(r[2]) for r in rows if r[1] == f"ses_{tag}"] == list(range(n))  # all, in order
    switches = sum(1 for a, b in itertools.pairwise(rows) if a[1] != b[1])
    assert switches > 0, "the two processes never wrote at the same time"


# finding a call -----------------------------------------------------------------------------------------
def test_audit_show_finds_a_call_by_a_tool_use_id_only_when_one_call_carries_it(tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    with AnthropicServer() as server:
        # The model repeats toolu_same in two steps; toolu_once is used once.
        server.add(reply(tool_use("fs_glob", {"pattern": "*"}, id="toolu_same")),
                   reply(tool_use("fs_glob", {"pattern": "*.txt"}, id="toolu_same")),
                   reply(tool_use("fs_glob", {"pattern": "*.md"}, id="toolu_once")), reply(text("done")))
        env = _cli_env(tmp_path, server)
        out = _cli(env, "run", "--project", str(project), "--sandbox", "local", "--permission-mode", "auto", "go")
        assert out.returncode == 0, out.stderr
    both = _cli(env, "audit", "list", "--tool-use-id", "toolu_same")
    ids = [line.split()[0] for line in both.stdout.splitlines()]
    assert len(ids) == 2 and len(set(ids)) == 2 and all(i.startswith("call_") for i in ids)
    once = _cli(env, "audit", "show", "toolu_once")
    assert once.returncode == 0 and '"tool_use_id": "toolu_once"' in once.stdout
    ambiguous = _cli(env, "audit", "show", "toolu_same")
    assert ambiguous.returncode != 0 and "2 tool calls carry" in ambiguous.stderr
    assert all(i in ambiguous.stderr for i in ids)
    by_desk_id = _cli(env, "audit", "show", ids[0])
    assert by_desk_id.returncode == 0 and f'"id": "{ids[0]}"' in by_desk_id.stdout
    missing = _cli(env, "audit", "show", "toolu_nobody")
    assert missing.returncode != 0 and "There is no tool call" in missing.stderr
