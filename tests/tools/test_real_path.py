"""Sandbox.real_path: the path a write would really touch, in the container's view, on both sandboxes."""

from __future__ import annotations

import uuid

import pytest

from desktop_app.core import PathOutsideWorkspace


async def _sh(sandbox, command: str) -> None:
    res = await sandbox.exec(command)
    assert res.exit_code == 0, res.stderr


async def test_spellings_of_one_path_resolve_to_one_container_path(sandbox) -> None:
    await _sh(sandbox, "mkdir -p secrets src/a/b")
    want = "/workspace/secrets/k"
    for spelling in ("secrets/k", "./secrets/k", "src/../secrets/k", "secrets//k", "/workspace/secrets/k",
                     "//workspace/secrets/k", "///workspace/./secrets/../secrets/k", "secrets/k/"):
        assert await sandbox.real_path(spelling) == want, spelling
    assert await sandbox.real_path(".") == "/workspace"
    assert await sandbox.real_path("/workspace") == "/workspace"
    # Whitespace is part of a name, for the kernel as for the tools.
    assert await sandbox.real_path(" secrets/k") == "/workspace/ secrets/k"


async def test_a_missing_path_resolves_through_its_existing_parent(sandbox) -> None:
    await _sh(sandbox, "mkdir -p secrets && ln -s secrets s")
    assert await sandbox.real_path("new/dir/file.txt") == "/workspace/new/dir/file.txt"
    assert await sandbox.real_path("s/not/yet") == "/workspace/secrets/not/yet"


async def test_symlinks_inside_the_workspace_are_followed(sandbox) -> None:
    await _sh(sandbox, "mkdir -p secrets src/a/b && ln -s secrets link && ln -s src/a/b deep"
                       " && ln -s secrets/new dangling && ln -s link chain")
    assert await sandbox.real_path("link/k") == "/workspace/secrets/k"
    assert await sandbox.real_path("chain/k") == "/workspace/secrets/k"
    # `..` after a symlink climbs from the link's target, as the kernel does (not lexically).
    assert await sandbox.real_path("deep/../x") == "/workspace/src/a/x"
    # A write to a dangling link creates its target.
    assert await sandbox.real_path("dangling") == "/workspace/secrets/new"


async def test_a_symlink_from_outside_into_the_workspace_is_followed(sandbox) -> None:
    outside = f"/tmp/into-ws-{uuid.uuid4().hex[:8]}"
    await _sh(sandbox, f'mkdir -p secrets && ln -s "$PWD/secrets" {outside}')
    try:
        assert await sandbox.real_path(f"{outside}/k") == "/workspace/secrets/k"
    finally:
        await _sh(sandbox, f"rm -f {outside}")


@pytest.mark.parametrize("path", ["../x", "/etc/passwd", "/workspace/../etc/passwd", "out/passwd",
                                  "dout", "/tmp/x", "/", "/workspacefoo/x"])
async def test_paths_that_end_outside_are_refused(sandbox, path) -> None:
    await _sh(sandbox, "ln -sf /etc out && ln -sf /tmp/zz-missing dout")
    with pytest.raises(PathOutsideWorkspace):
        await sandbox.real_path(path)


async def test_the_executor_judges_a_write_at_the_path_the_sandbox_resolves(sandbox) -> None:
    from desktop_app.core import (
        Action,
        EventBus,
        Executor,
        HookChain,
        MemoryStore,
        PermissionPolicy,
        Rule,
        RunContext,
        ToolCall,
        ToolCallState,
        ToolRegistry,
    )
    from desktop_app.tools import builtin_tools

    await _sh(sandbox, "mkdir -p secrets notes && ln -s secrets link")
    store = MemoryStore()
    policy = PermissionPolicy("auto")
    policy.add_rule(Rule(Action.DENY, "fs_write", "secrets/**", "project"))
    executor = Executor(ToolRegistry(builtin_tools()), policy, bus=EventBus(store), store=store, hooks=HookChain())
    run = RunContext(session_id="s1", project_id="p1", sandbox=sandbox)
    for i, path in enumerate(["link/k", "//workspace/secrets/k", "notes/../link/k"]):
        [record] = await executor.run_batch([ToolCall(f"t{i}", "fs_write", {"path": path, "content": "x"})], run)
        assert record.state is ToolCallState.DENIED, (path, record.error)
    assert await sandbox.stat("secrets/k") is None
    [ok] = await executor.run_batch([ToolCall("t9", "fs_write", {"path": "notes/k", "content": "x"})], run)
    assert ok.state is ToolCallState.COMPLETED
