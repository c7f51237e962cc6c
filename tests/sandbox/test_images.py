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
