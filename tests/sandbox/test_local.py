"""LocalSandbox on a tmp folder (no Docker): the helper's own code on the host, and its refusals."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from desktop_app.core import WORKSPACE, ConfigError, PathOutsideWorkspace, Sandbox, SandboxError
from desktop_app.sandbox import DockerSandbox, LocalSandbox, SandboxConfig, create_sandbox


@pytest.fixture
async def sb(tmp_path: Path):
    box = LocalSandbox(tmp_path)
    await box.start()
    yield box
    await box.close()


def test_is_a_sandbox_and_says_it_is_unsandboxed(tmp_path: Path) -> None:
    box = LocalSandbox(tmp_path)
    assert isinstance(box, Sandbox)
    d = box.describe()
    assert d.kind == "local" and d.unsandboxed is True
    assert d.relaxations and "unsandboxed" in d.relaxations[0]
    assert d.to_dict()["host_path"] == str(tmp_path.resolve())


def test_local_is_never_chosen_silently(tmp_path: Path) -> None:
    project = {"id": "p1", "path": str(tmp_path), "settings": {}}
    assert isinstance(create_sandbox(project), DockerSandbox)
    chosen = create_sandbox({"id": "p1", "path": str(tmp_path), "settings": {"sandbox": "local"}})
    assert isinstance(chosen, LocalSandbox)
    with pytest.raises(ConfigError, match="unknown sandbox kind"):
        create_sandbox({"id": "p1", "path": str(tmp_path), "settings": {"sandbox": "host"}})
    with pytest.raises(SandboxError, match="project folder"):
        LocalSandbox(tmp_path / "missing")


def test_config_from_settings_and_relaxations() -> None:
    cfg = SandboxConfig.from_settings(
        {"network": True, "memory": "4g", "workspace_ro": True, "other": 1}, image="agent-desk/python:latest"
    )
    assert cfg.network and cfg.memory == 4 * 1024**3 and cfg.workspace_readonly
    assert cfg.image == "agent-desk/python:latest"
    assert cfg.relaxations() == ["network: on (bridge)", "memory: 4 GiB (default 2 GiB)"]
    assert SandboxConfig().relaxations() == []
    assert SandboxConfig().container_hash(x=1) != SandboxConfig(memory=1024**3).container_hash(x=1)
    with pytest.raises(ConfigError, match="size"):
        SandboxConfig.from_settings({"memory": "lots"})


async def test_exec_streams_and_reports(sb: LocalSandbox) -> None:
    chunks: list[tuple[str, str]] = []
    res = await sb.exec("echo out; echo err >&2; exit 3", on_output=lambda s, t: chunks.append((s, t)))
    assert (res.exit_code, res.stdout, res.stderr) == (3, "out\n", "err\n")
    assert not res.timed_out and not res.truncated and res.duration_ms > 0
    assert ("stdout", "out\n") in chunks and ("stderr", "err\n") in chunks
    res = await sb.exec(["printf", "%s", "a b"], cwd=WORKSPACE, env={"X": "1"})
    assert res.stdout == "a b"
    res = await sb.exec("echo $AGENT_X; pwd", env={"AGENT_X": "v"})
    assert res.stdout.splitlines() == ["v", sb.root]


async def test_exec_hides_host_secrets(sb: LocalSandbox, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    res = await sb.exec("echo ${ANTHROPIC_API_KEY:-unset}")
    assert res.stdout == "unset\n"


async def test_exec_timeout_kills_a_term_ignoring_group(sb: LocalSandbox) -> None:
    res = await sb.exec("trap '' TERM; sleep 30.71 & sleep 30.71; wait", timeout=0.5)
    assert res.timed_out and res.killed_signal == 9 and res.duration_ms < 5000
    left = await sb.exec("pgrep -f '^sleep 30.71' || true")
    assert left.stdout == ""


async def test_exec_truncates_keeping_head_and_tail(sb: LocalSandbox) -> None:
    res = await sb.exec("seq 1 200000", output_limit=10_000)
    assert res.truncated
    assert res.stdout.startswith("1\n2\n") and res.stdout.endswith("199999\n200000\n")
    assert "bytes of output truncated" in res.stdout and len(res.stdout) < 11_000


async def test_exec_cancel_kills_the_command(sb: LocalSandbox, tmp_path: Path) -> None:
    task = asyncio.create_task(sb.exec(f"echo started > {tmp_path}/s; sleep 30.72; echo no > {tmp_path}/after"))
    for _ in range(200):
        if (tmp_path / "s").exists():
            break
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    gone = await sb.exec("for i in $(seq 50); do pgrep -f '^sleep 30.72' >/dev/null || exit 0; sleep 0.1; done; exit 1")
    assert gone.exit_code == 0
    assert not (tmp_path / "after").exists()


async def test_files_round_trip(sb: LocalSandbox) -> None:
    st = await sb.write_text("src/a.py", "import os\nprint('x')\n")
    assert (st.path, st.type, st.size) == ("src/a.py", "file", 21)
    assert await sb.read_text("/workspace/src/a.py") == "import os\nprint('x')\n"
    await sb.write_file("src/b.bin", b"\x00\x01\x02abc")
    assert await sb.read_file("src/b.bin", offset=3, limit=2) == b"ab"
    assert (await sb.stat("src")).type == "dir"
    assert await sb.stat("nope") is None
    assert [e.path for e in await sb.list_dir("src")] == ["src/a.py", "src/b.bin"]
    assert [e.path for e in await sb.glob("**/*.py")] == ["src/a.py"]
    assert [e.path for e in await sb.glob("src/*.{py,bin}")] != []
    hits = await sb.grep("PRINT", ignore_case=True)
    assert [(h.path, h.line, h.text) for h in hits] == [("src/a.py", 2, "print('x')")]  # binary skipped
    assert await sb.grep("import", glob="*.txt") == []
    with pytest.raises(SandboxError, match="regular expression"):
        await sb.grep("(")
    with pytest.raises(SandboxError, match="over the 5-byte limit"):
        await sb.read_text("src/a.py", limit=5)
    with pytest.raises(SandboxError, match="no such file"):
        await sb.read_text("missing.txt")
    with pytest.raises(SandboxError, match="directory"):
        await sb.read_text("src")


async def test_write_keeps_mode(sb: LocalSandbox, tmp_path: Path) -> None:
    (tmp_path / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(tmp_path / "run.sh", 0o755)
    st = await sb.write_text("run.sh", "#!/bin/sh\necho hi\n")
    assert st.mode == 0o755
    assert (await sb.exec("./run.sh")).stdout == "hi\n"


async def test_refuses_dotdot_and_absolute_paths(sb: LocalSandbox, tmp_path: Path) -> None:
    outside = tmp_path.parent / f"{tmp_path.name}-escape.txt"
    for bad in ("../x.txt", "a/../../x.txt", "/etc/passwd", "/workspace/../etc/passwd"):
        with pytest.raises(PathOutsideWorkspace):
            await sb.read_text(bad)
    with pytest.raises(PathOutsideWorkspace):
        await sb.write_text(f"../{outside.name}", "no")
    assert not outside.exists()
    with pytest.raises(PathOutsideWorkspace):
        await sb.exec("pwd", cwd="/tmp")
    with pytest.raises(PathOutsideWorkspace):
        await sb.list_dir("..")


async def test_refuses_symlinks_out_of_the_folder(sb: LocalSandbox, tmp_path: Path) -> None:
    secret = tmp_path.parent / f"{tmp_path.name}-secret"
    secret.mkdir()
    (secret / "key").write_text("s3cret")
    os.symlink(secret / "key", tmp_path / "link")
    os.symlink(secret, tmp_path / "dirlink")
    os.symlink("inside.txt", tmp_path / "ok-link")
    (tmp_path / "inside.txt").write_text("fine")
    for op in (
        sb.read_text("link"),
        sb.read_text("dirlink/key"),
        sb.list_dir("dirlink"),
        sb.stat("link"),
        sb.write_text("link", "pwned"),
        sb.write_text("dirlink/new", "pwned"),
        sb.grep("s3", "dirlink"),
    ):
        with pytest.raises(PathOutsideWorkspace):
            await op
    assert (secret / "key").read_text() == "s3cret" and not (secret / "new").exists()
    assert await sb.read_text("ok-link") == "fine"
    # listing shows the links without following them; grep and glob do not descend into them
    types = {e.path: e.type for e in await sb.list_dir(".")}
    assert types["link"] == "symlink" and types["dirlink"] == "symlink"
    assert await sb.grep("s3cret") == []
    assert [e.path for e in await sb.glob("**/key")] == []


async def test_background_process(sb: LocalSandbox) -> None:
    pid = await sb.start_background("echo ready; exec sleep 30")
    for _ in range(200):
        logs = await sb.logs(pid)
        if "ready" in logs.output:
            break
        await asyncio.sleep(0.01)
    assert logs.running and logs.output == "ready\n"
    done = await sb.kill(pid)
    assert not done.running and done.exit_code == 143
    finished = await sb.start_background("exit 7")
    for _ in range(200):
        logs = await sb.logs(finished)
        if not logs.running:
            break
        await asyncio.sleep(0.01)
    assert logs.exit_code == 7
    with pytest.raises(SandboxError, match="no background process"):
        await sb.logs("bg-999")


async def test_plain_word_commands_behave_as_in_the_shell(sb: LocalSandbox, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "f.txt").write_text("x")
    direct, piped = await sb.exec("ls -a"), await sb.exec("ls -a | cat")
    assert direct.stdout == piped.stdout and "f.txt" in direct.stdout
    missing = await sb.exec("no-such-command-xyz")
    assert missing.exit_code == 127 and "command not found" in missing.stderr
    assert (await sb.exec("cd sub")).exit_code == 0  # a builtin: through the shell
    assert (await sb.exec("A=1")).exit_code == 0
    assert (await sb.exec("false")).exit_code == 1
