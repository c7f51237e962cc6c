"""`agent-desk network list|mode|allow|revoke`: a project's network from the terminal, as the project settings'
Network tab sets it in the window. The mode (off, allowlist, on), the person's list (the project's
`network_allow` setting), their "for this project" answers (consent.json) and the repository's list
(.agent-desk/network.toml, used once approved). Every change is saved with the project and told on the event
log, both in the hash chain."""

from __future__ import annotations

import argparse
import asyncio
import sys

from ..core import ALLOWLIST_SETTING, ConfigError, ConsentKind, ErrorEvent, EventBus, NetworkAllowlist, ProjectInfo
from ._common import EXIT_FAILED, EXIT_OK
from ._db import project_of
from ._run import ask

_MODES = {False: "off", True: "on (full network)", "allowlist": "allowlist"}
MODE_NAMES = {"off": False, "allowlist": "allowlist", "on": True}  # the command's words, the setting's values


async def network_command(args: argparse.Namespace) -> int:
    async with project_of(args) as (_, _, store, project):
        if args.action == "list":
            await asyncio.to_thread(_print_list, project)
            return EXIT_OK
        if args.action == "mode":
            if args.mode is None:  # the mode alone, on stdout, in the command's words
                print({v: k for k, v in MODE_NAMES.items()}.get(_mode_of(project), "unknown"))
                return EXIT_OK
            said = _set_mode(project, args.mode, args.yes)
            if said is None:
                print("not changed: the project's network stays as it was.", file=sys.stderr)
                return EXIT_FAILED
            subject = args.mode
        else:
            said = _allow(project, args.pattern) if args.action == "allow" else await _revoke(project, args.pattern)
            subject = args.pattern
        await store.save_project(project)  # the project's row, with its settings, goes into the chain
        bus = await EventBus.open(store)
        bus.publish(ErrorEvent(source="network", severity="info", phase="system",
                               message=f"network {args.action} {subject} in {project.name} "
                                       f"(agent-desk network {args.action}): {said}"))
        await store.flush()
    done = {"allow": "allowed", "revoke": "revoked", "mode": "set"}[args.action]
    print(f"{done}: {said}", file=sys.stderr)
    mode = _mode_of(project)
    if args.action == "mode" and mode == "allowlist" and not project.settings.get(ALLOWLIST_SETTING):
        print("note: your list is empty: every destination asks while a call runs (refused where nobody can be "
              "asked); `agent-desk network allow PATTERN` adds one", file=sys.stderr)
    elif args.action != "mode" and mode != "allowlist":
        print(f"note: the project's network is {_MODES.get(mode, mode)}; the list applies in the allowlist mode "
              "(`agent-desk network mode allowlist`, or the project settings' Network)", file=sys.stderr)
    return EXIT_OK


def _mode_of(project: ProjectInfo) -> object:
    """The stored mode, a missing or null one being off (as the sandbox reads it)."""
    mode = project.settings.get("network")
    return False if mode is None else mode


def _set_mode(project: ProjectInfo, word: str, yes: bool) -> str | None:
    """Set the project's network mode; None when the person declined the full network. The allowlist mode with
    a malformed list is refused (the setting's own error, nothing saved): the sandbox would have no network."""
    value = MODE_NAMES[word]
    before = _mode_of(project)
    if value == before:
        return f"the project's network was already {_MODES[value]}"
    if value == "allowlist":
        NetworkAllowlist.parse(project.settings.get(ALLOWLIST_SETTING) or [])
    if value is True and not yes and ask(
            "Give this project's sandbox the full network (no list, no asking, connections not recorded)? "
            "[y/N] ").strip().lower() not in ("y", "yes"):
        return None
    project.settings = {**project.settings, "network": value}
    return f"the project's network is {_MODES[value]} (was {_MODES.get(before, before)}); its next sandbox uses it"


def _print_list(project: ProjectInfo) -> None:
    from ..runtime import NETWORK_FILE, answered_patterns, consents

    mode = _mode_of(project)
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
