"""docs/scale.md runs as written: every ```sh block is executed by bash (-e, -u, pipefail) exactly as the page
shows it, against a second dockerd reached over ssh (a real sshd on loopback) and over TLS, and a throwaway
PostgreSQL server whose roles then do exactly their part (the writer's turn, the auditor's verify) and no more."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from tests.conftest import make_workspace
from tests.fakes.anthropic_server import AnthropicServer, reply, text, tool_use
from tests.kit.cli import cli_environ
from tests.postgres import PG_USER, PostgresServer, pg_bin

ROOT = Path(__file__).resolve().parent.parent
SCALE = ROOT / "docs" / "scale.md"


def sh_blocks(path: Path) -> list[str]:
    """The page's ```sh blocks, in order, as written."""
    return re.findall(r"^```sh\n(.*?)^```$", path.read_text(encoding="utf-8"), re.M | re.S)


def run_block(block: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, f"this block of docs/scale.md failed ({done.returncode}):\n{block}\n" \
                                 f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-3000:]}"
    return done


def doc_environ(root: Path, home: Path) -> dict[str, str]:
    """A person's shell: the desk kept under `root`, `agent-desk` and `psql` on PATH, HOME of its own, no agent."""
    env = cli_environ(root)
    extra = [str(Path(sys.executable).parent)] + [str(Path(p).parent) for p in (pg_bin("psql"),) if p]
    env["PATH"] = os.pathsep.join([*extra, env.get("PATH", "")])
    env["PYTHONPATH"] = os.pathsep.join(x for x in (str(ROOT), os.environ.get("PYTHONPATH", "")) if x)
    env["HOME"] = str(home)
    env.pop("SSH_AUTH_SOCK", None)
    for k in ("DOCKER_HOST", "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        env.pop(k, None)
    return env


def test_every_shell_block_is_tested() -> None:
    blocks = sh_blocks(SCALE)
    engine = [b for b in blocks if "DOCKER_HOST" in b]
    postgres = [b for b in blocks if "psql" in b or "postgresql+psycopg" in b]
    gvisor = [b for b in blocks if "RUNSC=1" in b]
    assert (len(engine), len(postgres), len(gvisor)) == (2, 4, 1), blocks
    assert len(blocks) == len(engine) + len(postgres) + len(gvisor), "a block no test runs"


@pytest.mark.docker
@pytest.mark.e2e
def test_the_gvisor_block_runs_from_a_checkout(docker_client, tmp_path: Path) -> None:
    """`make engine RUNSC=1`: with an engine up it installs or registers runsc where it can, else says how."""
    [block] = [b for b in sh_blocks(SCALE) if "RUNSC=1" in b]
    done = run_block(block, doc_environ(tmp_path, tmp_path), ROOT)
    assert "engine: ready" in done.stderr, done.stderr
    if shutil.which("runsc") and "runsc" not in docker_client.info().get("Runtimes", {}):
        assert "runsc install" in done.stderr  # an engine started elsewhere: the person is told how


@pytest.mark.docker
@pytest.mark.e2e
def test_the_remote_engine_blocks_run_over_ssh_and_tls(remote_engine, tmp_path: Path) -> None:
    from tests.sandbox.engine_access import ssh_server

    url = remote_engine.url
    with ssh_server(tmp_path / "ssh", remote_engine.socket) as sshd:
        certs = sshd.home / ".docker" / "build-host"
        certs.mkdir(parents=True)
        for name in ("ca.pem", "cert.pem", "key.pem"):
            shutil.copy(remote_engine.cert_path / name, certs / name)
        env = doc_environ(tmp_path, sshd.home)
        env.update(BUILD_HOST=sshd.target, TLS_ENGINE=url.removeprefix("tcp://"))
        # A CA bundle in the environment (a proxy's) must not replace the engine's CA.
        env["REQUESTS_CA_BUNDLE"] = env["CURL_CA_BUNDLE"] = "/etc/ssl/certs/ca-certificates.crt"
        ssh_block, tls_block = [b for b in sh_blocks(SCALE) if "DOCKER_HOST" in b]
        for block in (ssh_block, tls_block):
            out = run_block(block, env, tmp_path).stdout
            assert "minimal" in out and "built" in out, out  # the engine's images, listed through the link


@pytest.mark.docker
@pytest.mark.e2e
def test_the_postgresql_setup_runs_as_written_and_each_role_does_its_part_only(docker_client, tmp_path: Path) -> None:
    server = PostgresServer().start()  # a cluster of its own: roles are the whole server's
    try:
        _postgres_blocks(server, tmp_path)
        _least_privilege(server)
    finally:
        server.stop()


def _postgres_blocks(server: PostgresServer, tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_workspace(home / "src" / "app")
    (home / "src" / "app" / "README").write_text("an app\n")
    with AnthropicServer() as srv:
        srv.add(reply(tool_use("fs_read", {"path": "README"}, id="toolu_1")),
                reply(text("There is a README.")))
        env = doc_environ(tmp_path, home)
        env.update(PGHOST=str(server.socket_dir), PGUSER=PG_USER, ANTHROPIC_API_KEY=srv.api_key,
                   ANTHROPIC_BASE_URL=srv.url)
        blocks = [b for b in sh_blocks(SCALE) if "psql" in b or "postgresql+psycopg" in b]
        outputs = [run_block(b, env, home) for b in blocks]
    assert "There is a README." in outputs[-1].stdout, outputs[-1].stdout
    assert "OK" in outputs[-1].stdout.upper(), outputs[-1].stdout  # the auditor's verify
    with psycopg.connect(host=str(server.socket_dir), user=PG_USER, dbname="agent_desk") as conn:
        owners = {r[0] for r in conn.execute("SELECT tableowner FROM pg_tables WHERE schemaname = 'public'")}
        states = [tuple(r) for r in conn.execute("SELECT state, error FROM tool_calls")]
    assert owners == {"agent_desk_owner"}, "the migrations ran as the owner"
    assert [s for s, _ in states] == ["COMPLETED"], states  # alice's turn ran its tool call to the end


def _least_privilege(server: PostgresServer) -> None:
    def refused(user: str, sql: str) -> None:
        with psycopg.connect(host=str(server.socket_dir), user=user, dbname="agent_desk") as conn, \
                pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(sql)

    for table in ("audit_entries", "tool_calls", "events", "audit_head"):
        refused("alice", f"DELETE FROM {table}")
        refused("alice", f"TRUNCATE {table}")
        refused("auditor", f"DELETE FROM {table}")
    refused("alice", "UPDATE audit_entries SET hash = hash")
    refused("alice", "UPDATE events SET type = type")
    refused("alice", "CREATE TABLE public.mine (x int)")
    refused("auditor", "INSERT INTO blobs (digest, size, data) VALUES ('x', 1, 'x')")
    refused("auditor", "UPDATE tool_calls SET state = state")
    with psycopg.connect(host=str(server.socket_dir), user="auditor", dbname="agent_desk") as conn:
        assert conn.execute("SELECT count(*) FROM audit_entries").fetchone()[0] > 0


def test_each_postgresql_connection_failure_names_its_cause(postgres_server, tmp_path: Path) -> None:
    """A refused login, no server, a failed TLS handshake and a missing database: four causes, four fixes."""
    import asyncio

    from desktop_app.core import StoreError
    from desktop_app.runtime import open_store

    def failure(url: str) -> StoreError:
        with pytest.raises(StoreError) as caught:
            asyncio.run(open_store(url))
        return caught.value

    sock = postgres_server.socket_dir
    with psycopg.connect(host=str(sock), user=PG_USER, dbname="postgres", autocommit=True) as conn:
        conn.execute("DO $$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'nologin_group') "
                     "THEN CREATE ROLE nologin_group NOLOGIN; END IF; END $$")
    refused = failure(f"postgresql+psycopg://nologin_group@/postgres?host={sock}")
    assert "refused the user 'nologin_group'" in str(refused) and "does not answer" not in str(refused)
    assert "LOGIN" in refused.hint
    empty = tmp_path / "nothing-listens"
    empty.mkdir()
    silent = failure(f"postgresql+psycopg://{PG_USER}@/postgres?host={empty}")
    assert "does not answer" in str(silent) and "start the server" in silent.hint
    missing = failure(f"postgresql+psycopg://{PG_USER}@/no_such_db?host={sock}")
    assert "'no_such_db' does not exist" in str(missing) and "createdb" in missing.hint
    port = free_port()
    tcp = PostgresServer(tcp_port=port).start()
    try:
        plain = failure(f"postgresql+psycopg://{PG_USER}@127.0.0.1:{port}/postgres?sslmode=require")
        assert "TLS handshake" in str(plain) and "sslmode" in plain.hint, str(plain)
        no_ca = failure(f"postgresql+psycopg://{PG_USER}@127.0.0.1:{port}/postgres?sslmode=verify-full"
                        f"&sslrootcert={tmp_path / 'none.crt'}")
        assert "TLS handshake" in str(no_ca) and "sslrootcert" in no_ca.hint, str(no_ca)
    finally:
        tcp.stop()


def free_port() -> int:
    """A free loopback port (closed again before the server takes it)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
