"""`agent-desk audit report`: the auditor's report of a session, a project or a period, as HTML or PDF."""

from __future__ import annotations

import argparse
import asyncio
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from ..core import AgentDeskError
from ._common import EXIT_FAILED, EXIT_OK
from ._sessions import project_id_for

if TYPE_CHECKING:
    from ..runtime import SqlStore


def when_arg(value: str | None, flag: str) -> float | None:
    """An ISO date or time as epoch seconds (UTC unless it carries an offset); a clear error otherwise."""
    if value is None:
        return None
    try:
        at = datetime.fromisoformat(value)
    except ValueError:
        raise AgentDeskError(f"{flag} {value!r} is not a date or time",
                             hint=f"write it as ISO 8601, e.g. {flag} 2026-11-01 or {flag} 2026-11-01T14:30") from None
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


async def audit_report(args: argparse.Namespace, store: SqlStore) -> int:
    from ..runtime import ReportScope, build_report, report_html

    since, until = when_arg(args.since, "--since"), when_arg(args.until, "--until")
    if since is not None and until is not None and since >= until:
        raise AgentDeskError("--since must come before --until", hint="swap the two, or leave one out")
    project_id = None
    if args.project:
        project_id = project_id_for(await store.list_projects(), args.project)
        if project_id == "-":
            raise AgentDeskError(f"{args.project} is not a project of this audit database",
                                 hint="list the projects with `agent-desk sessions list`, or pass --db")
    if args.session and await store.get_session(args.session) is None:
        raise AgentDeskError(f"there is no session {args.session!r} in this audit database",
                             hint="list them with `agent-desk sessions list`")
    where = str(store.path) if store.path is not None else "a PostgreSQL database"
    report = await build_report(store, ReportScope(args.session, project_id, since, until), database=where)
    page = report_html(report)
    out = Path(args.out)
    if args.pdf:
        from ..ui import write_pdf

        write_pdf(page, out)  # Qt's printing wants the main thread; the CLI has nothing else to serve
    else:
        await asyncio.to_thread(out.write_text, page, "utf-8")
    calls = len(report.calls())
    verdict = "verifies" if report.verify.ok else f"does NOT verify ({report.verify.problem})"
    print(f"wrote {out}: {len(report.sessions)} session(s), {calls} tool call(s); the chain {verdict}",
          file=sys.stderr)
    return EXIT_OK if report.verify.ok else EXIT_FAILED
