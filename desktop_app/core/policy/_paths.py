"""One path normalisation for the permission policy and the file tools: the container's view of a path.

Nothing is stripped: a tool writes the path it is given, so the policy judges exactly that path.
"""

from __future__ import annotations

import posixpath

from .._sandbox import WORKSPACE


def container_path(path: str) -> str:
    """`path` as the container sees it: relative paths under /workspace, `.`, `..` and repeated `/` resolved
    (a leading `//` too, which POSIX lets normpath keep). Symlinks are resolved in the container, not here."""
    full = path if path.startswith("/") else posixpath.join(WORKSPACE, path)
    norm = posixpath.normpath(full)
    if norm.startswith("//"):
        norm = "/" + norm.lstrip("/")
    return norm


def workspace_relative(path: str) -> str | None:
    """The workspace-relative form of `path` ("." for the workspace itself), or None when it is outside.
    A path starting with `~` is the home folder, which is outside the workspace."""
    if path.startswith("~") or "\x00" in path:
        return None
    norm = container_path(path)
    if norm == WORKSPACE:
        return "."
    if not norm.startswith(WORKSPACE + "/"):
        return None
    return norm[len(WORKSPACE) + 1 :]


# The control folders: the desk's own settings and rules, and git's folder, whose config and hooks run
# programs on the host. The agent may read them, never change them (the container mounts them read-only).
CONTROL_DIRS = (".agent-desk", ".git")
_CONTROL_WHY = {
    ".agent-desk": "the desk's settings and permission rules",
    ".git": "git's folder, whose config and hooks run programs on the host",
}


def _control_name(component: str) -> str | None:
    """The control folder a top-level name reaches. Case-insensitively, and with what Windows and macOS
    hosts ignore (trailing dots and spaces, an NTFS `:stream`, an 8.3 short name such as `GIT~1`), because
    a case-insensitive host folder reaches the same files under any of those spellings and the read-only
    mount holds only for the exact name."""
    name = component.split(":", 1)[0].rstrip(". ").casefold()
    stem = name.lstrip(".").split("~", 1)[0]
    for d in CONTROL_DIRS:
        if name == d or ("~" in name and len(stem) >= 2 and d.lstrip(".").startswith(stem)):
            return d
    return None


def control_dir(path: str) -> str | None:
    """The control folder (`.agent-desk` or `.git`) that `path` is or lies in, as the container sees it,
    or None. Symlinks are not resolved here: the caller judges the resolved path too."""
    if "\x00" in path or path.startswith("~"):
        return None
    rel = workspace_relative(path)
    if rel is None or rel == ".":
        return None
    return _control_name(rel.split("/", 1)[0])


def control_reason(path: str, control: str) -> str:
    """Why a change to `path` in the control folder `control` is refused, in words for the model."""
    return (f"{path} is inside {control}/, {_CONTROL_WHY[control]}; the agent may read it but never "
            "change it, in any mode")
