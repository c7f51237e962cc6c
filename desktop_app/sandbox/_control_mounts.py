"""The control folders' mounts: `.agent-desk` and `.git` read-only inside the container, nested over the
read-write workspace, checked and prepared on the host before the container starts."""

from __future__ import annotations

import os
import stat

from ..core import WORKSPACE, SandboxError

# Bump when the layout of the control mounts changes: every existing container is then recreated.
MOUNTS_VERSION = 2  # 2: .git is always read-only (no git_writable)
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


def control_mounts(folder: str) -> list[tuple[str, str, bool]]:
    """(container path, host path, read-only) of each control mount. `.agent-desk` is created on the host
    when missing, so that its read-only mount exists before the agent can make one. `.git` is mounted only
    when it exists (an empty `.git` would break the person's git), and always read-only: what git reads from
    it (config, hooks, commondir, a gitdir file) runs programs on the host. The agent commits through the
    desk's git_commit tool, on the host (tools/_host_git.py)."""
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
    return [*mounts, (f"{WORKSPACE}/.git", git, True)]
