"""The image catalog: what sandbox_images/images.toml offers, what is built on this engine, and
building an image (the registry-free base first, when missing) with streamed progress."""

from __future__ import annotations

import os
import re
import subprocess
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...core import ConfigError, SandboxError
from .._client import connect
from ._base_plan import BasePlan, plan_for
from ._build_context import build_context, build_network, build_proxy_args
from ._cancel import BuildCancel, cancellable

if TYPE_CHECKING:
    import docker

Progress = Callable[[str], None]
DEFAULT_BASE = "agent-desk/base:bookworm"


@dataclass(frozen=True, slots=True)
class ImageSpec:
    name: str
    label: str
    description: str
    contains: tuple[str, ...]
    dockerfile: Path
    tag: str


@dataclass(frozen=True, slots=True)
class ImageStatus:
    spec: ImageSpec
    present: bool
    image_id: str = ""  # sha256:... (the digest shown by describe())
    size: int = 0
    created: str = ""


def images_dir() -> Path:
    """sandbox_images/: $AGENT_DESK_IMAGES_DIR, else the package's own copy (desktop_app/sandbox_images in
    a wheel, a bundle or the .deb), else the checkout's sandbox_images/ next to desktop_app/."""
    env = os.environ.get("AGENT_DESK_IMAGES_DIR")
    if env:
        if (Path(env) / "images.toml").is_file():
            return Path(env)
        raise ConfigError(
            f"AGENT_DESK_IMAGES_DIR={env} has no images.toml",
            hint="point it at the sandbox_images folder of an agent-desk checkout",
        )
    pkg = Path(__file__).resolve().parents[2]  # desktop_app/
    # The copy shipped inside the package (wheel, bundle, .deb) first; the checkout's own folder only in a
    # checkout: a stray site-packages/sandbox_images from another distribution is never the catalog.
    candidates = [pkg / "sandbox_images"]
    if (pkg.parent / "pyproject.toml").is_file():
        candidates.append(pkg.parent / "sandbox_images")
    for c in candidates:
        if (c / "images.toml").is_file():
            return c
    raise ConfigError(
        "cannot find sandbox_images/images.toml",
        hint="set AGENT_DESK_IMAGES_DIR to the sandbox_images folder of an agent-desk checkout",
    )


def _manifest(directory: Path | None = None) -> tuple[Path, dict[str, Any]]:
    d = directory or images_dir()
    try:
        with open(d / "images.toml", "rb") as fh:
            return d, tomllib.load(fh)
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read {d / 'images.toml'}: {exc}") from None


def load_catalog(directory: Path | None = None) -> dict[str, ImageSpec]:
    """Image name -> spec, in manifest order."""
    d, data = _manifest(directory)
    out = {}
    for name, e in (data.get("images") or {}).items():
        try:
            out[name] = ImageSpec(
                name=name,
                label=e.get("label", name),
                description=e.get("description", ""),
                contains=tuple(e.get("contains", ())),
                dockerfile=d / e["dockerfile"],
                tag=e["tag"],
            )
        except KeyError as exc:
            raise ConfigError(f"images.toml: image {name!r} lacks {exc.args[0]!r}") from None
    return out


def base_image(directory: Path | None = None) -> str:
    return os.environ.get("AGENT_DESK_BASE_IMAGE") or (_manifest(directory)[1].get("base") or {}).get(
        "base_image", DEFAULT_BASE
    )


def image_name_for_tag(tag: str) -> str | None:
    try:
        catalog = load_catalog()
    except ConfigError:
        return None
    for spec in catalog.values():
        if spec.tag == tag or spec.tag.split(":")[0] == tag:
            return spec.name
    return None


# Docker's reference grammar (distribution/reference), written so that no string has two parses (its
# separator `[-]*` may be empty; here `-+`), so a failing match stays linear; names are capped first anyway.
_HOST_PART = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
# a first part is a registry host only with a dot or a port, or as localhost (else "UPPER/x" would pass)
_HOST = rf"(?:localhost|{_HOST_PART}(?:\.{_HOST_PART})+|{_HOST_PART}(?=:))(?::[0-9]+)?"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REFERENCE = re.compile(
    rf"(?:{_HOST}/)?{_COMPONENT}(?:/{_COMPONENT})*"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?"
)
_MAX_REFERENCE = 255 + 1 + 128 + 1 + 72 + 64  # name, tag, and a sha512 digest


def resolve_image(name: str) -> str:
    """The image tag for `name`: a catalog name ("python") gives its tag, anything else must be a valid
    Docker reference ("agent-desk/python:latest", "debian:12@sha256:…"). A malformed one is a ConfigError
    that names what is wrong, before any engine is asked."""
    text = name.strip() if isinstance(name, str) else ""
    if not text:
        raise ConfigError("The image name is empty.", hint="name a catalog image (`agent-desk images list`) or a tag")
    try:
        catalog = load_catalog()
    except ConfigError:
        catalog = {}
    if text in catalog:
        return catalog[text].tag
    repository = re.sub(r":[\w][\w.-]*$", "", text.split("@", 1)[0])
    if len(text) > _MAX_REFERENCE or not _REFERENCE.fullmatch(text) or len(repository) > 255:
        shown = text if len(text) <= 80 else text[:77] + "…"
        raise ConfigError(
            f"{shown!r} is neither a catalog image nor a valid image tag.",
            hint="catalog images: " + (", ".join(catalog) or "(none found)")
            + "; a tag is lower-case, like agent-desk/python:latest or debian:12",
        )
    return text


def _client(client: docker.DockerClient | None) -> docker.DockerClient:
    return client if client is not None else connect()


def list_images(client: docker.DockerClient | None = None) -> list[ImageStatus]:
    """Every catalog image with its build status on the engine (present or not, its id and size)."""
    import docker.errors

    client = _client(client)
    out = []
    for spec in load_catalog().values():
        try:
            img = client.images.get(spec.tag)
        except docker.errors.ImageNotFound:
            out.append(ImageStatus(spec, present=False))
            continue
        out.append(ImageStatus(spec, True, img.id, int(img.attrs.get("Size", 0)), img.attrs.get("Created", "")))
    return out


def _base_script() -> Path:
    d, data = _manifest()
    return d / (data.get("base") or {}).get("base_script", "build_base.sh")


def base_plan(client: docker.DockerClient | None = None) -> BasePlan:
    """How the base image gets made here (pulled, debootstrap as root, mmdebstrap without root), or what to do."""
    return plan_for(_base_script(), base_image(), client)


def build_base_image(on_progress: Progress | None = None, *, force: bool = False,
                     client: docker.DockerClient | None = None) -> str:
    """Make the base image with sandbox_images/build_base.sh by the method base_plan chose; a machine where
    none works is a SandboxError whose hint is the commands that fix it."""
    script = _base_script()
    plan = base_plan(client)
    if plan.method == "none":
        raise SandboxError(plan.detail, hint="; then ".join(plan.commands))
    if on_progress is not None:
        on_progress(plan.detail)
    method = plan.method if plan.method in ("pull", "debootstrap", "mmdebstrap") else "auto"
    # Through bash, not the file's mode: an unpacked wheel or bundle need not have kept the executable bit.
    args = ["bash", str(script), "--method", method] + (["--force"] if force else [])
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    tail: list[str] = []
    for line in proc.stdout:
        line = line.rstrip("\n")
        tail = [*tail[-20:], line]
        if on_progress is not None:
            on_progress(line)
    if proc.wait() != 0:
        raise SandboxError(
            "building the base image failed:\n" + "\n".join(tail),
            hint="`agent-desk doctor` says which way the base image is made here and what it lacks",
        )
    return base_image()


def build_image(
    name: str,
    on_progress: Progress | None = None,
    *,
    client: docker.DockerClient | None = None,
    base: str | None = None,
    nocache: bool = False,
    cancel: BuildCancel | None = None,
) -> ImageStatus:
    """Build catalog image `name` with BASE=`base` (default agent-desk/base:bookworm, built first
    when missing), streaming the build's lines to `on_progress`; `cancel` stops the docker build for real
    (the base's debootstrap is not stopped mid-way: the cancel is seen after it). Blocking: run it in a thread."""
    import docker.errors

    catalog = load_catalog()
    spec = catalog.get(name)
    if spec is None:
        raise SandboxError(f"no sandbox image called {name!r}", hint="one of: " + ", ".join(catalog))
    client = _client(client)
    base = base or base_image()
    try:
        client.images.get(base)
    except docker.errors.ImageNotFound:
        if base != base_image():
            raise SandboxError(
                f"the base image {base} is not on this engine",
                hint="pull it, or build without --base to use the offline Debian base",
            ) from None
        if on_progress:
            on_progress(f"building the base image {base} (once per machine)")
        build_base_image(on_progress, client=client)
    with cancellable(client, cancel):
        _run_build(client, spec, base, on_progress or (lambda _line: None), nocache=nocache)
        img = client.images.get(spec.tag)
    return ImageStatus(spec, True, img.id, int(img.attrs.get("Size", 0)), img.attrs.get("Created", ""))


def _run_build(client: docker.DockerClient, spec: ImageSpec, base: str, say: Progress, *, nocache: bool) -> None:
    """One `docker build` of `spec`, its lines to `say`; with the CA bundle and proxy variables of
    _build_context, so a build behind a TLS proxy can fetch."""
    import docker.errors

    context = build_context(spec.dockerfile.parent)
    try:
        for chunk in client.api.build(
            fileobj=context,
            custom_context=True,
            dockerfile=spec.dockerfile.name,
            tag=spec.tag,
            buildargs={"BASE": base, **build_proxy_args()},
            network_mode=build_network(),
            decode=True,
            rm=True,
            forcerm=True,
            pull=False,
            nocache=nocache,
        ):
            if "error" in chunk:
                raise SandboxError(f"building {spec.name} failed: {chunk['error'].strip()}")
            text = chunk.get("stream") or chunk.get("status") or ""
            for line in text.splitlines():
                if line.strip():
                    say(line)
    except docker.errors.APIError as exc:
        raise SandboxError(f"building {spec.name} failed: {exc.explanation or exc}") from None
    finally:
        context.close()
