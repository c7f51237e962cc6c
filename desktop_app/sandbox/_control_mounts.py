"""The control folders' mounts: `.agent-desk` and `.git` read-only inside the container, nested over the
read-write workspace, checked and prepared on the host before the container starts."""

from __future__ import annotations

import os
import stat

from ..core import WORKSPACE, SandboxError

# Bump when the layout of the control mounts changes: every existing container is then recreated.
MOUNTS_VERSION = 1
# With "let the agent commit", these stay read-only: what git reads from them runs programs on the host.
GIT_READ_ONLY = ("config", "hooks", "info")
_LINK_HINT = ("replace the link with a real folder (or remove it) in a terminal, after checking where it "
              "points; the desk mounts this folder read-only and a link would carry that mount elsewhere")


def _lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


def _refuse_link(path: str, st: os.stat_result | None) -> None:
    if st is not None and stat.S_ISLNK(st.st_mode):
        raise SandboxError(f"{path} is a symbolic link; the sandbox does not start with a linked control folder",
                           hint=_LINK_HINT)


def check_control_dirs(folder: str) -> tuple[os.stat_result | None, os.stat_result | None]:
    """The lstat of `.agent-desk` and `.git` in `folder` (None when absent); SandboxError when either is a
    symbolic link, or `.agent-desk` is not a folder."""
    desk, git = os.path.join(folder, ".agent-desk"), os.path.join(folder, ".git")
    desk_st, git_st = _lstat(desk), _lstat(git)
    _refuse_link(desk, desk_st)
    _refuse_link(git, git_st)
    if desk_st is not None and not stat.S_ISDIR(desk_st.st_mode):
        raise SandboxError(f"{desk} is not a folder", hint="move that file away; the desk keeps its rules there")
    return desk_st, git_st


def control_mounts(folder: str, *, git_writable: bool = False) -> list[tuple[str, str, bool]]:
    """(container path, host path, read-only) of each control mount. `.agent-desk` is created on the host
    when missing, so that its read-only mount exists before the agent can make one. `.git` is mounted only
    when it exists: an empty `.git` would break the person's git."""
    desk_st, git_st = check_control_dirs(folder)
    desk, git = os.path.join(folder, ".agent-desk"), os.path.join(folder, ".git")
    if desk_st is None:
        try:
            os.mkdir(desk, 0o755)
        except FileExistsError:
            pass
        check_control_dirs(folder)  # something raced the mkdir: judge what is there now
    mounts = [(f"{WORKSPACE}/.agent-desk", desk, True)]
    if git_st is None:
        return mounts
    if not (git_writable and stat.S_ISDIR(git_st.st_mode)):
        return [*mounts, (f"{WORKSPACE}/.git", git, True)]
    mounts.append((f"{WORKSPACE}/.git", git, False))
    names = [*GIT_READ_ONLY, *(["modules"] if os.path.isdir(os.path.join(git, "modules")) else [])]
    for name in names:
        path = os.path.join(git, name)
        st = _lstat(path)
        _refuse_link(path, st)
        if st is None and name == "config":
            open(path, "x").close()  # git reads an empty config as no settings
        elif st is None:
            os.mkdir(path, 0o755)  # what `git init` makes: empty folders mean nothing to git
        mounts.append((f"{WORKSPACE}/.git/{name}", path, True))
    return mounts
