"""The build setting for registries behind a TLS proxy: every image build's context carries the chosen CA
bundle (or an empty file) and the proxy variables go as build arguments; a real build through
`build_image` fetches over HTTPS with it, and the bundle is not in the image it makes."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from desktop_app.core import ConfigError
from desktop_app.sandbox.images._build_context import CA_FILE, build_context, build_proxy_args
from tests.sandbox.mcp_wire import need_mcp_image

PEM = b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _members(directory: Path) -> dict[str, bytes]:
    with build_context(directory) as fh, tarfile.open(fileobj=fh) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def test_the_context_carries_the_chosen_bundle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    (tmp_path / CA_FILE).write_bytes(b"a stale one in the folder is never used")
    bundle = tmp_path.parent / "proxy-ca.pem"
    bundle.write_bytes(PEM)
    monkeypatch.setenv("AGENT_DESK_BUILD_CA_BUNDLE", str(bundle))
    got = _members(tmp_path)
    assert got[CA_FILE] == PEM and got["Dockerfile"] == b"FROM scratch\n" and len(got) == 2
    monkeypatch.setenv("AGENT_DESK_BUILD_CA_BUNDLE", "none")
    assert _members(tmp_path)[CA_FILE] == b""
    monkeypatch.delenv("AGENT_DESK_BUILD_CA_BUNDLE")
    system = Path("/etc/ssl/certs/ca-certificates.crt")
    if system.is_file():
        assert _members(tmp_path)[CA_FILE] == system.read_bytes()


@pytest.mark.parametrize("content", [None, b"not a certificate", b""])
def test_a_bad_bundle_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes | None) -> None:
    bundle = tmp_path / "ca.pem"
    if content is not None:
        bundle.write_bytes(content)
    monkeypatch.setenv("AGENT_DESK_BUILD_CA_BUNDLE", str(bundle))
    with pytest.raises(ConfigError) as err:
        build_context(tmp_path)
    assert "ca.pem" in str(err.value) and err.value.hint


def test_proxy_variables_in_either_case_become_build_arguments() -> None:
    env = {"HTTPS_PROXY": "http://proxy:3128", "no_proxy": "localhost", "HOME": "/root", "http_proxy": ""}
    assert build_proxy_args(env) == {"HTTPS_PROXY": "http://proxy:3128", "no_proxy": "localhost"}


FETCH_DOCKERFILE = """\
ARG BASE
FROM agent-desk/mcp:latest AS fetch
COPY agent-desk-build-ca.cr[t] /tmp/
RUN python3 -c "import os, ssl, urllib.request; \
ca = '/tmp/agent-desk-build-ca.crt'; \
ctx = ssl.create_default_context(cafile=ca if os.path.getsize(ca) else None); \
page = urllib.request.urlopen('https://pypi.org/simple/mcp-server-time/', context=ctx, timeout=60).read(); \
open('/tmp/fetched', 'wb').write(page[:200])"
FROM ${BASE}
COPY --from=fetch /tmp/fetched /fetched
"""


@pytest.mark.docker
def test_a_build_that_fetches_over_https_works_and_keeps_no_bundle(
    docker_client, test_network: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from desktop_app.sandbox import build_image

    need_mcp_image(docker_client)
    (tmp_path / "fetch").mkdir()
    (tmp_path / "fetch" / "Dockerfile").write_text(FETCH_DOCKERFILE)
    (tmp_path / "images.toml").write_text(
        '[images.fetch]\nlabel = "t"\ndockerfile = "fetch/Dockerfile"\ntag = "agent-desk/test-build-fetch:latest"\n'
    )
    monkeypatch.setenv("AGENT_DESK_IMAGES_DIR", str(tmp_path))
    monkeypatch.setenv("AGENT_DESK_BUILD_NETWORK", test_network)  # the tests' own bridge, not docker0
    try:
        status = build_image("fetch", nocache=True)
        out = docker_client.containers.run(
            status.image_id, ["sh", "-c", "cat /fetched; find / -xdev -name 'agent-desk-build-ca*'"],
            remove=True, network_mode="none",
        ).decode()
        assert "mcp-server-time" in out.lower() or "<!doctype html>" in out.lower() or "<html" in out.lower()
        assert "agent-desk-build-ca" not in out
    finally:
        docker_client.images.remove("agent-desk/test-build-fetch:latest", force=True)
