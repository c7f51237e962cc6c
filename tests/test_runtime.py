"""The composition: the CLI's one runtime (open_runtime) and the window's runtime per project (ProjectRuntimes)
are built by one recipe (build_runtime), on a real SQLite file, a LocalSandbox and the fake Anthropic server."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from desktop_app.config import Settings
from desktop_app.core import AnthropicModelClient, ConfigError, EventBus, Executor, ProjectInfo, StoreError
from desktop_app.runtime import ProjectRuntime, ProjectRuntimes, open_runtime, open_store
from desktop_app.runtime import _desk as rt_module  # where open_runtime and ProjectRuntimes find the recipe
from desktop_app.sandbox import LocalSandbox
from desktop_app.tools import builtin_tools
from tests.fakes.anthropic_server import AnthropicServer, reply, text

BUILTIN_NAMES = sorted(t.name for t in builtin_tools())


class RecordingSandbox(LocalSandbox):
    def __init__(self, folder: str) -> None:
        super().__init__(folder)
        self.starts = self.closes = 0

    async def start(self) -> None:
        self.starts += 1

    async def close(self) -> None:
        self.closes += 1
        await super().close()


@pytest.fixture
def env(tmp_path: Path, desk_env: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    return folder


@pytest.fixture
def recipe_calls(monkeypatch) -> list[str]:
    """The project id of every build_runtime call, whichever path made it."""
    calls: list[str] = []
    real = rt_module.build_runtime

    async def spy(settings, project, **kw):
        calls.append(project.id)
        return await real(settings, project, **kw)

    monkeypatch.setattr(rt_module, "build_runtime", spy)
    return calls


def assert_wired(runtime: ProjectRuntime, settings: Settings) -> None:
    assert isinstance(runtime.executor, Executor)
    assert sorted(t.name for t in runtime.tools) == sorted([*BUILTIN_NAMES, "task_run"])  # skill: when there are skills
    assert isinstance(runtime.sandbox, LocalSandbox)
    assert isinstance(runtime.model_client, AnthropicModelClient)
    assert (runtime.model_client.model, runtime.model_client.base_url) == (settings.model, settings.base_url)


async def test_cli_and_window_build_by_one_recipe(env: Path, tmp_path: Path, recipe_calls: list[str]) -> None:
    with AnthropicServer([reply(text("from the CLI")), reply(text("from the window"))]) as server:
        settings = Settings(base_url=server.url, api_key=server.api_key, sandbox="local")
        cli_rt = await open_runtime(settings, env, db_url=str(tmp_path / "new" / "desk.db"))
        try:
            assert_wired(cli_rt, settings)
            assert cli_rt.project.settings == {"sandbox": "local"}
            result = await (await cli_rt.open_session(title="cli")).send("hello")
            assert result.reason == "end_turn"
        finally:
            await cli_rt.close()
        with pytest.raises(StoreError, match="closed"):  # the CLI's runtime owned its store
            await cli_rt.store.list_projects()

        store = await open_store(str(tmp_path / "new" / "desk.db"))  # the folder was made by the store
        try:
            runtimes = ProjectRuntimes(settings=settings, store=store, bus=await EventBus.open(store))
            project = (await store.list_projects())[0]
            session = await runtimes(project, None)
            window_rt = runtimes.runtimes[project.id]
            assert_wired(window_rt, settings)
            assert (await session.send("hello")).reason == "end_turn"
            await runtimes.close()
            await store.list_projects()  # the window's store stays open
        finally:
            await store.close()
    assert recipe_calls == [project.id, project.id]


async def test_window_keeps_one_runtime_per_project_until_it_changes(env: Path, tmp_path: Path) -> None:
    settings = Settings(api_key="sk-test")
    made: list[RecordingSandbox] = []

    def sandbox_factory(project: ProjectInfo) -> RecordingSandbox:
        made.append(RecordingSandbox(project.path))
        return made[-1]

    store = await open_store(tmp_path / "desk.db")
    try:
        runtimes = ProjectRuntimes(settings=settings, store=store, bus=await EventBus.open(store),
                                   sandbox_factory=sandbox_factory)
        project = ProjectInfo("prj_1", "demo", str(env))
        first = await runtimes.get(project)
        assert await runtimes.get(project) is first and len(made) == 1
        await first.ready()
        assert made[0].starts == 1

        changed = await runtimes.get(dataclasses.replace(project, image="agent-desk/python:latest"))
        assert changed is not first and len(made) == 2
        await runtimes.close()
        assert [s.closes for s in made] == [1, 1]  # the replaced sandbox went too
    finally:
        await store.close()


async def test_forget_model_gives_the_next_session_a_new_client(env: Path, tmp_path: Path) -> None:
    settings = Settings(api_key="sk-test", sandbox="local")
    store = await open_store(tmp_path / "desk.db")
    try:
        runtimes = ProjectRuntimes(settings=settings, store=store, bus=await EventBus.open(store))
        project = ProjectInfo("prj_1", "demo", str(env), settings={"sandbox": "local"})
        await store.save_project(project)
        await runtimes(project, None)
        old = runtimes.runtimes[project.id].model_client
        settings.model = "claude-haiku-4-5"
        runtimes.forget_model()
        session = await runtimes(project, None)
        assert session.model_client is not old and session.model_client.model == "claude-haiku-4-5"
        await runtimes.close()
    finally:
        await store.close()


async def test_open_runtime_closes_the_store_when_it_cannot_start(env: Path, tmp_path: Path) -> None:
    store = await open_store(tmp_path / "desk.db")
    with pytest.raises(ConfigError, match="does not exist"):
        await open_runtime(Settings(api_key="sk-test"), tmp_path / "missing", store=store)
    with pytest.raises(StoreError, match="closed"):
        await store.list_projects()


@pytest.mark.parametrize(("db", "message"), [
    ("foo://bar", "cannot use the database foo://bar"),
    ("://nothing", "is not a database URL"),
    ("sqlite://", "not an in-memory SQLite database"),
    ("/proc/no-such/desk.db", "cannot create the folder"),
])
async def test_bad_db_values_are_explained(db: str, message: str) -> None:
    with pytest.raises(StoreError, match=message):
        await open_store(db)
