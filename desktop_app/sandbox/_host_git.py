"""Git on the host, shut in: the one way the desk runs git on the person's machine (the git_commit tool's
status and commit; any dirty check or diff the desk makes on the host goes through `HostGit` too).

The repository is the project's, and a sandbox or a repository may have shaped it, so what git would read
and run from it is closed: no system or global configuration (an empty HOME), hooks off, fsmonitor off, no
pager, editor, credential helper, signing program or protocol, and a repository configuration that sets any
key this module does not know to be inert is refused before git runs (includes too). The `.git` file or
folder, a `commondir` file and the configuration files must resolve inside the project folder."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import shutil
import stat
import tempfile
from dataclasses import dataclass, field

from ..core import ToolInputError

GIT_TIMEOUT_S = 120.0
# Keys of a repository's configuration that make git run nothing and read nothing outside the repository.
# Closed world: anything else (core.fsmonitor, core.hooksPath, core.sshCommand, core.pager, core.editor,
# diff.external, diff.*.textconv, filter.*, merge.*.driver, gpg.program, credential.*, include.*,
# includeIf.*, alias.*, core.worktree, core.excludesFile, ...) refuses the repository.
SAFE_KEYS = (
    "core.repositoryformatversion", "core.filemode", "core.bare", "core.logallrefupdates", "core.ignorecase",
    "core.precomposeunicode", "core.symlinks", "core.autocrlf", "core.safecrlf", "core.eol", "core.quotepath",
    "core.abbrev", "core.checkstat", "core.trustctime", "core.compression", "core.loosecompression",
    "core.commentchar", "core.sharedrepository", "core.warnambiguousrefs",
    "user.name", "user.email", "init.defaultbranch", "extensions.objectformat", "extensions.worktreeconfig",
    "i18n.commitencoding", "i18n.logoutputencoding", "pull.rebase", "pull.ff", "push.default", "fetch.prune",
    "remote.*.url", "remote.*.pushurl", "remote.*.fetch", "remote.*.tagopt", "remote.*.prune",
    "branch.*.remote", "branch.*.merge", "branch.*.rebase", "branch.*.pushremote",
    "submodule.*.url", "submodule.*.active", "color.*", "advice.*",
)
# Set on every git command line, whatever the repository says (beside the refusals above).
OVERRIDES = (
    "core.hooksPath=/dev/null", "core.fsmonitor=false", "core.untrackedCache=false", "core.pager=cat",
    "core.editor=true", "core.askPass=", "credential.helper=", "commit.gpgSign=false", "tag.gpgSign=false",
    "gc.auto=0", "maintenance.auto=false", "protocol.allow=never", "submodule.recurse=false",
)


@dataclass(frozen=True, slots=True)
class Repository:
    """A project's repository, checked: the work tree, its git folder and the common folder."""

    work_tree: str
    git_dir: str
    common_dir: str
    config_files: tuple[str, ...] = ()  # the repository's configuration files that exist
    identity: dict[str, str] = field(default_factory=dict)  # GIT_AUTHOR_NAME, ...


@dataclass(frozen=True, slots=True)
class GitRun:
    code: int
    out: str
    err: str


def _refuse(what: str, hint: str) -> ToolInputError:
    return ToolInputError(what, hint=hint)


def _inside(root: str, path: str, what: str) -> str:
    real = os.path.realpath(path)
    if real != root and not real.startswith(root + os.sep):
        raise _refuse(f"{what} leads outside the project folder ({real})",
                      "the desk runs git only on a repository whose files are all in the project folder; "
                      "commit in a terminal after checking where it points")
    return real


def _pointer(path: str, prefix: str) -> str:
    """The target a `.git` file ("gitdir: ...") or a `commondir` file names, relative to its folder."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(4096).strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise _refuse(f"{path} cannot be read ({exc})", "check the repository in a terminal") from None
    if prefix:
        if not text.startswith(prefix):
            raise _refuse(f"{path} is not a gitdir file", "check the repository in a terminal")
        text = text[len(prefix):].strip()
    return os.path.join(os.path.dirname(path), text)


def locate(folder: str) -> Repository:
    """The project's repository, its `.git`, `commondir` and configuration files checked to resolve inside
    the project folder (no git runs here). ToolInputError, with the reason, when they do not."""
    root = os.path.realpath(folder)
    dotgit = os.path.join(root, ".git")
    try:
        st = os.lstat(dotgit)
    except FileNotFoundError:
        raise _refuse(f"{root} is not a git repository (no .git)", "run git init in a terminal first") from None
    if stat.S_ISLNK(st.st_mode):
        raise _refuse(f"{dotgit} is a symbolic link", "replace it with the repository folder itself")
    git_dir = dotgit if stat.S_ISDIR(st.st_mode) else _inside(root, _pointer(dotgit, "gitdir:"), "the .git file")
    git_dir = _inside(root, git_dir, ".git")
    common = os.path.join(git_dir, "commondir")
    common_dir = _inside(root, _pointer(common, ""), "the commondir file") if os.path.lexists(common) else git_dir
    files = []
    for name, base in (("config", common_dir), ("config.worktree", git_dir)):
        path = os.path.join(base, name)
        if os.path.lexists(path):
            files.append(_inside(root, path, f".git/{name}"))
    return Repository(root, git_dir, common_dir, tuple(files))


def _safe_key(key: str) -> bool:
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in SAFE_KEYS)


def git_binary() -> str:
    found = shutil.which("git", path="/usr/bin:/bin:/usr/local/bin")
    if found is None:
        raise _refuse("git is not installed on this machine", "install git, then try again")
    return found


def hardened_env(home: str, repo: Repository | None = None) -> dict[str, str]:
    """The whole environment of a host git: nothing of the desk's own (no GIT_*, no PATH of the person's)."""
    env = {
        "PATH": "/usr/bin:/bin", "HOME": home, "XDG_CONFIG_HOME": home, "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_SYSTEM": "/dev/null", "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_PAGER": "cat", "PAGER": "cat",
        "GIT_EDITOR": "true", "GIT_SEQUENCE_EDITOR": "true", "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_LITERAL_PATHSPECS": "1", "GIT_PROTOCOL_FROM_USER": "0", "GIT_OPTIONAL_LOCKS": "0",
        "GIT_CEILING_DIRECTORIES": "/",
    }
    if repo is not None:
        env |= {"GIT_DIR": repo.git_dir, "GIT_WORK_TREE": repo.work_tree, **repo.identity}
    return env


async def _run(argv: list[str], env: dict[str, str], cwd: str) -> GitRun:
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, start_new_session=True)
    try:
        async with asyncio.timeout(GIT_TIMEOUT_S):
            out, err = await proc.communicate()
    except (TimeoutError, asyncio.CancelledError):
        proc.kill()
        await proc.wait()
        raise
    return GitRun(proc.returncode or 0, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


async def config_keys(path: str, home: str) -> dict[str, str]:
    """The keys a git configuration file sets (lower-cased section and name), read without its includes."""
    run = await _run([git_binary(), "config", "--file", path, "--no-includes", "--list", "--null"],
                     hardened_env(home), home)
    if run.code != 0:
        raise _refuse(f"{path} cannot be read by git: {run.err.strip()[:300]}", "check the repository's config")
    out: dict[str, str] = {}
    for entry in filter(None, run.out.split("\0")):
        key, _, value = entry.partition("\n")
        out[key] = value
    return out


async def checked(folder: str, home: str) -> Repository:
    """`locate`, then the repository's configuration judged key by key (closed world), and the committer's
    name and email found (the repository's, else the person's own ~/.gitconfig: only those two keys)."""
    repo = await asyncio.to_thread(locate, folder)
    keys: dict[str, str] = {}
    for path in repo.config_files:
        found = await config_keys(path, home)
        bad = sorted(k for k in found if not _safe_key(k))
        if bad:
            raise _refuse(f"{path} sets {', '.join(bad[:5])}: the desk does not run git with a configuration "
                          "that can run programs or read files elsewhere",
                          "remove those keys from the repository's config, or commit in a terminal")
        keys |= found
    identity = {}
    for part, env_names in (("name", ("GIT_AUTHOR_NAME", "GIT_COMMITTER_NAME")),
                            ("email", ("GIT_AUTHOR_EMAIL", "GIT_COMMITTER_EMAIL"))):
        value = keys.get(f"user.{part}") or await _person_identity(part, home)
        if value:
            identity |= dict.fromkeys(env_names, value)
    return Repository(repo.work_tree, repo.git_dir, repo.common_dir, repo.config_files, identity)


def _person_config_files() -> list[str]:
    real_home = os.path.expanduser("~")
    candidates = (os.path.join(real_home, ".gitconfig"), os.path.join(real_home, ".config", "git", "config"))
    return [path for path in candidates if os.path.isfile(path)]


async def _person_identity(part: str, home: str) -> str:
    """user.name or user.email from the person's own git configuration, read as data (git config --get)."""
    for path in await asyncio.to_thread(_person_config_files):
        run = await _run([git_binary(), "config", "--file", path, "--get", f"user.{part}"],
                         hardened_env(home), home)
        if run.code == 0 and run.out.strip():
            return run.out.strip()
    return ""


async def host_git(repo: Repository, *args: str, home: str) -> GitRun:
    """Run `git <args>` on a checked repository with the hardened environment and overrides."""
    overrides = [part for o in (*OVERRIDES, f"safe.directory={repo.work_tree}") for part in ("-c", o)]
    argv = [git_binary(), "--no-pager", *overrides, *args]
    return await _run(argv, hardened_env(home, repo), repo.work_tree)


class HostGit:
    """A checked repository and an empty HOME of its own, for a few git commands: `async with
    HostGit(folder) as git: await git("status", "--short")`."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self._home: tempfile.TemporaryDirectory[str] | None = None
        self.repo: Repository | None = None

    async def __aenter__(self) -> HostGit:
        self._home = tempfile.TemporaryDirectory(prefix="agent-desk-git-")
        try:
            self.repo = await checked(self.folder, self._home.name)
        except BaseException:
            self._home.cleanup()
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._home is not None:
            self._home.cleanup()

    async def __call__(self, *args: str) -> GitRun:
        assert self.repo is not None and self._home is not None
        return await host_git(self.repo, *args, home=self._home.name)


class ProjectGit:
    """The project's repository as the git_commit tool uses it (tools/_git_commit.py): what a commit would
    take, and the commit. Pathspecs are workspace-relative and literal; refusals are ToolInputError."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    async def status(self, paths: list[str]) -> str:
        async with HostGit(self.folder) as git:
            run = await git("status", "--short", "--untracked-files=all", "--", *(paths or ["."]))
        if run.code != 0:
            raise ToolInputError(f"git status failed: {run.err.strip()[:500]}")
        return run.out

    async def commit(self, message: str, paths: list[str]) -> dict[str, object]:
        """Add the paths (all changes when none), commit them: {commit, branch, subject, files}."""
        async with HostGit(self.folder) as git:
            return await _commit(git, message, paths)


async def _commit(git: HostGit, message: str, paths: list[str]) -> dict[str, object]:
    spec = ["--", *(paths or ["."])]
    added = await git("add", "-A", *spec)
    if added.code != 0:
        raise ToolInputError(f"git add failed: {added.err.strip()[:500]}", hint="check the paths")
    staged = await git("diff", "--cached", "--name-only", "-z", "--no-ext-diff", "--no-textconv", *spec)
    files = [f for f in staged.out.split("\0") if f]
    if not files:
        raise ToolInputError("nothing to commit: the workspace has no change" + (" in those paths" if paths else ""))
    done = await git("commit", "--quiet", "--no-verify", "--no-gpg-sign", "--no-edit", "-m", message,
                     *(spec if paths else []))
    if done.code != 0:
        who = "tell me who you are" in done.err
        raise ToolInputError(f"git commit failed: {(done.err or done.out).strip()[:500]}",
                             hint="set user.name and user.email in ~/.gitconfig or the repository's config" if who
                             else "check the repository in a terminal")
    head = await git("log", "-1", "--format=%H%x00%D%x00%s")
    sha, refs, subject = [*head.out.rstrip("\n").split("\0"), "", ""][:3]
    branch = refs.removeprefix("HEAD -> ").split(",")[0] if refs.startswith("HEAD -> ") else "(detached HEAD)"
    return {"commit": sha, "branch": branch, "subject": subject, "files": files}
