"""The API key and the audit signing key through a real Secret Service: Debian's gnome-keyring-daemon on a
private D-Bus session bus, its login keyring unlocked with a known password, reached through keyring's own
SecretService backend (no stand-in). Also: the secrets survive a restart of the daemon, are not on its disk
in clear, are read by another process; a locked keyring and a bus with no Secret Service fall back to the
0600 files, quickly. `.ci/keyring-deps.sh` (run by `make test`) installs gnome-keyring and dbus; in CI
(CI=true) a missing daemon fails instead of skipping."""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backend
import keyring.core
import pytest

from desktop_app.config import (
    KEYRING_SERVICE,
    KEYRING_SIGNING_USER,
    KEYRING_USER,
    SIGNING_KEY_FILE,
    Settings,
    clear_api_key,
    desk_signing_key,
    keyring_available,
    resolve_api_key,
    store_api_key,
)
from tests.conftest import in_ci

PASSWORD = "correct horse battery staple"
API_KEY = "sk-ant-api03-" + "Q7" * 40  # looks like a real key: the redaction patterns would know it
BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  {servicedirs}
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def _need(*programs: str) -> None:
    missing = [p for p in programs if shutil.which(p) is None]
    if missing:
        msg = f"{', '.join(missing)} missing: run .ci/keyring-deps.sh (apt-get install gnome-keyring dbus)"
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """End a process this test started, and its process group (a prompter the bus activated, say)."""
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)


class Desktop:
    """A private session bus (optionally with gnome-keyring-daemon on it) and the XDG folders of one user."""

    def __init__(self, root: Path, *, activation: bool = True) -> None:
        self.root = root
        self.env = {**os.environ, "HOME": str(root / "home"), "XDG_DATA_HOME": str(root / "data"),
                    "XDG_CONFIG_HOME": str(root / "config"), "XDG_RUNTIME_DIR": str(root / "run")}
        for key in ("PYTHON_KEYRING_BACKEND", "AGENT_DESK_NO_KEYRING", "ANTHROPIC_API_KEY", "DISPLAY",
                    "WAYLAND_DISPLAY"):
            self.env.pop(key, None)  # no prompt may find a display; no other key source may answer
        for name in ("home", "data", "config", "run"):
            (root / name).mkdir(mode=0o700, exist_ok=True)
        self.bus = self._start_bus(activation)
        self.daemon: subprocess.Popen[bytes] | None = None

    def _start_bus(self, activation: bool) -> subprocess.Popen[bytes]:
        cfg = self.root / "bus.conf"
        dirs = "<standard_session_servicedirs/>" if activation else ""
        cfg.write_text(BUS_CONFIG.format(socket=self.root / "bus", servicedirs=dirs))
        proc = subprocess.Popen(["dbus-daemon", f"--config-file={cfg}", "--nofork", "--print-address=1"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=self.env,
                                start_new_session=True)
        address = proc.stdout.readline().decode().strip()
        assert address.startswith("unix:"), f"dbus-daemon gave no address ({proc.poll()=})"
        self.env["DBUS_SESSION_BUS_ADDRESS"] = address
        return proc

    def start_keyring(self, password: str = PASSWORD, *, unlocks: bool = True) -> None:
        """gnome-keyring-daemon's secrets component, its login keyring unlocked (made on first use) with
        `password` read on stdin; returns once the Secret Service answers on the bus with its default collection
        there and unlocked (the daemon answers before it has made the login keyring: keyring's backend would
        then ask to create a collection, a prompt that no display can show, and fall back). `unlocks=False`: a
        password that does not open it: returns once the collection is there, locked."""
        self.daemon = subprocess.Popen(
            ["gnome-keyring-daemon", "--foreground", "--unlock", "--components=secrets"],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env,
            start_new_session=True)
        self.daemon.stdin.write(password.encode())
        self.daemon.stdin.close()
        deadline = time.monotonic() + 30
        while self._login_keyring(self.daemon.pid) != ("unlocked" if unlocks else "locked"):
            assert self.daemon.poll() is None, "gnome-keyring-daemon exited"
            assert time.monotonic() < deadline, "the Secret Service never answered with its login keyring"
            time.sleep(0.1)

    def _login_keyring(self, daemon: int) -> str:
        """"unlocked" or "locked": the default collection (the one keyring's backend uses) as the Secret Service
        answers; "" while there is no service or no such collection yet. Asks the service only once the daemon
        `daemon` (a pid) owns its name: a call to an unowned name would make the bus start one from its service
        file, with no password, and that one would hold the name while the test's daemon waited behind it (the
        race that failed a CI run). Asking the bus who owns a name starts nothing."""
        return self.python("import secretstorage as s, contextlib\n"
                           "from jeepney.bus_messages import message_bus as bus\n"
                           "with contextlib.closing(s.dbus_init()) as c:\n"
                           "    name = 'org.freedesktop.secrets'\n"
                           "    ask = lambda m: c.send_and_get_reply(m).body[0]\n"
                           "    owner = ask(bus.NameHasOwner(name)) and ask(bus.GetConnectionUnixProcessID(name))\n"
                           f"    if owner != {daemon}:\n"
                           "        print('')\n"
                           "        raise SystemExit\n"
                           "    try:\n"
                           "        up = s.Collection(c)\n"
                           "        print('locked' if up.is_locked() else 'unlocked')\n"
                           "    except s.exceptions.SecretStorageException:\n"
                           "        print('')", check=False).strip()

    def stop_keyring(self) -> None:
        if self.daemon is not None:
            _stop(self.daemon)
            self.daemon = None

    def close(self) -> None:
        self.stop_keyring()
        _stop(self.bus)

    def python(self, code: str, *, check: bool = True, extra: dict[str, str] | None = None) -> str:
        """Run `code` in a fresh interpreter on this desktop (its bus, its folders)."""
        done = subprocess.run([sys.executable, "-c", code], env={**self.env, **(extra or {})},
                              capture_output=True, text=True, timeout=60, check=False)
        if check:
            assert done.returncode == 0, done.stderr
        return done.stdout

    @contextlib.contextmanager
    def in_process(self, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
        """This process talks to this desktop: its environment, and keyring's backend chosen afresh."""
        for key in ("HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS"):
            monkeypatch.setenv(key, self.env[key])
        for key in ("PYTHON_KEYRING_BACKEND", "AGENT_DESK_NO_KEYRING", "ANTHROPIC_API_KEY"):
            monkeypatch.delenv(key, raising=False)
        before = keyring.get_keyring()
        with contextlib.suppress(KeyError):  # keyring judges the backends once a process: judge again here
            keyring.backend.get_all_keyring.reset()
        # keyring's own backends only: the suite's stand-ins (KeyringBackend subclasses) would win otherwise
        keyring.core.init_backend(lambda b: type(b).__module__.startswith("keyring.backends."))
        try:
            yield
        finally:
            keyring.set_keyring(before)


@pytest.fixture
def desktop(monkeypatch: pytest.MonkeyPatch) -> Iterator[Desktop]:
    _need("dbus-daemon", "gnome-keyring-daemon")
    root = Path(tempfile.mkdtemp(prefix="adk-kr-"))  # short: a unix socket path has ~100 bytes
    desk = Desktop(root)
    monkeypatch.setenv("AGENT_DESK_CONFIG_DIR", str(root / "config" / "agent-desk"))
    monkeypatch.setenv("AGENT_DESK_DATA_DIR", str(root / "data" / "agent-desk"))
    desk.env["AGENT_DESK_CONFIG_DIR"] = str(root / "config" / "agent-desk")
    desk.env["AGENT_DESK_DATA_DIR"] = str(root / "data" / "agent-desk")
    try:
        yield desk
    finally:
        desk.close()
        shutil.rmtree(root, ignore_errors=True)


def _on_disk(desk: Desktop) -> bytes:
    """Everything gnome-keyring wrote to the user's data folder."""
    files = sorted((desk.root / "data" / "keyrings").glob("*"))
    assert files, "gnome-keyring wrote no keyring file"
    return b"".join(p.read_bytes() for p in files)


READ_BACK = ("from desktop_app.config import Settings, resolve_api_key, desk_signing_key\n"
             "import hashlib, json\n"
             "k = resolve_api_key(Settings.load())\n"
             "d = desk_signing_key()\n"
             "print(json.dumps([k and k.source, k and hashlib.sha256(k.value.encode()).hexdigest(),\n"
             "                  d.source, hashlib.sha256(d.seed).hexdigest()]))")


def _digest(data: bytes | str) -> str:
    import hashlib

    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def test_the_api_key_and_the_signing_key_live_in_the_real_secret_service(desktop, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    desktop.start_keyring()
    with desktop.in_process(monkeypatch):
        assert type(keyring.get_keyring()).__module__ == "keyring.backends.SecretService"
        assert keyring_available()
        settings = Settings.load()
        assert store_api_key(settings, API_KEY) == "keyring"
        key = resolve_api_key(settings)
        assert (key.value, key.source) == (API_KEY, "keyring")
        seed = desk_signing_key()
        assert seed.source == "keyring" and desk_signing_key().seed == seed.seed
    settings_file = Path(os.environ["AGENT_DESK_CONFIG_DIR"]) / "settings.json"
    assert not settings_file.exists() or API_KEY not in settings_file.read_text()
    assert not (Path(os.environ["AGENT_DESK_DATA_DIR"]) / SIGNING_KEY_FILE).exists()
    # The daemon holds them under the desk's names, as items of the login keyring.
    items = json.loads(desktop.python(
        "import secretstorage as s, json\nc = s.dbus_init()\ncol = s.get_default_collection(c)\n"
        "print(json.dumps(sorted((i.get_attributes()['username'], i.get_secret().decode())\n"
        f"      for i in col.search_items({{'service': {KEYRING_SERVICE!r}}}))))"))
    assert items == sorted([[KEYRING_USER, API_KEY], [KEYRING_SIGNING_USER, base64.b64encode(seed.seed).decode()]])
    # Another process reads the same two secrets.
    assert json.loads(desktop.python(READ_BACK)) == ["keyring", _digest(API_KEY), "keyring", _digest(seed.seed)]
    # Neither is on the daemon's disk in clear, and neither was logged.
    disk = _on_disk(desktop)
    for secret in (API_KEY.encode(), base64.b64encode(seed.seed), seed.seed):
        assert secret not in disk
        assert secret.decode("latin-1") not in caplog.text


def test_the_secrets_survive_a_restart_of_the_daemon_and_go_when_forgotten(desktop, monkeypatch):
    desktop.start_keyring()
    with desktop.in_process(monkeypatch):
        store_api_key(Settings.load(), API_KEY)
        seed = desk_signing_key().seed
    desktop.stop_keyring()
    desktop.start_keyring()  # a new login: the keyring file unlocked again with the same password
    assert json.loads(desktop.python(READ_BACK)) == ["keyring", _digest(API_KEY), "keyring", _digest(seed)]
    with desktop.in_process(monkeypatch):
        settings = Settings.load()
        clear_api_key(settings)
        assert resolve_api_key(settings) is None
        assert keyring.get_password(KEYRING_SERVICE, KEYRING_USER) is None
        assert desk_signing_key().seed == seed  # forgetting the API key leaves the audit key alone


def test_a_locked_keyring_falls_back_quickly_and_keeps_the_key_private(desktop, monkeypatch):
    desktop.start_keyring()
    desktop.python("import secretstorage as s\ns.get_default_collection(s.dbus_init()).lock()")
    with desktop.in_process(monkeypatch):
        settings = Settings.load()
        started = time.monotonic()
        assert resolve_api_key(settings) is None  # no prompt can show: the locked keyring is passed over
        assert store_api_key(settings, API_KEY) == "settings"
        assert time.monotonic() - started < 20
        assert resolve_api_key(settings).source == "settings"
    assert stat.S_IMODE(settings.path.stat().st_mode) == 0o600
    assert API_KEY.encode() not in _on_disk(desktop)


def test_a_wrong_password_leaves_the_keyring_locked_and_the_key_out_of_it(desktop, monkeypatch):
    desktop.start_keyring()
    desktop.stop_keyring()  # the login keyring now exists, made with PASSWORD
    desktop.start_keyring(password="not the password", unlocks=False)
    with desktop.in_process(monkeypatch):
        assert store_api_key(Settings.load(), API_KEY) == "settings"
    assert json.loads(desktop.python(READ_BACK))[0] == "settings"


@pytest.mark.parametrize("bus", ["no bus", "a bus without a Secret Service"])
def test_without_a_backend_both_keys_fall_back_to_private_files(bus, monkeypatch):
    _need("dbus-daemon")
    root = Path(tempfile.mkdtemp(prefix="adk-kr-"))
    desk = Desktop(root, activation=False)  # no service files: nothing can be activated on this bus
    if bus == "no bus":
        desk.env["DBUS_SESSION_BUS_ADDRESS"] = f"unix:path={root / 'no-such-bus'}"
    cfg, data = root / "config" / "agent-desk", root / "data" / "agent-desk"
    monkeypatch.setenv("AGENT_DESK_CONFIG_DIR", str(cfg))
    monkeypatch.setenv("AGENT_DESK_DATA_DIR", str(data))
    try:
        with desk.in_process(monkeypatch):
            assert not keyring_available()
            settings = Settings.load()
            assert store_api_key(settings, API_KEY) == "settings"
            assert resolve_api_key(settings).source == "settings"
            signing = desk_signing_key()
            assert signing.source == "file" and signing.path == data / SIGNING_KEY_FILE
        for path in (cfg / "settings.json", data / SIGNING_KEY_FILE):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
        desk.env.update(AGENT_DESK_CONFIG_DIR=str(cfg), AGENT_DESK_DATA_DIR=str(data))
        assert json.loads(desk.python(READ_BACK)) == ["settings", _digest(API_KEY), "file", _digest(signing.seed)]
    finally:
        desk.close()
        shutil.rmtree(root, ignore_errors=True)
