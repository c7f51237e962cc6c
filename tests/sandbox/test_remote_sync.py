"""The synced workspace on a second, remote Docker engine (tcp://127.0.0.1, started by the tests): no bind
mount, the whole tool suite through the real executor, changes back on the host byte for byte, a conflict
kept and reported, the control folders read-only, a link out of the workspace never made on the host."""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import Any

from desktop_app.core import (
    CONFLICT_SUFFIX,
    EventBus,
    Executor,
    HookChain,
    MemoryStore,
    PermissionPolicy,
    RunContext,
    SandboxError,
    ToolCall,
    ToolCallState,
    ToolRegistry,
)
from desktop_app.tools import builtin_tools
from tests.kit import wait_until_async


def _engine(sandbox: Any) -> tuple[Executor, RunContext, list[Any]]:
    store = MemoryStore()
    bus = EventBus(store)
    events: list[Any] = []
    bus.on("*", events.append)
    executor = Executor(ToolRegistry(builtin_tools()), PermissionPolicy("auto"), bus=bus, store=store,
                        hooks=HookChain())
    return executor, RunContext(session_id="s1", project_id="p1", sandbox=sandbox), events


def lexists(path: object) -> bool:
    """A link counts, whether or not it leads anywhere."""
    return os.path.lexists(path)  # type: ignore[arg-type]


async def _run(executor: Executor, run: RunContext, name: str, **input: Any) -> Any:
    [record] = await executor.run_batch([ToolCall(id=f"t-{name}", name=name, input=input)], run)
    return record


def _text(record: Any) -> str:
    return "\n".join(b.get("text", "") for b in (record.result or {}).get("content", []))


def _tree(folder: Path) -> dict[str, Any]:
    """{relative path: bytes, "<dir>", or "-> target"} of everything under `folder`."""
    out: dict[str, Any] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root, name)
            rel = str(p.relative_to(folder))
            if p.is_symlink():
                out[rel] = "-> " + os.readlink(p)
            elif p.is_dir():
                out[rel] = "<dir>"
            else:
                out[rel] = p.read_bytes()
    return out


async def test_the_sandbox_has_no_bind_mount_and_says_where_it_runs(make_remote_sandbox, remote_engine, workspace):
    (workspace / ".git").mkdir()
    (workspace / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    sb = await make_remote_sandbox()
    client, url = remote_engine
    mounts = client.api.inspect_container(sb.container_id)["Mounts"]
    assert {m["Type"] for m in mounts} == {"volume"}
    assert {m["Destination"]: m["RW"] for m in mounts} == {
        "/workspace": True, "/workspace/.agent-desk": False, "/workspace/.git": False}
    d = sb.describe().to_dict()
    assert d["workspace_sync"] == "synced" and d["engine_address"] == url
    assert d["where"] == f"remote engine, synced workspace ({url})"
    assert (await sb.read_file(".git/HEAD")) == b"ref: refs/heads/main\n"


async def test_the_whole_tool_suite_runs_and_every_write_comes_back(make_remote_sandbox, workspace):
    (workspace / "src").mkdir()
    (workspace / "src" / "app.py").write_text("print('hello')\n")
    sb = await make_remote_sandbox()
    executor, run, _ = _engine(sb)
    read = await _run(executor, run, "fs_read", path="src/app.py")
    assert "print('hello')" in _text(read)
    assert (await _run(executor, run, "fs_edit", path="src/app.py", old_string="hello",
                       new_string="bye")).state is ToolCallState.COMPLETED
    assert (workspace / "src" / "app.py").read_text() == "print('bye')\n"
    await _run(executor, run, "fs_write", path="docs/new.md", content="# new\n")
    assert (workspace / "docs" / "new.md").read_text() == "# new\n"
    edits = [{"path": "docs/new.md", "old_string": "# new", "new_string": "# newer"},
             {"path": "src/app.py", "old_string": "bye", "new_string": "ciao"}]
    multi = await _run(executor, run, "fs_multi_edit", edits=edits)
    assert multi.state is ToolCallState.COMPLETED, multi.error
    assert (workspace / "docs" / "new.md").read_text() == "# newer\n"
    assert (workspace / "src" / "app.py").read_text() == "print('ciao')\n"
    assert "docs/new.md" in _text(await _run(executor, run, "fs_glob", pattern="**/*.md"))
    assert "newer" in _text(await _run(executor, run, "fs_grep", pattern="newer"))
    bash = await _run(executor, run, "bash_run", command="echo made > made.txt && cat src/app.py")
    assert "print('ciao')" in _text(bash) and (workspace / "made.txt").read_bytes() == b"made\n"


async def test_a_background_command_comes_back_when_it_is_killed(make_remote_sandbox, remote_engine, workspace):
    sb = await make_remote_sandbox()
    executor, run, _ = _engine(sb)
    bg = await _run(executor, run, "bash_run", command="echo started > bg.txt; sleep 60", background=True)
    pid = bg.result["details"]["process_id"]
    logs = await _run(executor, run, "bash_logs", process_id=pid)
    assert logs.state is ToolCallState.COMPLETED
    # Killed once the file is written in the volume (on a loaded engine the command may not have run yet).
    container = remote_engine.client.containers.get(sb.container_id)
    assert await wait_until_async(lambda: container.exec_run(["test", "-s", "/workspace/bg.txt"]).exit_code == 0, 60)
    await _run(executor, run, "bash_kill", process_id=pid)
    assert (workspace / "bg.txt").read_bytes() == b"started\n"


async def test_a_command_that_creates_edits_and_deletes_leaves_the_host_equal(make_remote_sandbox, workspace):
    (workspace / "keep.txt").write_text("keep\n")
    (workspace / "edit.txt").write_text("old\n")
    (workspace / "gone.txt").write_text("gone\n")
    (workspace / "olddir").mkdir()
    (workspace / "olddir" / "inner.txt").write_text("inner\n")
    sb = await make_remote_sandbox()
    executor, run, _ = _engine(sb)
    script = ("echo new >> edit.txt && rm gone.txt && rm -r olddir && mkdir -p a/b && printf '\\x00\\xff' > a/b/bin "
              "&& printf '#!/bin/sh\\n' > run.sh && chmod 755 run.sh && ln -s a/b/bin link && mkdir empty "
              "&& touch \"$(printf 'odd\\nname')\"")
    record = await _run(executor, run, "bash_run", command=script)
    assert record.result["details"]["exit_code"] == 0, _text(record)
    assert _tree(workspace) == {
        ".agent-desk": "<dir>", "keep.txt": b"keep\n", "edit.txt": b"old\nnew\n", "a": "<dir>", "a/b": "<dir>",
        "a/b/bin": b"\x00\xff", "run.sh": b"#!/bin/sh\n", "link": "-> a/b/bin", "empty": "<dir>", "odd\nname": b""}
    assert stat.S_IMODE(os.stat(workspace / "run.sh").st_mode) == 0o755
    listing = await sb.exec("find . -path ./.agent-desk -prune -o -print | sort")
    assert sorted(listing.stdout.split("\n")) == sorted(
        [".", "./a", "./a/b", "./a/b/bin", "./edit.txt", "./empty", "./keep.txt", "./link", "./odd", "name",
         "./run.sh", ""])


async def test_host_changes_go_in_before_the_next_call(make_remote_sandbox, workspace):
    sb = await make_remote_sandbox()
    executor, run, _ = _engine(sb)
    (workspace / "from-host.txt").write_text("typed by the person\n")
    record = await _run(executor, run, "fs_read", path="from-host.txt")
    assert "typed by the person" in _text(record)


async def test_a_conflict_keeps_the_host_copy_and_is_reported(make_remote_sandbox, workspace):
    (workspace / "notes.txt").write_text("base\n")
    sb = await make_remote_sandbox()
    executor, run, events = _engine(sb)
    # The sandbox changes the file, and the person changes it too before the changes come back.
    await sb.exec("echo sandbox > notes.txt")
    (workspace / "notes.txt").write_text("person\n")
    record = await _run(executor, run, "bash_run", command="true")
    text = _text(record)
    assert "CONFLICT notes.txt" in text and CONFLICT_SUFFIX in text
    assert (workspace / "notes.txt").read_text() == "person\n"
    assert (workspace / f"notes.txt{CONFLICT_SUFFIX}").read_text() == "sandbox\n"
    errors = [e for e in events if e.type == "error"]
    assert errors and errors[0].payload["source"] == "workspace sync" and "notes.txt" in errors[0].payload["message"]
    assert any(e.actor == "workspace sync" for e in record.trail)
    # Both sides now hold the person's copy, and the sandbox sees the conflict file.
    assert await sb.read_file("notes.txt") == b"person\n"
    assert (await sb.exec(f"cat notes.txt{CONFLICT_SUFFIX}")).stdout == "sandbox\n"


async def test_the_control_folders_are_read_only_and_never_come_back(make_remote_sandbox, workspace):
    (workspace / ".git").mkdir()
    (workspace / ".git" / "config").write_text("[core]\n")
    sb = await make_remote_sandbox()
    res = await sb.exec("echo evil > .git/config; echo evil > .agent-desk/rules.toml; mkdir .git/hooks")
    assert res.stderr.count("Read-only file system") == 3, res.stderr
    assert (workspace / ".git" / "config").read_text() == "[core]\n"
    assert not (workspace / ".agent-desk" / "rules.toml").exists()


async def test_a_link_out_of_the_workspace_is_not_made_on_the_host(make_remote_sandbox, workspace):
    sb = await make_remote_sandbox()
    executor, run, _ = _engine(sb)
    record = await _run(executor, run, "bash_run", command="ln -s /etc/passwd leak && ln -s ../../.. up && echo ok")
    assert not lexists(workspace / "leak") and not lexists(workspace / "up")
    text = _text(record)
    assert "NOT BROUGHT BACK leak" in text and "NOT BROUGHT BACK up" in text
    # Reported once: the next sync does not say it again.
    assert "NOT BROUGHT BACK" not in _text(await _run(executor, run, "bash_run", command="true"))


async def test_a_second_conflict_never_overwrites_the_first_copy_and_a_lost_sync_container_comes_back(
        make_remote_sandbox, remote_engine, workspace):
    (workspace / "n.txt").write_text("base\n")
    sb = await make_remote_sandbox()
    for i in (1, 2):
        await sb.exec(f"echo sandbox {i} > n.txt")
        (workspace / "n.txt").write_text(f"person {i}\n")
        assert (await sb.sync_workspace()).conflicts == ["n.txt"]
    assert (workspace / f"n.txt{CONFLICT_SUFFIX}").read_text() == "sandbox 1\n"
    assert (workspace / f"n.txt{CONFLICT_SUFFIX}-2").read_text() == "sandbox 2\n"
    client, _ = remote_engine
    [box] = client.containers.list(filters={"label": f"org.agent-desk.sync-of={sb.project_id}"})
    box.remove(force=True)
    await sb.exec("echo after > after.txt")
    with contextlib.suppress(SandboxError):
        await sb.sync_workspace()  # the helper's death is seen here, or already at the next call
    await sb.sync_workspace()
    assert (workspace / "after.txt").read_text() == "after\n"


def test_the_second_engine_leaves_the_main_engines_bridge_alone(remote_engine, docker_client):
    """A dockerd started with --bridge=none deletes the host's docker0; the second engine has a bridge of its
    own, so the main engine's containers with a network still start."""
    import subprocess

    name = docker_client.api.inspect_network("bridge")["Options"].get("com.docker.network.bridge.name", "docker0")
    assert subprocess.run(["ip", "link", "show", name], capture_output=True).returncode == 0
