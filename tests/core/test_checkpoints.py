"""The checkpoint store on real folders with the host's git: what is kept and what is named "not kept", ids
that follow the content, a store that grows by what changed; and the executor's step: a call that may write
is checkpointed, one that only reads is not, and a checkpoint that cannot be taken makes the call ask."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path

from desktop_app.core import Allow, Deny, MemoryStore, ShadowStore, ToolCallRecord, ToolCallState
from desktop_app.core._checkpoints import _CONFIG, _config_text
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit.agent_rig import Rig

from .conftest import Harness


def _store_bytes(store: ShadowStore) -> int:
    return sum(p.stat().st_size for p in store.git_dir.rglob("*") if p.is_file())


def test_what_is_kept_and_what_is_named(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "src").mkdir(parents=True)
    (ws / "src" / "a.py").write_text("print(1)\n")
    (ws / ".gitignore").write_text("node_modules/\n*.log\n")
    (ws / "node_modules" / "x").mkdir(parents=True)
    (ws / "node_modules" / "x" / "i.js").write_text("1")
    (ws / "run.log").write_text("noise")
    (ws / "big.bin").write_bytes(b"\0" * 2048)
    (ws / ".agent-desk").mkdir()
    (ws / ".agent-desk" / "rules.toml").write_text("x")
    subprocess.run(["git", "init", "-q", str(ws / "vendored")], check=True)
    (ws / "vendored" / "v.txt").write_text("v")
    (ws / "crlf.txt").write_bytes(b"one\r\ntwo\r\n")
    (ws / ".gitattributes").write_text("* text=auto eol=lf filter=evil ident\n")
    store = ShadowStore(tmp_path / "cps", ws, max_file_bytes=1024)
    cp = store.take()
    files = store.files(cp.id)
    assert set(files) == {"src/a.py", ".gitignore", "crlf.txt", ".gitattributes"}
    assert cp.not_kept == {"node_modules": "ignored (.gitignore)", "run.log": "ignored (.gitignore)",
                           "big.bin": "over the 1,024 bytes limit", "vendored": "a repository of its own"}
    # the bytes kept are the bytes on disk: the project's attributes change nothing
    assert store.blobs({files["crlf.txt"].blob})[files["crlf.txt"].blob] == b"one\r\ntwo\r\n"
    assert not (tmp_path / "cps").is_relative_to(ws) and not any(ws.rglob("index"))


def test_the_store_is_configured_as_written_and_nothing_of_the_project_runs(tmp_path: Path) -> None:
    """The store's settings are written into its config file at once (not a `git config` each): git reads back
    every one, quotes and backslashes included, and a hook or fsmonitor the project ships never runs."""
    ws = tmp_path / "ws"
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "a.txt").write_text("a")
    marker = tmp_path / "ran"
    for hook in ("pre-commit", "post-index-change", "fsmonitor-watchman"):
        (ws / ".git" / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {marker}\n")
        (ws / ".git" / "hooks" / hook).chmod(0o755)
    store = ShadowStore(tmp_path / "cps", ws)
    store.take()
    for key, value in _CONFIG.items():
        got = subprocess.run(["git", "config", "--file", str(store.git_dir / "config"), "--get", key],
                             capture_output=True, text=True, check=False).stdout.rstrip("\n")
        assert got == value, key
    assert _config_text({"x.y": 'a "b" \\c'}) == '[x]\n\ty = "a \\"b\\" \\\\c"\n'
    (ws / "b.txt").write_text("b")
    assert set(store.files(store.take().id)) == {"a.txt", "b.txt"} and not marker.exists()


def test_ids_follow_the_content_and_the_store_grows_by_what_changed(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    for d in range(10):
        (ws / f"d{d}").mkdir(parents=True)
        for f in range(30):
            (ws / f"d{d}" / f"f{f}.txt").write_text(f"file {d}/{f}\n" * 20)
    store = ShadowStore(tmp_path / "cps", ws)
    first = store.take()
    assert store.take().id == first.id  # unchanged: the same checkpoint
    size = _store_bytes(store)
    (ws / "d3" / "f7.txt").write_text("changed\n")
    second = store.take()
    assert second.id != first.id
    assert _store_bytes(store) - size < 40_000  # a blob, a few trees, the index: not the project again
    (ws / "d3" / "f7.txt").write_text("file 3/7\n" * 20)
    assert store.take().id == first.id  # the same content is the same checkpoint
    # a new store over the same folder (the next start of the desk, the CLI beside the window) finds the same
    # ids, and a change another process recorded is not missed by this one
    other = ShadowStore(tmp_path / "cps", ws)
    assert other.take().id == first.id
    (ws / "d0" / "f0.txt").write_text("seen by the other process first\n")
    assert other.take().id != first.id and store.take().id == other.take().id



def test_the_tree_written_in_memory_is_the_tree_git_writes(tmp_path: Path) -> None:
    """After the first checkpoint the desk hashes what changed itself (core/_git_objects.py): every kind of
    change gives the very tree git's own index gives a new store over the same files, and reads back."""
    ws = tmp_path / "ws"
    (ws / "a" / "b").mkdir(parents=True)
    for name in ("a/one.txt", "a/b/two.txt", "top.txt", "x"):
        (ws / name).write_text(name)
    store = ShadowStore(tmp_path / "cps", ws, max_file_bytes=1024)
    store.take()
    steps = [
        lambda: (ws / "a" / "one.txt").write_text("rewritten"),
        lambda: (ws / "a" / "b" / "two.txt").rename(ws / "a" / "moved.txt"),  # b/ left empty: gone from the tree
        lambda: (ws / "top.txt").chmod(0o755),
        lambda: (ws / "link").symlink_to("a/one.txt"),
        lambda: ((ws / "x").unlink(), (ws / "x").mkdir(), (ws / "x" / "in.txt").write_text("a folder now")),
        lambda: (ws / "new" / "deep").mkdir(parents=True) or (ws / "new" / "deep" / "n.txt").write_bytes(b"\0\1"),
        lambda: (ws / "big.bin").write_bytes(b"x" * 2048),
        lambda: (ws / "a" / "one.txt").write_bytes(b"x" * 2048),  # grew past the limit: out, and named
        lambda: ((ws / "new" / "deep" / "n.txt").unlink(), (ws / "new" / "deep").rmdir()),
    ]
    in_memory = 0  # steps taken the in-memory way, ahead of git's index (a slow step may go through git: its
    for step in steps:  # second passed, as on a loaded CI machine; the trees must be the same either way)
        step()
        cp = store.take()
        in_memory += bool(store._pending)
        assert ShadowStore(tmp_path / "by-git", ws, max_file_bytes=1024).take().id == cp.id  # its own index
        assert store.take().id == cp.id  # taken again unchanged: the same (from the stat it keeps)
    assert store._cache is not None and in_memory  # the in-memory way was taken
    # a file git's index never had, checkpointed, then deleted: git names nothing, the desk still knows it
    ws2 = tmp_path / "ws2"
    (ws2 / "d").mkdir(parents=True)
    (ws2 / "d" / "kept.txt").write_text("kept")
    for p in ws2.rglob("*"):  # long written: no entry of the new index is racily clean (git would look again)
        os.utime(p, (time.time() - 60, time.time() - 60))
    fresh = ShadowStore(tmp_path / "fresh", ws2)
    before = fresh.take()
    (ws2 / "d" / "tmp.txt").write_text("made, checkpointed, then gone")
    assert "d/tmp.txt" in fresh.files(fresh.take().id)
    (ws2 / "d" / "tmp.txt").unlink()
    assert fresh.take().id == before.id
    files = store.files(cp.id)
    assert set(files) == {"a/moved.txt", "top.txt", "link", "x/in.txt"}
    assert files["top.txt"].mode == "100755" and files["link"].mode == "120000"
    assert store.blobs({files["link"].blob}) == {files["link"].blob: b"a/one.txt"}
    assert cp.not_kept["a/one.txt"].startswith("over the") and cp.not_kept["big.bin"].startswith("over the")

async def _run_write(rig: Rig, decision) -> object:
    rig.server.add(reply(tool_use("echo", {"text": "hi"}), tool_use("write", {"path": "x"})), reply(text("ok")))
    session = await rig.open()
    turn = asyncio.ensure_future(session.send("go"))
    await asyncio.wait_for(rig.asked.wait(), 30)
    (pending,) = rig.executor.pending()
    rig.executor.decide(pending.id, decision)
    await turn
    return pending


async def test_a_checkpoint_that_cannot_be_taken_asks_with_the_reason(tmp_path: Path, server: AnthropicServer) -> None:
    (tmp_path / "ws").mkdir()
    rig = Rig(server, mode="auto")  # auto would run the write unasked: the missing checkpoint asks
    rig.executor.checkpoints = ShadowStore(tmp_path / "cps", tmp_path / "ws", git=str(tmp_path / "no-git"))
    pending = await _run_write(rig, Deny(note="not without a checkpoint"))
    asked = next(e for e in rig.events if e.type == "permission_required")
    assert "no checkpoint of the workspace can be taken (git could not run" in asked.payload["reason"]
    assert "a rewind could not undo this call" in asked.payload["reason"]
    assert rig.store.records[pending.id].state is ToolCallState.DENIED
    echo = next(r for r in rig.store.records.values() if r.name == "echo")  # only reads: no checkpoint asked
    assert echo.state is ToolCallState.COMPLETED


async def test_an_allowed_call_without_checkpoint_says_so_and_one_with_carries_it(tmp_path: Path,
                                                                                  server: AnthropicServer) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "f.txt").write_text("x")
    rig = Rig(server, mode="auto")
    rig.executor.checkpoints = ShadowStore(tmp_path / "cps", tmp_path / "ws", git=str(tmp_path / "no-git"))
    pending = await _run_write(rig, Allow())
    done = rig.store.records[pending.id]
    assert done.state is ToolCallState.COMPLETED
    asked = next(e for e in done.trail if e.state is ToolCallState.APPROVAL_REQUIRED)
    assert "no checkpoint" in asked.note  # the chain says it ran unrecorded by a checkpoint, and who allowed it
    assert not any("checkpoint" in e.data for e in done.trail if e.state is ToolCallState.EXECUTING)

    rig2 = Rig(server, mode="auto")
    rig2.executor.checkpoints = ShadowStore(tmp_path / "cps", tmp_path / "ws")
    server.add(reply(tool_use("write", {"path": "y"})), reply(text("ok")))
    await (await rig2.open()).send("again")
    (call,) = [r for r in rig2.store.records.values() if r.name == "write"]
    executing = next(e for e in call.trail if e.state is ToolCallState.EXECUTING)
    assert len(executing.data["checkpoint"]["id"]) == 40
    assert call.trail[-1].data["checkpoint_after"]["id"] == executing.data["checkpoint"]["id"]  # wrote nothing


async def test_a_call_allowed_after_a_restart_is_checkpointed_or_does_not_run(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    store = MemoryStore()
    for rid, path in (("toolu_ok", "d"), ("toolu_no", "e")):  # waiting for approval when the process died
        waiting = ToolCallRecord(name="write", input={"path": path, "content": "4"}, session_id="s1", id=rid)
        waiting.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy")
        store.records[rid] = waiting
    h = Harness(store)
    report = await h.executor.seal_open("s1")
    for rid, git in (("toolu_ok", None), ("toolu_no", str(tmp_path / "no-git"))):
        h.executor.checkpoints = ShadowStore(tmp_path / "cps", tmp_path / "ws", git=git)
        resumed = asyncio.ensure_future(h.executor.resume_approvals([r for r in report.reoffered if r.id == rid],
                                                                    h.run))
        await h.wait_for(lambda rid=rid: any(p.id == rid for p in h.executor.pending()))
        h.executor.decide(rid, Allow())
        [done] = await resumed
        if git is None:
            assert done.state is ToolCallState.COMPLETED
            assert any("checkpoint" in e.data for e in done.trail if e.state is ToolCallState.EXECUTING)
        else:
            assert done.state is ToolCallState.FAILED and "no checkpoint of the workspace" in done.error
            assert "nothing ran" in done.error and "e" not in h.run.state.get("files", {})
