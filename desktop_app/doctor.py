"""`agent-desk doctor` and the window's "Check setup": what a new user needs, checked in plain words,
each failure with its fix. The checks block (Docker, HTTP, ldd, SQLite): they run on worker threads."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .config import Settings, keyring_available, resolve_api_key
from .core import AgentDeskError, ProjectSettings, Redactor

OK, WARN, FAIL = "ok", "warn", "fail"
ENDPOINT_TIMEOUT_S = 5.0
DEFAULT_ENDPOINT = "https://api.anthropic.com"

# What Qt's xcb platform plugin loads (ldd on libqxcb.so), and the Debian package that ships each.
QT_LIB_PACKAGES = {
    "libxcb-cursor.so.0": "libxcb-cursor0", "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-keysyms.so.1": "libxcb-keysyms1", "libxcb-image.so.0": "libxcb-image0",
    "libxcb-render-util.so.0": "libxcb-render-util0", "libxcb-xkb.so.1": "libxcb-xkb1",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11-0", "libxkbcommon.so.0": "libxkbcommon0",
    "libxcb-randr.so.0": "libxcb-randr0", "libxcb-shape.so.0": "libxcb-shape0",
    "libxcb-xfixes.so.0": "libxcb-xfixes0", "libxcb-sync.so.1": "libxcb-sync1", "libxcb-shm.so.0": "libxcb-shm0",
    "libxcb-xinerama.so.0": "libxcb-xinerama0", "libxcb-xinput.so.0": "libxcb-xinput0",
    "libxcb-render.so.0": "libxcb-render0", "libxcb-util.so.1": "libxcb-util1", "libxcb.so.1": "libxcb1",
    "libX11-xcb.so.1": "libx11-xcb1", "libX11.so.6": "libx11-6", "libSM.so.6": "libsm6", "libICE.so.6": "libice6",
    "libEGL.so.1": "libegl1", "libGL.so.1": "libgl1", "libOpenGL.so.0": "libopengl0",
    "libGLX.so.0": "libglx0", "libfontconfig.so.1": "libfontconfig1", "libfreetype.so.6": "libfreetype6",
    "libdbus-1.so.3": "libdbus-1-3", "libglib-2.0.so.0": "libglib2.0-0",
    "libwayland-client.so.0": "libwayland-client0", "libwayland-cursor.so.0": "libwayland-cursor0",
}

# The same libraries on Fedora (dnf) and Arch (pacman): the xcb-util family, xkbcommon and the GL and font
# libraries by their names there; the core xcb extensions (randr, shape, xfixes…) are all in `libxcb`.
_FEDORA_ARCH_UTIL = {
    "libxcb-cursor.so.0": "xcb-util-cursor", "libxcb-icccm.so.4": "xcb-util-wm",
    "libxcb-keysyms.so.1": "xcb-util-keysyms", "libxcb-image.so.0": "xcb-util-image",
    "libxcb-render-util.so.0": "xcb-util-renderutil", "libxcb-util.so.1": "xcb-util",
    "libxkbcommon-x11.so.0": "libxkbcommon-x11", "libxkbcommon.so.0": "libxkbcommon",
}
QT_LIB_PACKAGES_BY_DISTRO: dict[str, dict[str, str]] = {
    "debian": QT_LIB_PACKAGES,
    "fedora": {**_FEDORA_ARCH_UTIL, "libX11-xcb.so.1": "libX11-xcb", "libX11.so.6": "libX11", "libSM.so.6": "libSM",
               "libICE.so.6": "libICE", "libEGL.so.1": "libglvnd-egl", "libGL.so.1": "libglvnd-glx",
               "libOpenGL.so.0": "libglvnd-opengl", "libGLX.so.0": "libglvnd-glx", "libfontconfig.so.1": "fontconfig",
               "libfreetype.so.6": "freetype", "libdbus-1.so.3": "dbus-libs", "libglib-2.0.so.0": "glib2",
               "libwayland-client.so.0": "libwayland-client", "libwayland-cursor.so.0": "libwayland-cursor"},
    "arch": {**_FEDORA_ARCH_UTIL, "libX11-xcb.so.1": "libx11", "libX11.so.6": "libx11", "libSM.so.6": "libsm",
             "libICE.so.6": "libice", "libEGL.so.1": "libglvnd", "libGL.so.1": "libglvnd", "libOpenGL.so.0": "libglvnd",
             "libGLX.so.0": "libglvnd", "libfontconfig.so.1": "fontconfig", "libfreetype.so.6": "freetype2",
             "libdbus-1.so.3": "dbus", "libglib-2.0.so.0": "glib2", "libwayland-client.so.0": "wayland",
             "libwayland-cursor.so.0": "wayland"},
}
INSTALL_COMMANDS = {"debian": "sudo apt-get install", "fedora": "sudo dnf install", "arch": "sudo pacman -S --needed"}


def linux_family(os_release: str | None = None) -> str:
    """"debian", "fedora" or "arch" from /etc/os-release's ID and ID_LIKE (Ubuntu is debian); "" otherwise."""
    if os_release is None:
        try:
            os_release = Path("/etc/os-release").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
    ids: list[str] = []
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        if key in ("ID", "ID_LIKE"):
            ids += value.strip().strip('"').lower().split()
    aliases = {"ubuntu": "debian", "rhel": "fedora", "centos": "fedora", "manjaro": "arch", "endeavouros": "arch"}
    return next((f for i in ids if (f := aliases.get(i, i)) in INSTALL_COMMANDS), "")


def package_of(lib: str, family: str) -> str:
    """The package that ships `lib` on the family's distributions ("" when not known)."""
    packages = QT_LIB_PACKAGES_BY_DISTRO.get(family or "debian", QT_LIB_PACKAGES)
    if lib in packages:
        return packages[lib]
    if family in ("fedora", "arch") and lib.startswith("libxcb"):
        return "libxcb"  # the core extensions (randr, shape, xfixes, …)
    return ""


def install_fix(missing: list[str], family: str | None = None) -> str:
    """The one command that installs the packages of `missing` here (apt-get where the family is not known),
    and how to find the package of a library no table names."""
    family = linux_family() if family is None else family
    packages = sorted({package_of(m, family) for m in missing} - {""})
    unknown = [m for m in missing if not package_of(m, family)]
    fix = f"{INSTALL_COMMANDS.get(family, INSTALL_COMMANDS['debian'])} {' '.join(packages)}" if packages else ""
    if unknown:
        finder = {"fedora": "dnf provides", "arch": "pacman -F"}.get(family, "apt-file search")
        fix += ("; " if fix else "") + "find the package of " + ", ".join(unknown) + f" with {finder}"
    return fix


@dataclass(frozen=True, slots=True)
class Check:
    """One check: what was looked at, "ok" / "warn" / "fail", what was found, and how to fix a failure."""

    name: str
    status: str
    detail: str
    fix: str = ""

    @property
    def ok(self) -> bool:
        return self.status != FAIL


def format_check(check: Check) -> str:
    """One line per check (and a "fix:" line under a failure or a warning), in plain words."""
    mark = {OK: "[ok]  ", WARN: "[warn]", FAIL: "[FAIL]"}[check.status]
    line = f"{mark} {check.name}: {check.detail}"
    return f"{line}\n       fix: {check.fix}" if check.fix and check.status != OK else line


async def run_checks(*, db: str | None = None, settings: Settings | None = None) -> list[Check]:
    """Every check, the blocking ones on worker threads at once; the same list for the CLI and the window."""
    settings_check: list[Check] = []
    if settings is None:
        try:
            settings = await asyncio.to_thread(Settings.load)
        except AgentDeskError as e:
            settings = Settings()
            settings_check = [Check("Settings", FAIL, str(e), e.hint or "fix or delete the settings file")]
    names = ("Docker engine", "API key", "Keyring", "Qt", "Database", "Plugins")
    parts = await asyncio.gather(
        asyncio.to_thread(docker_checks, settings),
        asyncio.to_thread(key_checks, settings),
        asyncio.to_thread(keyring_check),
        asyncio.to_thread(qt_check),
        database_check(db),
        asyncio.to_thread(plugin_checks, settings),
        return_exceptions=True,
    )
    checks = list(settings_check)
    for name, part in zip(names, parts, strict=True):
        if isinstance(part, BaseException):
            # A check that broke (an engine too slow to answer, a driver's own error) is a failed line of its
            # own: the other checks are still shown.
            if not isinstance(part, Exception):
                raise part
            first = Redactor().redact((str(part).splitlines() or [""])[0][:200])
            checks.append(Check(name, FAIL, f"the check itself failed: {type(part).__name__}: {first}",
                                "run doctor again; if it keeps failing, `agent-desk --debug doctor` shows why"))
        else:
            checks.extend(part if isinstance(part, list) else [part])
    return checks


# Docker -------------------------------------------------------------------------------------------------
def docker_checks(settings: Settings) -> list[Check]:
    """The engine (its version, whether this user may use it, a link others could use), gVisor, then the
    catalog images on it."""
    from .sandbox import connect, engine_link, list_images

    link = engine_link()
    host = link.address
    try:
        client = connect()
    except AgentDeskError as e:
        return [_engine_failure(host, str(e), e.hint), Check("Sandbox images", WARN, "not checked: no Docker engine")]
    try:
        info = client.version()
        engine = Check("Docker engine", OK, f"Docker {info.get('Version', '?')} (API {info.get('ApiVersion', '?')}) "
                       f"at {host}; your user may use it")
        problem, fix = link.warning()
        if problem:
            engine = Check("Docker engine", WARN, f"{engine.detail}; but {problem}", fix)
        images = _images_check(list_images(client), settings)
        return [engine, runtime_check(client), images, base_image_check(client, images.ok)]
    except Exception as e:  # the engine answered the ping, then failed: said, not raised
        return [Check("Docker engine", FAIL, f"the engine at {host} failed: {str(e).splitlines()[0][:200]}",
                      "restart Docker (sudo systemctl restart docker) and run doctor again")]
    finally:
        client.close()


def runtime_check(client: Any) -> Check:
    """gVisor: whether the engine knows the `runsc` runtime a project may choose (`"runtime": "runsc"`)."""
    from .sandbox import RUNSC_HINT

    runtimes = sorted((client.info().get("Runtimes") or {}).keys())
    if "runsc" in runtimes:
        return Check("gVisor", OK, f"the engine has the runsc runtime (runtimes: {', '.join(runtimes)}): a project "
                     "may choose \"runtime\": \"runsc\"")
    if shutil.which("runsc"):
        return Check("gVisor", WARN, f"runsc is installed here ({shutil.which('runsc')}) but the engine does not "
                     f"know it (runtimes: {', '.join(runtimes)})", RUNSC_HINT)
    return Check("gVisor", OK, f"not set up (optional; runtimes: {', '.join(runtimes)}): install runsc "
                 "(Debian: sudo apt-get install runsc), then " + RUNSC_HINT)


def _engine_failure(host: str, message: str, hint: str = "") -> Check:
    from .sandbox import ENGINE_HINT, engine_link

    if engine_link(host).remote:  # never "install Docker" for an engine on another machine
        return Check("Docker engine", FAIL, message, hint or f"check DOCKER_HOST ({host}) and that dockerd runs there")
    sock = host.removeprefix("unix://") if host.startswith("unix://") else None
    if sock and os.path.exists(sock) and not os.access(sock, os.R_OK | os.W_OK):
        return Check("Docker engine", FAIL, f"the engine's socket {sock} exists, but your user may not use it",
                     "add yourself to the docker group (sudo usermod -aG docker $USER), then log out and in; "
                     "or run rootless Docker and set DOCKER_HOST")
    if hint and hint != ENGINE_HINT:  # the engine's own cause (a hung dockerd) says more than "install Docker"
        return Check("Docker engine", FAIL, message, hint)
    return Check("Docker engine", FAIL, message,
                 "install Docker (Debian: sudo apt-get install docker.io) and start it "
                 "(sudo systemctl start docker), or set DOCKER_HOST to an engine; the local (unsandboxed) "
                 "sandbox works without one")


def engine_link_note() -> str:
    """For the CLI: what is wrong with the link to the engine ("" when nothing is), and its fix."""
    from .sandbox import engine_link

    problem, fix = engine_link().warning()
    return f"{problem} (fix: {fix})" if problem else ""


def _images_check(statuses: list[Any], settings: Settings) -> Check:
    built = [s.spec.name for s in statuses if s.present]
    missing = [s.spec for s in statuses if not s.present]
    detail = f"built: {', '.join(built) or 'none'}"
    if missing:
        detail += f"; not built: {', '.join(s.name for s in missing)}"
    default = next((s for s in missing if s.tag == settings.default_image), None)
    if default is not None:
        return Check("Sandbox images", FAIL, f"{detail} (the default image {default.tag} is missing)",
                     f"agent-desk images build {default.name}")
    fix = f"agent-desk images build {missing[0].name}" if missing else ""
    return Check("Sandbox images", OK, detail, fix)


def base_image_check(client: Any, images_ok: bool = True) -> Check:
    """Which way the base image gets made here (pulled, debootstrap as root, mmdebstrap without root), and
    what is missing when none works: a failure only when the default image is not built either."""
    from .sandbox import base_plan

    plan = base_plan(client)
    if plan.method == "present":
        return Check("Base image", OK, plan.detail)
    if plan.method != "none":
        return Check("Base image", OK, f"not built yet: {plan.detail}", "agent-desk images build minimal")
    return Check("Base image", WARN if images_ok else FAIL, plan.detail, "; then ".join(plan.commands))


# the API key and the endpoint ---------------------------------------------------------------------------
_KEY_SOURCES = {"env": "from ANTHROPIC_API_KEY (the environment; it overrides a stored key)",
                "env-token": "a bearer token from ANTHROPIC_AUTH_TOKEN (it overrides any key)",
                "keyring": "from the system keyring", "settings": "from the settings file (no keyring)"}


def key_checks(settings: Settings) -> list[Check]:
    """Where the key comes from (never the key), then whether the endpoint answers and accepts it."""
    key = resolve_api_key(settings)
    if key is None:
        return [Check("API key", FAIL, "not set",
                      "set it in the window (File › Settings…), or export ANTHROPIC_API_KEY=sk-ant-…"),
                _endpoint_check(settings, None)]
    return [Check("API key", OK, _KEY_SOURCES.get(key.source, key.source)),
            _endpoint_check(settings, key.value, bearer=key.source == "env-token")]


def _endpoint_check(settings: Settings, key: str | None, *, bearer: bool = False) -> Check:
    url = settings.resolved_base_url() or DEFAULT_ENDPOINT
    where = {"env": " (from ANTHROPIC_BASE_URL)", "settings": " (from the settings)"}.get(
        settings.base_url_source(), "")
    status = _get_status(url.rstrip("/") + "/v1/models",
                         {"anthropic-version": "2023-06-01", **_auth_header(key, bearer)})
    if isinstance(status, str):
        return Check("Endpoint", FAIL, f"{url}{where} does not answer ({status})",
                     "check the network (a proxy: HTTPS_PROXY), or the base URL in Settings / ANTHROPIC_BASE_URL")
    if status in (401, 403) and key:
        return Check("Endpoint", FAIL, f"{url}{where} answers, and refuses the API key (HTTP {status})",
                     "set a valid key (console.anthropic.com › API keys) in Settings or ANTHROPIC_API_KEY")
    state = "and accepts the key" if status == 200 and key else f"HTTP {status}"
    return Check("Endpoint", OK, f"{url}{where} answers ({state})")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The key goes to the configured endpoint only: a redirect is an answer, never followed."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _auth_header(key: str | None, bearer: bool) -> dict[str, str]:
    if not key:
        return {}
    return {"authorization": f"Bearer {key}"} if bearer else {"x-api-key": key}


def _get_status(url: str, headers: dict[str, str]) -> int | str:
    """The HTTP status of a GET (an error status is an answer too), or why nothing answered."""
    if not url.lower().startswith(("http://", "https://")):
        return "not an http(s) URL"
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=ENDPOINT_TIMEOUT_S) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return f"{type(reason).__name__}: {str(reason)[:120]}" if str(reason) else type(reason).__name__


# keyring, Qt ---------------------------------------------------------------------------------------------
def keyring_check() -> Check:
    if os.environ.get("AGENT_DESK_NO_KEYRING"):
        return Check("Keyring", WARN, "turned off by AGENT_DESK_NO_KEYRING: keys are kept in 0600 files",
                     "unset AGENT_DESK_NO_KEYRING")
    if not keyring_available():
        return Check("Keyring", WARN, "no keyring backend: the API key and the audit signing key are kept in "
                     "files readable only by you", "install and unlock a Secret Service keyring "
                     "(Debian: sudo apt-get install gnome-keyring), or KWallet")
    import keyring

    backend = keyring.get_keyring()
    return Check("Keyring", OK, f"{type(backend).__module__}.{type(backend).__name__}")


def plugin_checks(settings: Settings) -> list[Check]:
    """Each installed plugin (the `agent_desk.tools` entry points): its tools, package and version, on, off
    or refused and why. No plugin, no line."""
    from .runtime import tools_with_plugins

    _tools, plugins = tools_with_plugins(settings)
    return [Check("Plugin", WARN if p.problem else OK, p.line(),
                  f"fix or uninstall {p.package}, or add {p.entry!r} to plugins_disabled in the settings")
            for p in plugins.found]


def qt_check() -> Check:
    """The Qt platform plugins present, the system libraries the xcb plugin lacks, and a display."""
    try:
        from PySide6.QtCore import QLibraryInfo
    except ImportError as e:
        return Check("Qt", FAIL, f"PySide6 cannot be imported ({e})", "pip install 'PySide6-Essentials'")
    platforms = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms"
    names = sorted(p.name.removeprefix("libq").removesuffix(".so") for p in platforms.glob("libq*.so"))
    xcb = platforms / "libqxcb.so"
    missing = _missing_libraries(xcb) if xcb.exists() else []
    if missing is None:
        return Check("Qt", WARN, f"platform plugins: {', '.join(names)}; the system libraries were not checked "
                     "(no ldd)", "install ldd (Debian: libc-bin)")
    if missing:
        return Check("Qt", FAIL, f"the window's xcb plugin lacks system libraries: {', '.join(missing)}",
                     install_fix(missing))
    display = os.environ.get("WAYLAND_DISPLAY") or os.environ.get("DISPLAY")
    found = f"platform plugins: {', '.join(names)}; the xcb plugin's libraries are all present"
    if not display and not os.environ.get("QT_QPA_PLATFORM"):
        return Check("Qt", WARN, f"{found}; no display (DISPLAY, WAYLAND_DISPLAY unset)",
                     "open the window from a desktop session; `agent-desk --screenshot out.png` works without one")
    return Check("Qt", OK, found)


def qt_start_problem() -> str | None:
    """What keeps the window from starting, said as `agent-desk doctor` says it (the missing system libraries
    and the one command that installs them); None when the Qt check finds nothing wrong."""
    check = qt_check()
    if check.status != FAIL:
        return None
    return (f"agent-desk: the window cannot start: {check.detail}.\n"
            f"  fix: {check.fix}\n"
            "  then start it again; `agent-desk doctor` checks the whole setup (Docker, key, Qt, database).")


def _missing_libraries(plugin: Path) -> list[str] | None:
    """The libraries ldd cannot find for `plugin` (ldd lists the whole tree); None without ldd."""
    ldd = shutil.which("ldd")
    if ldd is None:
        return None
    try:
        out = subprocess.run([ldd, str(plugin)], capture_output=True, text=True, timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return sorted({line.split("=>")[0].strip() for line in out.splitlines() if "not found" in line})


# the database ---------------------------------------------------------------------------------------------
async def database_check(db: str | None) -> Check:
    """The database opens and its chain verifies; a SQLite file not made yet is fine (made on first use)."""
    from .config import default_db_url, sqlite_file
    from .runtime import open_store

    url = db or default_db_url()
    path = sqlite_file(url)
    if path is not None and not path.exists():
        return Check("Database", OK, f"{path} (not made yet: it is created on first use)")
    shown = str(path) if path is not None else _hide_password(url)
    try:
        store = await open_store(url)
    except AgentDeskError as e:
        return Check("Database", FAIL, f"{shown}: {e!s}", e.hint or "check --db / AGENT_DESK_DB")
    try:
        result = await store.verify()
    finally:
        await store.close()
    if not result.ok:
        return Check("Database", FAIL, f"{shown}: the audit chain is BROKEN ({result.problem}): {result.message}",
                     "`agent-desk audit verify` names the first bad entry; keep the file as evidence and start a "
                     "new database with --db")
    return Check("Database", OK, f"{shown}: the audit chain verifies ({result.count} entries)")


def _hide_password(url: str) -> str:
    try:
        from sqlalchemy.engine import make_url

        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(an unreadable URL)"


# a project's sandbox, checked when it is opened or saved ----------------------------------------------------
GREEN, AMBER, RED = "green", "amber", "red"
_WORSE = {GREEN: 0, AMBER: 1, RED: 2}


@dataclass(frozen=True, slots=True)
class SandboxStatus:
    """What the status bar says of a project's sandbox: a colour, plain words, what else was seen (`detail`),
    and the one action that fixes it: "build" (`build`: a catalog name, or "project"), "pick" (the project's
    settings), "fix" (`fix` says what to run) or "retry"."""

    level: str
    text: str
    detail: str = ""
    action: str = ""
    fix: str = ""
    build: str = ""

    def worse(self, other: SandboxStatus) -> bool:
        return _WORSE[self.level] > _WORSE[other.level]


def check_project_sandbox(path: str, image: str, settings: dict[str, Any] | None = None) -> SandboxStatus:
    """The engine (answers, version), the folder against the sandbox's uid, and the image (on the engine,
    buildable, or changed since its build). Blocking: run it on a worker thread."""
    from .sandbox import SandboxConfig

    settings = dict(settings or {})
    if ProjectSettings.of(settings).sandbox == "local":
        return SandboxStatus(AMBER, "Unsandboxed: tools run on this machine, as you", action="pick",
                             detail="the project's settings chose the local sandbox")
    folder = project_folder_status(path, image, settings)
    if folder.action == "pick":  # the folder is missing or the sandbox settings invalid: nothing more to check
        return folder
    found = [folder]
    client, engine = _engine_status()
    if client is None:
        return engine
    if engine.level != GREEN:
        found.append(engine)
    try:
        found.append(_image_status(client, path, SandboxConfig.from_settings(settings, image=image).image, settings))
    finally:
        client.close()
    worst = max(found, key=lambda s: (_WORSE[s.level], bool(s.text)))
    detail = "; ".join(x for x in (*(s.detail for s in found), engine.detail if engine.level == GREEN else "") if x)
    return SandboxStatus(worst.level, worst.text, detail, worst.action, worst.fix, worst.build)


def project_folder_status(path: str, image: str, settings: dict[str, Any] | None = None) -> SandboxStatus:
    """The project's folder against its sandbox's user (`folder_status`): green for the local sandbox and for a
    workspace that lives on a remote engine, red when the folder is missing or the sandbox settings invalid."""
    from .sandbox import SandboxConfig, workspace_where

    settings = dict(settings or {})
    if ProjectSettings.of(settings).sandbox == "local" or workspace_where(settings):
        return SandboxStatus(GREEN, "", "")
    if not os.path.isdir(path):
        return SandboxStatus(RED, "Project folder missing", f"{path} does not exist", action="pick")
    try:
        config = SandboxConfig.from_settings(settings, image=image)
    except AgentDeskError as e:
        return SandboxStatus(RED, "Sandbox settings invalid", e.user_message(), action="pick")
    return folder_status(path, config.uid, config.workspace_readonly)


def _engine_status() -> tuple[Any, SandboxStatus]:
    """(a client, its version in `detail`, amber when the link to it is unencrypted) or (None, red "Docker
    engine not running" with a Check again)."""
    from .sandbox import connect, engine_link

    link = engine_link()
    host = link.address
    try:
        client = connect()
        info = client.version()
    except Exception as e:
        message = str(e) if isinstance(e, AgentDeskError) else str(e).splitlines()[0][:200]
        hint = e.hint if isinstance(e, AgentDeskError) else ""
        return None, SandboxStatus(RED, "Docker engine not running", message, action="retry",
                                   fix=_engine_failure(host, message, hint or "").fix)
    problem, fix = link.warning()
    if problem:
        return client, SandboxStatus(AMBER, "The link to the engine is not encrypted", problem, action="fix", fix=fix)
    return client, SandboxStatus(GREEN, "", f"Docker {info.get('Version', '?')} at {host}")


def folder_status(path: str, uid: int | None = None, readonly: bool = False) -> SandboxStatus:
    """Whether the sandbox's user (the folder's owner, or uid 1000 when root owns it) may read the folder,
    and write it and what lies directly in it (unless the workspace is mounted read-only)."""
    import shlex
    import stat

    from .sandbox import folder_owner

    st = os.stat(path)
    uid, gid = (uid, uid) if uid else folder_owner(path)
    if os.geteuid() == 0:  # root's own uid is never the sandbox's: the folder goes to the sandbox's user
        owner_fix = f"chown -R {uid}:{gid} {shlex.quote(path)}   (the sandbox's user; it never runs as root)"
    else:
        owner_fix = f"sudo chown -R \"$(id -u):$(id -g)\" {shlex.quote(path)}   (then the sandbox runs as you)"
    fix = f"{owner_fix}, or tick \"Mount the workspace read-only\" in the project's settings"
    owner = "root" if st.st_uid == 0 else f"uid {st.st_uid}"
    if not _may(st, uid, gid, 0o5):
        return SandboxStatus(RED, f"Folder owned by {owner}: the sandbox (uid {uid}) cannot read it",
                             f"{path} is {stat.filemode(st.st_mode)} {owner}", action="fix", fix=fix)
    if readonly:
        return SandboxStatus(GREEN, "", "the workspace is mounted read-only")
    if not _may(st, uid, gid, 0o3):
        return SandboxStatus(RED, f"Folder owned by {owner}: the sandbox (uid {uid}) cannot write in it",
                             f"{path} is {stat.filemode(st.st_mode)} {owner}", action="fix", fix=fix)
    stuck = _unwritable_entries(path, uid, gid)
    if stuck:
        names = ", ".join(stuck[:3]) + ("…" if len(stuck) > 3 else "")
        return SandboxStatus(AMBER, f"{len(stuck)} item(s) the sandbox (uid {uid}) cannot change: {names}",
                             "they belong to another user (often root, from an earlier docker run)",
                             action="fix", fix=fix)
    return SandboxStatus(GREEN, "", "")


def _may(st: os.stat_result, uid: int, gid: int, bits: int) -> bool:
    """Whether uid:gid has `bits` (r=4 w=2 x=1) on a file of this stat, as the kernel decides for a non-root."""
    shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
    return (st.st_mode >> shift) & bits == bits


def _unwritable_entries(path: str, uid: int, gid: int, limit: int = 500) -> list[str]:
    """What lies directly in the folder that the sandbox cannot write (the first `limit` entries)."""
    import stat

    out = []
    with os.scandir(path) as it:
        for n, entry in enumerate(it):
            if n >= limit:
                break
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISLNK(st.st_mode) or entry.name in (".git", ".agent-desk"):
                continue  # control folders are read-only in the sandbox anyway
            need = 0o3 if stat.S_ISDIR(st.st_mode) else 0o2
            if not _may(st, uid, gid, need):
                out.append(entry.name + ("/" if stat.S_ISDIR(st.st_mode) else ""))
    return sorted(out)


def _image_status(client: Any, path: str, image: str, settings: dict[str, Any]) -> SandboxStatus:
    """The image on the engine, or what builds it; a project image whose file changed since its build."""
    import docker.errors

    from .sandbox import image_name_for_tag, refuse_loosening

    shown = image.removesuffix(":latest")
    built = _built_from(image, settings)
    try:
        img = client.images.get(image)
    except docker.errors.ImageNotFound:
        name = image_name_for_tag(image)
        if name:
            return SandboxStatus(RED, f"Image missing: {shown}", f"the catalog image {name} is not built",
                                 action="build", build=name)
        if built:
            return SandboxStatus(RED, "Image missing: the project's own image", f"{image} is not on this engine",
                                 action="build", build="project")
        return SandboxStatus(RED, f"Image missing: {shown}", f"{image} is not on this engine", action="pick")
    try:
        refuse_loosening(img)
    except AgentDeskError as e:
        return SandboxStatus(RED, "Image refused: it declares a VOLUME", e.user_message(), action="pick")
    changed = _project_image_change(path, built) if built else None
    return changed or SandboxStatus(GREEN, f"Sandbox ready: {shown}", "")


def _built_from(image: str, settings: dict[str, Any]) -> dict[str, Any]:
    """What the project's own image was built from, when the project uses it (a catalog image chosen since
    leaves the setting behind, unused)."""
    own = image.startswith("agent-desk/project-")  # project_image_tag's repository
    return dict(ProjectSettings.of(settings).project_image or {}) if own else {}


def project_image_note(path: str, image: str, settings: dict[str, Any] | None) -> str:
    """For the CLI: what changed in the project's own image file since its build ("" when nothing did)."""
    built = _built_from(image, dict(settings or {}))
    change = _project_image_change(path, built) if built else None
    return f"{change.text} ({change.detail})" if change else ""


def _project_image_change(path: str, built: dict[str, Any]) -> SandboxStatus | None:
    """Amber when the project's image file is gone, unreadable, or differs from what was built (the agent may
    have edited it): the built image stays in use until the person builds again."""
    from .sandbox import find_project_image, project_image_digest

    try:
        source = find_project_image(path)
        digest = project_image_digest(path, source) if source is not None else ""
    except AgentDeskError as e:
        return SandboxStatus(AMBER, "The project's image file cannot be read: the last build is used",
                             e.user_message(), action="build", build="project")
    if source is None:
        return SandboxStatus(AMBER, "The project's image file is gone: the last build is used", action="pick")
    if digest != built.get("digest"):
        what = "Dockerfile" if source.builds else source.name
        return SandboxStatus(AMBER, f"{what} changed since the build: Build again",
                             f"{source.path}, its Dockerfile or its context differs from what was built (the agent "
                             "may have edited it); the last build is used until you build again",
                             action="build", build="project")
    return None
