"""A mode binds the session's whole sandbox, by the kernel. In plan, read-only and strict mode every door of the
session writes nothing: a granted MCP server of kind sandbox that writes at start, a granted hook, a sub-agent,
bash_run and fs_write (allowed by a rule in strict, so only the kernel stands in the way), and what a fooled
policy would let through (run here straight on the session's sandbox: symlinks, /proc/self/root, hard links,
remounts, user namespaces, background writers). Leaving a read-only mode switches the container, the switch
is a record in the audit chain, and a writer started before it never writes after. The real Docker sandbox;
the host folder is compared byte for byte (every file's hash, every entry's mode and owner)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import stat
import time
from pathlib import Path
from typing import Any

import pytest

from desktop_app.core import Answer, ConsentKind, ProjectInfo, SandboxError, ToolCallState
from desktop_app.runtime import approve, consents
from desktop_app.runtime._mode_sandbox import SWITCH_RECORD
from tests.conftest import SANDBOX_UID
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit.daemons import stops_changing
from tests.kit.waiting import wait_until_async

pytestmark = pytest.mark.docker

HOOK = ('[[PreToolUse]]\nmatcher = "*"\ncommand = "sh .agent-desk/hooks/w.sh"\n'
        '[[PostToolUse]]\nmatcher = "*"\ncommand = "sh .agent-desk/hooks/w.sh"\n')
# the hook's script tries to write, then says on stdout (a note in the call's trail) what the kernel answered
HOOK_SCRIPT = "{ echo hooked > src/app.py; rm -rf docs; } 2>&1 | head -c 300\ntrue\n"
MCP_WRITER = {"writer": {"command": "sh", "args": ["-c", "echo pwned > src/app.py; rm -rf docs; touch mcp.txt; "
                                                   "echo tried >&2; exit 3"]}}
# What a policy fooled by a command would let run: each straight on the session's sandbox.
ATTACKS = {
    "redirect": "echo pwned > src/app.py",
    "delete": "rm -rf docs",
    "create": "touch new.txt",
    "python": "python3 -c \"open('src/app.py', 'w').write('pwned')\"",
    "symlink-in-tmp": "ln -sf /workspace/src/app.py /tmp/l && echo pwned > /tmp/l",
    "symlink-in-workspace": "ln -s /tmp/x src/link",
    "proc-self-root": "echo pwned > /proc/self/root/workspace/src/app.py",
    "proc-self-cwd": "cd src && echo pwned > /proc/self/cwd/app.py",
    "proc-pid1-root": "echo pwned > /proc/1/root/workspace/src/app.py",
    "hardlink-in-workspace": "ln src/app.py src/hard",
    "hardlink-to-tmp": "ln src/app.py /tmp/hard && echo pwned > /tmp/hard",
    "remount": "mount -o remount,rw /workspace",
    "remount-bind": "mount --bind /tmp /workspace/src",
    "userns-remount": "unshare -rm sh -c 'mount -o remount,rw /workspace; echo pwned > /workspace/src/app.py'",
    "chmod": "chmod 777 src/app.py",
    "touch-time": "touch -d 2000-01-01 src/app.py",
    "rename": "mv src/app.py src/moved.py",
    "truncate": "truncate -s 0 src/app.py",
    "control-folder": "echo x > .agent-desk/rules.toml",
    "nohup": "nohup sh -c 'sleep 0.2; echo pwned > src/app.py' >/dev/null 2>&1 &",
    "setsid": "setsid -f sh -c 'sleep 0.2; echo pwned > /workspace/src/app.py' >/dev/null 2>&1",
}


def snapshot(folder: Path) -> dict[str, tuple]:
    """Every entry under `folder`: its type and mode bits, owner, and its content's hash (a link: its target)."""
    out: dict[str, tuple] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as f:
                    body = hashlib.sha256(f.read()).hexdigest()
            else:
                body = os.readlink(path) if stat.S_ISLNK(st.st_mode) else ""
            out[os.path.relpath(path, folder)] = (stat.filemode(st.st_mode), st.st_uid, st.st_nlink, body)
    return out


def ship(folder: Path, *, mcp: bool = True) -> None:
    """The repository: its sources, a granted MCP server that writes at start and a granted hook that writes;
    owned by the container's user, so that nothing but the mount stops a write."""
    (folder / "src").mkdir(exist_ok=True)
    (folder / "src" / "app.py").write_text("print('mine')\n")
    (folder / "docs").mkdir(exist_ok=True)
    (folder / "docs" / "guide.md").write_text("# guide\n")
    (folder / ".agent-desk" / "hooks").mkdir(parents=True, exist_ok=True)
    (folder / ".agent-desk" / "hooks" / "w.sh").write_text(HOOK_SCRIPT)
    (folder / ".agent-desk" / "hooks.toml").write_text(HOOK)
    if mcp:
        (folder / ".agent-desk" / "mcp.json").write_text(json.dumps({"mcpServers": MCP_WRITER}))
    if os.geteuid() == 0:
        for root, dirs, files in os.walk(folder):
            for name in [*dirs, *files]:
                os.lchown(os.path.join(root, name), SANDBOX_UID, SANDBOX_UID)
    project = ProjectInfo("p", "p", str(folder))
    for kind in (ConsentKind.MCP, ConsentKind.HOOKS) if mcp else (ConsentKind.HOOKS,):
        for consent in consents(project, kind):
            approve(project, consent)  # the person granted them: only the mode holds them now


def _said(record: Any) -> str:
    return json.dumps([record.result, record.error, [(e.note, e.data) for e in record.trail]], default=str)


@pytest.mark.parametrize("mode", ["plan", "read-only", "strict"])
async def test_no_door_of_a_read_only_mode_writes(desk_for, server: AnthropicServer, desk_env: Path,
                                                  mode: str) -> None:
    folder = desk_env / "project"
    ship(folder)
    before = snapshot(folder)
    rules = [["allow", "bash_run(*)"], ["allow", "fs_write(**)"], ["allow", "fs_read"], ["allow", "task_run"]]
    desk = await desk_for(mode=mode, rules=rules)
    server.add(reply(tool_use("fs_read", {"path": "notes.txt"}),
                     tool_use("bash_run", {"command": "echo parent > src/app.py"}),
                     tool_use("fs_write", {"path": "src/new.py", "content": "parent"})),
               reply(tool_use("task_run", {"task": "write", "template": "coding"})),
               reply(tool_use("fs_read", {"path": "notes.txt"}),
                     tool_use("bash_run", {"command": "echo child > src/app.py; rm -rf docs"})),
               lambda req: reply(text("done")), lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await desk.rt.mcp.wait_started()
    [mcp] = desk.rt.mcp_servers()
    assert "Read-only file system" in mcp.stderr_tail and "tried" in mcp.stderr_tail  # it ran: the kernel refused
    await session.send("go")

    twin = desk.rt.sandboxes.twin
    assert twin is not None and twin.describe().limits["workspace"] == "read-only"
    recs = await desk.records(session.session.id)
    read, bash, write, task = recs
    child = await desk.records(task.result["details"]["child_session_id"])
    for rec in (read, child[0]):  # the parent's and the child's calls ran in the read-only container
        assert rec.sandbox["container_id"] == twin.describe().container_id
        assert "Read-only file system" in _said(rec)  # the hooks ran there too: the kernel refused them
    for rec in (bash, write, child[1]):  # denied by the policy, or run under a rule and refused by the kernel
        assert rec.state is ToolCallState.DENIED or "switch this session" in _said(rec), rec.name
        how = "exit_plan_mode" if mode == "plan" else "switch this session"
        assert how in _said(rec), (rec.name, _said(rec))  # every refusal says how to allow it
    if mode == "plan":  # no rule makes a write run while planning
        assert {bash.state, write.state, child[1].state} == {ToolCallState.DENIED}
    if mode == "strict":  # the rules allowed them: only the kernel stood in the way, and says how to allow it
        assert bash.state is ToolCallState.COMPLETED and write.state is ToolCallState.FAILED

    view = session.sandbox
    for name, command in ATTACKS.items():
        res = await view.exec(command)
        assert name in ("nohup", "setsid") or res.exit_code != 0, (name, res)
    with pytest.raises(SandboxError, match="switch this session"):
        await view.write_file("src/app.py", b"pwned")
    await view.exec("sleep 0.5")  # the background writers had their time
    assert snapshot(folder) == before
    assert not desk.rt.sandbox.container_id  # the project's writable container never started


async def test_leaving_and_entering_a_read_only_mode_switches_the_container(
        desk_for, server: AnthropicServer, desk_env: Path) -> None:
    folder = desk_env / "project"
    ship(folder, mcp=False)
    desk = await desk_for(mode="auto")
    session = await desk.rt.open_session()
    view, sid, policy = session.sandbox, session.session.id, desk.rt.policy

    policy.set_session_mode(sid, "plan")  # the window's per-session switch
    await view.exec("true")
    cold_ms = view.last_switch_ms  # the twin is made and started on the first switch
    twin = desk.rt.sandboxes.twin
    writer = ("setsid nohup sh -c 'while :; do echo bg >> /workspace/bg-plan.txt; echo t >> /tmp/ticks; "
              "sleep 0.05; done' >/dev/null 2>&1 &")
    await view.start_background(writer)
    before_plan = snapshot(folder)

    policy.set_session_mode(sid, "auto")  # the plan approved
    t0 = time.perf_counter()
    res = await view.exec("echo ok > written.txt")
    call_ms = (time.perf_counter() - t0) * 1000  # the first call after the switch: switch, record, command
    assert res.exit_code == 0 and (folder / "written.txt").read_text() == "ok\n"  # writable again
    warm_ms = view.last_switch_ms

    async def ticks() -> int:
        return int((await twin.exec("wc -l < /tmp/ticks")).stdout.strip() or 0)

    seen = await ticks()
    async with asyncio.timeout(30):
        while await ticks() < seen + 10:  # the plan-mode writer still runs, in the read-only container
            await view.exec("true")
    assert not (folder / "bg-plan.txt").exists()
    assert {k: v for k, v in snapshot(folder).items() if k != "written.txt"} == before_plan

    auto_writer = "setsid -f sh -c 'while :; do date +%s%N > bg-auto.txt; sleep 0.05; done'; sleep 600"
    await view.start_background(auto_writer)
    assert await wait_until_async(lambda: (folder / "bg-auto.txt").exists(), 30)
    policy.set_session_mode(sid, "read-only")
    res = await view.exec("echo again > written.txt")
    assert res.exit_code != 0 and "switch this session" in res.stderr
    assert await asyncio.to_thread(stops_changing, folder / "bg-auto.txt")  # ended with the switch

    switches = [r for r in await desk.records(sid) if r.name == SWITCH_RECORD]
    assert [r.input["mode"] for r in switches] == ["plan", "auto", "read-only"]
    ids = [twin.describe().container_id, desk.rt.sandbox.describe().container_id]
    assert [r.trail[-1].data["container"] for r in switches] == [ids[0], ids[1], ids[0]]
    assert [r.trail[-1].data["left"] for r in switches] == [ids[1], ids[0], ids[1]]
    assert switches[-1].trail[-1].data["ended_processes"]  # the auto writer, by its id
    await desk.rt.store.flush()
    verified = await desk.rt.store.verify()
    assert verified.ok, verified  # the switches are links of the chain like any call
    print(f"switch into a read-only mode, twin made: {cold_ms:.0f} ms; between running containers: "
          f"{warm_ms:.0f} ms; the first call after it, recorded switch included: {call_ms:.0f} ms")
    assert warm_ms is not None and cold_ms is not None


async def test_an_approved_plan_moves_the_session_to_the_writable_container(
        desk_for, server: AnthropicServer, desk_env: Path) -> None:
    folder = desk_env / "project"
    ship(folder, mcp=False)
    desk = await desk_for(mode="plan")

    def approve_plan(env: Any) -> None:
        if env.type == "question_asked" and env.event.kind == "plan":
            desk.rt.executor.questions.answer(env.event.question_id, Answer(approved=True, mode="accept-edits"))

    desk.rt.bus.on("*", approve_plan)
    server.add(reply(tool_use("fs_read", {"path": "notes.txt"})),
               reply(tool_use("exit_plan_mode", {"plan": "write after.txt"})),
               reply(tool_use("fs_write", {"path": "after.txt", "content": "planned\n"})),
               lambda req: reply(text("ok")))
    session = await desk.rt.open_session()
    await session.send("go")
    by_name = {r.name: r for r in await desk.records(session.session.id)}
    read, plan, write, switch = (by_name[n] for n in ("fs_read", "exit_plan_mode", "fs_write", SWITCH_RECORD))
    assert plan.name == "exit_plan_mode" and (folder / "after.txt").read_text() == "planned\n"
    twin, own = desk.rt.sandboxes.twin.describe(), desk.rt.sandbox.describe()
    assert read.sandbox["container_id"] == twin.container_id and read.sandbox["limits"]["workspace"] == "read-only"
    # the writable container started within this call: the switch record, written during it, names it
    assert write.sandbox["limits"]["workspace"] == "read-write"
    assert plan.state is ToolCallState.COMPLETED and switch.input == {"mode": "accept-edits", "workspace": "read-write"}
    assert (switch.trail[-1].data["left"], switch.trail[-1].data["container"]) == (twin.container_id,
                                                                                   own.container_id)


# A real (tiny, stdlib) MCP server that writes /workspace/mcp.txt every 50 ms while it runs, and counts its
# tries in its container's /tmp.
MCP_SERVER = r'''
import re, sys, threading, time
def write():
    while True:
        try:
            with open("/workspace/mcp.txt", "a") as f:
                f.write("%d\n" % time.time_ns())
        except OSError:
            pass
        with open("/tmp/mcp-ticks", "a") as f:
            f.write("t\n")
        time.sleep(0.05)
threading.Thread(target=write, daemon=True).start()
for line in sys.stdin:  # the image's python has no json module: the few answers a client needs, by hand
    method, rid = re.search(r'"method": *"([^"]+)"', line), re.search(r'"id": *(\d+|"[^"]*")', line)
    if method is None or rid is None:
        continue
    if method.group(1) == "initialize":
        version = re.search(r'"protocolVersion": *"([^"]+)"', line).group(1)
        result = ('{"protocolVersion": "%s", "capabilities": {"tools": {}}, '
                  '"serverInfo": {"name": "ticker", "version": "1"}}' % version)
    else:
        result = '{"tools": []}' if method.group(1) == "tools/list" else "{}"
    sys.stdout.write('{"jsonrpc": "2.0", "id": %s, "result": %s}\n' % (rid.group(1), result))
    sys.stdout.flush()
'''


async def test_the_projects_mcp_servers_leave_the_writable_container_while_a_session_plans(
        desk_for, server: AnthropicServer, desk_env: Path) -> None:
    folder = desk_env / "project"
    ship(folder, mcp=False)
    (folder / ".agent-desk" / "ticker.py").write_text(MCP_SERVER)
    (folder / ".agent-desk" / "mcp.json").write_text(json.dumps(
        {"mcpServers": {"ticker": {"command": "python3", "args": [".agent-desk/ticker.py"]}}}))
    project = ProjectInfo("p", "p", str(folder))
    for consent in consents(project, ConsentKind.MCP):
        approve(project, consent)
    desk = await desk_for(mode="auto")
    session = await desk.rt.open_session()
    await desk.rt.mcp.wait_started()
    assert await wait_until_async(lambda: (folder / "mcp.txt").exists(), 30)  # it writes, in mode auto

    desk.rt.policy.set_session_mode(session.session.id, "plan")
    await session.sandbox.exec("true")  # the session's next call: the switch, the servers' move, are done
    assert await asyncio.to_thread(stops_changing, folder / "mcp.txt")  # its writer ended with it
    twin = desk.rt.sandboxes.twin

    async def ticks() -> int:
        return int((await twin.exec("cat /tmp/mcp-ticks 2>/dev/null | wc -l")).stdout.strip() or 0)

    async with asyncio.timeout(30):
        while await ticks() < 10:  # it started again in the read-only twin, and tries in vain
            await twin.exec("true")
    assert await asyncio.to_thread(stops_changing, folder / "mcp.txt")

    desk.rt.policy.set_session_mode(session.session.id, "auto")  # the plan approved: it may write again
    await session.sandbox.exec("true")
    size = (folder / "mcp.txt").stat().st_size
    assert await wait_until_async(lambda: (folder / "mcp.txt").stat().st_size > size, 30)
