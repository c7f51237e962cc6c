"""The CLI refuses what is not there and keeps the habits of Claude Code and Codex: a mistyped --db is named
and never made, an empty database has nothing to verify, ANTHROPIC_MODEL and ANTHROPIC_AUTH_TOKEN are read
(flag > environment > settings), fish gets a completion script. The turn itself (the current folder, stdin, the
--json stream, the loop guard's exit code) is in tests/e2e/test_cli_habits.py."""

from __future__ import annotations

import argparse
import asyncio
import re
from pathlib import Path

import pytest

from desktop_app import cli
from desktop_app.cli import EXIT_FAILED, EXIT_USAGE
from desktop_app.cli._common import command_settings
from desktop_app.config import Settings, resolve_api_key
from desktop_app.store import SqlStore

READERS = [["audit", "list"], ["audit", "show", "call_x"], ["audit", "export"], ["audit", "verify"],
           ["sessions", "list"], ["sessions", "status", "ses_x"], ["sessions", "show", "ses_x"]]


@pytest.mark.parametrize("args", READERS, ids=" ".join)
def test_a_command_that_reads_the_record_refuses_a_missing_db(args, desk_env: Path, tmp_path: Path,
                                                                 capsys, monkeypatch) -> None:
    missing = tmp_path / "typo" / "audti.db"
    assert cli.main([*args, "--db", str(missing)]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert f"There is no audit database at {missing} (from --db)" in err
    assert "hint:" in err and "--db" in err and "agent-desk run" in err
    assert not missing.exists() and not missing.parent.exists(), "neither the file nor its folder was made"
    monkeypatch.setenv("AGENT_DESK_DB", f"sqlite:///{missing}")  # the variable is named as the source
    assert cli.main(args) == EXIT_USAGE
    assert "(from $AGENT_DESK_DB)" in capsys.readouterr().err
    assert not missing.parent.exists()


def test_verify_of_an_empty_database_has_nothing_to_verify(desk_env: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "empty.db"

    async def make() -> None:
        await (await SqlStore.open(db)).close()

    asyncio.run(make())
    assert cli.main(["audit", "verify", "--db", str(db)]) == EXIT_FAILED
    seen = capsys.readouterr()
    assert seen.out == "" and "nothing to verify" in seen.err and str(db) in seen.err
    assert "OK" not in seen.err


def _args(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"model": None, "max_steps": None, "sandbox": None, **kw})


def test_the_model_is_the_flag_then_anthropic_model_then_the_settings(desk_env: Path, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    Settings(model="claude-from-settings").save()
    assert command_settings(_args()).model == "claude-from-settings"
    monkeypatch.setenv("ANTHROPIC_MODEL", "claude-from-env")
    assert command_settings(_args()).model == "claude-from-env"
    assert command_settings(_args(model="claude-from-flag")).model == "claude-from-flag"
    monkeypatch.setenv("ANTHROPIC_MODEL", "  ")  # blank counts as unset, as for the other variables
    assert command_settings(_args()).model == "claude-from-settings"


def test_anthropic_auth_token_is_a_bearer_token_that_wins_over_a_key(desk_env: Path, monkeypatch) -> None:
    settings = Settings(api_key="sk-ant-stored")
    assert resolve_api_key(settings).source == "settings"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    assert resolve_api_key(settings).source == "env"
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-bearer")
    key = resolve_api_key(settings)
    assert (key.value, key.source) == ("tok-bearer", "env-token")
    assert "tok-bearer" not in repr(key)


def test_doctor_sends_the_auth_token_as_a_bearer(desk_env: Path, server, monkeypatch) -> None:
    from desktop_app.doctor import key_checks

    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", server.api_key)
    key, endpoint = key_checks(Settings())
    assert "ANTHROPIC_AUTH_TOKEN" in key.detail and endpoint.status == "ok", endpoint
    _path, headers = server.gets[-1]
    assert headers.get("authorization") == f"Bearer {server.api_key}" and "x-api-key" not in headers


def test_fish_completion_completes_subcommands_actions_options_and_folders(capsys) -> None:
    assert cli.main(["completion", "fish"]) == 0
    script = capsys.readouterr().out
    lines = script.splitlines()
    assert all(ln.startswith(("#", "complete -c agent-desk ")) for ln in lines)
    for sub in cli.SUBCOMMANDS:
        assert f"complete -c agent-desk -n __fish_use_subcommand -a {sub} -d " in script, sub
    # an action only after its command, and not once one is typed
    assert re.search(r"-n '__fish_seen_subcommand_from audit; and not __fish_seen_subcommand_from list show "
                     r"export report verify verify-export' -a verify ", script)
    assert "-n '__fish_seen_subcommand_from audit; and __fish_seen_subcommand_from export' -l format -r -a " \
           "'jsonl csv'" in script
    assert "-l project -r -a '(__fish_complete_directories)'" in script
    assert "-l db -r -F" in script  # files for --db
    assert "-a 'bash zsh fish'" in script
