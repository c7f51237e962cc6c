"""Search figures on a real engine: fs_grep and fs_glob over a real tree of more than 20,000 files (copies
of the venv's site-packages and of the standard library without its own site-packages, bytecode caches
included, made once and kept under .bench/) against ripgrep run on its own in the same container, in the
same run."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import sysconfig
import time
import uuid
from pathlib import Path

from desktop_app.sandbox import DockerSandbox, SandboxConfig

from ._util import emit, p50
from .bench_sandbox import IMAGE, _engine

ROUNDS = 7
CACHE = Path(__file__).resolve().parent.parent / ".bench" / "search_ws_v2"
TREE = "tree"  # the tree's folder in the workspace
MAX_FILE = 256 * 1024  # smaller copies; the big binaries add bytes, not files
GREP_PATTERN = r"def __init_subclass__\("  # a real search with a few hundred hits, under the result cap
GLOB_PATTERN = "**/*.pyi"
RG_SAME_FILES = ["--hidden", "--no-require-git", "--glob", "!.git"]  # the files fs_grep and fs_glob search


def _skip_big(folder: str, names: list[str]) -> set[str]:
    skipped = {"site-packages"} & set(names)  # the standard library's own: another Python's packages
    for n in names:
        full = os.path.join(folder, n)
        if os.path.isfile(full) and not os.path.islink(full) and os.path.getsize(full) > MAX_FILE:
            skipped.add(n)
    return skipped


def _tree() -> tuple[str, int]:
    """The workspace folder holding the tree (built on first use), and the tree's number of files."""
    done = CACHE / ".complete"
    if not done.exists():
        shutil.rmtree(CACHE, ignore_errors=True)
        sources = {"site-packages": sysconfig.get_paths()["purelib"], "stdlib": sysconfig.get_paths()["stdlib"]}
        for name, src in sources.items():
            shutil.copytree(src, CACHE / TREE / name, symlinks=True, ignore=_skip_big,
                            ignore_dangling_symlinks=True)  # fmt: skip
        count = sum(len(files) for _, _, files in os.walk(CACHE / TREE))
        done.write_text(str(count))
    if os.geteuid() == 0:
        os.chown(CACHE, 1000, 1000)  # the sandbox's user owns its workspace, as a person's folder would be
    return str(CACHE), int(done.read_text())


async def _timed(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = await fn()
    return (time.perf_counter() - t) * 1000, out


async def _run(client, folder: str, files: int) -> None:
    project = f"bench-search-{uuid.uuid4().hex[:8]}"
    sb = DockerSandbox(project, folder, SandboxConfig(image=IMAGE), client=client)
    try:
        await sb.start()
        tree = f"/workspace/{TREE}"
        rg_grep = ["rg", *RG_SAME_FILES, "--regexp", GREP_PATTERN, "--", tree]
        rg_glob = ["rg", "--files", *RG_SAME_FILES, "--glob", GLOB_PATTERN, "--", tree]
        sides = {
            "grep": (lambda: sb.grep(GREP_PATTERN, TREE, max_results=2000),
                     lambda: sb.exec(rg_grep, output_limit=16 << 20, timeout=120)),
            "glob": (lambda: sb.glob(GLOB_PATTERN, TREE, limit=200),
                     lambda: sb.exec(rg_glob, output_limit=16 << 20, timeout=120)),
        }  # fmt: skip
        for _tool, rg in sides.values():  # the page cache first, by rg alone (a tree read cold from disk can
            await rg()                     # take fs_grep past its 20 s deadline), then the rounds
        times: dict[str, list[float]] = {f"{k}_{side}": [] for k in sides for side in ("tool", "rg")}
        hits: dict[str, object] = {}
        for i in range(ROUNDS + 1):  # the first round warms the page cache and the search child
            for kind, (tool, rg) in sides.items():
                t_tool, out = await _timed(tool)
                t_rg, res = await _timed(rg)
                assert res.exit_code == 0, res.stderr
                hits[kind] = (len(out), res.stdout.count("\n"))
                if i:
                    times[f"{kind}_tool"].append(t_tool)
                    times[f"{kind}_rg"].append(t_rg)
        print(f"# search tree: {files} files; grep hits tool/rg {hits['grep']}, glob rg lists {hits['glob'][1]}")
        for kind in sides:
            tool, rg = p50(times[f"{kind}_tool"]), p50(times[f"{kind}_rg"])
            print(f"# {kind}: fs_{kind} p50 {tool:.1f} ms, rg alone p50 {rg:.1f} ms", flush=True)
        # fs_grep / fs_glob: the whole call (host -> helper -> search child -> rg, JSON records parsed, the
        # glob's matches stat'ed and sorted newest first, the answer back). rg: the same files and pattern,
        # by the helper's exec (a posix_spawn and its output back), rg's own defaults otherwise (threads).
        # Each round pairs the two sides back to back: the median of the rounds' ratios, with their spread.
        for kind in sides:
            ratios = [t / r for t, r in zip(times[f"{kind}_tool"], times[f"{kind}_rg"], strict=True)]
            emit(f"{kind}_tree_ratio_vs_rg", ratios, "x")
    finally:
        await sb.close()
        for c in client.containers.list(all=True, filters={"label": f"org.agent-desk.project={project}"}):
            c.remove(force=True)


def main() -> None:
    client = _engine()
    if client is None:
        return
    try:
        folder, files = _tree()
        asyncio.run(_run(client, folder, files))
    finally:
        client.close()


if __name__ == "__main__":
    main()
    sys.exit(0)
