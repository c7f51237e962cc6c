"""`agent-desk audit`: list, show, export and verify the audit log, and check a signed export offline."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from ..core import (
    AgentDeskError,
)
from ._common import EXIT_FAILED, EXIT_OK, when
from ._db import db_source, open_existing_store
from ._sessions import project_id_for

if TYPE_CHECKING:
    from ..runtime import SqlStore


# audit ------------------------------------------------------------------------------------------------
async def audit_command(args: argparse.Namespace) -> int:

    if args.action == "verify-export":
        return _audit_verify_export(args)
    from ._report import audit_report

    action = {"list": _audit_list, "show": _audit_show, "export": _audit_export,
              "report": audit_report}.get(args.action, _audit_verify)
    store = await open_existing_store(args)
    try:
        return await action(args, store)
    finally:
        await store.close()


async def _audit_list(args: argparse.Namespace, store: SqlStore) -> int:
    from ..runtime import audit_query

    projects = await store.list_projects()
    project_id = project_id_for(projects, args.project) if args.project else None
    q = audit_query(project_id=project_id, session_id=args.session, tool=args.tool, states=args.state,
                   outcome=args.outcome, text=args.text, limit=args.limit, tool_use_id=args.tool_use_id,
                   risk=args.risk, decider=args.decider, mcp_server=args.mcp_server, domain=args.domain)
    for r in await store.list_records(q):
        ms = f"{r.duration_ms:.0f}ms" if r.duration_ms is not None else "-"
        print(f"{r.id}  {when(r.created_at)}  {r.name:14} {r.state.value:17} "
              f"{(r.outcome or '-'):10} {ms:>8}  {r.input_preview[:80]}")
    return EXIT_OK


async def _audit_show(args: argparse.Namespace, store: SqlStore) -> int:
    from ..runtime import audit_query

    record = await store.get_record(args.id)
    if record is None:
        # The model's id is only an attribute, which it may repeat: show it only when it names one call.
        found = await store.list_records(audit_query(tool_use_id=args.id, limit=10))
        if len(found) > 1:
            raise AgentDeskError(f"{len(found)} tool calls carry the tool_use id {args.id!r}: "
                                 + ", ".join(r.id for r in found) + ".",
                                 hint="Name one by its call id, or list them with `audit list --tool-use-id`.")
        if not found:
            raise AgentDeskError(f"There is no tool call {args.id!r}.")
        record = await store.get_record(found[0].id)
    print(json.dumps(record.to_dict(), indent=2, default=str))
    for e in await store.get_trail(record.id):
        print(f"  {e.seq:>6}  {when(e.at)}  {e.state.value:17} {e.actor:14} {e.note}")
    return EXIT_OK


async def _audit_export(args: argparse.Namespace, store: SqlStore) -> int:
    from ..runtime import audit_query

    n = await store.export(audit_query(session_id=args.session, limit=None), args.format, args.out or sys.stdout,
                           signed=args.signed)
    if args.out:
        print(f"exported {n} tool calls to {args.out}{' (signed)' if args.signed else ''}", file=sys.stderr)
    return EXIT_OK


async def _audit_verify(args: argparse.Namespace, store: SqlStore) -> int:
    from ..config import sqlite_file

    result = await store.verify(trusted_keys=getattr(args, "trust_key", None) or ())
    if result.ok and result.count == 0:
        url, source = db_source(args)
        where = sqlite_file(url) or f"given by {source}"
        print(f"nothing to verify: the audit database ({where}) has no entries (no tool call or "
              "message was ever recorded in it); check --db or $AGENT_DESK_DB", file=sys.stderr)
        return EXIT_FAILED
    if result.ok:
        print(f"audit chain OK: {result.message or f'{result.count} entries verified'}")
        return EXIT_OK
    print(f"audit chain BROKEN ({result.problem}): {result.message}; {result.count} entries checked",
          file=sys.stderr)
    for more in result.problems[1:]:  # every other finding, one a line: each rewritten row is named
        print(f"  also: {more}", file=sys.stderr)
    return EXIT_FAILED


def _audit_verify_export(args: argparse.Namespace) -> int:
    from ..runtime import verify_audit_export

    result = verify_audit_export(args.file, args.key)
    if result.ok:
        print(f"export OK: {result.message}")
        return EXIT_OK
    print(f"export REJECTED: {result.problem}: {result.message}", file=sys.stderr)
    return EXIT_FAILED
