"""The desk's own writes into a project never follow a link the sandbox planted: a link at every name the
desk writes (rules.toml, rules.tmp, its temp names, `.agent-desk` itself, a parent folder), pointing at a
fake ~/.bashrc or a folder outside, leaves the outside untouched, and the write lands safely or fails
clearly. Links are planted from a real container too, and a racing thread swaps them during 500 writes."""

from __future__ import annotations

import ctypes
import os
import secrets
import threading
from pathlib import Path

import pytest

from desktop_app.config import trusted_rules
from desktop_app.core import ConfigError, Rule, append_project_rule, make_dirs_beneath, read_beneath, write_beneath
from desktop_app.runtime import append_trusted_rule, write_project_rules

BASHRC = "# the person's own shell start-up\nexport PATH=$HOME/bin:$PATH\n"
RULE = Rule.parse("bash_run(npm test *)", "allow")


@pytest.fixture
def home(tmp_path: Path, desk_env: Path) -> Path:
    """A fake home outside the project with a ~/.bashrc; settings and the trust record kept in tmp."""
    h = tmp_path / "home"
    h.mkdir()
    (h / ".bashrc").write_text(BASHRC)
    return h


@pytest.fixture
def project(tmp_path: Path) -> Path:
    p = tmp_path / "project"
    (p / ".agent-desk").mkdir(parents=True)
    return p


def _outside_untouched(home: Path, names: set[str] = frozenset({".bashrc"})) -> None:
    assert (home / ".bashrc").read_text() == BASHRC
    assert {p.name for p in home.iterdir()} == set(names)


# the three writers of the desk: "Always allow" (core and runtime) and the settings dialog --------------------
WRITERS = {
    "always-allow": lambda proj: append_trusted_rule(proj, RULE),
    "core-append": lambda proj: append_project_rule(proj, RULE),
    "settings-dialog": lambda proj: write_project_rules(proj, '[permissions]\nallow = ["bash_run(npm test *)"]\n'),
}


@pytest.mark.parametrize("writer", sorted(WRITERS))
@pytest.mark.parametrize("name", ["rules.toml", "rules.tmp", ".rules.toml.tmp"])
def test_a_link_at_a_written_name_is_replaced_or_ignored_never_followed(writer, name, project, home):
    (project / ".agent-desk" / name).symlink_to(home / ".bashrc")
    if name == "rules.toml" and writer != "settings-dialog":  # these read the file first: a link is refused
        with pytest.raises(ConfigError, match="symbolic link"):
            WRITERS[writer](project)
        _outside_untouched(home)
        (project / ".agent-desk" / name).unlink()
        (project / ".agent-desk" / name).symlink_to(home / "created-by-the-desk")  # a dangling link
        with pytest.raises(ConfigError, match="symbolic link"):
            WRITERS[writer](project)
        _outside_untouched(home)
        return
    WRITERS[writer](project)
    _outside_untouched(home)
    rules = project / ".agent-desk" / "rules.toml"
    assert not rules.is_symlink() and "npm test" in rules.read_text()  # the settings dialog replaced a link
    if name != "rules.toml":
        assert (project / ".agent-desk" / name).is_symlink()  # left alone: the desk no longer writes rules.tmp


def test_the_settings_dialog_replaces_a_link_at_rules_toml(project, home):
    """The settings dialog does not read first: the link itself is replaced by a regular file."""
    rules = project / ".agent-desk" / "rules.toml"
    rules.symlink_to(home / ".bashrc")
    write_project_rules(project, 'deny = ["bash_run(curl *)"]\n')
    _outside_untouched(home)
    assert not rules.is_symlink() and rules.read_text() == 'deny = ["bash_run(curl *)"]\n'


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_a_linked_control_folder_is_refused(writer, project, home):
    (project / ".agent-desk" / "rules.toml").unlink(missing_ok=True)
    (project / ".agent-desk").rmdir()
    (project / ".agent-desk").symlink_to(home)
    with pytest.raises(ConfigError, match=r"\.agent-desk.*symbolic link"):
        WRITERS[writer](project)
    _outside_untouched(home)
    assert trusted_rules(project) is None  # nothing trusted for a write that did not happen


def test_a_linked_parent_component_is_refused_and_a_missing_one_is_made(project, home):
    (project / "src").symlink_to(home)
    with pytest.raises(ConfigError, match="symbolic link"):
        write_beneath(project, "src/cfg/.bashrc", "pwned\n")
    with pytest.raises(ConfigError, match="symbolic link"):
        make_dirs_beneath(project, "src/sub")
    _outside_untouched(home)
    write_beneath(project, "a/b/c/new.txt", "ok\n")  # missing parents are made, beneath the project
    assert (project / "a" / "b" / "c" / "new.txt").read_text() == "ok\n"


def test_a_link_at_a_guessed_temp_name_is_skipped(project, home, monkeypatch):
    """The sandbox cannot know the random temp name; even if it guessed it, O_EXCL refuses the link."""
    draws = iter(["guessed", "guessed", "fresh"])
    monkeypatch.setattr(secrets, "token_hex", lambda n=None: next(draws))
    (project / ".agent-desk" / ".rules.toml.guessed.tmp").symlink_to(home / ".bashrc")
    write_beneath(project, ".agent-desk/rules.toml", "x = 1\n")
    _outside_untouched(home)
    assert (project / ".agent-desk" / "rules.toml").read_text() == "x = 1\n"
    assert not (project / ".agent-desk" / ".rules.toml.fresh.tmp").exists()  # renamed into place


def test_a_hard_link_at_the_rules_file_is_replaced_not_written_through(project, home):
    """A hard link to an outside file (LocalSandbox on the same filesystem): the rename replaces the
    name, so the outside inode keeps its text."""
    os.link(home / ".bashrc", project / ".agent-desk" / "rules.toml")
    write_project_rules(project, "allow = []\n")
    _outside_untouched(home)
    assert (project / ".agent-desk" / "rules.toml").read_text() == "allow = []\n"


def test_special_files_are_refused_on_read_and_replaced_on_write(project, home):
    rules = project / ".agent-desk" / "rules.toml"
    os.mkfifo(rules)  # an open() that would block the desk for good
    with pytest.raises(ConfigError, match="not a regular file"):
        read_beneath(project, ".agent-desk/rules.toml")
    write_project_rules(project, "allow = []\n")
    assert rules.read_text() == "allow = []\n"
    rules.unlink()
    rules.mkdir()
    with pytest.raises(ConfigError, match=r"rules\.toml"):
        write_project_rules(project, "allow = []\n")
    with pytest.raises(ConfigError, match="not a regular file"):
        read_beneath(project, ".agent-desk/rules.toml")
    _outside_untouched(home)


def test_reads_refuse_links_and_oversized_files(project, home):
    (home / "rules.toml").write_text('allow = ["*"]\n')
    rules = project / ".agent-desk" / "rules.toml"
    rules.symlink_to(home / "rules.toml")
    with pytest.raises(ConfigError, match=r"refusing to read .*rules\.toml"):
        read_beneath(project, ".agent-desk/rules.toml")
    rules.unlink()
    rules.write_bytes(b"#" * 2048)
    with pytest.raises(ConfigError, match="over 1024 bytes"):
        read_beneath(project, ".agent-desk/rules.toml", limit=1024)
    assert read_beneath(project, ".agent-desk/missing.toml") is None
    assert read_beneath(project, "no-such-folder/rules.toml") is None


@pytest.mark.parametrize("rel", ["/etc/passwd", "../x", "a/../../x", "./x", "a//b", ""])
def test_paths_that_are_not_plainly_beneath_are_refused(rel, project):
    with pytest.raises(ConfigError, match="plain relative path"):
        write_beneath(project, rel, "x")


# links planted from inside a real container -------------------------------------------------------------------
async def test_links_planted_by_the_sandbox_are_not_followed_by_host_writes(make_docker_sandbox, workspace, home):
    """The container plants links in the shared folder (a parent folder, a file, a dangling one) at names
    the host then writes: nothing lands outside, and the host's writes land in the project or fail."""
    sb = await make_docker_sandbox()
    res = await sb.exec(
        "mkdir -p real && ln -s /etc cfg && ln -s /workspace/../../../../ up && "
        "ln -s /tmp/nowhere real/notes.txt && ln -s ../real/notes.txt real/alias.txt && echo planted",
        timeout=30)
    assert "planted" in res.stdout, res
    for rel in ("cfg/passwd", "up/owned.txt"):
        with pytest.raises(ConfigError, match="symbolic link"):
            write_beneath(workspace, rel, "owned\n")
    write_beneath(workspace, "real/notes.txt", "safe\n")  # the dangling link is replaced by a file
    assert not (workspace / "real" / "notes.txt").is_symlink()
    assert (workspace / "real" / "notes.txt").read_text() == "safe\n"
    with pytest.raises(ConfigError, match="symbolic link"):
        read_beneath(workspace, "real/alias.txt")
    _outside_untouched(home)
    seen = await sb.exec("cat /workspace/real/notes.txt; ls /tmp/nowhere 2>&1 || true", timeout=30)
    assert "safe" in seen.stdout and "No such file" in seen.stdout + seen.stderr


# the race -------------------------------------------------------------------------------------------------------
_LIBC = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


def _exchange(a: Path, b: Path) -> None:
    """renameat2(RENAME_EXCHANGE): `a` and `b` trade places in one step, so a folder becomes a link
    atomically (what a process in the sandbox can do to the shared folder)."""
    if _LIBC.renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _swapper(project: Path, home: Path, stop: threading.Event, swaps: list[int]) -> threading.Thread:
    """Keeps exchanging `.agent-desk` with a link to the outside folder, and rules.toml inside it with a
    link to the outside ~/.bashrc, and back."""
    ctl, ctl_link = project / ".agent-desk", project / ".swap-dir"
    rules, rules_link = ctl / "rules.toml", ctl / ".swap-file"
    os.symlink(home, ctl_link)

    def run() -> None:
        while not stop.is_set():
            for a, b in ((ctl, ctl_link), (ctl, ctl_link), (rules, rules_link), (rules, rules_link)):
                try:
                    if b == rules_link and not os.path.lexists(rules_link):
                        os.symlink(home / ".bashrc", rules_link)
                    _exchange(a, b)
                    swaps[0] += 1
                except OSError:
                    pass  # rules.toml not there yet, or the desk's rename won this step

    return threading.Thread(target=run, daemon=True)


@pytest.mark.parametrize("writer", ["settings-dialog", "always-allow"])
def test_a_component_swapped_for_a_link_during_500_writes_never_sends_a_write_outside(writer, project, home):
    stop, swaps = threading.Event(), [0]
    t = _swapper(project, home, stop, swaps)
    t.start()
    landed = refused = 0
    try:
        for _ in range(500):
            try:
                WRITERS[writer](project)
                landed += 1
            except ConfigError:
                refused += 1
    finally:
        stop.set()
        t.join(10)
    assert landed + refused == 500 and swaps[0] > 0
    _outside_untouched(home)
    stray = [p for p in home.rglob("*") if p.name != ".bashrc"]
    assert stray == []
