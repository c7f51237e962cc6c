"""A failed Qt start tells the truth: the system libraries the window's xcb plugin lacks, named as `agent-desk
doctor` names them, with the one command that installs them on this distribution; and that command for Debian,
Ubuntu, Fedora and Arch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from PySide6.QtCore import QLibraryInfo

from desktop_app.doctor import QT_LIB_PACKAGES, _missing_libraries, install_fix, linux_family, qt_check
from tests.kit import isolated_environ

ROOT = Path(__file__).resolve().parents[1]
DEBIAN = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
UBUNTU = 'NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\n'
FEDORA = 'NAME="Fedora Linux"\nID=fedora\n'
ARCH = 'NAME="Arch Linux"\nID=arch\n'
MINT = 'NAME="Linux Mint"\nID=linuxmint\nID_LIKE="ubuntu debian"\n'


def test_the_distribution_family_is_read_from_os_release():
    assert [linux_family(t) for t in (DEBIAN, UBUNTU, FEDORA, ARCH, MINT)] == [
        "debian", "debian", "fedora", "arch", "debian"]
    assert linux_family('ID=gentoo\n') == "" and linux_family("") == ""


def test_the_fix_is_one_command_of_the_distributions_package_manager():
    missing = ["libxcb-icccm.so.4", "libxcb-keysyms.so.1", "libxcb-randr.so.0"]
    assert install_fix(missing, "debian") == "sudo apt-get install libxcb-icccm4 libxcb-keysyms1 libxcb-randr0"
    assert install_fix(missing, "fedora") == "sudo dnf install libxcb xcb-util-keysyms xcb-util-wm"
    assert install_fix(missing, "arch") == "sudo pacman -S --needed libxcb xcb-util-keysyms xcb-util-wm"
    # a library no table names: the command for the rest, and how to find its package
    assert install_fix(["libxcb-cursor.so.0", "libfoo.so.3"], "fedora") == (
        "sudo dnf install xcb-util-cursor; find the package of libfoo.so.3 with dnf provides")
    assert install_fix(["libfoo.so.3"], "") == "find the package of libfoo.so.3 with apt-file search"


def test_every_library_the_xcb_plugin_may_lack_has_a_package_in_each_family():
    for family in ("debian", "fedora", "arch"):
        fix = install_fix(sorted(QT_LIB_PACKAGES), family)
        assert "find the package" not in fix, (family, fix)


def test_a_window_that_cannot_start_names_the_missing_packages_and_the_command(tmp_path):
    """On X11 (DISPLAY set, no platform chosen): with libraries missing, the start ends with exit 2 and the doctor's
    words, not Qt's abort; with none missing, it gets past the check (then fails to reach the display, said too)."""
    plugin = Path(QLibraryInfo.path(QLibraryInfo.LibraryPath.PluginsPath)) / "platforms" / "libqxcb.so"
    missing = _missing_libraries(plugin)
    assert missing is not None
    env = isolated_environ(tmp_path, PYTHONPATH=str(ROOT), DISPLAY=":77")
    for key in ("QT_QPA_PLATFORM", "WAYLAND_DISPLAY"):
        env.pop(key, None)
    out = subprocess.run([sys.executable, "-m", "desktop_app.app"], env=env, capture_output=True, text=True,
                         timeout=120)
    assert "Traceback" not in out.stderr
    if missing:
        check = qt_check()
        assert out.returncode == 2, out.stderr
        assert f"fix: {check.fix}" in out.stderr and "agent-desk doctor" in out.stderr
        for lib in missing:
            assert lib in out.stderr
        assert "Reinstalling the application may fix this problem" not in out.stderr  # Qt's words, not ours
    else:
        assert out.returncode != 0 and "agent-desk doctor" in out.stderr


def test_the_quick_start_lists_the_system_packages_per_distribution():
    readme = (ROOT / "README.md").read_text()
    quick = readme[readme.index("## Quick start"):readme.index("## Install")]
    for family, label in (("debian", "# Debian, Ubuntu"), ("fedora", "# Fedora"), ("arch", "# Arch")):
        assert f"{label}\n{install_fix(sorted(QT_LIB_PACKAGES), family)}\n" in quick, family
    assert "agent-desk doctor" in quick
