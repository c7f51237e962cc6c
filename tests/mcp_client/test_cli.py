"""`agent-desk mcp list` and `agent-desk mcp grant` on a real project folder and database."""

from __future__ import annotations

import json
from pathlib import Path

from desktop_app.cli import main
from tests.mcp_client.conftest import write_config


def test_mcp_list_grant_and_revoke(project: Path, tmp_path: Path, py_bin: Path, capsys) -> None:
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    write_config(project, {"time": {"command": str(py_bin / "mcp-server-time")},
                           "clock": {"command": str(py_bin / "mcp-server-time"), "run": "host"},
                           "broken": {"command": ""}})
    assert main(["--db", db, "mcp", "list", "--project", str(project), "--sandbox", "local"]) == 0
    out = capsys.readouterr().out
    assert "time  [ready]  sandbox  project" in out and "mcp__time__get_current_time  (read-only)" in out
    assert "clock  [needs_approval]  host (unsandboxed)" in out and "agent-desk mcp grant clock" in out
    assert "broken  [failed]" in out and "field 'command'" in out

    assert main(["--db", db, "mcp", "grant", "clock", "--project", str(project)]) == 0
    assert "granted: clock runs with host" in capsys.readouterr().out
    assert main(["--db", db, "mcp", "list", "--project", str(project), "--sandbox", "local", "--json"]) == 0
    servers = {s["name"]: s for s in json.loads(capsys.readouterr().out)}
    assert servers["clock"]["state"] == "ready" and servers["clock"]["where"] == "host"

    assert main(["--db", db, "mcp", "grant", "clock", "--project", str(project), "--revoke"]) == 0
    capsys.readouterr()
    assert main(["--db", db, "mcp", "grant", "nope", "--project", str(project)]) == 2
    assert "no server 'nope'" in capsys.readouterr().err
    assert main(["--db", db, "mcp", "list", "--project", str(project), "--sandbox", "local", "--json"]) == 0
    assert {s["name"]: s for s in json.loads(capsys.readouterr().out)}["clock"]["state"] == "needs_approval"


def test_mcp_list_in_docker_names_the_image_that_has_the_server(project: Path, tmp_path: Path, docker_client,
                                                                 capsys) -> None:
    """The README's first step with the default image: the server is not in it, and the error says which
    image has it; `--image mcp` (remembered for the project, as `run --image` is) starts it."""
    from tests.conftest import TEST_IMAGE, make_workspace
    from tests.sandbox.mcp_wire import need_mcp_image

    need_mcp_image(docker_client)
    make_workspace(project)
    db = f"sqlite:///{tmp_path / 'cli.db'}"
    write_config(project, {"time": {"command": "mcp-server-time", "args": ["--local-timezone", "UTC"]}})
    try:
        assert main(["--db", db, "mcp", "list", "--project", str(project), "--image", TEST_IMAGE]) == 0
        out = capsys.readouterr().out
        assert "time  [failed]  sandbox" in out and "command not found" in out
        assert "the catalog's `mcp` image has mcp-server-time" in out
        assert main(["--db", db, "mcp", "list", "--project", str(project), "--image", "mcp", "--json"]) == 0
        [time] = json.loads(capsys.readouterr().out)
        assert time["state"] == "ready" and "get_current_time" in {t["name"] for t in time["tools"]}
        assert main(["--db", db, "mcp", "list", "--project", str(project), "--json"]) == 0  # the image is kept
        assert json.loads(capsys.readouterr().out)[0]["state"] == "ready"
        assert main(["--db", db, "mcp", "list", "--project", str(project), "--image", "NOT an image"]) == 2
        assert "neither a catalog image nor a valid image tag" in capsys.readouterr().err
    finally:
        for c in docker_client.containers.list(all=True, filters={"label": "org.agent-desk.sandbox"}):
            if c.labels.get("org.agent-desk.host-path") == str(project):
                c.remove(force=True)
