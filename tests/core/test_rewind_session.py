"""Checkpoints and rewind end to end: a runtime on a real DockerSandbox, a SQLite audit file and the fake
Anthropic server. bash_run deletes, renames, rewrites and re-modes files; the person then edits one on the
host; `agent-desk sessions rewind` shows the diff, asks twice, puts back the exact bytes and modes, keeps the
person's file, and is itself a record in a chain that verifies."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from desktop_app.core import BRANCH_OF, REWIND_TOOL, SessionInfo, StoredMessage, ToolCallState, point_before_turn
from desktop_app.runtime import plan_turn_rewind
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit.cli import cli, server_cli_environ

pytestmark = pytest.mark.docker

SANDBOX_UID = 1000
BEFORE = {"a.txt": (b"alpha\n", 0o644), "del.txt": (b"to be deleted\n", 0o644),
          "run.sh": (b"#!/bin/sh\necho hi\n", 0o755), "sub/b.txt": (b"\x00binary\xffbytes", 0o644),
          ".gitignore": (b"build/\n", 0o644), "build/out.bin": (b"ignored output", 0o644)}
FIRST = ("rm del.txt && mv a.txt a2.txt && printf 'rewritten' > sub/b.txt && chmod 644 run.sh"
         " && echo made > c.txt && echo rebuilt > build/out.bin")


def _files(project: Path) -> None:
    for rel, (body, mode) in BEFORE.items():
        path = project / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(body)
        path.chmod(mode)
        if os.geteuid() == 0:
            os.chown(path, SANDBOX_UID, SANDBOX_UID)
            os.chown(path.parent, SANDBOX_UID, SANDBOX_UID)


def _executing(record) -> dict:
    return next(e.data for e in record.trail if e.state is ToolCallState.EXECUTING)


async def test_bash_changes_are_rewound_and_the_persons_edit_is_kept(desk_for, desk_env: Path,
                                                                    server: AnthropicServer) -> None:
    desk = await desk_for(mode="auto")
    project = Path(desk.rt.project.path)
    _files(project)
    server.add(reply(tool_use("bash_run", {"command": FIRST})), reply(text("done")),
               reply(tool_use("bash_run", {"command": "ls"}), tool_use("bash_run", {"command": "echo agent > c2.txt"})),
               reply(text("ok")))
    session = await desk.rt.open_session()
    assert (await session.send("change things")).ok
    assert (await session.send("one more")).ok
    first, listing, _second = sorted(await desk.records(session.session.id), key=lambda r: r.created_at)
    assert (project / "a2.txt").read_bytes() == b"alpha\n" and not (project / "del.txt").exists()
    # the calls that may write carry their checkpoint (in the record and the chain); `ls` only reads
    assert len(_executing(first)["checkpoint"]["id"]) == 40 and "checkpoint" not in _executing(listing)
    assert _executing(first)["checkpoint"]["not_kept"] == {"build": "ignored (.gitignore)"}
    assert first.trail[-1].data["checkpoint_after"]["id"] != _executing(first)["checkpoint"]["id"]
    (project / "c2.txt").write_text("the person's own words\n")  # the person edits on the host

    env = server_cli_environ(desk_env, server)
    done = cli(env, "sessions", "rewind", session.session.id, "--before", first.id, "--files-only",
               input="y\nn\n")
    assert done.returncode == 0, done.stderr
    for line in ("restore  a.txt", "restore  del.txt", "restore  run.sh", "restore  sub/b.txt", "remove   a2.txt",
                 "remove   c.txt", "yours    c2.txt", "not kept build"):
        assert line in done.stdout, done.stdout
    assert "Also put back the 1 file(s) you changed since?" in done.stderr
    for rel, (body, mode) in BEFORE.items():
        if not rel.startswith("build/"):
            assert (project / rel).read_bytes() == body, rel
            assert (project / rel).stat().st_mode & 0o777 == mode, rel
    assert not (project / "a2.txt").exists() and not (project / "c.txt").exists()
    assert (project / "c2.txt").read_text() == "the person's own words\n"  # kept: not confirmed
    assert (project / "build" / "out.bin").read_text() == "rebuilt\n"  # ignored: not kept, left alone
    assert not (project / ".git").exists()

    rewind = next(r for r in await desk.records(session.session.id) if r.name == REWIND_TOOL)
    assert rewind.state is ToolCallState.COMPLETED and rewind.input["before_call"] == first.id
    approved = next(e for e in rewind.trail if e.state is ToolCallState.APPROVED)
    assert approved.actor == "person:cli"
    assert rewind.trail[-1].data["kept"] == ["c2.txt"] and "a2.txt" in rewind.trail[-1].data["removed"]
    assert rewind.input["checkpoint"] == _executing(first)["checkpoint"]["id"]
    assert (await desk.rt.store.verify()).ok

    # asked again, nothing is left to rewind but the person's file; without a yes nothing changes
    again = cli(env, "sessions", "rewind", session.session.id, "--before", first.id, input="n\n")
    assert again.returncode == 1 and "yours    c2.txt" in again.stdout and "restore" not in again.stdout
    assert "Rewind these files and the conversation? [y/N]" in again.stderr
    assert (project / "c2.txt").exists()
    before_ids = {r.id for r in await desk.records(session.session.id)}

    # without --files-only the conversation is rewound too: before the second turn, in a new session that
    # names the original, whose messages the model sees on the next request; the original stays as it was
    original = await desk.rt.store.messages(session.session.id)
    both = cli(env, "sessions", "rewind", session.session.id, "--before", _second.id, "--yes")
    assert both.returncode == 0, both.stderr
    assert "rewind the conversation: a new session from the 4 message(s) before the turn “one more”" in both.stdout
    branch_id = re.search(r"conversation rewound: session (ses_\S+)", both.stdout)[1]
    branch = await desk.rt.store.get_session(branch_id)
    assert branch.meta[BRANCH_OF] == session.session.id and branch.meta["branched_before_call"] == _second.id
    assert branch.meta["branched_before_message"] == original[4].id and original[4].content[0]["text"] == "one more"
    assert [m.content for m in await desk.rt.store.messages(branch_id)] == [m.content for m in original[:4]]
    records = {r.name: r for r in await desk.records(branch_id)}
    assert records["rewind_conversation"].input["branch_of"] == session.session.id
    assert records[REWIND_TOOL].input["before_call"] == _second.id  # the files' rewind, in the branch
    assert {r.id for r in await desk.records(session.session.id)} == before_ids  # the original: as it was
    server.add(reply(text("taken another way")))
    resumed = await desk.rt.open_session(branch_id)
    assert (await resumed.send("something else")).ok
    sent = server.requests[-1].messages
    said = [b.get("text") for m in sent for b in (m["content"] if isinstance(m["content"], list) else [])
            if b.get("type") == "text"]
    assert said[0] == "change things" and said[-1] == "something else" and "one more" not in said
    assert [m["role"] for m in sent] == ["user", "assistant", "user", "assistant", "user"]
    assert await desk.rt.store.messages(session.session.id) == original
    # in the branch, its first turn (asked in the original) rewinds to the original's checkpoint before it
    inherited = await plan_turn_rewind(desk.rt.store, desk.rt.settings, branch_id, 0)
    assert inherited.point.index == 0 and inherited.plan.checkpoint == _executing(first)["checkpoint"]["id"]
    assert (await desk.rt.store.verify()).ok


def test_a_prompt_of_images_only_is_a_turn_for_the_rewind_as_in_the_conversation() -> None:
    """The conversation numbers turns with core's `starts_a_turn`; a rewind from its turn 2 finds the same one."""
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
    said = [("user", [{"type": "text", "text": "first"}]), ("assistant", [{"type": "text", "text": "ok"}]),
            ("user", [image]), ("assistant", [{"type": "text", "text": "a cat"}]),
            ("user", [{"type": "tool_result", "tool_use_id": "t", "content": "x"}]),
            ("user", [{"type": "text", "text": "third"}])]
    messages = [StoredMessage("s1", role, content, id=i) for i, (role, content) in enumerate(said)]
    session = SessionInfo("s1", "p1")
    assert [point_before_turn(session, messages, t).index for t in range(3)] == [0, 2, 5]
