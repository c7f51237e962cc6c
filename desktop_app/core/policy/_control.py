"""What a shell command may change in the control folders (`.agent-desk`, `.git`): the operands of the
programs that write, delete, move or link files, patterns that expand into those folders, and code given to
an interpreter that names them. The policy denies such a command in every mode; the container's read-only
mounts are the guarantee, this is the early and clear refusal."""

from __future__ import annotations

import posixpath
import re

from .._sandbox import WORKSPACE
from ._glob import glob_regex
from ._paths import CONTROL_DIRS, control_dir
from ._risk import INTERPRETERS
from ._shell_model import SHELLS, ShellAnalysis, SimpleCommand

# Every operand may be the file changed (mv and ln: the source too, which moves or links a control file).
_EVERY_OPERAND = frozenset({
    "rm", "rmdir", "unlink", "shred", "touch", "truncate", "mkdir", "chmod", "chown", "chgrp", "tee", "ln",
    "link", "mv", "mkfifo", "mknod", "chattr", "setfattr", "patch", "rename", "prename", "file-rename",
})
# Only the last operand (or the -t folder) is written; the others are read.
_LAST_OPERAND = frozenset({"cp", "install", "rsync", "scp"})
# Options whose value names the file or folder written.
_VALUE_OPTIONS = {
    "cp": ("-t", "--target-directory"), "mv": ("-t", "--target-directory"), "ln": ("-t", "--target-directory"),
    "install": ("-t", "--target-directory"), "sort": ("-o", "--output"), "tar": ("-C", "--directory"),
    "unzip": ("-d",), "wget": ("-O", "--output-document", "-P"),
    "curl": ("-o", "--output", "--output-dir"),
}
_KEY_VALUE = {"dd": "of="}
# Code that names a control folder: `.git` or `.agent-desk` as a whole path component, in any case.
_MENTION = re.compile(r"(?i)(?:^|[^a-z0-9_.-])\.(?:agent-desk|git)(?:[^a-z0-9_-]|$)")
_MAX_BRACES = 64


def control_targets(a: ShellAnalysis) -> tuple[list[str], list[str]]:
    """(the literal paths the command's programs write, delete, move or link, for the caller to judge with
    its redirections after each cd and as resolved; what of it certainly reaches a control folder: a pattern
    that expands into one, or code given to an interpreter that names one)."""
    paths: list[str] = []
    certain: list[str] = []
    for c in a.commands:
        # literal redirections are the caller's (ShellAnalysis.writes); those known only when it runs are here
        words = [*_operands(c), *((r.target, "dyn") for r in c.redirects if r.writes_file and not r.literal)]
        for word, kind in words:
            if kind == "lit":
                paths.append(word)
            elif kind == "glob" and glob_reaches_control(word):
                certain.append(f"{word} (a pattern that expands into a control folder)")
            elif kind == "dyn" and _static_folder_is_control(word):
                certain.append(f"{word} (a path only known when it runs, inside a control folder)")
        if c.program in INTERPRETERS and c.program not in SHELLS:
            if any(_MENTION.search(w) for w in c.argv[1:]):
                certain.append(f"the code given to {c.program}, which names a control folder")
        elif _links(c) and any(_MENTION.search(w) for w in c.argv[1:]):
            # a link's target is read from the link's own folder: `ln -s ../.git/config src/x`
            certain.append(f"a link made by {c.program} to a control folder")
    return list(dict.fromkeys(paths)), list(dict.fromkeys(certain))


def _operands(c: SimpleCommand) -> list[tuple[str, str]]:
    """The words of `c` that name a file it changes, with their kinds."""
    words = list(zip(c.argv[1:], c.kinds[1:], strict=False))
    out: list[tuple[str, str]] = []
    for opt in _VALUE_OPTIONS.get(c.program, ()):
        for i, (w, k) in enumerate(words):
            if w == opt and i + 1 < len(words):
                out.append(words[i + 1])
            elif opt.startswith("--") and w.startswith(opt + "="):
                out.append((w.split("=", 1)[1], k))
            elif not opt.startswith("--") and w.startswith(opt) and len(w) > len(opt):
                out.append((w[len(opt):], k))
    key = _KEY_VALUE.get(c.program)
    if key is not None:
        out += [(w[len(key):], k) for w, k in words if w.startswith(key)]
    if c.program in _EVERY_OPERAND or (c.program in ("sed", "perl") and _in_place(c)):
        out += [(w.split("=", 1)[1], k) if w.startswith("--") and "=" in w else (w, k) for w, k in words]
    elif c.program in _LAST_OPERAND:
        operands = [(w, k) for w, k in words if not w.startswith("-")]
        out += operands[-1:]
    return out


def _static_folder_is_control(source: str) -> bool:
    """`.agent-desk/$F`, `".git/hooks/${NAME}"`: the folder written before the first expansion."""
    cut = min((i for i in (source.find("$"), source.find("`")) if i >= 0), default=len(source))
    head = source[:cut].replace('"', "").replace("'", "")
    return "/" in head and control_dir(head.rsplit("/", 1)[0] or "/") is not None


def _links(c: SimpleCommand) -> bool:
    """ln, link, and `cp -s` make links."""
    if c.program in ("ln", "link"):
        return True
    return c.program == "cp" and any(w == "--symbolic-link" or (w.startswith("-") and not w.startswith("--")
                                                                and "s" in w[1:]) for w in c.argv[1:])


def _in_place(c: SimpleCommand) -> bool:
    return any(w.startswith("--in-place") or (w.startswith("-") and not w.startswith("--") and "i" in w[1:])
               for w in c.argv[1:])


def glob_reaches_control(pattern: str) -> bool:
    """Whether a shell pattern (with braces) can expand to a path in, or at, a control folder. A
    component that does not start with a literal `.` never matches a dot-name (bash without dotglob)."""
    for word in _braces(pattern):
        full = word if word.startswith("/") else posixpath.join(WORKSPACE, word)
        parts = posixpath.normpath(full).lstrip("/").split("/")
        want = WORKSPACE.strip("/").split("/")
        if len(parts) <= len(want) or not all(_component_matches(p, w) for p, w in zip(parts, want, strict=False)):
            continue
        top = parts[len(want)]
        if control_dir(posixpath.join(WORKSPACE, top)) is not None:
            return True
        if top.startswith(".") and any(_component_matches(top.casefold(), d) for d in CONTROL_DIRS):
            return True
    return False


def _component_matches(pattern: str, name: str) -> bool:
    return glob_regex(pattern).match(name) is not None


def _braces(word: str) -> list[str]:
    """Bash's brace expansion of `word` (`{a,b}`, nested), capped: what the shell turns it into."""
    out, todo = [], [word]
    while todo and len(out) + len(todo) <= _MAX_BRACES:
        w = todo.pop()
        m = re.search(r"\{([^{}]*,[^{}]*)\}", w)
        if m is None:
            out.append(w)
            continue
        todo += [w[: m.start()] + alt + w[m.end():] for alt in m.group(1).split(",")]
    return out + todo
