"""`agent-desk sessions rewind SESSION_ID --before CALL_ID`: print what a rewind of the session's files (and,
unless --files-only, of its conversation: a new session from before that call's turn) changes, ask (unless
--yes), do it, and say what it did (the rewind is a record in the audit chain)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from ..core import EventBus
from ._common import EXIT_FAILED, EXIT_OK
from ._run import ask

if TYPE_CHECKING:
    from ..runtime import Rewind

YES = ("y", "yes")


async def rewind_command(args: argparse.Namespace, store: object) -> int:
    """Plan, show, confirm and do a rewind; the person's own changes are kept unless they say otherwise.
    Without --files-only the conversation is rewound too: it goes on in a new session (a branch)."""
    from ..config import Settings
    from ..runtime import plan_rewind, run_rewind

    settings = Settings.load()
    rewind = await plan_rewind(store, settings, args.id, args.before)
    p, conversation = rewind.plan, not args.files_only
    print("\n".join(p.lines()))
    if conversation and rewind.point is None:
        print(f"the conversation cannot be rewound: {rewind.no_conversation}", file=sys.stderr)
        print("nothing was changed (--files-only rewinds the files alone).", file=sys.stderr)
        return EXIT_FAILED
    if rewind.point is not None and conversation:
        print("\n".join(rewind.point.lines()))
    if p.empty and not conversation:
        return EXIT_OK
    what = "the conversation" if p.empty else "these files and the conversation" if conversation else "these files"
    if not args.yes and ask(f"Rewind {what}? [y/N] ").strip().lower() not in YES:
        print("not rewound: nothing was changed.", file=sys.stderr)
        return EXIT_FAILED
    mine = bool(args.overwrite_mine)
    if p.mine and not args.yes and not mine:
        mine = ask(f"Also put back the {len(p.mine)} file(s) you changed since? [y/N] ").strip().lower() in YES
    await run_rewind(store, EventBus(), rewind, actor="person:cli", include_mine=mine, conversation=conversation)
    return _said(rewind, conversation)


def _said(rewind: Rewind, conversation: bool) -> int:
    done = rewind.done
    if done is not None:
        for path in done.restored:
            print(f"restored  {path}")
        for path in done.removed:
            print(f"removed   {path}")
        for path in done.kept:
            print(f"kept      {path}  (yours)")
        for path, why in done.failed.items():
            print(f"failed    {path}: {why}", file=sys.stderr)
    if rewind.record is not None:
        print(f"rewind recorded as {rewind.record.id}", file=sys.stderr)
    if rewind.branch is not None and rewind.point is not None:
        print(f"conversation rewound: session {rewind.branch.id} goes on from the {rewind.point.index} message(s)"
              f" before that turn (session {rewind.point.session.id} is kept as it was)")
        print(f"continue it: agent-desk sessions resume {rewind.branch.id} PROMPT", file=sys.stderr)
    elif conversation:
        print("the conversation was not rewound: some files could not be", file=sys.stderr)
    return EXIT_FAILED if done is not None and done.failed else EXIT_OK
