"""The project's network gate: what its sandbox's egress proxy asks. The list (the project's settings and the
person's "for this project" answers, kept as consent records), the call a connection came from, the person's
answer for a domain not listed (as the session's mode allows), and each connection as evidence in the call's
audit trail."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time

from ..config import ConsentRecord, consent_records, record_consent
from ..core import (
    ErrorEvent,
    Executor,
    NetworkAllowlist,
    NetworkConnection,
    PermissionMode,
    ProjectInfo,
    StoreError,
    ToolCallRecord,
    split_mcp_tool_name,
)
from ._network_repo import RepoNetwork, approve_hint, repo_network

log = logging.getLogger(__name__)

NETWORK_CONSENT = "network"  # consent.json's kind for the destinations a person allowed for a project
ALLOW_ONCE = "allow once"
ALLOW_PROJECT = "allow for this project"
DENY = "deny"
CHOICES = (ALLOW_ONCE, ALLOW_PROJECT, DENY)
NEVER_ASKS = {
    PermissionMode.STRICT: "strict mode",
    PermissionMode.READ_ONLY: "read-only mode",
    PermissionMode.PLAN: "plan mode",
    PermissionMode.AUTO: "auto mode never widens the network",
}


def answered_patterns(project_dir: str) -> list[str]:
    """The destinations the person allowed for this project ("host:port"), from consent.json."""
    return sorted(r.text for r in consent_records(NETWORK_CONSENT, project_dir).values() if r.text)


def allow_for_project(project_dir: str, domain: str, port: int) -> None:
    pattern = f"{domain}:{port}"
    digest = hashlib.sha256(pattern.encode()).hexdigest()
    record_consent(NETWORK_CONSENT, project_dir, pattern, ConsentRecord(digest, pattern, time.time()))


def revoke_answered(project_dir: str, pattern: str) -> list[str]:
    """Take back the person's "for this project" answers that `pattern` names ("host:port" exactly, or every
    port of "host"); returns the answers taken back."""
    wanted = pattern.strip().lower()
    gone = [name for name, r in consent_records(NETWORK_CONSENT, project_dir).items()
            if r.text and (r.text == wanted or r.text.rsplit(":", 1)[0] == wanted)]
    for name in gone:
        record_consent(NETWORK_CONSENT, project_dir, name, None)
    return sorted(gone)


class ProjectNetworkGate:
    """The gate of one project's proxy (sandbox/_proxy.py's NetworkGate), on its executor."""

    def __init__(self, project: ProjectInfo, executor: Executor, allowlist: NetworkAllowlist, *,
                 server: str = "") -> None:
        self.project, self.executor, self.base = project, executor, allowlist
        self.server = server  # an MCP server's companion: its connections are that server's calls'
        self._answered = NetworkAllowlist.parse(answered_patterns(project.path))
        self._asking: dict[tuple[str, int], asyncio.Future[tuple[bool, str]]] = {}
        self._records: dict[int, list[ToolCallRecord]] = {}

    def allowlist(self) -> NetworkAllowlist:
        """The person's list and their "for this project" answers (the repository's list is read again for each
        destination they do not list, in `ask`: approved exactly as the file is now, or not at all)."""
        return NetworkAllowlist(self.base.patterns + self._answered.patterns, self.base.written)

    def for_server(self, server: str) -> ProjectNetworkGate:
        """The gate of an MCP server's companion (`sandbox+network` in the allowlist mode): the same list and
        answers, its connections attributed to that server's calls."""
        return ProjectNetworkGate(self.project, self.executor, self.base, server=server)

    def attribute(self, conn: NetworkConnection) -> None:
        """The calls whose tool runs in this sandbox right now (for a server's companion: that server's calls):
        a connection starts while its call runs, so one such call is the one; with several, each is named and
        none is guessed."""
        executing = self.executor.runner.executing.values()
        if self.server:
            calls = [r for r in executing if (split_mcp_tool_name(r.name) or ("",))[0] == self.server]
        else:
            calls = [r for r in executing if (r.sandbox or {}).get("kind") == "docker"]
        conn.calls = [r.id for r in calls]
        self._records[id(conn)] = calls
        conn.attribution = (f"MCP server {self.server!r}: " if self.server else "") + (
            "no call was executing" if not calls else "the one call executing" if len(calls) == 1
            else f"one of {len(calls)} calls executing")

    async def ask(self, conn: NetworkConnection) -> bool:
        """A destination not listed: the repository's list approved since the gate read it lets it through;
        otherwise the person is asked (as the mode allows), and a refusal of a destination the repository's
        unapproved list names says which consent would allow it."""
        repo: RepoNetwork = await asyncio.to_thread(repo_network, self.project.path)
        if repo.approved.admits_name(conn.domain, conn.port):
            conn.reason = "listed (the repository's list, approved)"
            return True
        allowed = await self._ask(conn)
        if not allowed and repo.waiting.admits_name(conn.domain, conn.port):
            conn.reason = f"{conn.reason}; {approve_hint(self.project.path)}"
        return allowed

    async def _ask(self, conn: NetworkConnection) -> bool:
        calls = self._records.get(id(conn), [])
        if len(calls) != 1:
            conn.reason = "not listed (no single call to ask for)" if calls else "not listed (no call to ask for)"
            return False
        record = calls[0]
        mode = self.executor.policy.mode_for(record.session_id)
        if mode in NEVER_ASKS:
            conn.reason = f"not listed ({NEVER_ASKS[mode]})"
            return False
        key = (conn.domain, conn.port)
        pending = self._asking.get(key)
        if pending is None:  # one card per destination, however many connections wait for it
            pending = asyncio.ensure_future(self._ask_person(record, conn))
            self._asking[key] = pending
            pending.add_done_callback(lambda _f: self._asking.pop(key, None))
        allowed, conn.reason = await asyncio.shield(pending)
        return allowed

    async def _ask_person(self, record: ToolCallRecord, conn: NetworkConnection) -> tuple[bool, str]:
        tool = self.executor.registry.find(record.name)
        what = tool.summarize(record.input).removeprefix(f"{record.name}: ") if tool is not None else ""
        text = f"{record.name} `{what}` wants {conn.domain}:{conn.port}" if what else \
            f"{record.name} wants {conn.domain}:{conn.port}"
        answer = await self.executor.questions.ask(
            record.session_id, record.id, "question", text, choices=CHOICES,
            meta={"network": {"domain": conn.domain, "port": conn.port, "address": conn.address}})
        if not answer.answered:
            return False, f"not listed (nobody answered: {answer.note or 'no answer'})"
        if answer.text not in (ALLOW_ONCE, ALLOW_PROJECT):
            return False, "not listed (the person denied it)"
        if answer.text == ALLOW_PROJECT:
            await asyncio.to_thread(allow_for_project, self.project.path, conn.domain, conn.port)
            self._answered = NetworkAllowlist.parse(answered_patterns(self.project.path))
            return True, "answered: allowed for this project"
        return True, "answered: allowed once"

    async def record(self, conn: NetworkConnection) -> None:
        """The connection, with its bytes and times, in the trail of the call(s) it came from (the hash chain);
        with no call, an error notice on the bus (the events log)."""
        calls = self._records.pop(id(conn), [])
        data = {"network": conn.to_dict()}
        if not calls:
            self.executor.bus.publish(ErrorEvent(source="network", severity="warn", phase="tool",
                                                 message=f"{conn.summary()}, {conn.attribution}"))
            return
        for record in calls:
            try:
                await self.executor.recorder.note(record, "network", conn.summary(), data)
            except StoreError as exc:
                log.warning("could not record %s: %s", conn.summary(), exc)


def wire_network(project: ProjectInfo, executor: Executor, sandbox: object) -> None:
    """A sandbox in the allowlist mode gets this project's gate; a malformed list is said at once (the sandbox
    then has no network at all)."""
    config = getattr(sandbox, "config", None)
    problem = getattr(config, "network_problem", "")
    if problem:
        executor.bus.publish(ErrorEvent(source="network", message=problem))
    egress = getattr(sandbox, "egress", None)
    if egress is not None and config is not None and config.allowlist is not None:
        egress.gate = ProjectNetworkGate(project, executor, config.allowlist)


def network_problem(sandbox: object) -> str:
    """Why a started sandbox in the allowlist mode has no network (its proxy could not start), or ""."""
    egress = getattr(sandbox, "egress", None)
    return str(getattr(egress, "problem", "") or "")
