"""`agent-desk network list|allow|revoke`: a project's network allowlist from the terminal. The person's list
(the project's `network_allow` setting), their "for this project" answers (consent.json) and the repository's
list (.agent-desk/network.toml, used once approved). Every change is saved with the project and told on the
event log, both in the hash chain."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..core import ALLOWLIST_SETTING, ConfigError, ConsentKind, ErrorEvent, EventBus, NetworkAllowlist, ProjectInfo
from ._common import EXIT_OK
from ._db import project_of

_MODES = {False: "off", True: "on (full network)", "allowlist": "allowlist"}


async def network_command(args: argparse.Namespace) -> int:
    async with project_of(args) as (_, _, store, project):
        if args.action == "list":
            await asyncio.to_thread(_print_list, project)
            return EXIT_OK
        said = _allow(project, args.pattern) if args.action == "allow" else await _revoke(project, args.pattern)
        await store.save_project(project)  # the project's row, with its list, goes into the chain
        bus = await EventBus.open(store)
        bus.publish(ErrorEvent(source="network", severity="info", phase="system",
                               message=f"network {args.action} {args.pattern} in {project.name} "
                                       f"(agent-desk network {args.action}): {said}"))
        await store.flush()
    print(f"{'allowed' if args.action == 'allow' else 'revoked'}: {said}", file=sys.stderr)
    mode = project.settings.get("network", False)
    if mode != "allowlist":
        print(f"note: the project's network is {_MODES.get(mode, mode)}; the list applies in the allowlist mode "
              "(the project settings' Network)", file=sys.stderr)
    return EXIT_OK


def _print_list(project: ProjectInfo) -> None:
    from ..runtime import NETWORK_FILE, answered_patterns, consents

    mode = project.settings.get("network", False)
    print(f"{project.path}: network {_MODES.get(mode, mode)}", file=sys.stderr)
    for entry in project.settings.get(ALLOWLIST_SETTING) or []:
        print(f"yours\t{entry}")
    for entry in answered_patterns(project.path):
        print(f"answered\t{entry}")
    for consent in consents(project, ConsentKind.NETWORK):
        for line in (consent.current or "").splitlines():
            if line.startswith("#"):
                print(f"agent-desk: {NETWORK_FILE}: {line.lstrip('# ')}", file=sys.stderr)
            elif line:
                print(f"repository\t{line}\t{consent.status.value}")


def _allow(project: ProjectInfo, pattern: str) -> str:
    NetworkAllowlist.parse([pattern])  # a malformed pattern: the setting's own error, nothing saved
    entries = list(project.settings.get(ALLOWLIST_SETTING) or [])
    if pattern.strip().lower() in (e.strip().lower() for e in entries):
        return f"{pattern} was already in the project's list"
    project.settings = {**project.settings, ALLOWLIST_SETTING: [*entries, pattern.strip()]}
    return f"{pattern} is in the project's list"


async def _revoke(project: ProjectInfo, pattern: str) -> str:
    from ..runtime import revoke_answered

    wanted = pattern.strip().lower()
    entries = list(project.settings.get(ALLOWLIST_SETTING) or [])
    kept = [e for e in entries if e.strip().lower() != wanted]
    answers = await asyncio.to_thread(revoke_answered, project.path, pattern)
    if len(kept) == len(entries) and not answers:
        raise ConfigError(f"{pattern} is neither in the project's list nor among your answers for it",
                          hint="`agent-desk network list` shows them; the repository's list is taken back with "
                               f"agent-desk consent revoke --kind {ConsentKind.NETWORK.value}")
    project.settings = {**project.settings, ALLOWLIST_SETTING: kept}
    gone = [e for e in entries if e not in kept] + answers
    return f"{', '.join(gone)} no longer reachable without asking"
