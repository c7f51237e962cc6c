"""Suite-wide settings: Qt runs offscreen, and the engine's data never lands in the user's folders."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# The test kit (tests/kit): the fixtures every test file may ask for.
pytest_plugins = ["tests.kit.fixtures"]

# Property tests judge correctness, not speed: no per-example deadline on a loaded 2-core CI machine.
settings.register_profile("desk", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("desk")

# Set before anything imports Qt: the window tests run without a display.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Keep settings, keyring fallbacks and databases of the suite away from the real user's.
os.environ.setdefault("AGENT_DESK_TESTING", "1")
# The consent records and settings of a test that does not make its own desk (desk_env) land here, not in ~.
os.environ.setdefault("AGENT_DESK_CONFIG_DIR", tempfile.mkdtemp(prefix="agent-desk-test-config-"))
# The log file of every process the suite starts (CLI and window alike) lands in a folder of its own.
os.environ.setdefault("AGENT_DESK_LOG_DIR", tempfile.mkdtemp(prefix="agent-desk-test-logs-"))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


TEST_IMAGE = os.environ.get("AGENT_DESK_TEST_IMAGE", "agent-desk/minimal:latest")
SANDBOX_UID = 1000  # the container's user when the folder's owner is root


def no_engine(reason: str) -> None:
    """Skip outside CI; in CI a missing engine is a failure."""
    if in_ci():
        pytest.fail(f"a Docker engine is required in CI: {reason}", pytrace=False)
    pytest.skip(f"no Docker engine: {reason}")


@pytest.fixture(scope="session")
def docker_client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A docker client for the engine DOCKER_HOST names, with the test image present."""
    from desktop_app.core import AgentDeskError
    from desktop_app.sandbox import connect

    try:
        client = connect()
    except AgentDeskError as exc:
        no_engine(str(exc))
    try:
        client.images.get(TEST_IMAGE)
    except Exception:
        no_engine(f"image {TEST_IMAGE} is missing (run sandbox_images/engine.sh)")
    yield client
    _sweep_suite_containers(client, tmp_path_factory.getbasetemp())
    client.close()


def remove_project(client: Any, project_id: str) -> None:
    """Everything a test's project left on the engine: its containers (stopped at close, kept for the next
    start as the desk keeps them) and their door folders, its synced workspace's sync container and volumes."""
    from desktop_app.sandbox.docker._helper_door import remove_door_dir
    from desktop_app.sandbox.sync._volumes import remove_project_volumes

    for c in client.containers.list(all=True, ignore_removed=True,
                                    filters={"label": f"org.agent-desk.project={project_id}"}):
        c.remove(force=True)
        remove_door_dir(c.name)  # as remove_orphans does with a container it removes
    remove_project_volumes(client, project_id)


def _sweep_suite_containers(client: Any, basetemp: Path) -> None:
    """At the session's end, the projects of the suite's own folders (under its temporary base) that a test
    left: the CLI and window tests' desks keep a project's container stopped, as they do for a user."""
    try:
        found = client.containers.list(all=True, ignore_removed=True, filters={"label": "org.agent-desk.host-path"})
    except Exception:
        return
    base = str(basetemp.resolve())
    for pid in {c.labels.get("org.agent-desk.project", "") for c in found
                if Path(c.labels.get("org.agent-desk.host-path", "/")).resolve().is_relative_to(base)} - {""}:
        try:
            remove_project(client, pid)
        except Exception:
            continue


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """A throwaway PostgreSQL server (tests/postgres.py), started on first use. Never skipped: a machine
    without PostgreSQL's programs fails these tests, with the fix in the message."""
    from tests.postgres import PostgresServer

    try:
        server = PostgresServer().start()
    except RuntimeError as exc:
        pytest.fail(f"PostgreSQL is required: {exc}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture
def postgres_url(postgres_server: Any) -> str:
    """A fresh, empty PostgreSQL database for one test (a SQLAlchemy URL over the server's socket)."""
    return postgres_server.database()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The audit database of one test, once on each database the store supports: a SQLite file in a folder
    not made yet, then a fresh database on the session's PostgreSQL server (never skipped)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'nested' / 'audit.db'}"
    return request.getfixturevalue("postgres_url")


def make_workspace(path: Path) -> Path:
    """A project folder the container's user can write (chowned to 1000 when we are root)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        os.chown(path, SANDBOX_UID, SANDBOX_UID)
    return path


@pytest.fixture(scope="session")
def remote_engine(docker_client) -> Any:
    """(client, tcp:// address) of a second dockerd the tests start (see remote_engine.py: TLS verified both
    ways, a unix socket, runsc when installed; `.tls_environ()`, `.socket`, `.runtimes`); stopped at the end of
    the session. Never skipped under CI=true."""
    from tests.sandbox.remote_engine import second_engine

    engine = second_engine(TEST_IMAGE)
    try:
        found = engine.__enter__()
    except RuntimeError as exc:
        no_engine(str(exc))
    yield found
    engine.__exit__(None, None, None)


@pytest.fixture(autouse=True)
def _collector_as_found() -> Iterator[None]:
    """A test that runs the app or the CLI in this process settles the collector (runtime/_gc.py: start-up
    frozen, a higher threshold); it is put back after each test, so no later test runs with it."""
    import gc

    before = gc.get_threshold()
    yield
    from desktop_app.runtime._gc import is_settled, unsettle

    if is_settled() or gc.get_threshold() != before:
        unsettle(before)
