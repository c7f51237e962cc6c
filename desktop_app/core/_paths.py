"""One path normalisation for the permission policy and the file tools: the container's view of a path.

Nothing is stripped: a tool writes the path it is given, so the policy judges exactly that path.
"""

from __future__ import annotations

import posixpath

from ._sandbox import WORKSPACE


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
