"""`agent-desk doctor` through a real process: each check in plain words, the key's source and never the key,
the endpoint asked (and a refused key said), a failed check with its fix and a non-zero exit."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from desktop_app.doctor import QT_LIB_PACKAGES, _missing_libraries, qt_check
from tests.fakes.anthropic_server import AnthropicServer
from tests.kit.cli import cli, cli_environ


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return cli_environ(tmp_path)


def lines(out: str) -> dict[str, str]:
    found = {}
    for line in out.splitlines():
        if line.startswith("["):
            name = line.split("]", 1)[1].split(":", 1)[0].strip()
            found[name] = line
    return found


def test_doctor_names_every_check_and_its_exit_code_follows_the_failures(env, tmp_path: Path) -> None:
    with AnthropicServer() as srv:
        e = {**env, "ANTHROPIC_API_KEY": srv.api_key, "ANTHROPIC_BASE_URL": srv.url}
        out = cli(e, "doctor", "--db", str(tmp_path / "none-yet.db"), timeout=120)
        assert srv.gets and srv.gets[0][0] == "/v1/models"
    checks = lines(out.stdout)
    assert {"Docker engine", "Sandbox images", "API key", "Endpoint", "Keyring", "Qt", "Database"} <= set(checks)
    assert "from ANTHROPIC_API_KEY" in checks["API key"]
    assert "answers (and accepts the key)" in checks["Endpoint"]
    assert srv.api_key not in out.stdout + out.stderr, "the key is never printed"
    assert "not made yet" in checks["Database"]
    assert not (tmp_path / "none-yet.db").exists(), "doctor makes no database"
    failed = [line for line in checks.values() if line.startswith("[FAIL]")]
    assert out.returncode == (1 if failed else 0)
    for name, line in checks.items():  # every failure says how to fix it
        if line.startswith("[FAIL]"):
            after = out.stdout.split(line, 1)[1].lstrip("\n")
            assert after.strip().startswith("fix: "), name


def test_a_refused_key_and_a_silent_endpoint_fail_with_a_fix(env) -> None:
    with AnthropicServer() as srv:
        out = cli({**env, "ANTHROPIC_API_KEY": "sk-ant-wrong-key-123456", "ANTHROPIC_BASE_URL": srv.url}, "doctor")
    assert out.returncode == 1
    assert "refuses the API key (HTTP 401)" in out.stdout and "sk-ant-wrong-key" not in out.stdout
    started = time.monotonic()
    out = cli({**env, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}, "doctor")
    assert time.monotonic() - started < 60
    checks = lines(out.stdout)
    assert checks["API key"].startswith("[FAIL]") and "does not answer" in checks["Endpoint"]
    assert "export ANTHROPIC_API_KEY" in out.stdout


async def _make_db(path: Path) -> None:
    from desktop_app.store import SqlStore

    await (await SqlStore.open(path)).close()


def test_the_database_check_verifies_the_chain_and_fails_on_a_bad_database(env, tmp_path: Path) -> None:
    db = tmp_path / "desk.db"
    assert cli(env, "audit", "list", "--db", str(db)).returncode == 2  # a reader never makes the database
    asyncio.run(_make_db(db))
    ok = lines(cli(env, "doctor", "--db", str(db)).stdout)["Database"]
    assert ok.startswith("[ok]") and "the audit chain verifies" in ok
    junk = tmp_path / "junk.db"
    junk.write_text("not a database\n")
    for bad in (str(junk), "foo://x", "postgresql://u:pw-hidden@h/d"):
        out = cli(env, "doctor", "--db", bad)
        check = lines(out.stdout)["Database"]
        assert check.startswith("[FAIL]") and out.returncode == 1, bad
        assert "pw-hidden" not in out.stdout and "Traceback" not in out.stderr


def test_the_qt_check_names_a_package_for_each_missing_library() -> None:
    from PySide6.QtCore import QLibraryInfo

    plugin = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms" / "libqxcb.so"
    missing = _missing_libraries(plugin)
    assert missing is not None
    check = qt_check()
    if missing:
        assert check.status == "fail"
        for lib in missing:
            assert lib in check.detail and QT_LIB_PACKAGES.get(lib, lib) in check.fix
    else:
        assert check.status in ("ok", "warn") and "all present" in check.detail


async def test_a_check_that_breaks_is_a_failed_line_and_the_others_still_show(monkeypatch) -> None:
    """An engine too slow to answer (a requests timeout under load), or any check's own error, must not take
    the whole doctor down: its line says it failed, with no secret, and every other check is shown."""
    import desktop_app.doctor as doctor

    def slow_engine(settings):
        raise TimeoutError("Read timed out (token sk-ant-api03-" + "x" * 40 + ")")

    monkeypatch.setattr(doctor, "docker_checks", slow_engine)
    checks = await doctor.run_checks(db="/nonexistent-dir/desk.db")
    by_name = {c.name: c for c in checks}
    assert by_name["Docker engine"].status == doctor.FAIL
    assert "TimeoutError" in by_name["Docker engine"].detail and "sk-ant-api03-x" not in by_name["Docker engine"].detail
    assert {"API key", "Keyring", "Qt", "Database"} <= set(by_name)
