"""Suite-wide settings: Qt runs offscreen, and the engine's data never lands in the user's folders."""

from __future__ import annotations

import os

# Set before anything imports Qt: the window tests run without a display.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# Keep settings, keyring fallbacks and databases of the suite away from the real user's.
os.environ.setdefault("AGENT_DESK_TESTING", "1")


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")
