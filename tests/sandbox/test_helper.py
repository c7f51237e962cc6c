"""The helper as shipped: one zipapp, deterministic and stored; run exactly as the container runs it
(`python3 -I -S ARCHIVE ROOT` over pipes); started by its bootstrap command in a real container."""

from __future__ import annotations

import asyncio
import io
import json
import subprocess
import sys
import zipfile
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import pytest

from desktop_app.core import SandboxError, glob_regex
from desktop_app.sandbox._helper_ops import ErrorCode
from desktop_app.sandbox.docker import _helper_archive
from desktop_app.sandbox.docker._helper_archive import helper_archive, helper_command
from desktop_app.sandbox.docker._helper_channel import HelperChannel
from desktop_app.sandbox.helper.errors import HelperError, OutsideWorkspace
from desktop_app.sandbox.helper.server import PROTOCOL_VERSION

MAX_ARG_STRLEN = 32 * 4096  # Linux: the longest single argv string


def test_the_archive_is_stored_deterministic_and_carries_cores_glob() -> None:
    data = helper_archive()
    assert data == helper_archive.__wrapped__()
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        infos = zf.infolist()
        assert {i.compress_type for i in infos} == {zipfile.ZIP_STORED}
        names = [i.filename for i in infos]
        assert "__main__.py" in names and "helper/server.py" in names and "helper/wire.py" in names
        package, _, module = glob_regex.__module__.rpartition(".")
        assert zf.read("helper/glob.py") == resources.files(package).joinpath(f"{module}.py").read_bytes()


def test_the_bootstrap_command_fits_in_argv() -> None:
    assert all(len(arg.encode()) < MAX_ARG_STRLEN for arg in helper_command("/workspace"))


def test_error_codes_are_the_helpers_kinds() -> None:
    assert {c.value for c in ErrorCode} == {HelperError.kind, OutsideWorkspace.kind}


def test_helper_over_pipes(tmp_path: Path) -> None:
    archive = tmp_path / "helper.pyz"
    archive.write_bytes(helper_archive())
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    proc = subprocess.Popen(
        [sys.executable, "-I", "-S", str(archive), str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin and proc.stdout
    hello = json.loads(proc.stdout.readline())
    assert hello["ev"] == "hello" and hello["version"] == PROTOCOL_VERSION
    requests = [
        {"id": 1, "op": "read_text", "args": {"path": "a.txt"}},
        {"id": 2, "op": "read_text", "args": {"path": "../etc/passwd"}},
        {"id": 3, "op": "exec", "args": {"command": "echo hi", "stream": True}},
        {"id": 4, "op": "glob", "args": {"pattern": "**/*.txt"}},
    ]
    for r in requests:
        proc.stdin.write(json.dumps(r) + "\n")
    proc.stdin.flush()
    got: dict[int, list[dict]] = {}
    while len([m for ms in got.values() for m in ms if "ok" in m]) < len(requests):
        msg = json.loads(proc.stdout.readline())
        got.setdefault(msg["id"], []).append(msg)
    proc.stdin.close()
    assert proc.wait(5) == 0
    assert got[1][-1] == {"id": 1, "ok": True, "result": "hello\n"}
    assert got[2][-1]["error"]["kind"] == "PathOutsideWorkspace"
    assert {"id": 3, "ev": "output", "stream": "stdout", "data": "hi\n"} in got[3]
    assert got[3][-1]["result"]["stdout"] == "hi\n" and got[3][-1]["result"]["exit_code"] == 0
    assert [d["path"] for d in got[4][-1]["result"]] == ["a.txt"]


@pytest.mark.docker
async def test_helpers_starting_at_once_in_one_container(docker_sandbox, docker_client) -> None:
    """Each start rewrites the archive in the container's /tmp: starts at the same time must not
    run each other's half-written file."""
    api, cid = docker_client.api, docker_sandbox.container_id
    with ThreadPoolExecutor(8) as pool:
        channels = [HelperChannel(api, cid, pool) for _ in range(6)]
        loop = asyncio.get_running_loop()
        opened = await asyncio.gather(*(loop.run_in_executor(pool, ch.open) for ch in channels))
        try:
            assert opened == [True] * len(channels)
            pongs = await asyncio.gather(*(ch.request("ping", {}) for ch in channels))
            assert all(p["version"] == PROTOCOL_VERSION for p in pongs)
        finally:
            for ch in channels:
                ch.close()


@pytest.mark.docker
async def test_a_helper_that_cannot_be_written_is_a_clear_error(docker_sandbox, docker_client, monkeypatch) -> None:
    monkeypatch.setattr(_helper_archive, "HELPER_DIR", "/proc/agent-desk-nope")
    with ThreadPoolExecutor(1) as pool:
        channel = HelperChannel(docker_client.api, docker_sandbox.container_id, pool)
        with pytest.raises(SandboxError, match="could not write the sandbox helper") as info:
            await asyncio.get_running_loop().run_in_executor(pool, channel.open)
    assert info.value.hint and "/tmp" in info.value.hint


@pytest.mark.docker
async def test_in_the_sandbox_path_lookups_trust_the_read_only_root_and_check_the_rest(docker_sandbox) -> None:
    """The helper's PATH cache stops looking at /usr/bin (the sandbox's root is read-only, and the helper has
    no capability to remount it), and keeps checking the workspace, /tmp and what a symlink leads to."""
    script = (
        "import glob, os, sys; sys.path.insert(0, sorted(glob.glob(sys.argv[1] + '/helper-*.pyz'))[0]);"
        "from helper.pathcache import PathCache; c = PathCache();"
        "print(c.find('true', '/usr/local/bin:/usr/bin'), len(c.entries[('true', '/usr/local/bin:/usr/bin')][1]));"
        "os.symlink('/usr/bin', '/tmp/bin-link');"
        "print(*[c._can_change(d) for d in ('/usr/bin', '/usr', '/', '/workspace', '/tmp', '/tmp/bin-link')])"
    )
    res = await docker_sandbox.exec(["python3", "-I", "-S", "-c", script, _helper_archive.HELPER_DIR])
    assert res.exit_code == 0, res.stderr
    found, fixed = res.stdout.splitlines()
    assert found.split() == ["/usr/bin/true", "0"]  # no folder to look at again
    assert fixed.split() == ["False", "False", "False", "True", "True", "True"]


def test_an_unknown_error_kind_is_a_plain_sandbox_error() -> None:
    assert ErrorCode.of("SomethingNew") is ErrorCode.SANDBOX and ErrorCode.of(None) is ErrorCode.SANDBOX
