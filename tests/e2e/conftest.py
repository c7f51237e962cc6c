"""End-to-end fixtures: settings kept in tmp, the CLI as a command, and a project runtime on a real
SQLite file with a real Docker sandbox (skipped without a Docker engine, failing in CI)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from desktop_app.config import Settings
from desktop_app.core import AnthropicModelClient, ProjectInfo
from tests.conftest import TEST_IMAGE, make_workspace, remove_project
from tests.fakes.anthropic_server import AnthropicServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def env(tmp_path: Path, desk_env: Path, server: AnthropicServer, monkeypatch) -> dict[str, str]:
    """Environment for the runtime and for CLI subprocesses: tmp config/data (the kit's desk_env), the fake
    endpoint."""
    values = {
        "AGENT_DESK_DB": f"sqlite:///{tmp_path / 'desk.db'}",
        "ANTHROPIC_API_KEY": server.api_key,
        "ANTHROPIC_BASE_URL": server.url,
    }
    for k, v in values.items():
        monkeypatch.setenv(k, v)
    full = dict(os.environ)
    full["PYTHONPATH"] = str(ROOT) + os.pathsep + full.get("PYTHONPATH", "")
    return full


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "desktop_app.cli", *args]


@pytest.fixture
def workspace_dir(tmp_path: Path) -> Path:
    ws = make_workspace(tmp_path / "project")
    (ws / "greet.txt").write_text("hello world\n")
    (ws / "test.sh").write_text('grep -q "hello agent" greet.txt && echo PASS || { echo FAIL; exit 1; }\n')
    if os.geteuid() == 0:
        for f in ws.iterdir():
            os.chown(f, 1000, 1000)
    return ws


@pytest.fixture
async def docker_runtime(docker_client, workspace_dir, server, env) -> AsyncIterator[Any]:
    """`await make(mode="auto")` -> ProjectRuntime on a real SQLite file and a real DockerSandbox."""
    from desktop_app.runtime import open_runtime

    made: list[Any] = []

    async def make(mode: str = "auto") -> Any:
        project = ProjectInfo(id=f"e2e-{os.urandom(4).hex()}", name="project", path=str(workspace_dir),
                              image=TEST_IMAGE)
        client = AnthropicModelClient(api_key=server.api_key, base_url=server.url, max_retries=1)
        runtime = await open_runtime(Settings(), project, permission_mode=mode, model_client=client)
        made.append(runtime)
        return runtime

    yield make
    for runtime in made:
        await runtime.close()
        remove_project(docker_client, runtime.project.id)
