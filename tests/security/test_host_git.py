""".git is never writable from the sandbox, and the desk's own git on the host (the git_commit tool, and any
git it runs there) runs nothing a repository, a sandbox or a configuration file names: no hooks, no
fsmonitor, no filters, no external diff, pager, editor, signing program or credential helper, no include, no
system or global configuration, no `.git`, `gitdir` or `commondir` pointer out of the project. Each payload
would create a marker file on the host; the marker must not exist afterwards."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from desktop_app.core import (
    Action,
    Allow,
    PermissionMode,
    PermissionPolicy,
    ToolCallState,
    ToolContext,
    ToolFacts,
    ToolInputError,
)
from desktop_app.sandbox import ProjectGit
from desktop_app.sandbox._host_git import Repository, host_git
from desktop_app.tools import GitCommit
from desktop_app.tools._git_commit import GitCommitInput
from tests.conftest import SANDBOX_UID, TEST_IMAGE
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit import Desk


def _init(ws: Path) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(ws)], check=True)
    _append(ws / ".git" / "config", "[user]\n\tname = Owner\n\temail = owner@example.com\n")


def _repo(tmp: Path, *, owner: int | None = None) -> Path:
    """A repository with one commit, the payload script beside it (outside the project) and no marker."""
    ws = tmp / "proj"
    ws.mkdir()
    _init(ws)
    (ws / "a.txt").write_text("one\n")
    _git(ws, "add", "a.txt")
    _git(ws, "commit", "-qm", "first")
    payload = tmp / "payload.sh"
    payload.write_text(f"#!/bin/sh\ntouch {tmp / 'ran'}\ncat >/dev/null 2>&1\nexit 0\n")
    payload.chmod(0o755)
    (ws / "a.txt").write_text("two\n")
    if owner is not None:
        for root, dirs, files in os.walk(ws):
            for name in [".", *dirs, *files]:
                os.lchown(os.path.join(root, name), owner, owner)
    return ws


def _git(ws: Path, *args: str) -> str:
    """The test's own git, with no configuration but the repository's."""
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "GIT_CONFIG_NOSYSTEM": "1",
           "GIT_CONFIG_GLOBAL": "/dev/null"}
    return subprocess.run(["git", "-c", "core.hooksPath=/dev/null", "-c", f"safe.directory={ws}", "-C", str(ws),
                           *args], check=True, capture_output=True, text=True, env=env).stdout


def _append(path: Path, text: str) -> None:
    with open(path, "a") as fh:
        fh.write(text)


def _head(ws: Path) -> str:
    return _git(ws, "rev-parse", "HEAD").strip()


async def _commit(ws: Path, message: str = "agent", paths: list[str] | None = None) -> Any:
    """The git_commit tool's run (dry run first, as the executor does): (result, refusal at dry run)."""
    tool, args = GitCommit(str(ws), ProjectGit(str(ws))), GitCommitInput(message=message, paths=paths or [])
    ctx = ToolContext(call_id="c", session_id="s", sandbox=None)
    try:
        await tool.dry_run(args, ctx)
    except ToolInputError as exc:
        refused = exc
    else:
        refused = None
    return await tool.run(args, ctx), refused


def _config_attack(ws: Path, tmp: Path, name: str) -> str:
    """Plant one program-running configuration in the repository: the key the refusal must name."""
    p, inc = tmp / "payload.sh", tmp / "inc.cfg"
    inc.write_text(f"[core]\n\tfsmonitor = {p}\n")
    hooks = tmp / "hooks"
    hooks.mkdir(exist_ok=True)
    for hook in ("pre-commit", "commit-msg", "post-commit"):
        os.symlink(p, hooks / hook) if not (hooks / hook).exists() else None
    attrs = {"filter-clean": "* filter=x\n", "filter-process": "* filter=x\n", "textconv": "* diff=x\n",
             "merge-driver": "* merge=x\n"}
    if name in attrs:
        (ws / ".gitattributes").write_text(attrs[name])
    config, key = CONFIG_ATTACKS[name]
    with open(ws / ".git" / "config", "a") as fh:
        fh.write(config.format(p=p, inc=inc, hooks=hooks, outside=tmp))
    return key


CONFIG_ATTACKS = {
    "fsmonitor": ("[core]\n\tfsmonitor = {p}\n", "core.fsmonitor"),
    "fsmonitor-case": ("[CoRe]\n\tFsMonitor = {p}\n", "core.fsmonitor"),
    "hooksPath": ("[core]\n\thooksPath = {hooks}\n", "core.hookspath"),
    "filter-clean": ('[filter "x"]\n\tclean = {p}\n\trequired = true\n', "filter.x.clean"),
    "filter-process": ('[filter "x"]\n\tprocess = {p}\n', "filter.x.process"),
    "diff-external": ("[diff]\n\texternal = {p}\n", "diff.external"),
    "textconv": ('[diff "x"]\n\ttextconv = {p}\n', "diff.x.textconv"),
    "merge-driver": ('[merge "x"]\n\tdriver = {p}\n', "merge.x.driver"),
    "pager": ("[core]\n\tpager = {p}\n", "core.pager"),
    "pager-cmd": ("[pager]\n\tcommit = {p}\n", "pager.commit"),
    "editor": ("[core]\n\teditor = {p}\n", "core.editor"),
    "sshCommand": ("[core]\n\tsshCommand = {p}\n", "core.sshcommand"),
    "gpg": ("[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = {p}\n", "gpg.program"),
    "credential": ("[credential]\n\thelper = !{p}\n", "credential.helper"),
    "askpass": ("[core]\n\taskPass = {p}\n", "core.askpass"),
    "include": ("[include]\n\tpath = {inc}\n", "include.path"),
    "includeIf-gitdir": ('[includeIf "gitdir:/"]\n\tpath = {inc}\n', "includeif.gitdir:/.path"),
    "includeIf-onbranch": ('[includeIf "onbranch:*"]\n\tpath = {inc}\n', "includeif.onbranch:*.path"),
    "worktree": ("[core]\n\tworktree = {outside}\n", "core.worktree"),
    "alias": ("[alias]\n\tci = !{p}\n", "alias.ci"),
    "subsection": ('[core "x"]\n\tfsmonitor = {p}\n', "core.x.fsmonitor"),
    "unknown-key": ("[uploadpack]\n\tpackObjectsHook = {p}\n", "uploadpack.packobjectshook"),
}


@pytest.mark.parametrize("name", sorted(CONFIG_ATTACKS))
async def test_a_repository_config_that_runs_programs_is_refused_before_git_runs(tmp_path, name):
    ws = _repo(tmp_path)
    before = _head(ws)
    key = _config_attack(ws, tmp_path, name)
    result, refused = await _commit(ws)
    assert refused is not None and key in str(refused) and "commit in a terminal" in refused.hint
    assert result.is_error and key in result.text_content
    assert not (tmp_path / "ran").exists()
    assert _head(ws) == before


async def test_a_worktree_config_is_judged_too(tmp_path):
    ws = _repo(tmp_path)
    _append(ws / ".git" / "config", "[extensions]\n\tworktreeConfig = true\n")
    (ws / ".git" / "config.worktree").write_text(f"[core]\n\tfsmonitor = {tmp_path / 'payload.sh'}\n")
    result, refused = await _commit(ws)
    assert refused is not None and "config.worktree sets core.fsmonitor" in str(refused)
    assert result.is_error and not (tmp_path / "ran").exists()


def _outside_repo(tmp: Path) -> Path:
    """A git folder outside the project whose config runs the payload (what the sandbox would have made)."""
    evil = tmp / "evil"
    evil.mkdir()
    subprocess.run(["git", "init", "-q", "--bare", str(evil)], check=True)
    with open(evil / "config", "a") as fh:
        fh.write(f"[core]\n\tfsmonitor = {tmp / 'payload.sh'}\n\thooksPath = {tmp / 'hooks'}\n")
    return evil


POINTERS = {
    "commondir-absolute": lambda ws, evil: (ws / ".git" / "commondir").write_text(f"{evil}\n"),
    "commondir-relative": lambda ws, evil: (ws / ".git" / "commondir").write_text("../../evil\n"),
    "commondir-link": lambda ws, evil: (os.symlink(evil, ws / "inside"),
                                        (ws / ".git" / "commondir").write_text("../inside\n")),
    "gitdir-file": lambda ws, evil: (_move_git(ws), (ws / ".git").write_text(f"gitdir: {evil}\n")),
    "gitdir-file-relative": lambda ws, evil: (_move_git(ws), (ws / ".git").write_text("gitdir: ../evil\n")),
    "git-link": lambda ws, evil: (_move_git(ws), os.symlink(evil, ws / ".git")),
    "config-link": lambda ws, evil: ((ws / ".git" / "config").unlink(),
                                     os.symlink(evil / "config", ws / ".git" / "config")),
}


def _move_git(ws: Path) -> None:
    (ws / ".git").rename(ws.parent / "moved-git")


@pytest.mark.parametrize("name", sorted(POINTERS))
async def test_a_git_pointer_out_of_the_project_is_refused(tmp_path, name):
    ws = _repo(tmp_path)
    POINTERS[name](ws, _outside_repo(tmp_path))
    result, refused = await _commit(ws)
    assert refused is not None, name
    assert "outside the project folder" in str(refused) or "symbolic link" in str(refused)
    assert result.is_error and not (tmp_path / "ran").exists()


async def test_hooks_in_the_repository_never_run_and_the_commit_is_named(tmp_path):
    ws = _repo(tmp_path)
    before = _head(ws)
    for hook in ("pre-commit", "prepare-commit-msg", "commit-msg", "post-commit", "post-index-change",
                 "reference-transaction", "pre-auto-gc", "fsmonitor-watchman"):
        os.symlink(tmp_path / "payload.sh", ws / ".git" / "hooks" / hook)
    (ws / "new file.txt").write_text("new\n")
    result, refused = await _commit(ws, "agent: two files")
    assert refused is None and not result.is_error, result.text_content
    head = _head(ws)
    assert head != before and result.details["commit"] == head and head[:12] in result.text_content
    assert sorted(result.details["files"]) == ["a.txt", "new file.txt"] and result.details["branch"] == "main"
    assert not (tmp_path / "ran").exists()
    assert _git(ws, "log", "-1", "--format=%an <%ae> %s").strip() == "Owner <owner@example.com> agent: two files"


async def test_only_the_named_paths_are_committed_and_bad_paths_are_refused(tmp_path):
    ws = _repo(tmp_path)
    (ws / "b.txt").write_text("b\n")
    result, _ = await _commit(ws, "only b", ["/workspace/b.txt"])
    assert result.details["files"] == ["b.txt"]
    assert _git(ws, "status", "--short").strip() == "M a.txt"
    for bad in ("../x", "/etc/passwd", ".git/config", "~/x", "a\x00b"):
        res, refused = await _commit(ws, "bad", [bad])
        assert refused is not None and res.is_error, bad
    nothing, refused = await _commit(ws, "none", ["b.txt"])
    assert refused is None and nothing.is_error and "nothing to commit" in nothing.text_content


async def test_the_desks_environment_and_the_persons_global_config_are_not_read(tmp_path, monkeypatch):
    """Only user.name and user.email are taken from the person's ~/.gitconfig (as data); the desk's own
    GIT_* variables (a config given on the environment, an external diff, another git dir) do not reach git."""
    ws = _repo(tmp_path)
    _git(ws, "config", "--remove-section", "user")
    home, evil = tmp_path / "home", _outside_repo(tmp_path)
    home.mkdir()
    p = tmp_path / "payload.sh"
    (home / ".gitconfig").write_text(f"[user]\n\tname = Person\n\temail = p@example.com\n[core]\n\tfsmonitor = "
                                     f"{p}\n\thooksPath = {tmp_path / 'hooks'}\n[include]\n\tpath = {p}\n")
    monkeypatch.setenv("HOME", str(home))
    for name, value in {"GIT_CONFIG_PARAMETERS": f"'core.fsmonitor'='{p}'", "GIT_CONFIG_COUNT": "1",
                        "GIT_CONFIG_KEY_0": "core.fsmonitor", "GIT_CONFIG_VALUE_0": str(p),
                        "GIT_EXTERNAL_DIFF": str(p), "GIT_DIR": str(evil),
                        "GIT_EXEC_PATH": str(tmp_path), "GIT_PAGER": str(p), "GIT_SSH_COMMAND": str(p)}.items():
        monkeypatch.setenv(name, value)
    os.symlink(p, ws / ".git" / "hooks" / "pre-commit")
    result, refused = await _commit(ws)
    assert refused is None and not result.is_error, result.text_content
    assert not (tmp_path / "ran").exists()
    assert _git(ws, "log", "-1", "--format=%an <%ae>").strip() == "Person <p@example.com>"


async def test_the_overrides_hold_even_without_the_config_check(tmp_path):
    """Behind the refusals, every git the desk runs sets fsmonitor, hooks, pager and signing off itself."""
    ws = _repo(tmp_path)
    p = tmp_path / "payload.sh"
    _append(ws / ".git" / "config", f"[core]\n\tfsmonitor = {p}\n\tpager = {p}\n\thooksPath = {tmp_path / 'hooks'}\n"
            f"[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = {p}\n")
    os.symlink(p, ws / ".git" / "hooks" / "pre-commit")
    repo = Repository(str(ws), str(ws / ".git"), str(ws / ".git"))
    home = tmp_path / "empty"
    home.mkdir()
    status = await host_git(repo, "status", home=str(home))
    done = await host_git(repo, "commit", "-qam", "unverified but hooked", home=str(home))
    assert status.code == 0 and done.code == 0, done.err
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("mode,expected", [("ask", Action.ASK), ("accept-edits", Action.ASK),
                                           ("auto", Action.ALLOW), ("plan", Action.DENY),
                                           ("read-only", Action.DENY), ("strict", Action.DENY)])
def test_a_commit_is_judged_as_a_write(mode, expected):
    tool = GitCommit("/nowhere", ProjectGit("/nowhere"))
    facts = ToolFacts(tool.name, tool.group, tool.read_only)
    policy = PermissionPolicy(PermissionMode(mode))
    decision = policy.resolve_ask(policy.evaluate(facts, {"message": "m", "paths": ["src/a.py"]}))
    assert decision.action is expected, decision.reason


# -- in the sandbox: .git is read-only in bind and synced workspaces, and the host commit holds -------------
SANDBOX_ATTACKS = (
    "mkdir -p /workspace/evil && printf '[core]\\n\\tfsmonitor = {p}\\n' > /workspace/evil/config && "
    "echo /workspace/evil > .git/commondir",
    "echo ../evil > .git/commondir",
    "printf '[core]\\n\\tfsmonitor = {p}\\n' >> .git/config",
    "git config core.hooksPath /workspace/evil",
    "printf '#!/bin/sh\\ntouch {ran}\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit",
    "printf '[core]\\n\\tfsmonitor = {p}\\n' > .git/config.worktree",
    "rm -rf .git; echo 'gitdir: /workspace/evil' > .git",
    "mv .git g",
    "echo '* filter=x' > .gitattributes && git config filter.x.clean {p}",
    "git -c user.email=a@b -c user.name=a commit -qam agent",
)


@pytest.mark.parametrize("workspace_mode", ["bind", "synced"])
async def test_the_sandbox_cannot_shape_the_hosts_git(make_docker_sandbox, tmp_path, workspace_mode):
    from desktop_app.sandbox import SandboxConfig

    ws = _repo(tmp_path, owner=SANDBOX_UID if os.geteuid() == 0 else None)
    git_before = {str(f.relative_to(ws)): f.read_bytes() for f in (ws / ".git").rglob("*") if f.is_file()}
    sb = await make_docker_sandbox(SandboxConfig(image=TEST_IMAGE, workspace=workspace_mode), folder=ws)
    for attack in SANDBOX_ATTACKS:
        await sb.exec(attack.format(p=tmp_path / "payload.sh", ran=tmp_path / "ran"))
    if workspace_mode == "synced":
        await sb.sync_workspace()
    git_after = {str(f.relative_to(ws)): f.read_bytes() for f in (ws / ".git").rglob("*") if f.is_file()}
    assert git_after == git_before and (ws / ".git").is_dir() and not (ws / "g").exists()
    result, refused = await _commit(ws, "the desk's commit", ["a.txt"])
    assert refused is None and not result.is_error, result.text_content
    assert result.details["files"] == ["a.txt"]
    assert not (tmp_path / "ran").exists()


# -- a session: the setting offers the tool, a commit asks, is recorded and names the commit ----------------
async def test_a_commit_in_a_session_asks_and_is_recorded(desk_for, desk_env: Path, server: AnthropicServer):
    ws = desk_env / "project"
    off: Desk = await desk_for()
    assert "git_commit" not in {t.name for t in off.rt.tools} and "git_commit" not in off.rt.registry
    _init(ws)
    desk: Desk = await desk_for(settings={"git_writable": True})  # the old spelling offers the tool
    assert "git_commit" in {t.name for t in desk.rt.tools}
    asked: list[Any] = []
    desk.answer = lambda ev: asked.append(ev) or Allow()
    server.add(reply(tool_use("git_commit", {"message": "notes", "paths": ["notes.txt"]})),
               lambda req: reply(text("done")))
    session = await desk.rt.open_session()
    await session.send("commit it")
    (call,) = await desk.records(session.session.id)
    assert len(asked) == 1 and "notes.txt" in str(asked[0])  # the dry run's status is on the card
    assert call.state is ToolCallState.COMPLETED, call.result
    head = _git(ws, "rev-parse", "HEAD").strip()
    assert call.result["details"]["commit"] == head and head[:12] in str(call.result["content"])
    assert call.sandbox is not None and call.sandbox.get("kind") == "host"
