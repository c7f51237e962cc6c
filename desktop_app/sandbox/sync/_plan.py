"""What a sync of a synced workspace must do, decided from three manifests: the host folder now, the volume
now, and what each side held at the last sync. Pure: no file is touched here (see _workspace_sync.py)."""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass, field

from ...core import WORKSPACE, control_dir
from ..helper.sync import entry_of, walk_manifest

# One manifest entry, the same shape on both sides: [type, mode, size, digest or link target], type one of
# f (file), d (folder), l (link), o (other: FIFO, socket, device; never synced).
Entry = list
Manifest = dict[str, Entry]



def same(a: Entry | None, b: Entry | None) -> bool:
    """Whether two entries hold the same thing: a file's bytes and mode, a link's target, a folder."""
    if a is None or b is None:
        return a is b
    if a[0] != b[0]:
        return False
    if a[0] == "f":
        return a[3] == b[3] and a[1] == b[1]
    return a[0] != "l" or a[3] == b[3]


@dataclass
class Plan:
    """Per path: to the host (`pull`), to the volume (`push`), or `conflicts`; and the paths already equal."""

    pull: list[str] = field(default_factory=list)
    push: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    equal: list[str] = field(default_factory=list)


def plan(host: Manifest, vol: Manifest, base_host: Manifest, base_vol: Manifest) -> Plan:
    """Host changed only: push. Volume changed only: pull. Both, to different things: a conflict."""
    out = Plan()
    for path in sorted(set(host) | set(vol) | set(base_host) | set(base_vol)):
        h, v = host.get(path), vol.get(path)
        host_changed = not same(h, base_host.get(path))
        vol_changed = not same(v, base_vol.get(path))
        if not host_changed and not vol_changed:
            continue
        if same(h, v):
            out.equal.append(path)
        elif not vol_changed:
            out.push.append(path)
        elif not host_changed:
            out.pull.append(path)
        else:
            out.conflicts.append(path)
    return out


def deepest_first(paths: list[str]) -> list[str]:
    return sorted(paths, key=lambda p: (-p.count("/"), p))


def link_refusal(path: str, target: str) -> tuple[str, str]:
    """(the target to make on the host, "") for a link that stays inside the workspace, else ("", why).
    An absolute target under /workspace becomes relative: on the host, /workspace is somewhere else."""
    if not target or "\x00" in target:
        return "", "an empty link"
    where = posixpath.normpath(posixpath.join(posixpath.dirname(f"{WORKSPACE}/{path}"), target))
    if where != WORKSPACE and not where.startswith(WORKSPACE + "/"):
        return "", f"a link to {target}, outside the workspace: it is not followed nor made on the host"
    inside = control_dir(where)
    if inside:
        return "", f"a link into {inside}/, which the sandbox never changes on the host"
    rel = posixpath.relpath(where, posixpath.dirname(f"{WORKSPACE}/{path}"))
    return (target if not target.startswith("/") else rel), ""


def pull_refusal(path: str, v: Entry | None) -> str:
    """Why a change the sandbox made to `path` is never brought back, or ""."""
    inside = control_dir(f"{WORKSPACE}/{path}")
    if inside:
        return f"it is inside {inside}/, which is read-only for the sandbox and never changed from it"
    if v is not None and v[0] == "o":
        return "it is not a file, a folder nor a link"
    return link_refusal(path, v[3])[1] if v is not None and v[0] == "l" else ""


def host_manifest(folder: str, cache: dict) -> Manifest:
    """The host folder's manifest: the helper's own walk, so both sides describe a tree the same way."""
    return walk_manifest(folder, cache)


def host_entry_now(folder: str, rel: str) -> Entry | None:
    """What `folder/rel` holds now (its folders walked without following links); None when absent."""
    parent, name = posixpath.split(rel)
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        for part in [p for p in parent.split("/") if p]:
            nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd)
            os.close(dfd)
            dfd = nxt
    except OSError:
        return None
    try:
        return entry_of(dfd, name, os.stat(name, dir_fd=dfd, follow_symlinks=False), {}, rel)
    except FileNotFoundError:
        return None
    finally:
        os.close(dfd)
