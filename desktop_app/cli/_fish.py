"""`agent-desk completion fish`: a fish completion script made from the argparse tree (shtab writes bash and
zsh only): each subcommand and action where it may come, each option with its help and its choices, files
for --db, folders for --project and the project paths."""

from __future__ import annotations

import argparse
import shlex


def fish_script(parser: argparse.ArgumentParser, prog: str = "agent-desk") -> str:
    lines = [f"# fish completion for {prog}: {prog} completion fish > ~/.config/fish/completions/{prog}.fish",
             f"complete -c {prog} -f"]
    _walk(parser, prog, [], lines)
    return "\n".join(lines) + "\n"


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction | None:
    return next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)


def _walk(parser: argparse.ArgumentParser, prog: str, path: list[str], lines: list[str]) -> None:
    sub = _subparsers(parser)
    here = _condition(path, list(sub.choices) if sub else [])
    for action in parser._actions:
        if action.option_strings and action.help != argparse.SUPPRESS:
            lines.append(_option(prog, here, action))
        elif not action.option_strings and action.dest not in ("help",) and not isinstance(
                action, argparse._SubParsersAction):
            lines.extend(_positional(prog, here, action))
    if sub is None:
        return
    helps = {a.dest: a.help or "" for a in sub._choices_actions}
    for name, child in sub.choices.items():
        lines.append(f"complete -c {prog} -n {shlex.quote(here)} -a {name} -d {shlex.quote(helps.get(name, ''))}")
        _walk(child, prog, [*path, name], lines)


def _condition(path: list[str], children: list[str]) -> str:
    """True where the words typed so far are `path` (and none of its children yet)."""
    parts = [f"__fish_seen_subcommand_from {word}" for word in path] or ["__fish_use_subcommand"]
    if path and children:
        parts.append(f"not __fish_seen_subcommand_from {' '.join(children)}")
    return "; and ".join(parts)


def _option(prog: str, here: str, action: argparse.Action) -> str:
    flags = []
    for opt in action.option_strings:
        flags.append(f"-l {opt[2:]}" if opt.startswith("--") else f"-s {opt[1:]}")
    out = f"complete -c {prog} -n {shlex.quote(here)} {' '.join(flags)}"
    if action.nargs != 0:
        out += " -r" + _values(action)
    return out + (f" -d {shlex.quote(action.help)}" if action.help else "")


def _positional(prog: str, here: str, action: argparse.Action) -> list[str]:
    values = _values(action)
    return [f"complete -c {prog} -n {shlex.quote(here)}{values}"] if values else []


def _values(action: argparse.Action) -> str:
    if action.choices:
        return f" -a {shlex.quote(' '.join(str(c) for c in action.choices))}"
    complete = getattr(action, "complete", None) or {}
    if complete.get("zsh") == "_files -/":
        return " -a '(__fish_complete_directories)'"
    if complete.get("zsh") == "_files":
        return " -F"
    return ""
