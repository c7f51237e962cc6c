"""The CLI's conventions, through real processes: --version, global options anywhere, --image by catalog
name, completion, exit codes, errors on stderr (never a traceback), the log file, the environment over the
stored settings."""

from __future__ import annotations

import json
import re
import stat
import subprocess
import tomllib
from pathlib import Path

import pytest

import desktop_app
from desktop_app.cli import EPILOG, EXIT_FAILED, EXIT_MAX_STEPS, EXIT_OK, EXIT_PAUSED, EXIT_USAGE
from tests.fakes.anthropic_server import AnthropicServer, reply, text
from tests.kit.cli import cli, cli_environ

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return cli_environ(tmp_path)


def test_version_is_the_package_version(env) -> None:
    out = cli(env, "--version")
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert out.returncode == 0
    assert out.stdout.strip() == f"agent-desk {desktop_app.__version__}" == f"agent-desk {pyproject}"


@pytest.mark.parametrize("where", ["before", "between", "after", "equals"])
def test_db_and_debug_are_accepted_before_or_after_the_subcommand(env, tmp_path: Path, where: str) -> None:
    db = tmp_path / f"{where}.db"
    args = {"before": ["--db", str(db), "-v", "audit", "list"],
            "between": ["audit", "--db", str(db), "--debug", "list"],
            "after": ["audit", "list", "--db", str(db), "-v"],
            "equals": ["audit", "list", f"--db={db}", "--debug"]}[where]
    out = cli(env, *args)
    # the database named by --db is the one looked for (a file that is not there is refused, never made)
    assert out.returncode == EXIT_USAGE and f"There is no audit database at {db} (from --db)" in out.stderr
    assert not db.exists()
    assert "DEBUG" in out.stderr, "-v/--debug logs to stderr"
    quiet = cli(env, "audit", "list", "--db", str(db))
    assert quiet.returncode == EXIT_USAGE and "DEBUG" not in quiet.stderr


def test_a_later_db_wins_over_an_earlier_one(env, tmp_path: Path) -> None:
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    out = cli(env, "--db", str(first), "audit", "verify", "--db", str(second))
    assert out.returncode == EXIT_USAGE, out.stderr
    assert str(second) in out.stderr and str(first) not in out.stderr


def test_help_documents_every_exit_code(env) -> None:
    out = cli(env, "--help")
    assert out.returncode == 0
    for code in (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PAUSED, EXIT_MAX_STEPS, 70, 130):
        assert re.search(rf"^  {code}\s+\S", out.stdout, re.M), code
    assert "ANTHROPIC_API_KEY" in EPILOG
    readme = (ROOT / "README.md").read_text()
    for code in (EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_PAUSED, EXIT_MAX_STEPS, 70, 130):
        assert f"| {code} |" in readme, f"README's exit-code table lacks {code}"


def test_usage_errors_exit_2_on_stderr(env) -> None:
    for args in (["audit", "nosuch"], ["run", "--max-steps", "x"], ["completion", "tcsh"],
                 ["audit", "list", "--limit", "x"]):
        out = cli(env, *args)
        assert out.returncode == EXIT_USAGE, args
        assert out.stdout == "" and "usage:" in out.stderr and "Traceback" not in out.stderr


BAD_DB_URLS = [
    "foo://x",  # an unknown scheme
    "postgresql://u:hunter2pw@localhost/db",  # a missing driver (psycopg), with a password
    "mysql://u@h/d",
    "sqlite+nosuch:///x.db",  # an unknown SQLite driver
    "postgresql+nosuch://h/d",
    "://", "not a url at all://",  # unparsable
    "sqlite://", "sqlite:///:memory:",  # no file
    "sqlite:////proc/nope/x.db",  # a folder that cannot be made
    "/etc/passwd",  # a file that is not a database
    "/tmp",  # a folder
    "sqlite:////tmp/" + "a" * 300 + "/x.db",  # a name too long
    "sqlite:///%00",
]


@pytest.mark.parametrize("url", BAD_DB_URLS)
def test_a_bad_db_url_is_one_clear_error(env, url: str) -> None:
    out = cli(env, "audit", "list", "--db", url, timeout=60)
    assert out.returncode == EXIT_USAGE, out.stderr
    assert out.stderr.startswith("agent-desk: ")
    assert "Traceback" not in out.stderr and out.stdout == ""
    assert "hunter2pw" not in out.stderr, "a password in the URL is never shown"


@pytest.mark.parametrize("image", ["Bad Name!!", "UPPER/case", "a:b:c", "-x", "ubuntu@sha256:zz", " ", "a" * 300,
                                   "x;rm -rf /", "$(touch pwned)", "ghcr.io/Org/x"])
def test_a_malformed_image_is_refused_before_anything_is_stored(env, tmp_path: Path, image: str) -> None:
    project = tmp_path / "p"
    project.mkdir()
    db = tmp_path / "desk.db"
    env = {**env, "ANTHROPIC_API_KEY": "sk-ant-test-1234567890"}
    out = cli(env, "run", "--project", str(project), f"--image={image}", "--db", str(db), "hi")
    assert out.returncode == EXIT_USAGE
    assert "is neither a catalog image nor a valid image tag" in out.stderr or "empty" in out.stderr
    assert "Traceback" not in out.stderr
    assert not db.exists(), "nothing was stored for a refused image"
    assert not (tmp_path / "pwned").exists() and not (project / "pwned").exists()


def test_run_image_takes_a_catalog_name(env, tmp_path: Path) -> None:
    project = tmp_path / "p"
    project.mkdir()
    db = tmp_path / "desk.db"
    with AnthropicServer([reply(text("hello"))]) as srv:
        e = {**env, "ANTHROPIC_API_KEY": srv.api_key, "ANTHROPIC_BASE_URL": srv.url}
        out = cli(e, "run", "--project", str(project), "--image", "python", "--sandbox", "local",
                  "--db", str(db), "hi")
    assert out.returncode == EXIT_OK, out.stderr
    import sqlite3

    with sqlite3.connect(db) as conn:
        images = [r[0] for r in conn.execute("select image from projects")]
    assert images == ["agent-desk/python:latest"]


def test_bash_completion_completes_subcommands_and_options(env, tmp_path: Path) -> None:
    out = cli(env, "completion", "bash")
    assert out.returncode == 0 and out.stdout
    script = tmp_path / "agent-desk.bash"
    script.write_text(out.stdout)

    def complete(*words: str) -> list[str]:
        line = " ".join(["agent-desk", *words])
        probe = (f"source {script}\n"
                 f"COMP_WORDS=(agent-desk {' '.join(words)}); COMP_CWORD={len(words)}; COMP_LINE='{line}'; "
                 f"COMP_POINT={len(line)}\n"
                 "$(complete -p agent-desk | sed -E 's/.* -F ([^ ]+) .*/\\1/') agent-desk\n"
                 "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
        r = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert "audit" in complete("au")
    assert {"list", "verify", "export"} <= set(complete("audit", ""))
    assert "--db" in complete("audit", "list", "--d")
    assert {"bash", "zsh"} <= set(complete("completion", ""))


def test_zsh_completion_is_a_compdef(env) -> None:
    out = cli(env, "completion", "zsh")
    assert out.returncode == 0
    assert out.stdout.startswith("#compdef agent-desk")
    assert "audit" in out.stdout and "--db" in out.stdout


def test_the_log_file_is_private_and_never_holds_the_key(env, tmp_path: Path) -> None:
    key = "custom-gateway-token-Zq8v31kP0"  # no known key shape: only the literal redaction catches it
    project = tmp_path / "p"
    project.mkdir()
    with AnthropicServer([reply(text("done"))], api_key=key) as srv:
        e = {**env, "ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": srv.url}
        prompt = f"my key is {key} and sk-ant-api03-{'x' * 40}"
        out = cli(e, "run", "--project", str(project), "--sandbox", "local", "-v", prompt)
    assert out.returncode == EXIT_OK, out.stderr
    log = tmp_path / "log" / "agent-desk.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    assert stat.S_IMODE(log.parent.stat().st_mode) == 0o700
    text_ = log.read_text()
    assert "arguments:" in text_ and "[REDACTED]" in text_, "the prompt was logged, redacted"
    assert key not in text_ and "sk-ant-api03-xxxx" not in text_
    assert key not in out.stderr, "--debug's stderr is redacted too"


def test_environment_overrides_stored_key_and_endpoint(env, tmp_path: Path) -> None:
    cfg = tmp_path / "cfg"
    cfg.mkdir()
    (cfg / "settings.json").write_text(json.dumps({"api_key": "sk-ant-stored-wrong-key",
                                                   "base_url": "http://127.0.0.1:9"}))
    project = tmp_path / "p"
    project.mkdir()
    with AnthropicServer([reply(text("from the env endpoint"))]) as srv:
        e = {**env, "ANTHROPIC_API_KEY": srv.api_key, "ANTHROPIC_BASE_URL": srv.url}
        out = cli(e, "run", "--project", str(project), "--sandbox", "local", "hi")
        assert out.returncode == EXIT_OK, out.stderr
        assert "from the env endpoint" in out.stdout
        headers = srv.requests[0].headers
        assert srv.api_key in (headers.get("x-api-key"), headers.get("authorization", "").removeprefix("Bearer "))
