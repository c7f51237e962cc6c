"""agent-desk(1) in roff, generated from the CLI's own argparse tree (desktop_app.cli's build_parser), so the
man page says what --help says. Usage: python packaging/manpage.py OUT.1 (the date is $SOURCE_DATE_EPOCH's)."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def _esc(text: str) -> str:
    """Roff-safe text: backslashes and hyphens escaped, no line starting with a control character."""
    out = text.replace("\\", "\\e").replace("-", "\\-")
    return "\n".join(("\\&" + line) if line[:1] in (".", "'") else line for line in out.splitlines())


def _subparsers(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    found = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help or "" for a in action._choices_actions}
            found += [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return found


def _options(parser: argparse.ArgumentParser) -> list[str]:
    lines = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) or action.help == argparse.SUPPRESS:
            continue
        if action.option_strings:
            head = ", ".join(action.option_strings)
            if action.nargs != 0:
                head += " " + (action.metavar or action.dest.upper())
        else:
            head = action.metavar or action.dest
        text = (action.help or "") % {"default": action.default} if "%(" in (action.help or "") else action.help
        if action.choices and not isinstance(action.choices, dict):
            text = f"{text or ''} (one of: {', '.join(map(str, action.choices))})".strip()
        lines += [".TP", f"\\fB{_esc(str(head))}\\fR", _esc(text or "")]
    return lines


def _section(path: str, parser: argparse.ArgumentParser, summary: str) -> list[str]:
    lines = [".SS " + _esc(path)]
    if summary:
        lines.append(_esc(summary))
    lines += [".PP", "\\fBUsage:\\fR " + _esc(" ".join(parser.format_usage().split()[1:]))]
    lines += _options(parser)
    for name, text, sub in _subparsers(parser):
        lines += _section(f"{path} {name}", sub, text)
    return lines


def render(parser: argparse.ArgumentParser, version: str, epoch: int) -> str:
    date = time.strftime("%Y-%m-%d", time.gmtime(epoch))
    lines = [
        f'.TH AGENT\\-DESK 1 "{date}" "agent\\-desk {_esc(version)}" "User Commands"',
        ".SH NAME", "agent\\-desk \\- " + _esc((parser.description or "").split(": ", 1)[-1]),
        ".SH SYNOPSIS", _esc(" ".join(parser.format_usage().split()[1:])),
        ".SH DESCRIPTION", _esc(parser.description or ""),
        ".SH OPTIONS", *_options(parser),
        ".SH COMMANDS",
    ]
    for name, text, sub in _subparsers(parser):
        lines += _section(f"{parser.prog} {name}", sub, text)
    lines += [".SH NOTES", ".nf", _esc(parser.epilog or ""), ".fi"]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    from desktop_app.cli import version
    from desktop_app.cli._parser import build_parser

    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", "0"))
    Path(argv[0]).write_text(render(build_parser(), version(), epoch))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
