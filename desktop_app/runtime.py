"""The runtime: the one composition of store, bus, tools, policy, hooks, executor, sandbox and model
client per project, wired the same way for the CLI and the desktop app."""

from __future__ import annotations

import asyncio
import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import Settings, config_dir, data_dir, default_db_url, resolve_api_key
from .core import (
    AgentDeskError,
    AgentSession,
    AnthropicModelClient,
    ConfigError,
    EventBus,
    Executor,
    ModelClient,
    PermissionPolicy,
    ProjectInfo,
    RuleSet,
    Tool,
    ToolRegistry,
    append_rule_to_file,
    builtin_hooks,
    load_rules,
    new_id,
    project_rules_path,
    rules_from_texts,
)

USER_RULES_FILE = "rules.toml"


@dataclass
class Engine:
    """Everything a session needs, built once per project."""

    settings: Settings
    project: ProjectInfo
    store: Any  # SqlStore (RecordStore + audit queries)
    bus: EventBus
    registry: ToolRegistry
    policy: PermissionPolicy
    executor: Executor
    sandbox: Any
    model_client: ModelClient
    profile: str = "coding"
    owns_sandbox: bool = True
    sessions: list[AgentSession] = field(default_factory=list)

    @property
    def tools(self) -> list[Tool]:
        return self.registry.for_profile(self.profile)

    async def open_session(self, session_id: str | None = None, *, title: str = "") -> AgentSession:
        """A new session of this project, or a stored one (sealed and resumed)."""
        session = await AgentSession.open(
            store=self.store, bus=self.bus, executor=self.executor, tools=self.tools,
            model_client=self.model_client, project=self.project, sandbox=self.sandbox,
            session_id=session_id, title=title, max_steps=self.settings.max_steps,
        )
        self.sessions.append(session)
        return session

    async def close(self) -> None:
        for s in self.sessions:
            s.stop()
        with contextlib.suppress(Exception):
            await self.model_client.close()
        if self.owns_sandbox and self.sandbox is not None:
            with contextlib.suppress(Exception):
                await self.sandbox.close()
        self.bus.close()
        await self.store.close()


def user_rules(settings: Settings) -> RuleSet:
    """The user's rules: config_dir()/rules.toml, then `rules` in the settings ([action, text] pairs or
    {"action": ..., "rule": ...} objects)."""
    rs = load_rules(None, config_dir() / USER_RULES_FILE)
    pairs: list[tuple[str, str]] = []
    for item in settings.rules:
        if isinstance(item, dict) and "action" in item and "rule" in item:
            pairs.append((str(item["action"]), str(item["rule"])))
        elif isinstance(item, (list, tuple)) and len(item) == 2:
            pairs.append((str(item[0]), str(item[1])))
        else:
            raise ConfigError(
                f"settings: cannot read the rule {item!r}",
                hint='write ["allow", "bash_run(npm test *)"] or {"action": "allow", "rule": "..."}',
            )
    return rs.extend(rules_from_texts(pairs, "user:settings")) if pairs else rs


async def open_store(db_url: str | None = None) -> Any:
    """The SqlStore at `db_url`, $AGENT_DESK_DB, or the default file in the user's data folder."""
    from .store import SqlStore

    url = db_url or default_db_url()
    if url.startswith("sqlite:///"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return await SqlStore.open(url)


def _project_dir(folder: str | os.PathLike[str]) -> Path:
    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"The project folder {path} does not exist.")
    return path


async def project_for_dir(store: Any, folder: str | os.PathLike[str], *, image: str | None = None,
                          settings: Settings | None = None) -> ProjectInfo:
    """The stored project for `folder` (matched by its absolute path), or a new one."""
    path = _project_dir(folder)
    for p in await store.list_projects():
        if Path(p.path) == path:
            if image and image != p.image:
                p.image = image
                await store.save_project(p)
            return p
    project = ProjectInfo(
        id=new_id("prj_"), name=path.name, path=str(path),
        image=image or (settings.default_image if settings else ProjectInfo.__dataclass_fields__["image"].default),
    )
    if settings is not None:
        project.permission_mode = settings.permission_mode
        if settings.sandbox != "docker":
            project.settings["sandbox"] = settings.sandbox
    await store.save_project(project)
    return project


def model_client_from_settings(settings: Settings) -> AnthropicModelClient:
    """Key from keyring / settings / ANTHROPIC_API_KEY, base URL from settings / ANTHROPIC_BASE_URL."""
    key = resolve_api_key(settings)
    return AnthropicModelClient(
        api_key=key.value if key else None,
        key_source=key.source if key else "",
        model=settings.model,
        base_url=settings.resolved_base_url(),
        max_tokens=settings.max_tokens,
        max_retries=settings.max_retries,
        timeout_s=settings.request_timeout_s,
        thinking_budget=settings.thinking_budget,
    )


def build_executor(
    settings: Settings,
    project: ProjectInfo,
    *,
    bus: EventBus,
    store: Any,
    permission_mode: str | None = None,
    tools: list[Tool] | None = None,
) -> tuple[Executor, ToolRegistry, PermissionPolicy]:
    """The project's tools, policy (user rules, then the project's), built-in hooks and executor on a
    given store and bus. It reads the rules files and the keyring, so async code calls it in a thread."""
    from .tools import builtin_tools

    registry = ToolRegistry(tools if tools is not None else builtin_tools())
    rules = user_rules(settings).extend(load_rules(project.path))
    # a project left on "ask" lets its rules file name the mode
    mode = permission_mode or (project.permission_mode if project.permission_mode != "ask" else None)
    policy = PermissionPolicy(mode, rules)
    key = resolve_api_key(settings)
    hooks = builtin_hooks(api_key=key.value if key else None, artifacts_dir=data_dir() / "artifacts")
    executor = Executor(registry, policy, bus=bus, store=store, hooks=hooks)
    rules_file = project_rules_path(project.path)
    executor.set_rule_writer(lambda rule: append_rule_to_file(rules_file, rule))
    return executor, registry, policy


async def build_engine(
    settings: Settings,
    project: ProjectInfo | str | os.PathLike[str],
    *,
    db_url: str | None = None,
    sandbox: Any = None,
    store: Any = None,
    permission_mode: str | None = None,
    model_client: ModelClient | None = None,
    profile: str = "coding",
    tools: list[Tool] | None = None,
) -> Engine:
    """Wire store, bus, registry (built-in tools), policy (project + user rules), hooks, executor,
    sandbox (created from the project and started, unless given) and the model client."""
    store = store or await open_store(db_url)
    try:
        if not isinstance(project, ProjectInfo):
            project = await project_for_dir(store, project, settings=settings)
        elif await store.get_project(project.id) is None:
            await store.save_project(project)
        bus = await EventBus.open(store)
        executor, registry, policy = await asyncio.to_thread(
            build_executor, settings, project, bus=bus, store=store, permission_mode=permission_mode, tools=tools
        )
        owns = sandbox is None
        if sandbox is None:
            from .sandbox import create_sandbox

            sandbox = create_sandbox(project)
            await sandbox.start()
        client = model_client or model_client_from_settings(settings)
    except BaseException:
        await store.close()
        raise
    return Engine(settings=settings, project=project, store=store, bus=bus, registry=registry, policy=policy,
                  executor=executor, sandbox=sandbox, model_client=client, profile=profile, owns_sandbox=owns)


__all__ = ["AgentDeskError", "Engine", "build_engine", "build_executor", "model_client_from_settings", "open_store",
           "project_for_dir", "user_rules"]
