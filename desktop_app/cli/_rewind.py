"""`agent-desk sessions rewind SESSION_ID --before CALL_ID`: print what a rewind of the session's files
changes, ask (unless --yes), do it, and say what it did (the rewind is a record in the audit chain)."""

from __future__ import annotations

import argparse
import sys

from ..core import EventBus
from ._common import EXIT_FAILED, EXIT_OK
from ._run import ask

YES = ("y", "yes")


async def rewind_command(args: argparse.Namespace, store: object) -> int:
    """Plan, show, confirm and do a rewind; the person's own changes are kept unless they say otherwise."""
    from ..config import Settings
    from ..runtime import plan_rewind, run_rewind

    settings = Settings.load()
    rewind = await plan_rewind(store, settings, args.id, args.before)
    p = rewind.plan
    print("\n".join(p.lines()))
    if not args.files_only:
        print("(the conversation is not rewound: only files can be, for now; --files-only says so)",
              file=sys.stderr)
    if p.empty:
        return EXIT_OK
    if not args.yes and ask("Rewind these files? [y/N] ").strip().lower() not in YES:
        print("not rewound: nothing was changed.", file=sys.stderr)
        return EXIT_FAILED
    mine = bool(args.overwrite_mine)
    if p.mine and not args.yes and not mine:
        mine = ask(f"Also put back the {len(p.mine)} file(s) you changed since? [y/N] ").strip().lower() in YES
    await run_rewind(store, EventBus(), rewind, actor="person:cli", include_mine=mine)
    done = rewind.done
    assert done is not None and rewind.record is not None
    for path in done.restored:
        print(f"restored  {path}")
    for path in done.removed:
        print(f"removed   {path}")
    for path in done.kept:
        print(f"kept      {path}  (yours)")
    for path, why in done.failed.items():
        print(f"failed    {path}: {why}", file=sys.stderr)
    print(f"rewind recorded as {rewind.record.id}", file=sys.stderr)
    return EXIT_FAILED if done.failed else EXIT_OK
