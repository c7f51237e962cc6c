"""DockerSandbox.open_process with real MCP servers from the mcp image (raw JSON-RPC lines): one attached exec
for a whole conversation, a crash's stderr tail and exit code, close killing every process the server started,
the sweep leaving a server alone; and companion containers (their own name, network, relaxation, removal)."""

from __future__ import annotations

import asyncio
import os

import docker.errors
import pytest

from desktop_app.core import ProcessChannel, SandboxError
from desktop_app.sandbox import DockerSandbox, SandboxConfig
from tests.kit import BASE_IMAGE, require_image
from tests.sandbox.mcp_wire import Wire, need_mcp_image, text_of

pytestmark = pytest.mark.docker


@pytest.fixture
async def mcp_sandbox(docker_client, make_docker_sandbox) -> DockerSandbox:
    return await make_docker_sandbox(SandboxConfig(image=need_mcp_image(docker_client)))


def _exec_ids(client, sb: DockerSandbox) -> set[str]:
    return set(client.api.inspect_container(sb.container_id).get("ExecIDs") or [])


async def _ps(sb: DockerSandbox) -> str:
    return (await sb.exec("ps -eo pid,ppid,sid,args")).stdout


async def test_a_real_server_answers_many_messages_over_one_exec(docker_client, mcp_sandbox: DockerSandbox) -> None:
    ch = await mcp_sandbox.open_process(["mcp-server-time", "--local-timezone", "UTC"])
    assert isinstance(ch, ProcessChannel)
    before = _exec_ids(docker_client, mcp_sandbox)
    wire = Wire(ch)
    init = await wire.initialize()
    assert init["result"]["serverInfo"]["name"] == "mcp-time"
    tools = (await wire.request("tools/list"))["result"]["tools"]
    assert {"get_current_time", "convert_time"} <= {t["name"] for t in tools}
    for _ in range(20):
        result = await wire.call("get_current_time", {"timezone": "Europe/Paris"})
        assert not result.get("isError") and "Europe/Paris" in text_of(result)
    assert _exec_ids(docker_client, mcp_sandbox) == before  # no exec per message: the same one throughout
    assert ch.returncode is None
    await ch.close()
    assert await ch.read() == b"" and ch.returncode is not None


async def test_a_crash_gives_eof_its_exit_code_and_stderr_tail(mcp_sandbox: DockerSandbox) -> None:
    ch = await mcp_sandbox.open_process(["mcp-server-git", "--repository", "/workspace/no-such-repo"])
    wire = Wire(ch)
    with pytest.raises(EOFError):
        await wire.initialize()
    assert ch.returncode not in (None, 0)
    assert "no-such-repo" in ch.stderr_tail() or "not a valid Git repository" in ch.stderr_tail()
    with pytest.raises(SandboxError, match="has ended"):
        await ch.write(b"{}\n")
    assert await ch.read() == b"" and await ch.read() == b""
    await ch.close()


async def test_a_server_killed_from_outside_reads_eof_and_a_signal_exit(mcp_sandbox: DockerSandbox) -> None:
    ch = await mcp_sandbox.open_process(["mcp-server-memory"])
    await Wire(ch).initialize()
    await mcp_sandbox.exec(f"kill -KILL {ch.pid}")
    while await ch.read():
        pass
    assert ch.returncode == 137
    with pytest.raises(SandboxError):
        await ch.write(b"{}\n")
    await ch.close()


async def test_close_kills_every_process_the_server_started(docker_sandbox: DockerSandbox) -> None:
    # A child, a setsid'd grandchild that keeps the cookie, an env-scrubbed one that stays in the session.
    script = "sleep 3001 & (setsid sleep 3002 &); (env -i sleep 3003 &); echo up; exec cat"
    ch = await docker_sandbox.open_process(["sh", "-c", script])
    assert (await ch.read()).startswith(b"up")
    ps = await _ps(docker_sandbox)
    assert all(f"sleep {n}" in ps for n in (3001, 3002, 3003))
    await ch.close()
    ps = await _ps(docker_sandbox)
    assert not any(f"sleep {n}" in ps for n in (3001, 3002, 3003)) and " cat" not in ps
    await ch.close()  # idempotent


async def test_a_server_that_ignores_eof_and_sigterm_is_killed_at_close(docker_sandbox: DockerSandbox) -> None:
    ch = await docker_sandbox.open_process(["sh", "-c", "trap '' TERM HUP; echo up; while :; do sleep 1; done"])
    assert await ch.read() == b"up\n"
    await ch.close()
    assert "while" not in await _ps(docker_sandbox) and ch.returncode is not None


async def test_the_session_sweep_leaves_a_server_alone(docker_client, docker_sandbox: DockerSandbox) -> None:
    """A server is its own `docker exec`, not a run of the helper: the sweep at a session's end neither kills
    it nor reports it. A daemon it orphans outside its session with a scrubbed environment is a stray."""
    ch = await docker_sandbox.open_process(["sh", "-c", "(setsid env -i sleep 3004 &); exec cat"])
    await ch.write(b"ping\n")
    assert await ch.read() == b"ping\n"
    # The daemon is a few forks and execs behind cat's echo (subshell, setsid, env, sleep); while the subshell
    # lives it is still under the server's own exec, which no sweep touches. Sweep once it is an orphan
    # (ppid 1) running sleep itself: ps by a docker exec of its own, since every command the helper runs
    # ends by killing strays.
    box = docker_client.containers.get(docker_sandbox.container_id)
    for _ in range(100):
        ps = (await asyncio.to_thread(box.exec_run, ["ps", "-eo", "ppid=,args="])).output.decode()
        if any(line.split() == ["1", "sleep", "3004"] for line in ps.splitlines()):
            break
        await asyncio.sleep(0.05)
    swept = await docker_sandbox.sweep()
    assert [k for k in swept["killed"] if "sleep 3004" in k["command"]]
    assert not [k for k in swept["killed"] + swept["alive"] if k["command"] == "cat"]
    await ch.write(b"still\n")
    assert await ch.read() == b"still\n"
    await ch.close()


async def test_the_environment_is_the_containers_plus_what_is_given(docker_sandbox: DockerSandbox) -> None:
    os.environ["AGENT_DESK_TEST_HOST_SECRET"] = "s3cret-of-the-host"
    try:
        ch = await docker_sandbox.open_process(["env"], env={"GIVEN": "yes"})
        out = b""
        while data := await ch.read():
            out += data
    finally:
        del os.environ["AGENT_DESK_TEST_HOST_SECRET"]
    text = out.decode()
    assert "GIVEN=yes" in text and "HOME=/home/sandbox" in text
    assert "s3cret-of-the-host" not in text and "AGENT_DESK_TEST_HOST_SECRET" not in text
    assert ch.returncode == 0


async def test_bad_starts_are_clear_errors(docker_sandbox: DockerSandbox) -> None:
    with pytest.raises(SandboxError, match="command not found") as err:
        await docker_sandbox.open_process(["no-such-server"])
    assert err.value.hint
    with pytest.raises(SandboxError, match="no such file"):
        await docker_sandbox.open_process(["cat"], cwd="/workspace/missing")
    with pytest.raises(SandboxError, match="environment variable"):
        await docker_sandbox.open_process(["cat"], env={"BAD=NAME": "x"})
    with pytest.raises(SandboxError):
        await docker_sandbox.open_process([])


async def test_large_output_arrives_whole_and_in_order(docker_sandbox: DockerSandbox) -> None:
    size = 8 * 1024 * 1024  # past the channel's 1 MiB buffer: the socket waits for the reader
    ch = await docker_sandbox.open_process(["sh", "-c", f"seq 1 10000000 | head -c {size}"])
    got = bytearray()
    while data := await ch.read():
        got += data
        if len(got) < 2 * 1024 * 1024:
            await asyncio.sleep(0.001)  # a slow reader at first
    assert len(got) == size and got.startswith(b"1\n2\n3\n") and ch.returncode == 0


async def test_closing_the_sandbox_closes_its_processes(make_docker_sandbox) -> None:
    sb = await make_docker_sandbox(SandboxConfig(keep_running=True))
    ch = await sb.open_process(["sh", "-c", "sleep 3005 & exec cat"])
    await sb.close()
    assert ch.returncode is not None and await ch.read() == b""
    again = await make_docker_sandbox(SandboxConfig(keep_running=True))
    assert "sleep 3005" not in await _ps(again)


async def test_images_without_python3_run_processes_too(docker_client, make_docker_sandbox) -> None:
    require_image(docker_client, BASE_IMAGE)
    sb = await make_docker_sandbox(SandboxConfig(image=BASE_IMAGE))
    assert sb.transport == "exec"
    ch = await sb.open_process(["sh", "-c", "sleep 3006 & exec cat"])
    await ch.write(b"hi\n")
    assert await ch.read() == b"hi\n"
    await ch.close()
    assert "sleep 3006" not in (await sb.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '")).stdout


# ------------------------------------------------------------------------------------------ companions
async def test_a_companion_is_a_second_hardened_container_removed_at_close(
    docker_client, docker_sandbox: DockerSandbox, test_network: str
) -> None:
    assert "network: bridge, for MCP server 'fetch'" in docker_sandbox.companion("fetch").describe().relaxations
    comp = docker_sandbox.companion("fetch", network=test_network)
    await comp.start()
    try:
        assert comp.container_id != docker_sandbox.container_id
        desc = comp.describe()
        assert desc.network == test_network
        assert f"network: {test_network}, for MCP server 'fetch'" in desc.relaxations
        assert docker_sandbox.describe().network == "none"
        assert not any("fetch" in r for r in docker_sandbox.describe().relaxations)
        host = docker_client.api.inspect_container(comp.container_id)["HostConfig"]
        assert host["NetworkMode"] == test_network and host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
        assert "no-new-privileges" in host["SecurityOpt"] and host["PidsLimit"] == docker_sandbox.config.pids
        assert host["Memory"] == docker_sandbox.config.memory
        mine = docker_client.api.inspect_container(docker_sandbox.container_id)
        assert {m["Destination"] for m in mine["Mounts"]} == {
            m["Destination"] for m in docker_client.api.inspect_container(comp.container_id)["Mounts"]
        }
        assert (await comp.exec("id -u")).stdout.strip() == (await docker_sandbox.exec("id -u")).stdout.strip()
        # Starting either again leaves the other alone (they share the project's label).
        again = DockerSandbox(docker_sandbox.project_id, docker_sandbox.folder, docker_sandbox.config,
                              client=docker_client)
        await again.start()
        assert again.container_id == docker_sandbox.container_id
        docker_client.containers.get(comp.container_id)
        await again.close()
    finally:
        await comp.close()
    with pytest.raises(docker.errors.NotFound):
        docker_client.containers.get(comp.container_id)


@pytest.mark.parametrize("network", ["host", "none", "container:abc", "bad name", ""])
async def test_a_companion_never_shares_a_namespace(docker_sandbox: DockerSandbox, network: str) -> None:
    with pytest.raises(SandboxError, match="cannot use the network"):
        docker_sandbox.companion("fetch", network=network)


async def test_two_companions_have_their_own_names(docker_sandbox: DockerSandbox, test_network: str) -> None:
    a, b = docker_sandbox.companion("a b", network=test_network), docker_sandbox.companion("a/b", network=test_network)
    try:
        await a.start()
        await b.start()
        assert a.container_id != b.container_id
    finally:
        await a.close()
        await b.close()
