"""Checkpoints and rewind under attack. The claims: a rewind never follows a link out of the project (a link
the agent planted where a folder or a file was, or a new one); a checkpoint keeps a link as a link, never what
it points to; the project's own git setup (hooks, fsmonitor, filters in .git/config, .gitattributes) never
runs when the desk checkpoints; a missing or corrupt checkpoint says so and changes nothing; `.git` and
`.agent-desk` are never touched; and the sandbox cannot reach the store."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from desktop_app.core import (
    AuditEntry,
    CheckpointError,
    RewindError,
    ShadowStore,
    ToolCallRecord,
    ToolCallState,
    apply_rewind,
    plan_rewind,
)
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use


class Project:
    """A workspace, its store, and calls recorded as the executor records them (checkpoint before, after)."""

    def __init__(self, tmp: Path) -> None:
        self.ws = tmp / "ws"
        self.ws.mkdir()
        self.outside = tmp / "outside"
        self.outside.mkdir()
        (self.outside / "secret.txt").write_text("the person's secret\n")
        self.store = ShadowStore(tmp / "state" / "checkpoints", self.ws)
        self.records: list[ToolCallRecord] = []

    def call(self, change) -> ToolCallRecord:
        """A call of the agent's that runs `change` between its two checkpoints."""
        r = ToolCallRecord(name="bash_run", input={}, session_id="ses_x", project_id="prj_x")
        before = self.store.take()
        r.started_at = time.time()
        r.trail.append(AuditEntry(r.id, ToolCallState.EXECUTING, r.started_at, "executor",
                                  data={"checkpoint": before.to_dict()}))
        change()
        after = self.store.take()
        r.trail.append(AuditEntry(r.id, ToolCallState.COMPLETED, time.time(), "executor",
                                  data={"checkpoint_after": after.to_dict()}))
        self.records.append(r)
        return r

    def snapshot(self) -> dict[str, bytes | str]:
        out: dict[str, bytes | str] = {}
        for root in (self.ws, self.outside):
            for p in sorted(root.rglob("*")):
                key = f"{root.name}/{p.relative_to(root)}"
                out[key] = f"-> {os.readlink(p)}" if p.is_symlink() else (p.read_bytes() if p.is_file() else "dir")
        return out


@pytest.fixture
def project(tmp_path: Path) -> Project:
    return Project(tmp_path)


def _replace_with_link(path: Path, target: Path) -> None:
    shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    path.symlink_to(target)


@pytest.mark.parametrize("planted", ["folder", "file", "new-link", "deep-folder"])
def test_a_planted_link_out_of_the_project_is_never_followed(project: Project, planted: str) -> None:
    ws, outside = project.ws, project.outside
    (ws / "sub" / "deep").mkdir(parents=True)
    (ws / "sub" / "deep" / "f.txt").write_text("inside\n")
    (ws / "secret.txt").write_text("the project's file\n")
    changes = {
        "folder": lambda: _replace_with_link(ws / "sub", outside),  # sub/deep/f.txt would land outside
        "file": lambda: _replace_with_link(ws / "secret.txt", outside / "secret.txt"),
        "new-link": lambda: (ws / "escape").symlink_to(outside),
        "deep-folder": lambda: _replace_with_link(ws / "sub" / "deep", outside),
    }
    first = project.call(changes[planted])
    outside_before = {k: v for k, v in project.snapshot().items() if k.startswith("outside/")}
    plan = plan_rewind(project.store, project.records, first.id)
    done = apply_rewind(project.store, plan)
    after = project.snapshot()
    assert {k: v for k, v in after.items() if k.startswith("outside/")} == outside_before  # nothing outside moved
    assert (ws / "sub" / "deep" / "f.txt").read_text() == "inside\n" and not (ws / "sub").is_symlink()
    assert (ws / "secret.txt").read_text() == "the project's file\n" and not (ws / "secret.txt").is_symlink()
    assert not (ws / "escape").exists() and not (ws / "escape").is_symlink()
    assert not done.failed



@pytest.mark.parametrize("swapped", ["folder", "file", "deep-folder"])
def test_a_link_swapped_in_while_a_checkpoint_reads_is_refused(project: Project, monkeypatch, swapped: str) -> None:
    """After the first checkpoint the desk reads changed files itself: a link the agent swaps in between the
    check of a path and its read (a race, made certain here) is refused, and nothing outside is kept."""
    ws, outside = project.ws, project.outside
    (ws / "sub" / "deep").mkdir(parents=True)
    (outside / "deep").mkdir()
    (outside / "deep" / "secret.txt").write_text("the person's secret\n")
    project.store.take()  # the first, through git's index; the desk's own reads from now on
    rel = "sub/deep/secret.txt" if swapped == "deep-folder" else "sub/secret.txt"
    (ws / rel).write_text("the project's file\n")
    real = ShadowStore._sizes

    def racing(self, paths):  # the lstat checks pass; then the agent swaps the link in
        out = real(self, paths)
        target = {"folder": (ws / "sub", outside), "file": (ws / rel, outside / "secret.txt"),
                  "deep-folder": (ws / "sub" / "deep", outside / "deep")}[swapped]
        _replace_with_link(*target)
        return out

    monkeypatch.setattr(ShadowStore, "_sizes", racing)
    with pytest.raises(CheckpointError, match=f"cannot read {rel}"):
        project.store.take()  # the call would ask, with this reason
    secret = b"the person's secret\n"
    oid = hashlib.sha1(b"blob %d\0" % len(secret) + secret, usedforsecurity=False).hexdigest()
    assert not (project.store.git_dir / "objects" / oid[:2] / oid[2:]).exists()

def test_a_checkpoint_keeps_a_link_never_what_it_points_to(project: Project) -> None:
    (project.ws / "escape").symlink_to(project.outside / "secret.txt")
    (project.ws / "dir-escape").symlink_to(project.outside)
    cp = project.store.take()
    files = project.store.files(cp.id)
    assert {p: e.mode for p, e in files.items()} == {"escape": "120000", "dir-escape": "120000"}
    kept = project.store.blobs({e.blob for e in files.values()})
    assert b"the person's secret" not in b"".join(kept.values())
    assert sorted(kept.values()) == sorted([os.fsencode(project.outside / "secret.txt"),
                                            os.fsencode(project.outside)])


def test_the_projects_own_git_setup_never_runs(project: Project, tmp_path: Path) -> None:
    ws = project.ws
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    pwned = tmp_path / "pwned"
    with open(ws / ".git" / "config", "a") as f:  # what the agent may have written into the project's repo
        f.write(f"[core]\n\tfsmonitor = touch {pwned}-fsmonitor\n\thooksPath = {ws}/hooks\n"
                f"[filter \"evil\"]\n\tclean = touch {pwned}-clean\n\tsmudge = touch {pwned}-smudge\n"
                f"[diff \"evil\"]\n\ttextconv = touch {pwned}-textconv\n")
    (ws / "hooks").mkdir()
    for hook in ("post-index-change", "pre-commit", "reference-transaction"):
        (ws / "hooks" / hook).write_text(f"#!/bin/sh\ntouch {pwned}-{hook}\n")
        (ws / "hooks" / hook).chmod(0o755)
    (ws / ".gitattributes").write_text("* filter=evil diff=evil\n")
    (ws / "a.txt").write_text("one\n")
    config = (ws / ".git" / "config").read_text()
    first = project.call(lambda: (ws / "a.txt").write_text("two\n"))
    apply_rewind(project.store, plan_rewind(project.store, project.records, first.id))
    assert (ws / "a.txt").read_text() == "one\n"
    assert not list(tmp_path.glob("pwned*"))
    assert (ws / ".git" / "config").read_text() == config  # the project's .git untouched
    assert not list((project.store.git_dir).glob("hooks/*"))


def test_git_and_agent_desk_are_never_rewound(project: Project) -> None:
    ws = project.ws
    (ws / ".agent-desk").mkdir()
    (ws / ".agent-desk" / "rules.toml").write_text("before\n")
    (ws / ".git").mkdir()
    (ws / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (ws / "a.txt").write_text("one\n")

    def change() -> None:
        (ws / ".agent-desk" / "rules.toml").write_text("changed by the person's trust\n")
        (ws / ".git" / "HEAD").write_text("ref: refs/heads/other\n")
        (ws / ".AGENT-DESK").mkdir()
        (ws / "a.txt").write_text("two\n")

    first = project.call(change)
    plan = plan_rewind(project.store, project.records, first.id)
    assert plan.restore == ["a.txt"] and not plan.remove and not plan.mine
    apply_rewind(project.store, plan)
    assert (ws / ".agent-desk" / "rules.toml").read_text() == "changed by the person's trust\n"
    assert (ws / ".git" / "HEAD").read_text() == "ref: refs/heads/other\n"
    assert (ws / ".AGENT-DESK").is_dir()


def _objects(store: ShadowStore, oid: str) -> Path:
    return store.git_dir / "objects" / oid[:2] / oid[2:]


@pytest.mark.parametrize("damage", ["tree-gone", "blob-gone", "blob-garbled", "store-gone", "id-tampered"])
def test_a_missing_or_corrupt_checkpoint_says_so_and_changes_nothing(project: Project, damage: str) -> None:
    ws = project.ws
    (ws / "a.txt").write_text("the first words, long enough to be their own blob\n")
    (ws / "b.txt").write_text("b\n")
    first = project.call(lambda: ((ws / "a.txt").write_text("rewritten\n"), (ws / "b.txt").unlink(),
                                  (ws / "c.txt").write_text("new\n")))
    cp = first.trail[0].data["checkpoint"]["id"]
    blob = project.store.files(cp)["a.txt"].blob
    if damage == "tree-gone":
        _objects(project.store, cp).unlink()
    elif damage == "blob-gone":
        _objects(project.store, blob).unlink()
    elif damage == "blob-garbled":  # a valid object of other bytes, stored under the blob's name
        other = subprocess.run(["git", "hash-object", "-w", "--stdin"], input=b"evil bytes\n", capture_output=True,
                               env={**os.environ, "GIT_DIR": str(project.store.git_dir)}, check=True)
        src = _objects(project.store, other.stdout.decode().strip())
        _objects(project.store, blob).chmod(0o644)
        shutil.copyfile(src, _objects(project.store, blob))
    elif damage == "store-gone":
        shutil.rmtree(project.store.git_dir)
    else:
        first.trail[0].data["checkpoint"]["id"] = "../../../../etc/passwd"
    before = project.snapshot()
    with pytest.raises(RewindError) as caught:
        apply_rewind(project.store, plan_rewind(project.store, project.records, first.id))
    assert "missing or corrupt" in str(caught.value) or "not a checkpoint id" in str(caught.value)
    assert "Nothing was changed" in caught.value.hint
    assert project.snapshot() == before


@pytest.mark.docker
async def test_the_sandbox_cannot_reach_the_checkpoint_store(desk_for, server: AnthropicServer) -> None:
    desk = await desk_for(mode="auto")
    project = Path(desk.rt.project.path)
    store = desk.rt.executor.checkpoints
    probe = (f"ls -la {store.git_dir} {store.git_dir.parent} 2>&1; find / -name '*.git' 2>/dev/null; "
             f"find / -path '*checkpoints*' 2>/dev/null; echo probed > a.txt")
    server.add(reply(tool_use("bash_run", {"command": probe})), reply(text("done")))
    session = await desk.rt.open_session()
    await session.send("look around")
    (call,) = await desk.records(session.session.id)
    out = call.result["content"][0]["text"]
    named = [line for line in out.splitlines() if "checkpoints" in line or ".git" in line]
    assert len(named) == 2 and all("No such file or directory" in line for line in named), out
    assert store.git_dir.is_dir() and not store.git_dir.is_relative_to(project)
    executing = next(e for e in call.trail if e.state is ToolCallState.EXECUTING)
    checkpoint = executing.data["checkpoint"]["id"]
    assert "a.txt" not in store.files(checkpoint) and (project / "a.txt").read_text() == "probed\n"
