"""The trust of a project's rules file and the grant of its hooks file: what the person last confirmed,
compared with what is on disk now."""

from __future__ import annotations

import difflib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import Settings, trust_rules, trusted_rules
from ..core import (
    HOOKS_FILE,
    Action,
    ProjectInfo,
    Rule,
    RuleSet,
    UserHookSpec,
    append_project_rule,
    hooks_digest,
    parse_user_hooks,
    project_rules_path,
    read_beneath,
    read_project_rules,
    rules_text_with,
    user_hooks_from_toml,
    write_beneath,
)
from ._project_settings import HOOKS_GRANT_KEY

log = logging.getLogger(__name__)

# the trust of a project's rules -------------------------------------------------------------------
# The sandbox, or the repository the project was cloned from, can write .agent-desk/rules.toml: it is
# used only as the person last trusted it. Rules the desk writes itself are trusted as written.
@dataclass(frozen=True, slots=True)
class RulesTrust:
    """A project's rules file against what the person last trusted. `status`: "none" (no file, nothing
    trusted), "trusted", "new" (never trusted, e.g. shipped by a repository), "changed" or "deleted"."""

    project_dir: str
    status: str
    current: str | None  # the file's text, as read (without following links)
    trusted: str | None  # the text last trusted, None when nothing was

    @property
    def ok(self) -> bool:
        return self.status in ("none", "trusted")

    def diff(self) -> str:
        """A unified diff from the trusted text to the file (the whole file when it is new)."""
        old, new = (self.trusted or "").splitlines(keepends=True), (self.current or "").splitlines(keepends=True)
        return "".join(difflib.unified_diff(old, new, "trusted rules.toml", "rules.toml on disk"))

    def warning(self) -> str:
        """One line saying what the session does about untrusted rules, and how to trust them."""
        what = {"new": "were never trusted", "changed": "changed since you trusted them",
                "deleted": "were deleted since you trusted them"}.get(self.status, "are not trusted")
        return (f"the project's rules ({project_rules_path(self.project_dir)}) {what}: this session uses "
                f"your own rules only (and the last trusted deny/ask rules). Review and trust them with: "
                f"agent-desk rules trust {self.project_dir}")


def project_rules_trust(project_dir: str | os.PathLike[str]) -> RulesTrust:
    """Read the project's rules file (a link is refused: ConfigError) and compare it with the trust record."""
    path = os.fspath(project_dir)
    current = read_project_rules(path)
    record = trusted_rules(path)
    trusted = record.text if record else None
    if current is None:
        status = "none" if trusted is None else "deleted"
    elif trusted is None:
        status = "new"
    else:
        status = "trusted" if current == trusted else "changed"
    return RulesTrust(path, status, current, trusted)


def trust_project_rules(trust: RulesTrust) -> None:
    """The person confirmed the rules shown in `trust`: exactly that text is trusted (a file changed since
    it was shown stays untrusted). Rules that cannot be read are refused (ConfigError), not trusted."""
    if trust.current is not None:
        RuleSet.from_text(trust.current, where=f"{project_rules_path(trust.project_dir)}: ")
    trust_rules(trust.project_dir, trust.current)


def write_project_rules(project_dir: str | os.PathLike[str], text: str) -> Path:
    """Write the project's rules as the person edited them (no link followed), trusted as written."""
    path = write_beneath(project_dir, ".agent-desk/rules.toml", text)
    trust_rules(project_dir, text)
    return path


def append_trusted_rule(project_dir: str | os.PathLike[str], rule: Rule) -> None:
    """"Always allow": add the rule to the file and to the trusted text alike. A file that was untrusted
    stays so (its unconfirmed part is still the difference); a trusted one stays trusted."""
    record = trusted_rules(project_dir)
    append_project_rule(project_dir, rule)
    trust_rules(project_dir, rules_text_with(record.text if record else None, rule))


def project_rules(trust: RulesTrust) -> RuleSet:
    """The project's rules a session uses: the file when trusted; otherwise only the deny and ask rules of
    the last trusted text (they can only narrow what runs), and no mode."""
    where = f"{project_rules_path(trust.project_dir)}: "
    if trust.ok:
        text = trust.current
        return RuleSet.from_text(text, f"project:{project_rules_path(trust.project_dir)}", where=where) \
            if text is not None else RuleSet()
    if not trust.trusted:
        return RuleSet()
    kept = RuleSet.from_text(trust.trusted, f"project-trusted:{project_rules_path(trust.project_dir)}")
    return RuleSet([r for r in kept.rules if r.action is not Action.ALLOW])

@dataclass(frozen=True, slots=True)
class HooksTrust:
    """The project's hooks file against the person's grant. `status`: "none" (no file), "granted", "new"
    (never granted) or "changed" (changed since the grant). Only a granted file's hooks run."""

    project_dir: str
    status: str
    text: str | None
    digest: str | None

    @property
    def ok(self) -> bool:
        return self.status in ("none", "granted")

    def warning(self) -> str:
        what = "were never granted" if self.status == "new" else "changed since you granted them"
        return (f"the project's hooks ({Path(self.project_dir) / HOOKS_FILE}) {what}: they do not run. Review and "
                f"grant them in the project settings (Hooks), or with: agent-desk hooks grant --project "
                f"{self.project_dir}")


def project_hooks_trust(project: ProjectInfo) -> HooksTrust:
    """Read the project's hooks file (no link followed: a link is a ConfigError) and compare it with the grant."""
    raw = read_beneath(project.path, HOOKS_FILE, limit=256 * 1024)
    if raw is None:
        return HooksTrust(project.path, "none", None, None)
    digest, granted = hooks_digest(raw), project.settings.get(HOOKS_GRANT_KEY)
    status = "granted" if granted == digest else ("changed" if granted else "new")
    return HooksTrust(project.path, status, raw.decode("utf-8", "replace"), digest)


def user_hook_specs(settings: Settings, project: ProjectInfo) -> tuple[list[UserHookSpec], HooksTrust]:
    """The person's hooks: the settings' first, then the project's file when its grant matches it. Blocking
    (a file): call it off the loop. A hook that cannot be read is a ConfigError: the session does not start
    without hooks the person asked for."""
    specs = parse_user_hooks(settings.hooks or None, "settings: hooks")
    trust = project_hooks_trust(project)
    if trust.status == "granted" and trust.text is not None:
        specs += user_hooks_from_toml(trust.text, str(Path(project.path) / HOOKS_FILE))
    elif not trust.ok:
        log.warning("%s", trust.warning())
    return specs, trust


def grant_hooks(project: ProjectInfo, trust: HooksTrust, *, revoke: bool = False) -> dict[str, Any]:
    """The project's settings with the hooks file, exactly as shown in `trust`, granted (or the grant taken
    back). A file whose hooks cannot be read is refused (ConfigError), not granted."""
    st = {k: v for k, v in project.settings.items() if k != HOOKS_GRANT_KEY}
    if revoke or trust.text is None:
        return st
    user_hooks_from_toml(trust.text, str(Path(project.path) / HOOKS_FILE))
    return {**st, HOOKS_GRANT_KEY: trust.digest}
