"""The verbs that record a person's consent: `consent list|approve|revoke` over every kind, and `rules trust`,
`hooks grant`, `mcp grant` for one kind each."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from ..core import ConfigError, ConsentKind, ConsentStatus
from ._common import EXIT_FAILED, EXIT_OK
from ._db import project_of
from ._run import ask


async def mcp_grant_command(args: argparse.Namespace) -> int:
    """Record (or revoke) the relaxation a project's server asks for, bound to its entry as it is now."""
    from ..runtime import Consent, approve, consents, project_mcp_servers

    async with project_of(args) as (folder, _settings, store, project):
        found = await asyncio.to_thread(consents, project, ConsentKind.MCP)
        consent = next((c for c in found if c.name == args.server), None)
        if consent is None and args.revoke:  # gone from the file, or asking for nothing now: still revocable
            consent = Consent(ConsentKind.MCP, project.path, args.server, ConsentStatus.NONE, None, None)
        if consent is None:
            entries = await asyncio.to_thread(project_mcp_servers, folder)
            entry = next((e for e in entries if e.name == args.server), None)
            why = (entry.error or f"server {entry.name!r} asks for no relaxation: nothing to grant") if entry else \
                f"no server {args.server!r} in {folder / '.agent-desk/mcp.json'}"
            raise ConfigError(why, hint="`agent-desk mcp list` shows the servers")
        updated = await asyncio.to_thread(approve, project, consent, revoke=args.revoke)
        if updated != project.settings:
            project.settings = updated
            await store.save_project(project)
    if args.revoke:
        print(f"revoked: {args.server} no longer starts with what it asks for.")
    else:
        print(f"granted: {consent.name} runs with {consent.asks} (until its entry in mcp.json changes).")
    return EXIT_OK


# hooks ------------------------------------------------------------------------------------------------
async def hooks_command(args: argparse.Namespace) -> int:
    """`hooks list`: the hooks that run for the project; `hooks grant`: show the project's hooks file, then
    grant exactly that text (after y, or with --yes), or take the grant back (--revoke)."""
    from ..runtime import grant_hooks, project_hooks_trust, user_hook_specs

    async with project_of(args) as (folder, settings, store, project):
        if args.action == "list":
            specs, trust = await asyncio.to_thread(user_hook_specs, settings, project)
            for spec in specs:
                print(f"{spec.event}\t{spec.matcher}\t{spec.command}\t({spec.source}, {spec.timeout_s:g} s)")
            if not trust.ok:
                print(f"agent-desk: warning: {trust.warning()}", file=sys.stderr)
            return EXIT_OK
        trust = await asyncio.to_thread(project_hooks_trust, project)
        if not args.revoke:
            if trust.current is None:
                raise ConfigError(f"no hooks file in {folder}", hint="write .agent-desk/hooks.toml first")
            sys.stdout.write(trust.current if trust.current.endswith("\n") else trust.current + "\n")
            sys.stdout.flush()
            if not args.yes and ask("Run these hooks in this project's sandbox? [y/N] ").strip().lower() not in (
                    "y", "yes"):
                print("not granted: the project's hooks do not run.", file=sys.stderr)
                return EXIT_FAILED
        updated = await asyncio.to_thread(grant_hooks, project, trust, revoke=args.revoke)
        if updated != project.settings:
            project.settings = updated
            await store.save_project(project)
    print("revoked: the project's hooks do not run." if args.revoke else
          "granted: the project's hooks run until the file changes.", file=sys.stderr)
    return EXIT_OK


# rules ------------------------------------------------------------------------------------------------
def rules_command(args: argparse.Namespace) -> int:
    """`rules diff`: the change since the rules were trusted (exit 1 when untrusted); `rules trust`: the same,
    then trust exactly the text shown (after y, or with --yes)."""
    from ..runtime import project_dir, project_rules_trust, trust_project_rules

    trust = project_rules_trust(project_dir(args.path))
    if trust.ok:
        state = "no rules file" if trust.status is ConsentStatus.NONE else "the rules are trusted"
        print(f"{trust.project_dir}: {state}; nothing to review.", file=sys.stderr)
        return EXIT_OK
    print(f"{trust.project_dir}: the rules are {trust.status} (not trusted yet):", file=sys.stderr)
    diff = trust.diff()
    sys.stdout.write(diff if diff.endswith("\n") or not diff else diff + "\n")
    sys.stdout.flush()
    if args.action == "diff":
        return EXIT_FAILED
    if not args.yes and ask("Trust these rules? [y/N] ").strip().lower() not in ("y", "yes"):
        print("not trusted: sessions keep using your own rules only.", file=sys.stderr)
        return EXIT_FAILED
    trust_project_rules(trust)
    print("trusted: sessions of this project use these rules from now on.", file=sys.stderr)
    return EXIT_OK


# consent, every kind ----------------------------------------------------------------------------------
async def consent_command(args: argparse.Namespace) -> int:
    """`consent list|approve|revoke`: one verb family over every kind of subject the person approves."""
    from ..runtime import approve, consents

    async with project_of(args) as (folder, _settings, store, project):
        kind = ConsentKind(args.kind) if args.kind else None
        found = [c for c in await asyncio.to_thread(consents, project, kind) if args.name in (None, c.name)]
        if args.action == "list":
            for c in found:
                print(f"{c.kind.value}\t{c.name or '-'}\t{c.status.value}")
            return EXIT_OK
        if args.action == "approve":
            found = [c for c in found if not c.ok]
            if not found:
                print(f"{folder}: nothing to approve.", file=sys.stderr)
        refused = False
        for c in found:
            if args.action == "approve" and not _shown_and_confirmed(c, args.yes):
                refused = True
                continue
            updated = await asyncio.to_thread(approve, project, c, revoke=args.action == "revoke")
            if updated != project.settings:  # an approval the settings held before consent.json moved out
                project.settings = updated
                await store.save_project(project)
            print(f"{'revoked' if args.action == 'revoke' else 'approved'}: the project's {c.label}.",
                  file=sys.stderr)
    return EXIT_FAILED if refused else EXIT_OK


def _shown_and_confirmed(c: Any, yes: bool) -> bool:
    """Print what is to be approved (the change since the last approval), then ask unless --yes."""
    print(f"{c.project_dir}: the project's {c.label} is {c.status.value}:", file=sys.stderr)
    diff = c.diff()
    sys.stdout.write(diff if diff.endswith("\n") or not diff else diff + "\n")
    sys.stdout.flush()
    if yes or ask(f"Approve the project's {c.label}? [y/N] ").strip().lower() in ("y", "yes"):
        return True
    print(f"not approved: the project's {c.label}.", file=sys.stderr)
    return False
