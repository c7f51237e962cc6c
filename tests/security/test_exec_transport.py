"""The exec transport (images without python3: a `docker exec` of a shell script per call) holds the same
containment as the helper (issue 10, items 2, 3, 6, 7): daemons of every kind gone after the command,
bash_kill, timeout, cancel and the session's end, forged cookies included; fs_write never follows a link,
also against a parent swapped while it runs; fs_grep cannot backtrack (ripgrep, else grep -E under a
deadline); no output lost. On agent-desk/base (no python3, no ps, no rg) and on a test image with rg."""

from __future__ import annotations

import asyncio
import io
import os
import time
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest

from desktop_app.core import EventBus, MemoryStore, PathOutsideWorkspace, SandboxError, SandboxSurvivors
from desktop_app.runtime import ProjectRuntime
from desktop_app.sandbox import SandboxConfig
from desktop_app.tools import FsGlob, FsGrep
from tests.kit import (
    BASE_IMAGE,
    VARIANTS,
    WRITER,
    argument_too_long,
    require_image,
    stops_changing,
    wait_until_async,
    write_many,
)

pytestmark = pytest.mark.docker
RG_IMAGE = "agent-desk/test-exec-rg:latest"
# A python-less image with ripgrep: the base plus the catalog's rg binary (its libraries are in the base).
RG_DOCKERFILE = f"FROM {BASE_IMAGE}\nCOPY --from=agent-desk/minimal:latest /usr/bin/rg /usr/bin/rg\n"
# What lists processes without ps (the base has no procps): every cmdline in /proc.
PS = "for p in /proc/[0-9]*; do printf '%s ' ${p#/proc/}; tr '\\0\\n' '  ' < $p/cmdline; echo; done 2>/dev/null"


class Box:
    def __init__(self, sb, client, folder: Path) -> None:
        self.sb, self.client, self.folder = sb, client, folder

    def pids(self, marker: str) -> list[int]:
        out = self.client.containers.get(self.sb.container_id).exec_run(["sh", "-c", PS]).output.decode()
        return [int(line.split()[0]) for line in out.splitlines() if marker in line and "/proc/[0-9]" not in line]


@pytest.fixture
async def box(make_docker_sandbox, docker_client, workspace: Path) -> Box:
    require_image(docker_client, BASE_IMAGE)
    sb = await make_docker_sandbox(SandboxConfig(image=BASE_IMAGE, keep_running=True))
    assert sb.transport == "exec"
    return Box(sb, docker_client, workspace)


@pytest.fixture(scope="session")
def rg_image(docker_client) -> str:
    require_image(docker_client, BASE_IMAGE)
    require_image(docker_client, "agent-desk/minimal:latest")
    try:
        docker_client.images.get(RG_IMAGE)
    except Exception:
        docker_client.images.build(fileobj=io.BytesIO(RG_DOCKERFILE.encode()), tag=RG_IMAGE, rm=True)
    return RG_IMAGE


def _owner(folder: Path) -> tuple[int, int]:
    st = folder.stat()
    return st.st_uid, st.st_gid


def _command(variant: str, marker: str, name: str) -> str:
    return VARIANTS[variant].format(w=WRITER.format(f=f"/workspace/{name}"), m=marker)


# ---------------------------------------------------------------------------------------- process trees
@pytest.mark.parametrize("variant", sorted(VARIANTS))
async def test_a_foreground_command_leaves_nothing_running(box: Box, variant: str) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    res = await box.sb.exec(_command(variant, marker, "fg.txt") + "\nsleep 0.3; echo done", timeout=30)
    assert "done" in res.stdout, res
    assert await asyncio.to_thread(box.pids, marker) == []
    assert await asyncio.to_thread(stops_changing, box.folder / "fg.txt")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
async def test_bash_kill_kills_the_whole_tree(box: Box, variant: str) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    pid = await box.sb.start_background(_command(variant, marker, "bg.txt") + "\nsleep 600")
    assert await wait_until_async(lambda: bool(box.pids(marker)), within_s=5), "the daemon never started"
    assert await wait_until_async(lambda: (box.folder / "bg.txt").exists(), within_s=5)
    killed = await box.sb.kill(pid)
    assert not killed.running
    assert await asyncio.to_thread(box.pids, marker) == []
    assert await asyncio.to_thread(stops_changing, box.folder / "bg.txt")


# A daemon that forges a run cookie: another desk's, this desk's for a run that is over, one with a newline
# that would forge a line of the scan, a cookie of a live background process (it lives with that one).
FORGED = {
    "foreign": "AGENT_DESK_RUN=xdeadbeef0000:1",
    "own_prefix_dead_run": "AGENT_DESK_RUN=$(printf %s \"$AGENT_DESK_RUN\" | sed 's/:.*/:9999/')",
    "newline": "AGENT_DESK_RUN=\"$(printf 'x\\n/proc/1/environ:AGENT_DESK_RUN=x')\"",
    "helper_style": "AGENT_DESK_RUN=1-1:1",
}


@pytest.mark.parametrize("forged", sorted(FORGED))
async def test_a_forged_cookie_does_not_save_a_daemon(box: Box, forged: str) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    daemon = f"{FORGED[forged]}; export AGENT_DESK_RUN; setsid -f env -i AGENT_DESK_RUN=\"$AGENT_DESK_RUN\" " \
             f"sh -c '{WRITER.format(f='/workspace/forged.txt')}' {marker}"  # fmt: skip
    await box.sb.exec(daemon + "\nsleep 0.2", timeout=30)
    assert await wait_until_async(lambda: not box.pids(marker), within_s=5), "survived its command's end"
    pid = await box.sb.start_background(daemon.replace(marker, marker + "b") + "\nsleep 600")
    assert await wait_until_async(lambda: bool(box.pids(marker + "b")), within_s=5)
    await box.sb.kill(pid)
    assert await asyncio.to_thread(box.pids, marker) == [], "survived bash_kill"


async def test_a_timed_out_command_leaves_nothing_running(box: Box) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    res = await box.sb.exec(_command("env_scrubbed", marker, "to.txt") + "\nsleep 600", timeout=1)
    assert res.timed_out and res.duration_ms < 8000
    assert await asyncio.to_thread(box.pids, marker) == []


async def test_a_cancelled_command_leaves_nothing_running(box: Box) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    run = asyncio.ensure_future(box.sb.exec(_command("double_fork", marker, "c.txt") + "\nsleep 600"))
    assert await wait_until_async(lambda: bool(box.pids(marker)), within_s=5)
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert await wait_until_async(lambda: not box.pids(marker), within_s=5), "the daemon outlived the cancelled call"


async def test_the_session_end_kills_everything_and_lists_it(box: Box) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    variants = ["setsid_f", "nohup_bg", "exec_a", "env_scrubbed"]
    for i, variant in enumerate(variants):
        await box.sb.start_background(_command(variant, f"{marker}{i}", f"s{i}.txt") + "\nsleep 600")
    assert await wait_until_async(lambda: len(box.pids(marker)) >= len(variants), within_s=5)
    running = asyncio.ensure_future(box.sb.exec(_command("setsid_f", f"{marker}fg", "sfg.txt") + "\nsleep 600"))
    assert await wait_until_async(lambda: bool(box.pids(f"{marker}fg")), within_s=5)
    bus = EventBus(MemoryStore())
    seen: list[SandboxSurvivors] = []
    bus.on(SandboxSurvivors.type, lambda env: seen.append(env.event))
    event = await ProjectRuntime.end_processes(SimpleNamespace(sandbox=box.sb, bus=bus), "session-1")
    assert event is not None and seen and seen[0].session_id == "session-1" and seen[0].alive == []
    commands = " ".join(p["command"] for p in seen[0].killed)
    for i in range(len(variants)):
        assert f"{marker}{i}" in commands
    assert any(p["started_by"].startswith("bg-") for p in seen[0].killed)
    assert any(p["started_by"].startswith("bash_run") for p in seen[0].killed), seen[0].killed
    res = await asyncio.wait_for(running, 20)  # the foreground command was killed too, and answered
    assert res.exit_code != 0
    assert await asyncio.to_thread(box.pids, marker) == []
    for i in range(len(variants)):
        assert await asyncio.to_thread(stops_changing, box.folder / f"s{i}.txt")
    assert box.client.containers.get(box.sb.container_id).status == "running"  # keep_running kept it
    assert (await box.sb.exec("echo still")).stdout == "still\n"


async def test_close_kills_everything(box: Box) -> None:
    marker = f"adm{uuid.uuid4().hex[:10]}"
    await box.sb.start_background(_command("setsid_f", marker, "z.txt") + "\nsleep 600")
    await box.sb.exec(f"setsid -f env -i sh -c 'sleep 600' {marker}x; true")  # gone with its command anyway
    assert await wait_until_async(lambda: bool(box.pids(marker)), within_s=5)
    await box.sb.close()
    assert await asyncio.to_thread(box.pids, marker) == []
    assert box.sb.last_sweep["alive"] == [] and box.sb.last_sweep["killed"]


async def test_other_runs_are_not_killed_by_one_ending(box: Box) -> None:
    """A background process's own daemon (its cookie) survives other commands' ends and another kill."""
    marker = f"adm{uuid.uuid4().hex[:10]}"
    pid = await box.sb.start_background(_command("setsid_f", marker, "k.txt") + "\nsleep 600")
    other = await box.sb.start_background("sleep 600")
    assert await wait_until_async(lambda: bool(box.pids(marker)), within_s=5)
    await box.sb.exec("true")
    await box.sb.exec("sleep 0.2 & true")
    await box.sb.kill(other)
    assert await asyncio.to_thread(box.pids, marker)
    assert (await box.sb.logs(pid)).running
    await box.sb.kill(pid)
    assert await asyncio.to_thread(box.pids, marker) == []


async def test_the_container_init_and_command_survive_a_sweep(box: Box) -> None:
    await box.sb.exec("kill -9 1 2>/dev/null; true")  # the agent cannot take the init with it either
    found = await box.sb.sweep()
    assert found["alive"] == []
    assert all(p["pid"] != 1 for p in found["killed"])
    assert (await box.sb.exec("echo up")).stdout == "up\n"


# ---------------------------------------------------------------------------------------- writes
# Inside the container, with perl (the base has it; no python3): swap /workspace/d for a link to /tmp/out
# and back as fast as it can, counting the swaps.
SWAPPER = (
    'perl -e \'mkdir "/tmp/out"; my $n = 0; while (1) { if (rename("d", "d.real")) { symlink("/tmp/out", '
    '"d"); unlink("d"); rename("d.real", "d"); $n++; if ($n % 100 == 0) { open(my $f, ">", '
    '"/tmp/swaps"); print $f $n; close($f) } } }\''
)
WRITES = 600


async def _write_many(sb, prefix: str) -> tuple[int, list[str]]:
    return await write_many(sb, prefix, WRITES, at_once=16)  # each write is a docker exec here


async def test_no_write_lands_outside_the_workspace_while_a_parent_is_swapped(box: Box) -> None:
    (box.folder / "d").mkdir()
    os.chown(box.folder / "d", *_owner(box.folder))
    swapper = await box.sb.start_background(SWAPPER)
    try:
        await asyncio.sleep(0.3)
        ok, errors = await _write_many(box.sb, "d")
        nested_ok, _ = await _write_many(box.sb, "d/deeper/still")
        swaps = (await box.sb.exec("cat /tmp/swaps", timeout=10)).stdout.strip()
    finally:
        await box.sb.kill(swapper)
    outside = await box.sb.exec("find /tmp/out -mindepth 1 | wc -l", timeout=30)
    assert outside.stdout.strip() == "0", outside.stdout
    assert int(swaps or 0) >= 1000, "the swapper did not race"
    assert ok + nested_ok > 0, errors[:3]
    kinds = ("resolves outside", "symlink", "no such file", "not a folder")
    assert all(any(k in e.lower() for k in kinds) for e in errors), sorted(set(errors))[:5]


async def test_links_are_refused_or_replaced_never_followed(box: Box) -> None:
    ws, sb = box.folder, box.sb
    res = await sb.exec(
        "mkdir -p inner /tmp/outside && echo keep > /tmp/outside/victim.txt && ln -s /tmp/outside escape"
        " && echo old > inner/real.txt && ln -s inner/real.txt link.txt && ln -s inner innerlink"
        " && ln -s /tmp/outside/new.txt dangling && mkdir -p 'sp ace/-/*' && ln -s /tmp/outside '-'",
        timeout=10,
    )
    assert res.exit_code == 0, res.stderr
    for path in ("escape/victim.txt", "escape/new.txt", "/workspace/escape/x", "inner/../escape/y", "dangling",
                 "-/x", "../x", "/tmp/outside/victim.txt"):  # fmt: skip
        with pytest.raises(PathOutsideWorkspace):
            await sb.write_file(path, b"pwned")
    await sb.write_file("link.txt", b"new")  # a link inside the workspace to a file inside it
    assert (ws / "inner" / "real.txt").read_bytes() == b"new" and (ws / "link.txt").is_symlink()
    await sb.write_file("innerlink/via.txt", b"via")  # a linked folder inside: resolved, then walked
    assert (ws / "inner" / "via.txt").read_bytes() == b"via"
    await sb.write_file("sp ace/-/*/odd name.txt", b"odd")
    assert (ws / "sp ace" / "-" / "*" / "odd name.txt").read_bytes() == b"odd"
    with pytest.raises(SandboxError, match="is a directory"):
        await sb.write_file("inner", b"x")
    with pytest.raises(SandboxError):
        await sb.write_file("new/dir/f.txt", b"x", make_dirs=False)
    left = await sb.exec("cat /tmp/outside/victim.txt; ls /tmp/outside; ls -a inner | grep -c agent-desk", timeout=10)
    assert left.stdout.split() == ["keep", "victim.txt", "0"], left.stdout  # nothing outside, no temp left


async def test_a_kept_mode_and_a_big_refused_write_do_not_hang(box: Box) -> None:
    await box.sb.exec("printf '#!/bin/sh\\n' > run.sh && chmod 755 run.sh && ln -s /etc etc", timeout=10)
    st = await box.sb.write_file("run.sh", b"#!/bin/sh\necho hi\n")
    assert st.mode == 0o755 and (await box.sb.exec("./run.sh")).stdout == "hi\n"
    start = time.monotonic()
    with pytest.raises(PathOutsideWorkspace):
        await box.sb.write_file("etc/big", b"x" * (8 << 20))  # refused before it reads: the input is drained
    assert time.monotonic() - start < 20


async def test_an_argument_over_128_kb_is_named(box: Box) -> None:
    await argument_too_long(box.sb)


# ---------------------------------------------------------------------------------------- grep
CATASTROPHIC = "(a+)+$"


async def test_a_catastrophic_regex_returns_with_grep_e(box: Box) -> None:
    (box.folder / "aaa.txt").write_text("a" * 2_000_000 + "b\n")
    (box.folder / "lines.txt").write_text(("a" * 40 + "!\n") * 2000)
    start = time.monotonic()
    assert await box.sb.grep(CATASTROPHIC, ".") == []
    assert await box.sb.grep("(a|aa)*(a|aa)*c$", ".") == []
    assert await box.sb.grep(r"(\w+\s?)*$", "aaa.txt") != []
    assert time.monotonic() - start < 15
    hits = await box.sb.grep(r"a+!$", "lines.txt", max_results=3)
    assert [h.line for h in hits] == [1, 2, 3]
    assert (await box.sb.exec("echo alive", timeout=10)).stdout == "alive\n"


async def test_grep_e_translation_and_refusals(box: Box) -> None:
    (box.folder / "src").mkdir()
    (box.folder / "src" / "a.py").write_text("version = 3.14\nx = foo_bar\nprint('[x]')\n")
    sb = box.sb
    assert [h.line for h in await sb.grep(r"\d+\.\d+", "src")] == [1]
    assert [h.line for h in await sb.grep(r"(?i)PRINT\('\[x\]'\)", "src")] == [3]
    assert [h.line for h in await sb.grep(r"foo(?:_bar)+?$", "src", glob="*.py")] == [2]
    assert await sb.grep("foo", "src", glob="*.txt") == []
    for bad in (r"(a)\1", r"(?=x)", r"\p{L}"):
        with pytest.raises(SandboxError, match="regular expression"):
            await sb.grep(bad, "src")
    with pytest.raises(SandboxError, match="regular expression"):
        await sb.grep("(unclosed", "src")


async def test_a_grep_past_its_deadline_is_killed_and_named(box: Box) -> None:
    await box.sb.exec("head -c 60000000 /dev/zero | tr '\\0' 'a' > big.txt", timeout=60)
    start = time.monotonic()
    with pytest.raises(SandboxError, match=r"stopped after 0\.05 s and was killed"):
        await box.sb._op("grep", {"pattern": "a+b", "path": ".", "timeout": 0.05})
    assert time.monotonic() - start < 10
    assert (await box.sb.exec("echo alive", timeout=10)).stdout == "alive\n"


async def test_ripgrep_runs_when_the_image_has_it(make_docker_sandbox, rg_image: str, workspace: Path) -> None:
    (workspace / "aaa.txt").write_text("a" * 2_000_000 + "b\n")
    (workspace / "u.txt").write_text("héllo\n")
    sb = await make_docker_sandbox(SandboxConfig(image=rg_image))
    assert sb.transport == "exec"
    start = time.monotonic()
    assert await sb.grep(CATASTROPHIC, ".") == []
    assert time.monotonic() - start < 15
    assert [h.path for h in await sb.grep(r"h\p{L}llo", ".")] == ["u.txt"]  # Rust syntax: rg ran, not grep -E
    with pytest.raises(SandboxError, match="regular expression"):
        await sb.grep(r"(a)\1", ".")


IGNORING = {".gitignore": "*.log\nbuild/\n", "a.txt": "needle\n", "x.log": "needle\n", "build/b.txt": "needle\n"}


async def test_ripgrep_reads_gitignore_and_its_walk_keeps_the_deadline(make_docker_sandbox, rg_image: str,
                                                                        workspace: Path) -> None:
    for path, text in IGNORING.items():
        (workspace / path).parent.mkdir(parents=True, exist_ok=True)
        (workspace / path).write_text(text)
    sb = await make_docker_sandbox(SandboxConfig(image=rg_image))
    assert [h.path for h in await sb.grep("needle", ".")] == ["a.txt"]
    assert sorted(f.path for f in await sb.glob("**/*", ".")) == [".gitignore", "a.txt"]
    every = sorted(f.path for f in await sb.glob("**/*", ".", include_ignored=True))
    assert every == [".gitignore", "a.txt", "build", "build/b.txt", "x.log"]
    await sb.exec("mkdir -p many && cd many && seq 1 20000 | xargs touch", timeout=60)
    with pytest.raises(SandboxError, match=r"fs_glob stopped after 0\.001 s and was killed"):
        await sb._op("glob", {"pattern": "**/*", "path": ".", "timeout": 0.001})


async def test_without_ripgrep_gitignore_is_not_read_as_the_tools_say(box: Box) -> None:
    for path, text in IGNORING.items():
        await box.sb.write_file(path, text.encode())
    assert sorted(h.path for h in await box.sb.grep("needle", ".")) == ["a.txt", "build/b.txt", "x.log"]
    listed = sorted(f.path for f in await box.sb.glob("**/*", ".") if not f.path.startswith(".agent-desk"))
    assert listed == [".gitignore", "a.txt", "build", "build/b.txt", "x.log"]
    for tool in (FsGrep(), FsGlob()):
        assert "neither Python nor ripgrep" in tool.input_schema()["properties"]["include_ignored"]["description"]


# ---------------------------------------------------------------------------------------- output
async def test_no_output_lost_foreground_and_background(box: Box) -> None:
    for i in range(100):
        res = await box.sb.exec(f"echo line{i}; echo err{i} >&2; exit 3", timeout=10)
        assert (res.exit_code, res.stdout, res.stderr) == (3, f"line{i}\n", f"err{i}\n"), (i, res)
    res = await box.sb.exec("seq 1 100000; exit 0", timeout=30)
    assert res.stdout.endswith("\n99999\n100000\n") and not res.truncated
    for i in range(50):
        pid = await box.sb.start_background(f"echo line{i}; exit 3")
        deadline = time.monotonic() + 10
        logs = await box.sb.logs(pid)
        while logs.running and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
            logs = await box.sb.logs(pid)
        assert logs.exit_code == 3 and f"line{i}" in logs.output, (i, logs)
