"""The runtime: one project's tools, policy, hooks, executor, sandbox and model client, built by one recipe
for the CLI (`open_runtime`, one project) and the window (`ProjectRuntimes`, a runtime per project)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import difflib
import logging
import os
import socket
import time
import weakref
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import (
    Settings,
    config_dir,
    data_dir,
    default_db_url,
    desk_signing_key,
    keyring_available,
    resolve_api_key,
    trust_rules,
    trusted_rules,
    witness_dir,
)
from .core import (
    DEFAULT_IMAGE,
    DEFAULT_TEMPLATE,
    HOOKS_FILE,
    MCP_GROUP,
    TASK_TOOL,
    TOOL_PROFILES,
    Action,
    AgentSession,
    AgentTemplate,
    AnthropicModelClient,
    ConfigError,
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
    Rule,
    RuleSet,
    Sandbox,
    SandboxSurvivors,
    SessionInfo,
    SessionNotice,
    SessionSetup,
    SkillCatalog,
    SubagentLimits,
    SubagentSetup,
    TemplateCatalog,
    Tool,
    ToolCallRecord,
    ToolCallState,
    ToolRegistry,
    UserHookSpec,
    append_project_rule,
    builtin_hooks,
    denied_outright,
    hooks_digest,
    load_rules,
    load_skills,
    load_templates,
    new_id,
    offered_tools,
    parse_user_hooks,
    project_rules_path,
    read_beneath,
    read_project_rules,
    rules_from_texts,
    rules_text_with,
    seal_calls,
    summarize_input,
    user_hook_chain,
    user_hooks_from_toml,
    write_beneath,
)

if TYPE_CHECKING:
    from .mcp_client import McpHub, ServerEntry
    from .store import HeadSigner, SqlStore

log = logging.getLogger(__name__)

USER_RULES_FILE = "rules.toml"
DEFAULT_PROFILE = ProjectSettings.model_fields["tool_profile"].default  # "coding"

SandboxFactory = Callable[[ProjectInfo], Sandbox]
# (the project's sandbox, an MCP server's name) -> a sandbox with network beside it, not started
CompanionFactory = Callable[[Sandbox, str], Sandbox]
MCP_KEYRING_SERVICE = "agent-desk-mcp"


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
    rules_trust: RulesTrust | None = None  # the project's rules file against the trust record, when built
    permission_mode: str | None = None  # the mode asked for explicitly (CLI flag), if any
    # What this runtime (and whoever opened its store and bus) must close, in reverse order.
    cleanup: AsyncExitStack = field(default_factory=AsyncExitStack)
    mcp: McpHub | None = None  # the project's and the user's MCP servers
    hooks_trust: HooksTrust | None = None  # the project's hooks file against its grant
    # agent templates and skills (built-in, the user's, the project's); the template asked for explicitly
    templates: TemplateCatalog = field(default_factory=TemplateCatalog)
    skills: SkillCatalog | None = None
    template_name: str | None = None
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
        self.executor.user_hooks = user_hook_chain(specs, lambda: self.sandbox)

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
            max_steps=self.settings.max_steps, more_tools=self.mcp_tools if self.mcp is not None else None,
            policy=NarrowedPolicy(self.policy, tpl) if tpl.narrows else None,
            restrict_tools=tpl.tools != frozenset({"*"}), system_extra="\n".join(p for p in prompt if p),
            subagents=setup, labels={"template": tpl.name} if tpl.name != DEFAULT_TEMPLATE else {})

    def _skills_prompt(self, template: AgentTemplate) -> str:
        skill = self.registry.find("skill")
        return self.skills.prompt() if self.skills is not None and skill and template.admits(skill) else ""

    def _client_for(self, model: str) -> ModelClient:
        return with_model(self.model_client, model)

    def start(self) -> asyncio.Future[None]:
        """Start the sandbox in the background, once; `ready()` reports a failure."""
        if self._started is None:
            self._started = asyncio.ensure_future(self.sandbox.start())
            if self.mcp is not None:  # in the background too: a server not ready yet is simply not offered
                self.mcp.start()
        return self._started

    async def ready(self) -> None:
        """Wait until the sandbox has started; a sandbox that cannot start raises here."""
        await asyncio.shield(self.start())

    async def open_session(self, session_id: str | None = None, *, title: str = "") -> AgentSession:
        """A new session of this project, or a stored one (sealed and resumed)."""
        await self.ready()
        tpl = self.template
        client = self._client_for(tpl.model) if tpl.model else self.model_client
        session = await AgentSession.open(
            store=self.store, bus=self.bus, executor=self.executor, tools=self.tools,
            model_client=client, project=self.project, sandbox=self.sandbox,
            session_id=session_id, title=title, setup=self.session_setup(),
        )
        self.sessions.add(session)
        self._watch()
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

    async def reload_rules(self) -> RulesTrust:
        """Read the rules again (after the person trusted them): the policy's rules and mode are replaced in
        place, so open sessions use them from their next call; rules added for one session stay."""
        rules, mode, trust = await asyncio.to_thread(policy_rules, self.settings, self.project,
                                                     self.permission_mode)
        self.policy.rules = list(rules.rules)
        self.policy.mode = PermissionMode(mode or rules.mode or PermissionMode.ASK)
        self.rules_trust = trust
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
        sweep = getattr(self.sandbox, "sweep", None)
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


# the project folder's changes that no tool made -------------------------------------------------------
DEBOUNCE_S = 0.25  # an editor's save is several events: they go out as one file_changed
TOOL_QUIET_S = 0.5  # changes this soon after a tool wrote are the tool's (and the sync's) own
_IGNORED_DIRS = (".agent-desk", ".git")
_KINDS = {"created": "created", "modified": "modified", "deleted": "deleted", "moved": "moved",
          "closed": "modified"}


class WorkspaceWatcher:
    """A watchdog observer on a project folder: file events (control folders left out) gathered on the
    event loop, debounced, and reported as (paths, kinds) unless a tool call was writing then."""

    def __init__(self, root: str | os.PathLike[str], report: Callable[[list[str], list[str]], None], *,
                 tools_writing: Callable[[], bool] = lambda: False, debounce_s: float = DEBOUNCE_S) -> None:
        self.root = os.path.realpath(root)
        self.report = report
        self.tools_writing = tools_writing
        self.debounce_s = debounce_s
        self._loop = asyncio.get_running_loop()
        self._pending: dict[str, str] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._observer: Any = None

    def start(self) -> None:
        from watchdog.events import FileSystemEventHandler
        from watchdog.observers import Observer

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:  # on the observer's thread
                watcher._seen(event)

        self._observer = Observer()
        self._observer.daemon = True
        self._observer.schedule(Handler(), self.root, recursive=True)
        self._observer.start()

    async def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            await asyncio.to_thread(observer.join, 5)

    def relative(self, path: str | bytes) -> str | None:
        """The workspace-relative path, or None for the root, a control folder or a path outside."""
        text = os.fsdecode(path)
        rel = os.path.relpath(text, self.root)
        if rel == "." or rel.startswith(".."):
            return None
        first = rel.split(os.sep, 1)[0]
        return None if first in _IGNORED_DIRS else rel.replace(os.sep, "/")

    def _seen(self, event: Any) -> None:
        kind = _KINDS.get(event.event_type)
        if kind is None or (event.is_directory and kind == "modified"):
            return
        found = [(event.src_path, "deleted" if kind == "moved" else kind)]
        if kind == "moved":
            found.append((event.dest_path, "created"))
        for path, what in found:
            rel = self.relative(path)
            if rel is not None:
                with contextlib.suppress(RuntimeError):  # the loop closed under us: nobody listens
                    self._loop.call_soon_threadsafe(self._add, rel, what)

    def _add(self, rel: str, kind: str) -> None:
        if self.tools_writing():
            return
        self._pending[rel] = kind if rel not in self._pending or kind != "modified" else self._pending[rel]
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_later(self.debounce_s, self._flush)

    def _flush(self) -> None:
        self._timer = None
        pending, self._pending = self._pending, {}
        if pending and not self.tools_writing():
            paths = sorted(pending)
            self.report(paths, [pending[p] for p in paths])
AGENT_GROUPS = frozenset({"group:agents", "group:skills"})  # offered whatever the profile, as templates admit


def with_model(client: ModelClient, model: str) -> ModelClient:
    """The same client (its connection shared, so never closed apart) asking for another model."""
    if not model or model == client.model:
        return client
    other = copy.copy(client)
    other.model = model
    return other


def agent_parts(settings: Settings, project: ProjectInfo) -> tuple[TemplateCatalog, SkillCatalog]:
    """The templates and skills of a project (the built-in ones, the user's, the project's). Blocking."""
    templates = load_templates(project.path, config_dir() / "templates")
    skills = load_skills(project.path, str(config_dir() / "skills"))
    for problem in templates.problems + skills.problems:
        log.warning("%s", problem)
    return templates, skills


async def _quietly(close: Callable[[], Awaitable[Any]], what: str) -> None:
    """Closing is best effort: one part that fails to close must not keep the others open."""
    try:
        await close()
    except Exception:
        log.exception("closing %s failed", what)


# the process that has a session open, and the calls of a process that is gone ------------------------------
OPEN_IN = "open_in"  # SessionInfo.meta: {"host", "pid", "started"} of the process that opened it last
_OPEN_STATES = (ToolCallState.PENDING, ToolCallState.APPROVED, ToolCallState.EXECUTING)


def this_process() -> dict[str, Any]:
    import psutil

    me = psutil.Process()
    return {"host": socket.gethostname(), "pid": me.pid, "started": round(me.create_time(), 2)}


def process_alive(owner: Any) -> bool | None:
    """Whether the process named by `owner` (`this_process()` as stored) still runs: a pid alone could be
    reused, so its start time must match too. None when it cannot be told (another host, another user)."""
    import psutil

    if not isinstance(owner, dict) or not isinstance(owner.get("pid"), int):
        return False  # a session from before the mark (or a damaged one): nobody claims it
    if owner.get("host") != socket.gethostname():
        return None
    try:
        started = psutil.Process(owner["pid"]).create_time()
        claimed = float(owner.get("started") or 0)
    except (psutil.NoSuchProcess, ValueError, TypeError, OverflowError):
        return False  # gone, or a mark no process could have written: nobody claims the session
    except (psutil.AccessDenied, OSError):
        return None
    return abs(started - claimed) < 1.0


async def mark_open_here(store: Any, session: SessionInfo) -> None:
    """Say in the store that this process has `session` open (read fresh: a title renamed since is kept)."""
    fresh = await store.get_session(session.id) or session
    fresh.meta = {**(fresh.meta or {}), OPEN_IN: await asyncio.to_thread(this_process)}
    session.meta = fresh.meta
    await store.save_session(fresh)


async def mark_closed_here(store: Any, session_id: str) -> None:
    """This process no longer has the session open (it quit): what it left open is sealed at the next
    start, by whichever process opens the store, this one included."""
    fresh = await store.get_session(session_id)
    if fresh is not None and (fresh.meta or {}).get(OPEN_IN) == await asyncio.to_thread(this_process):
        fresh.meta = {k: v for k, v in fresh.meta.items() if k != OPEN_IN}
        await store.save_session(fresh)


async def seal_abandoned(store: Any, bus: EventBus) -> dict[str, list[ToolCallRecord]]:
    """At start-up: the calls left open by a process that is gone (killed, crashed, quit anyway) are sealed
    now, and each session gets a notice of what was running. A session another live process has open
    (the CLI, another desk on a shared database) is left alone. Returns the sealed calls by session."""
    from .store import AuditQuery

    query = getattr(store, "query", None)
    if query is None:
        return {}
    by_session: dict[str, list[ToolCallRecord]] = {}
    for record in await query(AuditQuery(states=list(_OPEN_STATES), limit=None)):
        by_session.setdefault(record.session_id, []).append(record)
    sealed: dict[str, list[ToolCallRecord]] = {}
    for sid, records in by_session.items():
        session = await store.get_session(sid)
        owner = (session.meta or {}).get(OPEN_IN) if session is not None else None
        if await asyncio.to_thread(process_alive, owner) is not False:
            continue
        records.sort(key=lambda r: (r.created_at, r.batch_index))
        await seal_calls(store, bus, records)
        bus.publish(SessionNotice(session_id=sid, level="warning", text=interrupted_notice(records)))
        sealed[sid] = records
    return sealed


def interrupted_notice(records: list[ToolCallRecord]) -> str:
    """What a person reads in the conversation about the calls a gone process took with it."""
    shown = [f"{r.name} {summarize_input(r.input, 60)}".strip() for r in records[:3]]
    more = f" and {len(records) - 3} more" if len(records) > 3 else ""
    n = len(records)
    return (f"The app stopped while {n} call{'s were' if n != 1 else ' was'} running: {'; '.join(shown)}{more}. "
            f"{'They were' if n != 1 else 'It was'} interrupted and may have changed files; check the workspace "
            "before running it again.")


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
    )


# the trust of a project's rules -------------------------------------------------------------------
# The sandbox, or the repository the project was cloned from, can write .agent-desk/rules.toml: it is
# used only as the person last trusted it. Rules the desk writes itself are trusted as written.
@dataclass(frozen=True, slots=True)
class RulesTrust:
    """A project's rules file against what the person last trusted. `status`: "none" (no file, nothing
    trusted), "trusted", "new" (never trusted, e.g. shipped by a repository), "changed" or "deleted"."""

    project_dir: str
    status: str
    current: str | None  # the file's text, as read (without following links)
    trusted: str | None  # the text last trusted, None when nothing was

    @property
    def ok(self) -> bool:
        return self.status in ("none", "trusted")

    def diff(self) -> str:
        """A unified diff from the trusted text to the file (the whole file when it is new)."""
        old, new = (self.trusted or "").splitlines(keepends=True), (self.current or "").splitlines(keepends=True)
        return "".join(difflib.unified_diff(old, new, "trusted rules.toml", "rules.toml on disk"))

    def warning(self) -> str:
        """One line saying what the session does about untrusted rules, and how to trust them."""
        what = {"new": "were never trusted", "changed": "changed since you trusted them",
                "deleted": "were deleted since you trusted them"}.get(self.status, "are not trusted")
        return (f"the project's rules ({project_rules_path(self.project_dir)}) {what}: this session uses "
                f"your own rules only (and the last trusted deny/ask rules). Review and trust them with: "
                f"agent-desk rules trust {self.project_dir}")


def project_rules_trust(project_dir: str | os.PathLike[str]) -> RulesTrust:
    """Read the project's rules file (a link is refused: ConfigError) and compare it with the trust record."""
    path = os.fspath(project_dir)
    current = read_project_rules(path)
    record = trusted_rules(path)
    trusted = record.text if record else None
    if current is None:
        status = "none" if trusted is None else "deleted"
    elif trusted is None:
        status = "new"
    else:
        status = "trusted" if current == trusted else "changed"
    return RulesTrust(path, status, current, trusted)


def trust_project_rules(trust: RulesTrust) -> None:
    """The person confirmed the rules shown in `trust`: exactly that text is trusted (a file changed since
    it was shown stays untrusted). Rules that cannot be read are refused (ConfigError), not trusted."""
    if trust.current is not None:
        RuleSet.from_text(trust.current, where=f"{project_rules_path(trust.project_dir)}: ")
    trust_rules(trust.project_dir, trust.current)


def write_project_rules(project_dir: str | os.PathLike[str], text: str) -> Path:
    """Write the project's rules as the person edited them (no link followed), trusted as written."""
    path = write_beneath(project_dir, ".agent-desk/rules.toml", text)
    trust_rules(project_dir, text)
    return path


def append_trusted_rule(project_dir: str | os.PathLike[str], rule: Rule) -> None:
    """"Always allow": add the rule to the file and to the trusted text alike. A file that was untrusted
    stays so (its unconfirmed part is still the difference); a trusted one stays trusted."""
    record = trusted_rules(project_dir)
    append_project_rule(project_dir, rule)
    trust_rules(project_dir, rules_text_with(record.text if record else None, rule))


def project_rules(trust: RulesTrust) -> RuleSet:
    """The project's rules a session uses: the file when trusted; otherwise only the deny and ask rules of
    the last trusted text (they can only narrow what runs), and no mode."""
    where = f"{project_rules_path(trust.project_dir)}: "
    if trust.ok:
        text = trust.current
        return RuleSet.from_text(text, f"project:{project_rules_path(trust.project_dir)}", where=where) \
            if text is not None else RuleSet()
    if not trust.trusted:
        return RuleSet()
    kept = RuleSet.from_text(trust.trusted, f"project-trusted:{project_rules_path(trust.project_dir)}")
    return RuleSet([r for r in kept.rules if r.action is not Action.ALLOW])


def build_executor(
    settings: Settings,
    project: ProjectInfo,
    *,
    bus: EventBus,
    store: Any,
    permission_mode: str | None = None,
    tools: list[Tool] | None = None,
    secrets: list[str] | tuple[str, ...] = (),
) -> tuple[Executor, ToolRegistry, PermissionPolicy, RulesTrust]:
    """The project's tools, policy (user rules, then the project's when trusted), built-in hooks and
    executor on a given store and bus. It reads the rules files and the keyring, so async code calls it in
    a thread. `secrets` (an MCP server's header values) are redacted like the API key."""
    from .tools import builtin_tools

    registry = ToolRegistry(tools if tools is not None else builtin_tools())
    rules, mode, trust = policy_rules(settings, project, permission_mode)
    policy = PermissionPolicy(mode, rules)
    key = resolve_api_key(settings)
    hooks = builtin_hooks(api_key=key.value if key else None, artifacts_dir=data_dir() / "artifacts")
    redactor = Redactor([key.value] if key else []).with_literals(list(secrets)) if secrets else None
    executor = Executor(registry, policy, bus=bus, store=store, hooks=hooks, redactor=redactor,
                        approval_timeout_s=approval_expiry(settings, project))
    bus.redactor = executor.redactor  # the bus's last net knows the configured key too
    executor.set_rule_writer(lambda rule: append_trusted_rule(project.path, rule))
    return executor, registry, policy, trust


def policy_rules(settings: Settings, project: ProjectInfo,
                 permission_mode: str | None = None) -> tuple[RuleSet, str | None, RulesTrust]:
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
    entries, secrets = await asyncio.to_thread(mcp_config, settings, project)
    hook_specs, hooks_trust = await asyncio.to_thread(user_hook_specs, settings, project)
    executor, registry, policy, trust = await asyncio.to_thread(
        build_executor, settings, project, bus=bus, store=store, permission_mode=permission_mode, tools=tools,
        secrets=secrets,
    )
    if model_client is None:
        model_client = await asyncio.to_thread(model_client_from_settings, settings)
    templates, skills = await asyncio.to_thread(agent_parts, settings, project)
    _register_agent_tools(registry, skills)
    if sandbox_factory is None:
        from .sandbox import create_sandbox

        sandbox_factory = create_sandbox
    sandbox = sandbox_factory(project)
    stack = cleanup if cleanup is not None else AsyncExitStack()
    stack.push_async_callback(_quietly, sandbox.close, f"the sandbox of {project.name}")
    stack.push_async_callback(_quietly, model_client.close, "the model client")
    rt = ProjectRuntime(settings=settings, project=project, store=store, bus=bus, registry=registry,
                        policy=policy, executor=executor, sandbox=sandbox, model_client=model_client,
                        profile=project_profile(project, profile), cleanup=stack, rules_trust=trust,
                        permission_mode=permission_mode, hooks_trust=hooks_trust, templates=templates, skills=skills,
                        template_name=template)
    rt.template  # noqa: B018  an unknown template is a ConfigError now, not at the first session
    executor.hooks.pre.insert(0, OfferedToolsHook(rt.why_not_offered))  # before any other hook: not offered, not run
    executor.user_hooks = user_hook_chain(hook_specs, lambda: rt.sandbox)
    if not hooks_trust.ok:  # the window shows it as a notice (the CLI prints the warning itself)
        bus.publish(ErrorEvent(source="hooks", message=hooks_trust.warning()))
    if entries:
        rt.mcp = mcp_hub(rt, entries, companion_factory)
        stack.push_async_callback(_quietly, rt.mcp.close, "the MCP servers")  # before the sandbox closes
    return rt


# what a project offers the model, how long its approvals wait, the person's hooks -----------------------
HOOKS_GRANT_KEY = "hooks_grant_digest"  # the sha256 of the project's hooks file as the person granted it


def project_profile(project: ProjectInfo, asked: str | None = None) -> str:
    """The tool profile: the one asked for (CLI), else the project's, else "coding"; an unknown one is a
    ConfigError that names the known ones."""
    profile = asked or ProjectSettings.of(project.settings).tool_profile or DEFAULT_PROFILE
    if profile not in TOOL_PROFILES:
        raise ConfigError(f"unknown tool profile {profile!r} in the project {project.name!r}",
                          hint=f"choose one of {', '.join(TOOL_PROFILES)} in the project settings")
    return str(profile)


def approval_expiry(settings: Settings, project: ProjectInfo) -> float | None:
    """Seconds an approval waits before it is denied (expired), or None: it waits until answered."""
    value = ProjectSettings.of(project.settings).approval_expiry_s
    if value is None:
        value = settings.approval_expiry_s
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"the approval expiry {value!r} of the project {project.name!r} is not a number of seconds",
                          hint="set it again in the project settings (0: approvals wait)")
    return float(value) if value else None


@dataclass(frozen=True, slots=True)
class HooksTrust:
    """The project's hooks file against the person's grant. `status`: "none" (no file), "granted", "new"
    (never granted) or "changed" (changed since the grant). Only a granted file's hooks run."""

    project_dir: str
    status: str
    text: str | None
    digest: str | None

    @property
    def ok(self) -> bool:
        return self.status in ("none", "granted")

    def warning(self) -> str:
        what = "were never granted" if self.status == "new" else "changed since you granted them"
        return (f"the project's hooks ({Path(self.project_dir) / HOOKS_FILE}) {what}: they do not run. Review and "
                f"grant them in the project settings (Hooks), or with: agent-desk hooks grant --project "
                f"{self.project_dir}")


def project_hooks_trust(project: ProjectInfo) -> HooksTrust:
    """Read the project's hooks file (no link followed: a link is a ConfigError) and compare it with the grant."""
    raw = read_beneath(project.path, HOOKS_FILE, limit=256 * 1024)
    if raw is None:
        return HooksTrust(project.path, "none", None, None)
    digest, granted = hooks_digest(raw), project.settings.get(HOOKS_GRANT_KEY)
    status = "granted" if granted == digest else ("changed" if granted else "new")
    return HooksTrust(project.path, status, raw.decode("utf-8", "replace"), digest)


def user_hook_specs(settings: Settings, project: ProjectInfo) -> tuple[list[UserHookSpec], HooksTrust]:
    """The person's hooks: the settings' first, then the project's file when its grant matches it. Blocking
    (a file): call it off the loop. A hook that cannot be read is a ConfigError: the session does not start
    without hooks the person asked for."""
    specs = parse_user_hooks(settings.hooks or None, "settings: hooks")
    trust = project_hooks_trust(project)
    if trust.status == "granted" and trust.text is not None:
        specs += user_hooks_from_toml(trust.text, str(Path(project.path) / HOOKS_FILE))
    elif not trust.ok:
        log.warning("%s", trust.warning())
    return specs, trust


def grant_hooks(project: ProjectInfo, trust: HooksTrust, *, revoke: bool = False) -> dict[str, Any]:
    """The project's settings with the hooks file, exactly as shown in `trust`, granted (or the grant taken
    back). A file whose hooks cannot be read is refused (ConfigError), not granted."""
    st = {k: v for k, v in project.settings.items() if k != HOOKS_GRANT_KEY}
    if revoke or trust.text is None:
        return st
    user_hooks_from_toml(trust.text, str(Path(project.path) / HOOKS_FILE))
    return {**st, HOOKS_GRANT_KEY: trust.digest}
def _register_agent_tools(registry: ToolRegistry, skills: SkillCatalog) -> None:
    """task_run and (when there are skills) skill, unless the caller registered its own."""
    from .tools import TaskRun, skill_tools

    for tool in [TaskRun(), *skill_tools(skills)]:
        if tool.name not in registry:
            registry.register(tool)


# MCP servers ---------------------------------------------------------------------------------------------
def mcp_config(settings: Settings, project: ProjectInfo) -> tuple[list[ServerEntry], list[str]]:
    """The project's and the user's servers, and the secrets their headers resolve to (for the redactor).
    Blocking (files, the keyring): call it off the event loop."""
    from .mcp_client import header_secrets, load_servers

    entries = load_servers(project.path, settings.mcp_servers)
    return entries, header_secrets(entries, project.settings, mcp_secret)


def mcp_secret(kind: str, name: str) -> str | None:
    """`${env:NAME}` from the environment, `${keyring:NAME}` from the keyring service "agent-desk-mcp"."""
    if kind == "env":
        return os.environ.get(name) or None
    if not name or not keyring_available():
        return None
    import keyring

    try:
        return keyring.get_password(MCP_KEYRING_SERVICE, name) or None
    except Exception:  # a locked or broken keyring: the server fails with "has no value"
        log.warning("the keyring could not be read for the MCP secret %r", name)
        return None


def default_companion(sandbox: Sandbox, name: str) -> Sandbox:
    """A DockerSandbox's companion on the engine's bridge network, named after the server."""
    return sandbox.companion(f"mcp-{name}", network="bridge", purpose=f"MCP server {name!r}")  # type: ignore[attr-defined]


def mcp_hub(rt: ProjectRuntime, entries: list[ServerEntry], companion: CompanionFactory | None) -> McpHub:
    """The runtime's hub: sandboxed servers in its sandbox (once started), `sandbox+network` ones in a
    companion sandbox, tools in its registry, status on its bus."""
    from .mcp_client import HubPlaces, McpHub

    async def sandbox() -> Sandbox:
        await rt.ready()
        return rt.sandbox

    box = None
    if companion is not None or hasattr(rt.sandbox, "companion"):
        def box(name: str) -> Sandbox:
            return (companion or default_companion)(rt.sandbox, name)
    places = HubPlaces(project_id=rt.project.id, project_dir=rt.project.path, sandbox=sandbox,
                       settings=lambda: rt.project.settings, publish=rt.bus.publish, companion=box,
                       resolve_secret=mcp_secret)
    return McpHub(entries, places, rt.registry)


# the CLI: one project, with its own store and bus -----------------------------------------------------
async def open_store(db_url: str | None = None) -> SqlStore:
    """The SqlStore at `db_url` (a URL or a path), $AGENT_DESK_DB, or the default file in the user's data
    folder (the store creates a SQLite file's folder), signing its heads with this installation's key."""
    from .store import SqlStore

    signer = await asyncio.to_thread(head_signer)
    return await SqlStore.open(db_url or default_db_url(), signer=signer)


def head_signer() -> HeadSigner:
    """This installation's audit signer: its key (keyring, else a 0600 file) and its witness folder.
    Blocking (the keyring may ask the system): call it off the event loop."""
    from .store import HeadSigner

    return HeadSigner(desk_signing_key().seed, witness_dir=witness_dir())


def project_dir(folder: str | os.PathLike[str]) -> Path:
    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(f"The project folder {path} does not exist.")
    return path


async def project_for_dir(store: Any, folder: str | os.PathLike[str], *, image: str | None = None,
                          settings: Settings | None = None) -> ProjectInfo:
    """The stored project for `folder` (matched by its absolute path), or a new one."""
    path = project_dir(folder)
    for p in await store.list_projects():
        if Path(p.path) == path:
            if image and image != p.image:
                p.image = image
                await store.save_project(p)
            return p
    project = ProjectInfo(id=new_id("prj_"), name=path.name, path=str(path),
                          image=image or (settings.default_image if settings else DEFAULT_IMAGE))
    if settings is not None:
        project.permission_mode = settings.permission_mode
        if settings.sandbox != "docker":
            project.settings["sandbox"] = settings.sandbox
    await store.save_project(project)
    return project


async def open_runtime(
    settings: Settings,
    project: ProjectInfo | str | os.PathLike[str],
    *,
    db_url: str | None = None,
    store: Any = None,
    sandbox_factory: SandboxFactory | None = None,
    model_client: ModelClient | None = None,
    permission_mode: str | None = None,
    tools: list[Tool] | None = None,
    profile: str | None = None,
    companion_factory: CompanionFactory | None = None,
    template: str | None = None,
) -> ProjectRuntime:
    """A started runtime for one project (a ProjectInfo or a folder) with its own bus, on `store` or the
    store at `db_url`, its MCP servers started (each ready or failed); closing it closes the store too."""
    store = store or await open_store(db_url)
    cleanup = AsyncExitStack()
    cleanup.push_async_callback(store.close)
    try:
        if not isinstance(project, ProjectInfo):
            project = await project_for_dir(store, project, settings=settings)
        elif await store.get_project(project.id) is None:
            await store.save_project(project)
        bus = await EventBus.open(store)
        cleanup.callback(bus.close)
        runtime = await build_runtime(settings, project, store=store, bus=bus, sandbox_factory=sandbox_factory,
                                      model_client=model_client, permission_mode=permission_mode, tools=tools,
                                      profile=profile, cleanup=cleanup, companion_factory=companion_factory,
                                      template=template)
        await runtime.ready()
        if runtime.mcp is not None:
            await runtime.mcp.wait_started()
    except BaseException:
        await cleanup.aclose()
        raise
    return runtime


# the window: a runtime per project on the window's one store and bus ------------------------------------
class ProjectRuntimes:
    """The window's runtimes, one per project, built on first use by the same recipe as the CLI's;
    `await runtimes(project, session_id)` is an open AgentSession (the sandbox starts in the background)."""

    def __init__(self, *, settings: Settings, store: Any, bus: EventBus,
                 sandbox_factory: SandboxFactory | None = None,
                 companion_factory: CompanionFactory | None = None) -> None:
        self.settings = settings
        self.store = store
        self.bus = bus
        self.sandbox_factory = sandbox_factory  # default: sandbox.create_sandbox
        self.companion_factory = companion_factory  # default: the sandbox's own `companion`, if it has one
        self.runtimes: dict[str, ProjectRuntime] = {}
        self._stale_clients: set[str] = set()  # projects whose model client predates the settings
        self._closing: set[asyncio.Future[None]] = set()
        self._applying: set[asyncio.Future[None]] = set()
        self._lock = asyncio.Lock()

    async def get(self, project: ProjectInfo) -> ProjectRuntime:
        """The project's runtime; two sessions of one project opening at once share one."""
        async with self._lock:
            rt = self.runtimes.get(project.id)
            if rt is not None and rt.project == project:
                return rt
            if rt is not None:  # the project's settings changed: its old container goes
                self._closing.add(asyncio.ensure_future(rt.close()))
            rt = await build_runtime(self.settings, project, store=self.store, bus=self.bus,
                                     sandbox_factory=self.sandbox_factory,
                                     companion_factory=self.companion_factory)
            rt.start()
            self._stale_clients.discard(project.id)
            self.runtimes[project.id] = rt
            return rt

    async def __call__(self, project: ProjectInfo, session_id: str | None) -> AgentSession:
        rt = await self.get(project)
        if project.id in self._stale_clients:
            self._stale_clients.discard(project.id)
            await rt.renew_model_client()
        return await rt.open_session(session_id)  # a sandbox that cannot start is reported here

    async def reload_rules(self, project: ProjectInfo) -> None:
        """The person trusted the project's rules: its open runtime (if any) uses them from the next call."""
        rt = self.runtimes.get(project.id)
        if rt is not None:
            await rt.reload_rules()

    def forget_model(self) -> None:
        """Settings changed (key, model, endpoint): each project's next session gets a new client."""
        self._stale_clients = set(self.runtimes)
        for rt in self.runtimes.values():  # and the default approval expiry and the hooks reach them
            task = asyncio.ensure_future(rt.apply_settings())
            self._applying.add(task)
            task.add_done_callback(self._applied)

    def _applied(self, task: asyncio.Future[None]) -> None:
        self._applying.discard(task)
        if not task.cancelled() and task.exception() is not None:  # the dialog checked them: a file changed
            log.error("the new settings could not be applied: %s", task.exception())

    async def settings_applied(self) -> None:
        """Wait until the last settings change reached every open runtime."""
        if self._applying:
            await asyncio.gather(*self._applying, return_exceptions=True)

    async def close(self) -> None:
        await self.settings_applied()
        for rt in self.runtimes.values():
            await rt.close()
        self.runtimes.clear()
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)
