"""The one recipe: a project's tools, policy, hooks, executor, sandbox and model client, and the ProjectRuntime
that holds them for its sessions."""

from __future__ import annotations

import asyncio
import copy
import logging
import os
import time
import weakref
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..config import Settings, config_dir, consent_record, data_dir, resolve_api_key
from ..core import (
    DEFAULT_TEMPLATE,
    MCP_GROUP,
    TASK_TOOL,
    AgentSession,
    AgentTemplate,
    AnthropicModelClient,
    ConfigError,
    ConsentKind,
    ErrorEvent,
    EventBus,
    Executor,
    McpServerInfo,
    ModelClient,
    NarrowedPolicy,
    OfferedToolsHook,
    PermissionMode,
    PermissionPolicy,
    ProjectInfo,
    ProjectSettings,
    Redactor,
    RuleSet,
    Sandbox,
    SandboxSurvivors,
    SessionSetup,
    SkillCatalog,
    SubagentLimits,
    SubagentSetup,
    TemplateCatalog,
    Tool,
    ToolRegistry,
    builtin_hooks,
    denied_outright,
    load_rules,
    load_skills,
    load_templates,
    offered_tools,
    rules_from_texts,
    user_hook_chain,
)
from ._consent import (
    Consent,
    append_trusted_rule,
    approved_templates,
    consent_stamp,
    project_rules,
    project_rules_trust,
    user_hook_specs,
)
from ._instructions import record_instructions, session_instructions
from ._liveness import mark_open_here
from ._mcp import CompanionFactory, McpConfig, default_companion, mcp_config, mcp_secret
from ._mode_sandbox import ModeSandboxes, read_only_mode
from ._network import ProjectNetworkGate, network_problem, wire_network
from ._plugins import Plugins, load_plugins
from ._project_settings import DEFAULT_PROFILE, approval_expiry, project_profile
from ._rewind import checkpoint_store
from ._tool_labels import label_runtime_tools
from ._watcher import TOOL_QUIET_S, WorkspaceWatcher

if TYPE_CHECKING:
    from ..mcp_client import McpHub
    from ..store import SqlStore

log = logging.getLogger(__name__)

USER_RULES_FILE = "rules.toml"
SandboxFactory = Callable[[ProjectInfo], Sandbox]


@dataclass(eq=False)
class ProjectRuntime:
    """Everything a project's sessions share: one executor (so an approval from any session reaches the
    executor that waits for it), one sandbox and one model client. `close()` closes what it opened."""

    settings: Settings
    project: ProjectInfo
    store: SqlStore
    bus: EventBus
    registry: ToolRegistry
    policy: PermissionPolicy
    executor: Executor
    sandbox: Sandbox
    model_client: ModelClient
    profile: str = DEFAULT_PROFILE
    rules_trust: Consent | None = None  # the project's rules file against the trust record, when built
    permission_mode: str | None = None  # the mode asked for explicitly (CLI flag), if any
    # What this runtime (and whoever opened its store and bus) must close, in reverse order.
    cleanup: AsyncExitStack = field(default_factory=AsyncExitStack)
    mcp: McpHub | None = None  # the project's and the user's MCP servers
    hooks_trust: Consent | None = None  # the project's hooks file against its grant
    # agent templates and skills (built-in, the user's, the project's); the template asked for explicitly
    templates: TemplateCatalog = field(default_factory=TemplateCatalog)
    skills: SkillCatalog | None = None
    template_name: str | None = None
    consent_stamp: tuple[tuple[str, str, str], ...] = ()  # the hooks and MCP approvals it was built on
    # The project's container and its read-only twin: a session's mode picks its container (_mode_sandbox.py).
    sandboxes: ModeSandboxes | None = None
    mcp_place: Sandbox | None = field(default=None, init=False, repr=False)  # where its MCP servers run now
    _mcp_moving: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)
    _started: asyncio.Future[None] | None = field(default=None, init=False, repr=False)
    # The open sessions, told of the host's changes to the project folder by `watcher` (made on first use).
    sessions: weakref.WeakSet[AgentSession] = field(default_factory=weakref.WeakSet, init=False, repr=False)
    watcher: WorkspaceWatcher | None = field(default=None, init=False, repr=False)

    @property
    def template(self) -> AgentTemplate:
        """The template of this project's sessions: the CLI's --template, else the project's pick, else coding."""
        return self.templates.get(self.template_name or ProjectSettings.of(self.project.settings).template or None)

    @property
    def tools(self) -> list[Tool]:
        """The built-in tools offered to the model: the profile's and the agent tools (task_run, skill), as the
        template admits them, less those switched off or denied outright."""
        profile = [t for t in self.registry.for_profile(self.profile) if t.group != f"group:{MCP_GROUP}"]
        extras = [t for t in self.registry if t.group in AGENT_GROUPS and t not in profile
                  and (t.name != TASK_TOOL or self.settings.subagent_max_depth > 0)]
        own = [t for t in profile + extras if self.template.admits(t)]
        return offered_tools(own, disabled=self.disabled_tools, rules=self.policy.rules)

    @property
    def disabled_tools(self) -> list[str]:
        return list(ProjectSettings.of(self.project.settings).disabled_tools or [])

    def mcp_tools(self) -> list[Tool]:
        """The ready MCP servers' tools offered now, less those switched off or denied outright."""
        if self.mcp is None:
            return []
        template = self.template
        offered = [t for t in self.mcp.offered_tools() if template.admits(t)]
        return offered_tools(offered, disabled=self.disabled_tools, rules=self.policy.rules)

    def why_not_offered(self, name: str) -> str | None:
        """Why the model is not offered the tool `name` (so a call of it is denied), or None when it is."""
        if name in self.disabled_tools:
            return f"the tool {name} is switched off in this project's settings"
        if any(t.name == name for t in self.tools) or any(t.name == name for t in self.mcp_tools()):
            return None
        tool = self.registry.find(name)
        rule = denied_outright(tool, self.policy.rules) if tool is not None else None
        if rule is not None:
            return f"the tool {name} is denied by the rule {rule.text!r} ({rule.source or 'rules'})"
        if tool is not None and tool.group != f"group:{MCP_GROUP}":
            return f"the tool {name} is not in this project's tool profile {self.profile!r}"
        return f"the tool {name} is not offered in this project"

    async def apply_settings(self) -> None:
        """The user's settings changed: the approval expiry (where the project does not set its own) applies
        to approvals asked from now on, and the user's hooks to calls judged from now on."""
        self.executor.approvals.timeout_s = approval_expiry(self.settings, self.project)
        specs, self.hooks_trust = await asyncio.to_thread(user_hook_specs, self.settings, self.project)
        self.executor.user_hooks = user_hook_chain(specs, self.sandbox_for)

    def session_setup(self) -> SessionSetup:
        """What a session of this project gets: its bounds and tools, and from its template the narrowed
        policy, the prompt, children."""
        tpl = self.template
        prompt = [tpl.system_prompt, self._skills_prompt(tpl)]
        limits = SubagentLimits(max_depth=self.settings.subagent_max_depth,
                                max_children=self.settings.subagent_max_children,
                                max_running=self.settings.subagent_max_running)
        setup = SubagentSetup(templates=self.templates, limits=limits, client_for=self._client_for,
                              prompt_extra=self._skills_prompt)
        return SessionSetup(
            max_steps=self.settings.max_steps, mistake_limit=self.settings.mistake_limit,
            more_tools=self.mcp_tools if self.mcp is not None else None,
            policy=NarrowedPolicy(self.policy, tpl) if tpl.narrows else None,
            restrict_tools=tpl.tools != frozenset({"*"}), system_extra="\n".join(p for p in prompt if p),
            subagents=setup, labels={"template": tpl.name} if tpl.name != DEFAULT_TEMPLATE else {})

    def sandbox_for(self, session_id: str) -> Sandbox:
        """Where the session's processes run now: its view (the container of its mode), else the project's."""
        if self.sandboxes is None:
            return self.sandbox
        return self.sandboxes.view_of(session_id, self.policy)

    def project_sandbox(self) -> Sandbox:
        """Where the project's MCP servers run: the read-only twin while the project's mode, or any open
        session's, holds the workspace read-only (the safer choice: a server is shared by every session)."""
        if self.sandboxes is None:
            return self.sandbox
        read_only = read_only_mode(self.policy, None) is not None or self.sandboxes.any_read_only()
        return self.sandboxes.for_mode(read_only)

    async def move_mcp(self) -> None:
        """A session switched container: the MCP servers follow when their place changed (see project_sandbox)."""
        async with self._mcp_moving:  # a second session's switch waits until the servers have left
            if self.mcp is None or self.mcp_place is None or self.project_sandbox() is self.mcp_place:
                return
            self.mcp_place = self.project_sandbox()
            await self.mcp.move_sandboxed()

    def _skills_prompt(self, template: AgentTemplate) -> str:
        skill = self.registry.find("skill")
        return self.skills.prompt() if self.skills is not None and skill and template.admits(skill) else ""

    def _client_for(self, model: str) -> ModelClient:
        return with_model(self.model_client, model)

    def start(self) -> asyncio.Future[None]:
        """Start the sandbox in the background, once; `ready()` reports a failure."""
        if self._started is None:
            self._started = asyncio.ensure_future(self.project_sandbox().start())
            self._started.add_done_callback(self._network_said)
            if self.mcp is not None:  # in the background too: a server not ready yet is simply not offered
                self.mcp.start()
        return self._started

    def _network_said(self, started: asyncio.Future[None]) -> None:
        problem = "" if started.cancelled() or started.exception() else network_problem(self.sandbox)
        if problem:
            self.bus.publish(ErrorEvent(source="network", message=problem))

    async def ready(self) -> None:
        """Wait until the sandbox has started; a sandbox that cannot start raises here."""
        await asyncio.shield(self.start())

    async def open_session(self, session_id: str | None = None, *, title: str = "") -> AgentSession:
        """A new session of this project, or a stored one (sealed and resumed)."""
        await self.ready()
        tpl = self.template
        client = self._client_for(tpl.model) if tpl.model else self.model_client
        if isinstance(client, AnthropicModelClient):  # its worker starts while the person types
            await asyncio.to_thread(client.warm_up)
        setup = self.session_setup()
        view = self.sandboxes.view(setup.policy or self.policy, session_id or "") if self.sandboxes else None
        instructions, problem = await session_instructions(self.settings, self.project)
        setup.system_extra = "\n".join(p for p in (instructions.prompt(), setup.system_extra) if p)
        session = await AgentSession.open(
            store=self.store, bus=self.bus, executor=self.executor, tools=self.tools,
            model_client=client, project=self.project, sandbox=view or self.sandbox,
            session_id=session_id, title=title, setup=setup,
        )
        if view is not None:
            view.bind(session.session.id)
        self.sessions.add(session)
        self._watch()
        await record_instructions(self.store, self.bus, session.session, instructions, problem)
        await mark_open_here(self.store, session.session)
        return session

    def _watch(self) -> None:
        """Watch the project folder (once): changes no tool made reach every open session."""
        if self.watcher is not None or not os.path.isdir(self.project.path):
            return
        executor = self.executor

        def tools_writing() -> bool:
            return executor.writing > 0 or time.monotonic() - executor.last_write_end < TOOL_QUIET_S

        def report(paths: list[str], kinds: list[str]) -> None:
            for session in list(self.sessions):
                session.host_changed(paths, kinds)

        try:
            self.watcher = WorkspaceWatcher(self.project.path, report, tools_writing=tools_writing)
            self.watcher.start()
        except OSError as e:  # inotify limits, a folder gone: the session works without it
            log.warning("cannot watch %s for changes: %s", self.project.path, e)
            self.watcher = None
            return
        self.cleanup.push_async_callback(_quietly, self.watcher.stop, "the folder watcher")

    def mcp_servers(self) -> list[McpServerInfo]:
        """The status of every configured MCP server, now."""
        return self.mcp.server_infos() if self.mcp is not None else []

    async def reload_rules(self) -> Consent:
        """Read the rules again (after the person trusted them): the policy's rules and mode are replaced in
        place, so open sessions use them from their next call; rules added for one session stay."""
        rules, mode, trust = await asyncio.to_thread(policy_rules, self.settings, self.project,
                                                     self.permission_mode)
        self.policy.rules = list(rules.rules)
        self.policy.mode = PermissionMode(mode or rules.mode or PermissionMode.ASK)
        self.rules_trust = trust
        if self.sandboxes is not None:  # sessions that follow the project's mode switch their sandbox now
            self.sandboxes.modes_changed()
            await self.move_mcp()
        return trust

    async def renew_model_client(self) -> None:
        """The settings changed (key, model, endpoint): sessions opened from now on get a new client. The old
        one is closed with the runtime, since a running turn may still use it."""
        self.model_client = await asyncio.to_thread(model_client_from_settings, self.settings)
        self.cleanup.push_async_callback(_quietly, self.model_client.close, "the model client")

    async def end_processes(self, session_id: str = "") -> SandboxSurvivors | None:
        """The session's end: every process in the sandbox but its helper is killed. What was still
        running (and anything that outlived the kill) is published as SandboxSurvivors, so it is seen
        and persisted; None when nothing was running or the sandbox cannot sweep."""
        sweep = getattr(getattr(self, "sandboxes", None) or self.sandbox, "sweep", None)  # both containers
        if sweep is None:
            return None
        try:
            found = await sweep()
        except Exception:
            log.exception("sweeping the sandbox's processes failed")
            return None
        if not found.get("killed") and not found.get("alive"):
            return None
        config = getattr(self.sandbox, "config", None)
        event = SandboxSurvivors(session_id=session_id, killed=list(found.get("killed") or []),
                                 alive=list(found.get("alive") or []),
                                 keep_running=bool(getattr(config, "keep_running", False)))
        return self.bus.publish(event).event  # as published: command lines redacted

    async def close(self) -> None:
        """Close the sandbox and model client (and the store and bus when opened for this runtime). Open
        sessions are their owner's to stop: an approval left waiting stays open in the store."""
        await self.end_processes()
        await self.cleanup.aclose()


AGENT_GROUPS = frozenset({"group:agents", "group:skills"})  # offered whatever the profile, as templates admit


def with_model(client: ModelClient, model: str) -> ModelClient:
    """The same client (its connection shared, so never closed apart) asking for another model."""
    if not model or model == client.model:
        return client
    other = copy.copy(client)
    other.model = model
    return other


def agent_parts(settings: Settings, project: ProjectInfo) -> tuple[TemplateCatalog, SkillCatalog]:
    """The templates and skills of a project (the built-in ones, the user's, the project's the person approved
    as they are now), the skills within the prompt's limits. Blocking."""
    templates = load_agent_templates(project)
    approved = consent_record(ConsentKind.SKILLS, project.path)
    skills = load_skills(project.path, str(config_dir() / "skills"), approved.sha256 if approved else None,
                         max_skills=settings.skills_max, max_bytes=settings.skills_max_prompt_bytes)
    for problem in templates.problems + skills.problems:
        log.warning("%s", problem)
    return templates, skills


def load_agent_templates(project: ProjectInfo | None) -> TemplateCatalog:
    """The templates a person may pick for `project`: built in, their own, and the project's they approved (the
    others are the catalog's `waiting`). Blocking (files)."""
    approved = approved_templates(project) if project is not None else {}
    return load_templates(project.path if project else None, config_dir() / "templates", approved)


async def _quietly(close: Callable[[], Awaitable[Any]], what: str) -> None:
    """Closing is best effort: one part that fails to close must not keep the others open."""
    try:
        await close()
    except Exception:
        log.exception("closing %s failed", what)


# the recipe ------------------------------------------------------------------------------------------
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


def model_client_from_settings(settings: Settings) -> AnthropicModelClient:
    """Key from ANTHROPIC_API_KEY / keyring / settings, base URL from ANTHROPIC_BASE_URL / settings."""
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
        off_loop=True,  # the streams are parsed in the model worker process, not on the desk's loop
    )


def build_executor(
    settings: Settings,
    project: ProjectInfo,
    *,
    bus: EventBus,
    store: Any,
    permission_mode: str | None = None,
    tools: list[Tool] | None = None,
    secrets: list[str] | tuple[str, ...] = (),
) -> tuple[Executor, ToolRegistry, PermissionPolicy, Consent]:
    """The project's tools, policy (user rules, then the project's when trusted), built-in hooks and
    executor on a given store and bus. It reads the rules files and the keyring, so async code calls it in
    a thread. `secrets` (an MCP server's header values) are redacted like the API key."""
    from ..tools import builtin_tools

    registry = ToolRegistry(tools if tools is not None else builtin_tools())
    rules, mode, trust = policy_rules(settings, project, permission_mode)
    policy = PermissionPolicy(mode, rules)
    key = resolve_api_key(settings)
    hooks = builtin_hooks(api_key=key.value if key else None, artifacts_dir=data_dir() / "artifacts")
    redactor = Redactor([key.value] if key else []).with_literals(list(secrets)) if secrets else None
    executor = Executor(registry, policy, bus=bus, store=store, hooks=hooks, redactor=redactor,
                        approval_timeout_s=approval_expiry(settings, project))
    bus.redactor = executor.redactor  # the bus's last net knows the configured key too
    executor.checkpoints = checkpoint_store(settings, project)  # before each call that may write
    executor.set_rule_writer(lambda rule: append_trusted_rule(project.path, rule))
    return executor, registry, policy, trust


def policy_rules(settings: Settings, project: ProjectInfo,
                 permission_mode: str | None = None) -> tuple[RuleSet, str | None, Consent]:
    """The rules and explicit mode of a project's policy, and the trust of its rules file (read once)."""
    trust = project_rules_trust(project.path)
    if not trust.ok:
        log.warning("%s", trust.warning())
    rules = user_rules(settings).extend(project_rules(trust))
    # a project left on "ask" lets its (trusted) rules file name the mode
    mode = permission_mode or (project.permission_mode if project.permission_mode != PermissionMode.ASK else None)
    return rules, mode, trust


async def build_runtime(
    settings: Settings,
    project: ProjectInfo,
    *,
    store: Any,
    bus: EventBus,
    sandbox_factory: SandboxFactory | None = None,
    model_client: ModelClient | None = None,
    permission_mode: str | None = None,
    tools: list[Tool] | None = None,
    profile: str | None = None,
    cleanup: AsyncExitStack | None = None,
    companion_factory: CompanionFactory | None = None,
    template: str | None = None,
) -> ProjectRuntime:
    """The one recipe: executor, sandbox (made, not yet started), MCP servers (not yet started) and model
    client for `project` on a given store and bus. Rules files, the MCP configuration and the keyring are
    read on a worker thread, never on the event loop."""
    mcp = await asyncio.to_thread(mcp_config, settings, project)
    plugins = None
    if tools is None:  # the built-ins and the installed plugins' tools (a caller's own list is taken as is)
        tools, plugins = await asyncio.to_thread(tools_with_plugins, settings)
    stamp = await asyncio.to_thread(consent_stamp, project)
    hook_specs, hooks_trust = await asyncio.to_thread(user_hook_specs, settings, project)
    executor, registry, policy, trust = await asyncio.to_thread(
        build_executor, settings, project, bus=bus, store=store, permission_mode=permission_mode, tools=tools,
        secrets=mcp.secrets,
    )
    if model_client is None:
        model_client = await asyncio.to_thread(model_client_from_settings, settings)
    templates, skills = await asyncio.to_thread(agent_parts, settings, project)
    _register_agent_tools(registry, skills, project)
    if sandbox_factory is None:
        from ._orphans import leased_sandbox

        sandbox_factory = leased_sandbox  # its container leased: a crash's orphans are swept at the next start
    sandbox = sandbox_factory(project)
    sandboxes = ModeSandboxes(sandbox, store=store, bus=bus, project_id=project.id)
    policy.mode_listeners.append(sandboxes.mode_changed)  # a session's mode changed: its sandbox switches now
    wire_network(project, executor, sandbox)
    stack = cleanup if cleanup is not None else AsyncExitStack()
    stack.push_async_callback(_quietly, sandbox.close, f"the sandbox of {project.name}")
    stack.push_async_callback(_quietly, sandboxes.close, f"the read-only sandbox of {project.name}")
    stack.push_async_callback(_quietly, model_client.close, "the model client")
    rt = ProjectRuntime(settings=settings, project=project, store=store, bus=bus, registry=registry,
                        policy=policy, executor=executor, sandbox=sandbox, model_client=model_client,
                        profile=project_profile(project, profile), cleanup=stack, rules_trust=trust,
                        permission_mode=permission_mode, hooks_trust=hooks_trust, templates=templates, skills=skills,
                        template_name=template, consent_stamp=stamp, sandboxes=sandboxes)
    rt.template  # noqa: B018  an unknown template is a ConfigError now, not at the first session
    executor.hooks.pre.insert(0, OfferedToolsHook(rt.why_not_offered))  # before any other hook: not offered, not run
    executor.user_hooks = user_hook_chain(hook_specs, rt.sandbox_for)
    if not hooks_trust.ok:  # the window shows it as a notice (the CLI prints the warning itself)
        bus.publish(ErrorEvent(source="hooks", message=hooks_trust.warning()))
    if skills.left_out:
        bus.publish(ErrorEvent(source="skills", message=skills.problems[-1]))
    for problem in plugins.problems() if plugins is not None else ():
        bus.publish(ErrorEvent(source="plugins", message=problem))
    if mcp.entries:
        rt.mcp = mcp_hub(rt, mcp, companion_factory)
        stack.push_async_callback(_quietly, rt.mcp.close, "the MCP servers")  # before the sandbox closes
        sandboxes.on_switch = rt.move_mcp
    return rt

def tools_with_plugins(settings: Settings) -> tuple[list[Tool], Plugins]:
    """The built-in tools and every enabled plugin's (blocking: it imports the plugins)."""
    from ..tools import builtin_tools

    builtins = builtin_tools()
    reserved = [t.name for t in builtins] + ["task_run", "skill", "git_commit"]  # added per runtime, after
    plugins = load_plugins(settings.plugins_disabled, reserved)
    return [*builtins, *plugins.tools], plugins


def _register_agent_tools(registry: ToolRegistry, skills: SkillCatalog, project: ProjectInfo) -> None:
    """task_run, (when there are skills) skill, and (when the project's git_commit setting is on, or the
    retired git_writable that it replaces) git_commit, unless the caller registered its own."""
    from ..sandbox import ProjectGit
    from ..tools import GitCommit, TaskRun, skill_tools

    settings = project.settings or {}
    on = settings.get("git_commit") or settings.get("git_writable")
    commits = [GitCommit(project.path, ProjectGit(project.path))] if on else []
    for tool in [TaskRun(), *skill_tools(skills), *commits]:
        if tool.name not in registry:
            registry.register(tool)
    label_runtime_tools(registry)  # its plugins' and MCP servers' tools label their calls while it is open


def mcp_hub(rt: ProjectRuntime, mcp: McpConfig, companion: CompanionFactory | None) -> McpHub:
    """The runtime's hub: sandboxed servers in its sandbox (once started), `sandbox+network` ones in a
    companion sandbox, tools in its registry, status on its bus."""
    from ..mcp_client import HubPlaces, McpHub

    async def sandbox() -> Sandbox:
        await rt.ready()
        rt.mcp_place = rt.project_sandbox()  # a project or a session in plan, read-only or strict: the twin
        await rt.mcp_place.start()
        return rt.mcp_place

    box = None
    if companion is not None or hasattr(rt.sandbox, "companion"):
        def server_gate(allowlist: Any, name: str) -> Any:
            return ProjectNetworkGate(rt.project, rt.executor, allowlist, server=name)

        def box(name: str) -> Sandbox:
            if companion is not None:
                return companion(rt.project_sandbox(), name)
            return default_companion(rt.project_sandbox(), name, server_gate)
    places = HubPlaces(project_id=rt.project.id, project_dir=rt.project.path, sandbox=sandbox,
                       settings=lambda: rt.project.settings, consented=mcp.consented, publish=rt.bus.publish,
                       companion=box, resolve_secret=mcp_secret)
    return McpHub(mcp.entries, places, rt.registry)
