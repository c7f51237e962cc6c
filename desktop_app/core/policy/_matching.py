"""Matching a rule's pattern: paths globbed the way fs_glob does, commands by their argv, and the paths a
call's input names (as written, after each cd, as the container resolved them)."""

from __future__ import annotations

import posixpath
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import re2

from ._glob import glob_regex
from ._paths import workspace_relative
from ._programs import judge_program
from ._shell import analyse_command
from ._shell_model import ShellAnalysis, SimpleCommand


# Rules glob the way fs_glob does (`*`, `?`, `[...]`, `**`, `{a,b}`): one translation for both, run by
# RE2 so that matching stays linear in the path's length.
@lru_cache(maxsize=1024)
def glob_re(pattern: str) -> Any:
    return re2.compile(glob_regex(pattern).pattern.replace("\\Z", "\\z"))


def normalize_path(path: str) -> str | None:
    """Workspace-relative normal form of a tool's path, or None when it escapes the workspace. Nothing is
    stripped: the tool writes the path it is given."""
    return workspace_relative(path)


def _pattern_path(pattern: str) -> str:
    if pattern.startswith("/"):
        rel = workspace_relative(pattern)
        return pattern if rel is None else rel
    while pattern.startswith("./"):
        pattern = pattern[2:]
    return pattern or "."


def path_matches(pattern: str, path: str) -> bool:
    rel = normalize_path(path)
    if rel is None:
        return False
    return bool(glob_re(_pattern_path(pattern)).match(rel))


@dataclass(slots=True, frozen=True)
class _CommandPattern:
    """A bash_run rule's pattern: NAME=value words it names, the words, and whether it ends in ` *`."""

    env: tuple[str, ...]
    words: tuple[str, ...]
    prefix: bool
    everything: bool = False


@lru_cache(maxsize=1024)
def command_pattern(pattern: str) -> _CommandPattern:
    pat = pattern.strip()
    if pat in ("*", ""):
        return _CommandPattern((), (), True, everything=True)
    prefix = pat.endswith((" *", ":*"))
    body = pat[:-2] if prefix else pat
    words = _split(body)
    env: list[str] = []
    while words and "=" in words[0] and words[0].split("=", 1)[0].isidentifier():
        env.append(words.pop(0))
    return _CommandPattern(tuple(env), tuple(words), prefix)


def _argv_matches(pat: _CommandPattern, argv: tuple[str, ...], open_args: bool = False) -> bool:
    if pat.everything:
        return True
    if not pat.words:
        return not argv and not pat.prefix
    if pat.prefix:
        return argv[: len(pat.words)] == pat.words
    return not open_args and argv == pat.words


def command_matches(pattern: str, argv: list[str], text: str) -> bool:
    """`git status` matches exactly; `npm test *` (or `npm test:*`) matches that argv prefix."""
    pat = command_pattern(pattern)
    return pattern.strip() == text.strip() or _argv_matches(pat, tuple(argv))


_SYSTEM_BIN = ("/bin/", "/usr/bin/", "/usr/local/bin/", "/sbin/", "/usr/sbin/", "/usr/local/sbin/")


def allow_matches(pattern: str, cmd: SimpleCommand) -> bool:
    """An allow rule proves a simple command when it names the program that really runs (a path outside
    the system folders must be spelled as written), its arguments, and exactly its NAME=value words."""
    pat = command_pattern(pattern)
    if pat.everything:
        return True
    if sorted(pat.env) != sorted(cmd.env):
        return False
    argv = cmd.argv
    if "/" in cmd.program_path and not cmd.program_path.startswith(_SYSTEM_BIN):
        argv = (cmd.program_path, *argv[1:])
    if not _argv_matches(pat, argv, cmd.open_args):
        return False
    return not pat.prefix or _wildcard_adds_only_reads(pat, cmd)


def _wildcard_adds_only_reads(pat: _CommandPattern, cmd: SimpleCommand) -> bool:
    """A prefix rule's `*` proves a known program's words only when they add nothing the rule's own words do
    not: `sort *` allows `sort -r x`, never `sort --compress-prog=sh` (the table resolves abbreviations)."""
    judged = judge_program(cmd.argv, cmd.kinds, cmd.open_args)
    if judged.effect == "read" or not judged.in_table or not judged.by_option:
        return True  # what the program does with its operands (`git branch -D x`) is what the rule allows
    named = judge_program(pat.words, ("lit",) * len(pat.words))
    return named.effect == judged.effect and named.effect != "unknown"


def block_matches(pattern: str, cmd: SimpleCommand) -> bool:
    """A deny or ask rule meets a simple command under any of its spellings: each wrapper's argv, the
    program by basename or as written, and for a delete (unlink, rmdir, shred, find -delete) also `rm`."""
    pat = command_pattern(pattern)
    if pat.everything:
        return True
    if not set(pat.env) <= set(cmd.env):
        return False
    candidates = [cmd.argv]
    if cmd.argv:
        judged = judge_program(cmd.argv, cmd.kinds, cmd.open_args)
        if judged.in_table:  # `sort --compress-prog=sh` meets `deny sort --compress-program *`
            split = [p for w in judged.canonical for p in (w.split("=", 1) if w.startswith("--") else (w,))]
            candidates += [tuple(judged.canonical), tuple(split)]
    for layer in cmd.layers:
        if layer:
            candidates += [layer, (layer[0].rsplit("/", 1)[-1], *layer[1:])]
    if cmd.deletes:
        candidates.append(("rm", *cmd.argv[1:]))
    return any(_argv_matches(pat, tuple(c)) for c in candidates)


def _split(s: str) -> list[str]:
    try:
        return shlex.split(s)
    except ValueError:
        return s.split()


def paths_of(input: dict[str, Any]) -> list[str]:
    if isinstance(input.get("path"), str):
        return [input["path"]]
    edits = input.get("edits")
    if isinstance(edits, list):
        return [e["path"] for e in edits if isinstance(e, dict) and isinstance(e.get("path"), str)]
    return []


def primary_argument(input: dict[str, Any]) -> str | None:
    for key in ("command", "path", "pattern", "process_id", "url"):
        if isinstance(input.get(key), str):
            return input[key]
    return None


@lru_cache(maxsize=64)
def analysed(command: str) -> ShellAnalysis:
    return analyse_command(command)


def mentioned_names(text: str) -> set[str]:
    """The runs of name characters in a text (no regex): what an un-analysable command mentions."""
    out: set[str] = set()
    cur: list[str] = []
    for ch in text:
        if ch.isalnum() or ch in "_.-/":
            cur.append(ch)
        elif cur:
            out.add("".join(cur))
            cur = []
    if cur:
        out.add("".join(cur))
    return out | {t.rsplit("/", 1)[-1] for t in out}


def _cd_dirs(a: ShellAnalysis) -> tuple[list[str], bool]:
    """The literal folders `cd`/`pushd` go to in the command, and whether one is only known when it runs."""
    dirs, unknown = [], False
    for c in a.commands:
        if c.program in ("cd", "pushd", "popd"):
            ops = [x for x, k in zip(c.argv[1:], c.kinds[1:], strict=False) if not x.startswith("-")]
            kinds = [k for x, k in zip(c.argv[1:], c.kinds[1:], strict=False) if not x.startswith("-")]
            if c.program == "popd" or not ops or kinds[0] != "lit" or ops[0].startswith("~"):
                unknown = True
            else:
                dirs.append(ops[0])
    return dirs, unknown


def write_spellings(a: ShellAnalysis, resolved: Mapping[str, str],
                     targets: Iterable[str] | None = None) -> tuple[list[str], bool]:
    """Every spelling of every file the command's redirections (or `targets`) write (after each cd, and as
    the container resolved it), and whether a relative write follows a cd to a folder only known at run time."""
    dirs, unknown = _cd_dirs(a)
    out: list[str] = []
    relative_after_unknown = False
    for t in a.writes if targets is None else targets:
        spellings = [t]
        if not t.startswith(("/", "~")):
            spellings += [posixpath.join(d, t) for d in dirs]
            relative_after_unknown = relative_after_unknown or unknown
        out += spellings + [resolved[x] for x in spellings if x in resolved]
    return list(dict.fromkeys(out)), relative_after_unknown
