"""A project's own sandbox image: `.agent-desk/Dockerfile`, or `.devcontainer/devcontainer.json` (its `image`, or
`build.dockerfile` and `build.context`). Read without following links, digested over exactly the bytes sent to
the engine, built (or pulled) only when a person asks, and tagged per project and digest."""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

from ...core import ConfigError, SandboxError, read_beneath
from .._client import connect
from ._build_context import CA_FILE, _bundle_bytes, build_ca_bundle, build_network, build_proxy_args
from ._cancel import BuildCancel, cancellable

if TYPE_CHECKING:
    import docker

Progress = Callable[[str], None]

PROJECT_DOCKERFILE = ".agent-desk/Dockerfile"  # built with .agent-desk/ as its context
DEVCONTAINER_FILES = (".devcontainer/devcontainer.json", ".devcontainer.json")
IMAGE_REPOSITORY = "agent-desk/project-"
LABEL_DIGEST = "org.agent-desk.project-image.digest"
LABEL_SOURCE = "org.agent-desk.project-image.source"
OUTSIDE_DOCKERFILE = "agent-desk-project.Dockerfile"  # a Dockerfile outside its context, sent beside it
MAX_CONTEXT_BYTES = 512 * 1024**2
MAX_CONTEXT_FILES = 50_000
MAX_SPEC_BYTES = 1024**2

# What a devcontainer may ask for that would loosen the sandbox: never applied, said in a notice.
_LOOSENING = {
    "privileged": "the sandbox never runs privileged",
    "capAdd": "every capability stays dropped",
    "securityOpt": "the sandbox keeps its own security options",
    "mounts": "only the project folder is mounted",
    "workspaceMount": "only the project folder is mounted, at /workspace",
    "runArgs": "docker run arguments are not passed",
    "appPort": "no port is published",
    "forwardPorts": "no port is published",
    "containerEnv": "the image's own ENV applies; nothing is added at run time",
    "remoteEnv": "nothing is added at run time",
    "remoteUser": "the sandbox runs as the project folder's owner (uid 1000 for a root-owned folder)",
    "containerUser": "the sandbox runs as the project folder's owner (uid 1000 for a root-owned folder)",
    "features": "features are not installed: put what they add in the Dockerfile",
    "hostRequirements": "the project settings' limits apply",
}
_LIFECYCLE = ("initializeCommand", "onCreateCommand", "updateContentCommand", "postCreateCommand",
              "postStartCommand", "postAttachCommand")
_BUILD_IGNORED = {"options": "docker build options are not passed", "cacheFrom": "no cache source is pulled"}


@dataclass(frozen=True, slots=True)
class ProjectImageSource:
    """Where a project's image comes from: `path` (the file, relative to the project) and either a build
    (`dockerfile` and `context`, relative to the project) or an `image` reference; `notices` say what of the
    file is not applied, and why."""

    path: str
    dockerfile: str = ""
    context: str = ""
    image: str = ""
    build_args: dict[str, str] = field(default_factory=dict)
    target: str = ""
    notices: tuple[str, ...] = ()

    @property
    def builds(self) -> bool:
        return bool(self.dockerfile)

    @property
    def name(self) -> str:
        """How a person names the file: "Dockerfile" or "devcontainer.json"."""
        return PurePosixPath(self.path).name


@dataclass(frozen=True, slots=True)
class ProjectImageBuild:
    tag: str
    digest: str
    image_id: str
    source: ProjectImageSource


def find_project_image(folder: str | os.PathLike[str]) -> ProjectImageSource | None:
    """The project's image file, read without following links: `.agent-desk/Dockerfile` first, then a
    devcontainer. None when it has none; ConfigError when the file cannot be read or asks for the impossible."""
    if read_beneath(folder, PROJECT_DOCKERFILE, limit=MAX_SPEC_BYTES) is not None:
        return ProjectImageSource(PROJECT_DOCKERFILE, dockerfile=PROJECT_DOCKERFILE, context=".agent-desk")
    for rel in DEVCONTAINER_FILES:
        data = read_beneath(folder, rel, limit=MAX_SPEC_BYTES)
        if data is not None:
            return _devcontainer(rel, _parse_jsonc(rel, data))
    return None


def project_image_files(folder: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """Every image file the project has, in the order they are looked for, each with whether it is used and
    why: a person with both a Dockerfile and a devcontainer sees which one wins (never one silently)."""
    found: list[str] = []
    for rel in (PROJECT_DOCKERFILE, *DEVCONTAINER_FILES):
        try:
            present = read_beneath(folder, rel, limit=MAX_SPEC_BYTES) is not None
        except ConfigError:
            present = True  # there, but unreadable (a link, too large): still listed, find_project_image says why
        if present:
            found.append(rel)
    out = []
    for i, rel in enumerate(found):
        if i:
            out.append((rel, f"not used: {found[0]} comes first"))
        elif len(found) == 1:
            out.append((rel, "used"))
        elif rel == PROJECT_DOCKERFILE:
            out.append((rel, "used: the desk's own Dockerfile comes before a devcontainer"))
        else:
            out.append((rel, "used: .devcontainer/devcontainer.json comes before .devcontainer.json"))
    return out


def _parse_jsonc(rel: str, data: bytes) -> dict[str, Any]:
    """devcontainer.json is JSON with comments and trailing commas: JSON5 reads both."""
    import json5

    try:
        spec = json5.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{rel} is not valid JSON: {str(exc)[:200]}",
                          hint="fix the file (comments and trailing commas are fine)") from None
    if not isinstance(spec, dict):
        raise ConfigError(f"{rel} is not a JSON object", hint='write it like {"image": "debian:12"}')
    return spec


def _devcontainer(rel: str, spec: dict[str, Any]) -> ProjectImageSource:
    here = PurePosixPath(rel).parent
    notices = [f"{key} ignored: {why}" for key, why in _LOOSENING.items() if key in spec]
    notices += [f"{key} not run: the desk runs no command from the project's files" for key in _LIFECYCLE
                if key in spec]
    if "dockerComposeFile" in spec:
        raise ConfigError(f"{rel} uses Docker Compose", hint="point it at an image or a Dockerfile instead")
    build = spec.get("build") or {}
    if not isinstance(build, dict):
        raise ConfigError(f"{rel}: build must be an object")
    dockerfile = build.get("dockerfile") or spec.get("dockerFile")
    if dockerfile:
        notices += [f"build.{key} ignored: {why}" for key, why in _BUILD_IGNORED.items() if key in build]
        context = build.get("context") or spec.get("context") or "."
        args = build.get("args") or {}
        if not isinstance(args, dict) or not all(isinstance(v, str) for v in args.values()):
            raise ConfigError(f"{rel}: build.args must map names to strings")
        return ProjectImageSource(rel, dockerfile=_inside(rel, here / str(dockerfile)),
                                  context=_inside(rel, here / str(context)), build_args=dict(args),
                                  target=str(build.get("target") or ""), notices=tuple(notices))
    image = spec.get("image")
    if not isinstance(image, str) or not image.strip():
        raise ConfigError(f"{rel} names neither an image nor a build.dockerfile",
                          hint='add "image": "…" or "build": {"dockerfile": "Dockerfile"}')
    from ._catalog import resolve_image

    return ProjectImageSource(rel, image=resolve_image(image), notices=tuple(notices))


def _inside(rel: str, path: PurePosixPath) -> str:
    """`path` normalised, refused when it leaves the project (`..` past its root, or absolute)."""
    parts: list[str] = []
    for part in path.parts:
        if part == "/" or part.startswith("/"):
            raise ConfigError(f"{rel} names an absolute path ({path})", hint="paths are relative to the file")
        if part == "..":
            if not parts:
                raise ConfigError(f"{rel} names {path}, outside the project",
                                  hint="the Dockerfile and its context must be inside the project folder")
            parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts) or "."


# the context: walked without following links, digested over the bytes that are sent ------------------
def _ignore_patterns(root: Path, context: str) -> list[str]:
    """The context's .dockerignore, as `docker build` reads it (read without following links)."""
    data = read_beneath(root, ".dockerignore" if context == "." else f"{context}/.dockerignore")
    lines = (data or b"").decode("utf-8", "replace").splitlines()
    return [s.strip() for s in lines if s.strip() and not s.lstrip().startswith("#")]


def _context_entries(root: Path, keep: Callable[[str], bool]) -> Iterator[tuple[str, os.stat_result]]:
    """(relative path, lstat) of everything under `root`, sorted, links not followed."""
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            if not keep(rel):
                continue
            st = entry.stat(follow_symlinks=False)
            yield rel, st
            if stat.S_ISDIR(st.st_mode):
                stack.append(rel)


class _HashingReader(io.RawIOBase):
    def __init__(self, fh: IO[bytes], digest: Any) -> None:
        self._fh, self._digest = fh, digest

    def read(self, n: int = -1) -> bytes:
        data = self._fh.read(n)
        self._digest.update(data)
        return data


@dataclass(slots=True)
class _Context:
    tar: IO[bytes]
    digest: str
    dockerfile: str  # its name inside the tar


def pack_context(folder: str | os.PathLike[str], source: ProjectImageSource, *, with_ca: bool = True) -> _Context:
    """The build context as a tar (spooled to disk when large) and the sha256 of what it holds: every path,
    its kind, its executable bit, a link's target and a file's bytes, as read into the tar; the build's
    arguments and target too. The host's CA bundle rides along (not digested: it is the host's)."""
    root = Path(os.path.realpath(folder))
    context = root / source.context
    if not context.is_dir() or os.path.realpath(context) != os.path.normpath(context):
        raise ConfigError(f"the build context {source.context} of {source.path} is not a folder of the project",
                          hint="name a folder inside the project, reached without a symbolic link")
    matcher = _matcher(root, source.context)
    digest = hashlib.sha256(repr((source.path, source.dockerfile, sorted(source.build_args.items()),
                                  source.target)).encode())
    out = tempfile.SpooledTemporaryFile(max_size=16 * 1024 * 1024)
    total, count = 0, 0
    with tarfile.open(fileobj=out, mode="w") as tar:
        for rel, st in _context_entries(context, lambda r: not matcher(r)):
            count += 1
            total += st.st_size if stat.S_ISREG(st.st_mode) else 0
            if total > MAX_CONTEXT_BYTES or count > MAX_CONTEXT_FILES:
                raise ConfigError(f"the build context {source.context} is too large (over "
                                  f"{MAX_CONTEXT_BYTES // 1024**2} MiB or {MAX_CONTEXT_FILES} files)",
                                  hint="add a .dockerignore beside it, or give the Dockerfile its own folder")
            _add_entry(tar, context, rel, st, digest)
        dockerfile = _add_dockerfile(tar, root, context, source, digest, matcher)
        if with_ca:
            bundle = _bundle_bytes(build_ca_bundle())
            info = tarfile.TarInfo(CA_FILE)
            info.size, info.mode = len(bundle), 0o644
            tar.addfile(info, io.BytesIO(bundle))
    out.seek(0)
    return _Context(out, digest.hexdigest(), dockerfile)


def _matcher(root: Path, context: str) -> Callable[[str], bool]:
    """Whether a path of the context is left out: .dockerignore's patterns, and a stray CA file name."""
    from docker.utils.build import PatternMatcher

    matcher = PatternMatcher(_ignore_patterns(root, context))
    return lambda rel: rel == CA_FILE or matcher.matches(rel)


def _add_entry(tar: tarfile.TarFile, context: Path, rel: str, st: os.stat_result, digest: Any) -> None:
    info = tarfile.TarInfo(rel)
    info.mode, info.mtime = stat.S_IMODE(st.st_mode), 0  # mtime 0: the same bytes give the same layers
    if stat.S_ISDIR(st.st_mode):
        info.type = tarfile.DIRTYPE
        digest.update(f"d {rel}\0".encode())
        tar.addfile(info)
    elif stat.S_ISLNK(st.st_mode):
        info.type, info.linkname = tarfile.SYMTYPE, os.readlink(context / rel)
        digest.update(f"l {rel}\0{info.linkname}\0".encode())
        tar.addfile(info)
    elif stat.S_ISREG(st.st_mode):
        fd = os.open(context / rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            info.size = size
            digest.update(f"f {rel}\0{st.st_mode & 0o111:o}\0{size}\0".encode())
            tar.addfile(info, _HashingReader(fh, digest))
    # sockets, FIFOs and devices are not part of a build context


def _add_dockerfile(tar: tarfile.TarFile, root: Path, context: Path, source: ProjectImageSource,
                    digest: Any, ignored: Callable[[str], bool]) -> str:
    """The Dockerfile's name in the tar: its own path when inside the context (and sent), else a copy beside
    it (outside the context, or left out by .dockerignore: `docker build` sends it anyway)."""
    data = read_beneath(root, source.dockerfile, limit=MAX_SPEC_BYTES)
    if data is None:
        raise ConfigError(f"{source.path} names the Dockerfile {source.dockerfile}, which does not exist")
    inside = source.context == "." or source.dockerfile.startswith(source.context.rstrip("/") + "/")
    rel = source.dockerfile if source.context == "." else source.dockerfile[len(source.context) + 1:]
    if inside and not ignored(rel) and (context / rel).is_file() and not (context / rel).is_symlink():
        return rel
    info = tarfile.TarInfo(OUTSIDE_DOCKERFILE)
    info.size, info.mode = len(data), 0o644
    digest.update(b"D\0" + hashlib.sha256(data).digest())
    tar.addfile(info, io.BytesIO(data))
    return OUTSIDE_DOCKERFILE


def project_image_digest(folder: str | os.PathLike[str], source: ProjectImageSource) -> str:
    """What the project's image would be built from now (the same digest a build of it is tagged with)."""
    if not source.builds:
        return hashlib.sha256(f"image {source.image}".encode()).hexdigest()
    ctx = pack_context(folder, source, with_ca=False)
    ctx.tar.close()
    return ctx.digest


def project_image_tag(project_id: str, name: str, digest: str) -> str:
    """agent-desk/project-<name>-<id hash>:<digest>: one repository per project, one tag per content."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:40] or "project"
    return f"{IMAGE_REPOSITORY}{slug}-{hashlib.sha256(project_id.encode()).hexdigest()[:8]}:{digest[:16]}"


# building --------------------------------------------------------------------------------------------
def build_project_image(folder: str | os.PathLike[str], *, project_id: str, name: str,
                        on_progress: Progress | None = None, client: docker.DockerClient | None = None,
                        nocache: bool = False, cancel: BuildCancel | None = None) -> ProjectImageBuild:
    """Build (or, for a devcontainer's `image`, pull when missing and tag) the project's image, its lines to
    `on_progress`; `cancel` stops it for real (BuildCancelled). Only a person's click or command calls this.
    Blocking: run it in a thread."""
    source = find_project_image(folder)
    if source is None:
        raise ConfigError("this project has no image of its own",
                          hint=f"add {PROJECT_DOCKERFILE} or .devcontainer/devcontainer.json")
    say = on_progress or (lambda _line: None)
    for notice in source.notices:
        say(f"note: {notice}")
    for arg, value in sorted(source.build_args.items()):
        say(f"build argument from {source.path}: {arg}={value}")
    client = client if client is not None else connect()
    with cancellable(client, cancel):
        if not source.builds:
            return _use_reference(client, source, project_id, name, say)
        ctx = pack_context(folder, source)
        tag = project_image_tag(project_id, name, ctx.digest)
        try:
            _stream_build(client, ctx, source, tag, say, nocache=nocache)
        finally:
            ctx.tar.close()
        if cancel is not None:
            cancel.check()
        return ProjectImageBuild(tag, ctx.digest, client.images.get(tag).id, source)


def _stream_build(client: docker.DockerClient, ctx: _Context, source: ProjectImageSource, tag: str, say: Progress,
                  *, nocache: bool) -> None:
    import docker.errors

    try:
        for chunk in client.api.build(
            fileobj=ctx.tar, custom_context=True, dockerfile=ctx.dockerfile, tag=tag,
            buildargs={**source.build_args, **build_proxy_args()}, target=source.target or None,
            network_mode=build_network(), labels={LABEL_DIGEST: ctx.digest, LABEL_SOURCE: source.path},
            decode=True, rm=True, forcerm=True, pull=False, nocache=nocache,
        ):
            if "error" in chunk:
                raise SandboxError(f"building the project's image failed: {chunk['error'].strip()}",
                                   hint=f"fix {source.dockerfile} and click Build again")
            for line in (chunk.get("stream") or chunk.get("status") or "").splitlines():
                if line.strip():
                    say(line)
    except docker.errors.APIError as exc:
        raise SandboxError(f"building the project's image failed: {exc.explanation or exc}") from None


def _use_reference(client: docker.DockerClient, source: ProjectImageSource, project_id: str, name: str,
                   say: Progress) -> ProjectImageBuild:
    """A devcontainer's `image`: pulled when this engine lacks it, then tagged for the project (so a later
    change of the reference, or of what it points to, is never picked up without a click)."""
    import docker.errors

    try:
        image = client.images.get(source.image)
        say(f"{source.image} is on this engine")
    except docker.errors.ImageNotFound:
        say(f"pulling {source.image}")
        try:
            for chunk in client.api.pull(source.image, stream=True, decode=True):
                if chunk.get("status"):
                    say(" ".join(str(chunk.get(k, "")) for k in ("id", "status", "progress")).strip())
            image = client.images.get(source.image)
        except docker.errors.APIError as exc:
            raise SandboxError(f"cannot pull {source.image}: {exc.explanation or exc}",
                               hint="build or pull it yourself, or name another image") from None
    digest = project_image_digest("", source)
    tag = project_image_tag(project_id, name, digest)
    repository, _, version = tag.rpartition(":")
    image.tag(repository, version)
    say(f"tagged {tag}")
    return ProjectImageBuild(tag, digest, image.id, source)


def refuse_loosening(image: Any) -> None:
    """An image that would loosen the sandbox whatever the container asks: a VOLUME is a writable mount
    beside the read-only root, so such an image is refused (ENTRYPOINT and HEALTHCHECK are reset at create)."""
    volumes = sorted(((getattr(image, "attrs", None) or {}).get("Config") or {}).get("Volumes") or {})
    if volumes:
        shown = ", ".join(volumes[:3]) + ("…" if len(volumes) > 3 else "")
        raise SandboxError(f"the sandbox image declares VOLUME {shown}: it would be writable beside the "
                           "read-only root, so the image is not used",
                           hint="remove the VOLUME line from its Dockerfile and build it again")
