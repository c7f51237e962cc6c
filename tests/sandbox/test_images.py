"""The image catalog: the manifest, build status on the engine, and a streamed (cached) build."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from desktop_app.core import ConfigError, SandboxError
from desktop_app.sandbox import build_image, image_name_for_tag, images_dir, list_images, load_catalog

REPO = Path(__file__).resolve().parents[2]


def test_catalog_reads_the_manifest() -> None:
    catalog = load_catalog()
    assert {"minimal", "python", "node"} <= set(catalog)
    minimal = catalog["minimal"]
    assert minimal.tag == "agent-desk/minimal:latest" and minimal.dockerfile.is_file()
    assert any("python3-minimal" in c for c in minimal.contains)
    for spec in catalog.values():
        text = spec.dockerfile.read_text()
        assert "ARG BASE" in text and "FROM ${BASE}" in text, spec.name
    assert image_name_for_tag("agent-desk/python:latest") == "python"
    assert image_name_for_tag("someone/else:1") is None


def test_images_dir_override(monkeypatch, tmp_path: Path) -> None:
    assert images_dir() == REPO / "sandbox_images"
    monkeypatch.setenv("AGENT_DESK_IMAGES_DIR", str(tmp_path))
    with pytest.raises(ConfigError, match=r"images\.toml"):
        images_dir()
    (tmp_path / "images.toml").write_text('[images.tiny]\ndockerfile = "tiny/Dockerfile"\ntag = "x/tiny:1"\n')
    assert images_dir() == tmp_path and load_catalog()["tiny"].label == "tiny"


def test_scripts_are_strict_bash() -> None:
    for name in ("engine.sh", "build_base.sh"):
        script = REPO / "sandbox_images" / name
        assert script.stat().st_mode & 0o111, f"{name} is not executable"
        assert "set -euo pipefail" in script.read_text()
        subprocess.run(["bash", "-n", str(script)], check=True)


@pytest.mark.docker
def test_list_and_build(docker_client) -> None:
    status = {s.spec.name: s for s in list_images(docker_client)}
    assert status["minimal"].present and status["minimal"].image_id.startswith("sha256:")
    lines: list[str] = []
    built = build_image("minimal", lines.append, client=docker_client)  # cached layers: quick
    assert built.present and built.image_id == docker_client.images.get("agent-desk/minimal:latest").id
    assert any("Step 1/" in line for line in lines) and any("Successfully" in line for line in lines)
    with pytest.raises(SandboxError, match="no sandbox image called"):
        build_image("nope", client=docker_client)


# a project's own image -------------------------------------------------------------------------------------
DEVCONTAINER = """// the project's sandbox: comments and trailing commas, as devcontainer.json allows
{
  "name": "demo",
  "build": {"dockerfile": "Dockerfile", "context": "..", "args": {"GREETING": "hello"}},  /* the project root */
}
"""
DOCKERFILE = "FROM agent-desk/base:bookworm\nARG GREETING\nRUN echo \"$GREETING\" > /etc/desk-project-marker\n"


def devcontainer_project(root: Path, dockerfile: str = DOCKERFILE, spec: str = DEVCONTAINER) -> Path:
    from tests.conftest import make_workspace

    folder = make_workspace(root)
    (folder / ".devcontainer").mkdir()
    (folder / ".devcontainer" / "devcontainer.json").write_text(spec)
    (folder / ".devcontainer" / "Dockerfile").write_text(dockerfile)
    (folder / ".dockerignore").write_text("node_modules\n")
    (folder / "node_modules").mkdir()
    (folder / "node_modules" / "big.js").write_text("x")
    return folder


def test_devcontainer_jsonc_is_read_and_paths_stay_in_the_project(tmp_path: Path) -> None:
    from desktop_app.sandbox import find_project_image, project_image_digest, project_image_tag

    folder = devcontainer_project(tmp_path / "p")
    source = find_project_image(folder)
    assert source is not None and source.builds and source.path == ".devcontainer/devcontainer.json"
    assert (source.dockerfile, source.context, source.build_args) == (".devcontainer/Dockerfile", ".",
                                                                      {"GREETING": "hello"})
    first = project_image_digest(folder, source)
    (folder / "node_modules" / "big.js").write_text("ignored by .dockerignore")
    assert project_image_digest(folder, source) == first
    (folder / "src.py").write_text("print(1)")
    assert project_image_digest(folder, source) != first  # the context is the project root
    (folder / ".dockerignore").write_text("node_modules\n.devcontainer\n")  # the Dockerfile is sent anyway
    from desktop_app.sandbox.images._project_image import OUTSIDE_DOCKERFILE, pack_context

    assert pack_context(folder, source, with_ca=False).dockerfile == OUTSIDE_DOCKERFILE
    tag = project_image_tag("prj_1", "My Project!", first)
    assert tag.startswith("agent-desk/project-my-project-") and tag.endswith(":" + first[:16])
    for bad in ('{"build": {"dockerfile": "../../etc/passwd"}}', '{"build": {"dockerfile": "D", "context": "/"}}'):
        (folder / ".devcontainer" / "devcontainer.json").write_text(bad)
        with pytest.raises(ConfigError):
            find_project_image(folder)
    (folder / ".devcontainer" / "devcontainer.json").write_text('{"image": "Not A Tag!"}')
    with pytest.raises(ConfigError, match="neither a catalog image nor a valid image tag"):
        find_project_image(folder)
    (folder / ".devcontainer" / "devcontainer.json").write_text("{oops")
    with pytest.raises(ConfigError, match="not valid JSON"):
        find_project_image(folder)


def test_a_project_dockerfile_comes_first_with_its_own_folder_as_context(tmp_path: Path) -> None:
    from desktop_app.sandbox import find_project_image

    folder = devcontainer_project(tmp_path / "p")
    (folder / ".agent-desk").mkdir()
    (folder / ".agent-desk" / "Dockerfile").write_text(DOCKERFILE)
    source = find_project_image(folder)
    assert source is not None and (source.path, source.context) == (".agent-desk/Dockerfile", ".agent-desk")
    assert find_project_image(tmp_path) is None


@pytest.mark.docker
async def test_a_devcontainer_project_is_built_and_used_as_the_sandbox(docker_client, tmp_path: Path) -> None:
    """The issue's test: a real build FROM the local base, tagged per project and digest, then the sandbox."""
    from desktop_app.sandbox import DockerSandbox, SandboxConfig, build_project_image

    folder = devcontainer_project(tmp_path / "p")
    lines: list[str] = []
    built = build_project_image(folder, project_id="prj_devc", name="devc", on_progress=lines.append,
                                client=docker_client)
    image = docker_client.images.get(built.tag)
    assert image.id == built.image_id and image.labels["org.agent-desk.project-image.digest"] == built.digest
    assert any("Successfully tagged" in line for line in lines)
    sb = DockerSandbox("prj_devc", folder, SandboxConfig(image=built.tag), client=docker_client)
    try:
        await sb.start()
        res = await sb.exec("cat /etc/desk-project-marker; id -u; ls /workspace")
        assert res.exit_code == 0 and res.stdout.split()[:2] == ["hello", "1000"], res
        assert "node_modules" in res.stdout  # the workspace is the folder; only the build context ignores it
        assert sb.describe().image == built.tag
    finally:
        await sb.close()
        for c in docker_client.containers.list(all=True, filters={"label": "org.agent-desk.project=prj_devc"}):
            c.remove(force=True)
        docker_client.images.remove(built.tag)


@pytest.mark.docker
def test_a_devcontainer_image_reference_is_tagged_for_the_project(docker_client, tmp_path: Path) -> None:
    from desktop_app.sandbox import build_project_image

    folder = devcontainer_project(tmp_path / "p", spec='{"image": "agent-desk/base:bookworm", "runArgs": ["-v"]}')
    lines: list[str] = []
    built = build_project_image(folder, project_id="prj_ref", name="ref", on_progress=lines.append,
                                client=docker_client)
    assert docker_client.images.get(built.tag).id == docker_client.images.get("agent-desk/base:bookworm").id
    assert "note: runArgs ignored: docker run arguments are not passed" in lines
    docker_client.images.remove(built.tag)  # a tag only: the base stays
