"""Search at ripgrep speed keeps its confinement: patterns, globs and paths that try to leave /workspace,
links to / and /etc inside the tree (ripgrep, and the Python walker that stands in for it), ignore files
that try to reach out, and a flood of matches that stays capped with nothing left running. And commands
started by posix_spawn get nothing of the helper: no descriptor, no ignored or blocked signal."""

from __future__ import annotations

import json

import pytest

from desktop_app.core import PathOutsideWorkspace
from desktop_app.sandbox.helper.search import GREP_LINE_MAX

pytestmark = pytest.mark.docker
SECRET = "root:x:0:0"  # a line of the container's /etc/passwd

# The helper's own Search with rg=None (the fallback walker), run in the container from the helper's archive.
WALKER = """
import glob, sys
sys.path.insert(0, sorted(glob.glob('/tmp/.agent-desk/helper-*.pyz'))[-1])
from helper.search import Search
from helper.wire import dumps
from helper.workspace import Workspace
ws, s, inc = Workspace('/workspace', '/workspace'), Search(rg=None), sys.argv[1] == '1'
print(dumps([[m['path'] for m in s.grep(ws, sys.argv[2], include_ignored=inc)],
                  [f['path'] for f in s.glob(ws, sys.argv[3], include_ignored=inc)]]))
"""


async def _links_tree(sb) -> None:
    res = await sb.exec(
        "mkdir -p tree/sub && ln -s / tree/root && ln -s /etc tree/sub/etc && ln -s /etc/passwd tree/pw"
        " && ln -s ../tree tree/sub/loop && echo inside > tree/sub/in.txt"
        " && printf '!/../../etc\\n!etc\\n!/root/\\n' > tree/.gitignore",
        timeout=10,
    )
    assert res.exit_code == 0, res.stderr


@pytest.mark.parametrize("include_ignored", [False, True])
async def test_links_to_the_root_are_never_followed(make_docker_sandbox, include_ignored: bool) -> None:
    sb = await make_docker_sandbox()
    await _links_tree(sb)
    assert await sb.grep(SECRET, ".", include_ignored=include_ignored) == []
    assert await sb.grep("inside", "tree", include_ignored=include_ignored) != []
    for pattern in ("**/passwd", "**/etc/*", "tree/root/**", "**/shadow"):
        assert await sb.glob(pattern, ".", include_ignored=include_ignored) == [], pattern
    listed = [f.path for f in await sb.glob("**/*", ".", include_ignored=include_ignored, limit=1000)]
    assert listed and all(p.startswith("tree") for p in listed)
    assert not any(p.startswith(("tree/root/", "tree/sub/etc/", "tree/sub/loop/")) for p in listed)
    for via in ("tree/root", "tree/sub/etc", "tree/pw"):  # a link named as the path resolves out: refused
        with pytest.raises(PathOutsideWorkspace):
            await sb.grep(SECRET, via, include_ignored=include_ignored)


@pytest.mark.parametrize("include_ignored", [False, True])
async def test_the_fallback_walker_in_the_container_agrees(make_docker_sandbox, include_ignored: bool) -> None:
    """Where an image has no rg the walker runs: the same confinement and the same answer as rg."""
    sb = await make_docker_sandbox()
    await _links_tree(sb)
    await sb.write_file("ignored.log", b"inside\n")
    await sb.write_file(".gitignore", b"*.log\n")
    flag = "1" if include_ignored else "0"
    # Regular files only: the walker also lists links and empty folders, rg --files does not (as before).
    res = await sb.exec(["python3", "-I", "-S", "-c", WALKER, flag, "inside|" + SECRET, "**/*.{txt,log}"], timeout=60)
    assert res.exit_code == 0, res.stderr
    walked_grep, walked_glob = json.loads(res.stdout)
    rg_grep = [m.path for m in await sb.grep("inside|" + SECRET, ".", include_ignored=include_ignored)]
    rg_glob = [f.path for f in await sb.glob("**/*.{txt,log}", ".", include_ignored=include_ignored, limit=1000)]
    assert sorted(walked_grep) == sorted(rg_grep) == sorted(["tree/sub/in.txt"] + ["ignored.log"] * include_ignored)
    assert sorted(walked_glob) == sorted(rg_glob) == sorted(rg_grep)


async def test_patterns_and_paths_that_leave_the_workspace(make_docker_sandbox) -> None:
    sb = await make_docker_sandbox()
    await sb.write_file("a.txt", b"root:x:0:0 here\n")
    for path in ("/etc", "..", "../..", "/workspace/../etc", "//etc"):
        with pytest.raises(PathOutsideWorkspace):
            await sb.grep(SECRET, path)
        with pytest.raises(PathOutsideWorkspace):
            await sb.glob("*", path)
    with pytest.raises(PathOutsideWorkspace):
        await sb.glob("/etc/*")
    for pattern in ("../*", "../../etc/passwd", "**/../../etc/*", "/workspace/../etc/*"):
        try:
            found = await sb.glob(pattern)
        except PathOutsideWorkspace:
            continue
        assert found == [], pattern
    for glob in ("../../etc/*", "/etc/passwd", "**/../*"):
        assert [m.path for m in await sb.grep(SECRET, ".", glob=glob)] == [], glob
    # rg's own flags cannot be smuggled in as a pattern: it is passed after --regexp.
    assert await sb.grep("--files", ".") == [] and await sb.grep("--pre=sh", ".") == []


async def test_a_pattern_cannot_write_rules_into_the_globs_own_ignore_file(make_docker_sandbox) -> None:
    """fs_glob narrows rg's listing with an ignore file built from the pattern's literal end: a pattern that
    carries a newline, a `!`, a backslash or a trailing space to add a rule of its own (to take an ignored
    file back, or reach .git) gets what the regex over the full listing gets, and nothing ignored."""
    from desktop_app.core import glob_regex

    sb = await make_docker_sandbox()
    res = await sb.exec(
        "printf 'secret.log\\n*.key\\n' > .gitignore && echo s > secret.log && echo k > a.key && echo o > ok.log"
        " && mkdir -p .git sub && echo h > .git/secret.log && echo x > 'sub/x!*' && echo y > 'sub/y\\' ",
        timeout=10,
    )
    assert res.exit_code == 0, res.stderr
    every = [f.path for f in await sb.glob("**/*", limit=1000)]
    assert sorted(every) == sorted([".gitignore", "ok.log", "sub", "sub/x!*", "sub/y\\"])
    attacks = ["**/*.log\n!secret.log", "**/*\n!*.key\n", "**/*.log\r\n!**", "**/*\\\n!secret.log",
               "**/x!*", "**/*\\", "**/*.log ", "**/*\x00!secret.log", "**/*\u2028!secret.log",
               "**/.git/secret.log", "**/*!secret.log", "**/*/\n!/**"]
    for pattern in attacks:
        got = [f.path for f in await sb.glob(pattern, limit=1000)]
        assert got == [p for p in every if glob_regex(pattern).match(p)], pattern
        assert not {"secret.log", "a.key", ".git/secret.log"} & set(got), pattern


async def test_a_flood_of_matches_stays_capped_and_leaves_nothing_running(make_docker_sandbox) -> None:
    sb = await make_docker_sandbox()
    res = await sb.exec(
        "mkdir flood && seq 1 200000 | sed 's/^/hit /' > flood/lines.txt"
        " && head -c 8000000 /dev/zero | tr '\\0' 'a' | sed 's/^/hit /' > flood/one-line.txt"
        " && for i in $(seq 1 300); do echo hit > flood/f$i.txt; done",
        timeout=60,
    )
    assert res.exit_code == 0, res.stderr
    for include_ignored in (False, True):
        hits = await sb.grep("hit", ".", max_results=50, include_ignored=include_ignored)
        assert len(hits) == 50
        assert all(len(m.text) <= GREP_LINE_MAX for m in hits)
        assert hits == sorted(hits, key=lambda m: (m.path, m.line))
    long = await sb.grep("hit a", "flood/one-line.txt", max_results=5)
    assert len(long) == 1 and len(long[0].text) == GREP_LINE_MAX
    ps = await sb.exec("ps -eo args", timeout=10)
    assert not any(line.startswith("rg ") or "/rg " in line for line in ps.stdout.splitlines()), ps.stdout


async def test_a_spawned_command_inherits_nothing_of_the_helper(make_docker_sandbox) -> None:
    sb = await make_docker_sandbox()
    fds = await sb.exec("ls /proc/self/fd")
    assert set(fds.stdout.split()) <= {"0", "1", "2", "3"}, fds.stdout  # 3: ls's own opendir
    status = await sb.exec("cat /proc/self/status")
    fields = dict(line.split(":\t", 1) for line in status.stdout.splitlines() if ":\t" in line)
    # Signals 1-31 (SIGPIPE and SIGXFSZ, which Python ignores, included) at their defaults, none blocked.
    # 32 and 33 are glibc's own (threads, setxid): the engine's exec leaves 32 ignored, posix_spawn 33 too.
    assert int(fields["SigIgn"], 16) & 0x7FFFFFFF == 0 and int(fields["SigBlk"], 16) == 0, status.stdout
    stat = await sb.exec("cat /proc/self/stat")
    f = stat.stdout.rsplit(")", 1)[1].split()
    pid = int(stat.stdout.split()[0])
    assert int(f[3]) == pid and int(f[2]) == pid  # its own session and group, as start_new_session made
    devnull = await sb.exec("readlink /proc/self/fd/0")
    assert devnull.stdout.strip() == "/dev/null"
