"""Settings file, API key resolution order (keyring, settings, env) and the keyring fallback."""

from __future__ import annotations

import json
import logging
import stat

import keyring
import pytest
from keyring.backend import KeyringBackend

from desktop_app.config import (
    KEYRING_SERVICE,
    Settings,
    config_dir,
    default_db_url,
    resolve_api_key,
    store_api_key,
)
from desktop_app.core import ConfigError
from desktop_app.runtime import model_client_from_settings


class MemoryKeyring(KeyringBackend):
    priority = 10  # type: ignore[assignment]

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[tuple[str, str], str] = {}

    def get_password(self, service, username):
        return self.values.get((service, username))

    def set_password(self, service, username, password):
        self.values[(service, username)] = password

    def delete_password(self, service, username):
        self.values.pop((service, username), None)


@pytest.fixture
def cfg(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DESK_CONFIG_DIR", str(tmp_path / "cfg"))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("AGENT_DESK_NO_KEYRING", raising=False)
    return tmp_path / "cfg"


@pytest.fixture
def no_keyring():
    from keyring.backends import fail

    old = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(old)


@pytest.fixture
def memory_keyring():
    old = keyring.get_keyring()
    ring = MemoryKeyring()
    keyring.set_keyring(ring)
    yield ring
    keyring.set_keyring(old)


def test_defaults_when_no_file(cfg) -> None:
    s = Settings.load()
    assert s.path == cfg / "settings.json"
    assert s.model.startswith("claude-")
    assert config_dir() == cfg


def test_round_trip_keeps_unknown_keys(cfg) -> None:
    cfg.mkdir(parents=True)
    (cfg / "settings.json").write_text(json.dumps({"model": "claude-haiku-4-5", "future_option": [1, 2]}))
    s = Settings.load()
    assert s.model == "claude-haiku-4-5"
    s.max_steps = 12
    s.save()
    again = Settings.load()
    assert (again.model, again.max_steps, again.extra) == ("claude-haiku-4-5", 12, {"future_option": [1, 2]})


def test_broken_file_is_a_config_error_naming_the_file(cfg) -> None:
    cfg.mkdir(parents=True)
    (cfg / "settings.json").write_text("{not json")
    with pytest.raises(ConfigError) as info:
        Settings.load()
    assert "settings.json" in str(info.value)


def test_bad_value_is_a_config_error(cfg) -> None:
    cfg.mkdir(parents=True)
    (cfg / "settings.json").write_text(json.dumps({"max_steps": -3}))
    with pytest.raises(ConfigError, match="max_steps"):
        Settings.load()


def test_key_order_env_then_keyring_then_settings(cfg, memory_keyring, monkeypatch) -> None:
    s = Settings.load()
    assert resolve_api_key(s) is None
    s.api_key = "sk-settings"
    assert resolve_api_key(s).source == "settings"
    memory_keyring.set_password(KEYRING_SERVICE, "anthropic-api-key", "sk-ring")
    key = resolve_api_key(s)
    assert (key.value, key.source) == ("sk-ring", "keyring")
    assert "sk-ring" not in repr(key)
    # the environment overrides what is stored, as in the anthropic SDK and Claude Code
    monkeypatch.setenv("ANTHROPIC_API_KEY", " sk-env\n")
    assert (resolve_api_key(s).value, resolve_api_key(s).source) == ("sk-env", "env")
    # an empty or blank variable is no key: the stored one is used
    for blank in ("", "   ", "\n"):
        monkeypatch.setenv("ANTHROPIC_API_KEY", blank)
        assert resolve_api_key(s).source == "keyring"


def test_store_key_goes_to_the_keyring_when_there_is_one(cfg, memory_keyring) -> None:
    s = Settings.load()
    assert store_api_key(s, "sk-ant-secret-1234567890") == "keyring"
    assert memory_keyring.values[(KEYRING_SERVICE, "anthropic-api-key")] == "sk-ant-secret-1234567890"
    assert not (cfg / "settings.json").exists() or "sk-ant" not in (cfg / "settings.json").read_text()


def test_without_keyring_the_key_falls_back_to_the_file_with_a_warning(cfg, no_keyring, caplog) -> None:
    s = Settings.load()
    with caplog.at_level(logging.WARNING):
        assert store_api_key(s, "sk-ant-secret-1234567890") == "settings"
    assert "no keyring backend" in caplog.text
    assert "sk-ant-secret" not in caplog.text, "the key is never logged"
    path = cfg / "settings.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert resolve_api_key(Settings.load()).source == "settings"
    assert "sk-ant-secret" not in repr(Settings.load())


def test_base_url_from_env_then_settings(cfg, monkeypatch) -> None:
    s = Settings.load()
    assert (s.resolved_base_url(), s.base_url_source()) == (None, "default")
    s.base_url = "http://settings.example"
    assert (s.resolved_base_url(), s.base_url_source()) == ("http://settings.example", "settings")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://env.example")
    assert (s.resolved_base_url(), s.base_url_source()) == ("http://env.example", "env")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "  ")
    assert (s.resolved_base_url(), s.base_url_source()) == ("http://settings.example", "settings")


def test_client_from_settings(cfg, no_keyring, monkeypatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-from-env")
    s = Settings(model="claude-opus-4-6", base_url="http://127.0.0.1:9", max_retries=5)
    c = model_client_from_settings(s)
    assert (c.model, c.base_url, c.max_retries, c.key_source, c.has_api_key) == (
        "claude-opus-4-6", "http://127.0.0.1:9", 5, "env", True)


def test_db_url_default_and_override(monkeypatch, tmp_path) -> None:
    monkeypatch.delenv("AGENT_DESK_DB", raising=False)
    monkeypatch.setenv("AGENT_DESK_DATA_DIR", str(tmp_path))
    assert default_db_url() == f"sqlite:///{tmp_path / 'agent-desk.db'}"
    monkeypatch.setenv("AGENT_DESK_DB", "postgresql://x/y")
    assert default_db_url() == "postgresql://x/y"
