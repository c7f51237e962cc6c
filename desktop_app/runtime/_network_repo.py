"""A network allowlist shipped in the repository (.agent-desk/network.toml): the domains a project's sessions
need, proposed by the repository, used only once the person approved exactly those patterns (consent bound to
the digest of what the file adds). Until then only the person's own list applies, and a refusal of a domain the
file lists says which consent allows it. A repository proposes domains only: no address, no wildcard over a
shared suffix, no punycode (core's `repository_refusal`); the mode (off, allowlist, full) stays the person's."""

from __future__ import annotations

import hashlib
import time
import tomllib
from dataclasses import dataclass

from ..config import ConsentRecord, consent_record, record_consent
from ..core import (
    AgentDeskError,
    ConfigError,
    ConsentKind,
    ConsentStatus,
    NetworkAllowlist,
    ProjectInfo,
    read_beneath,
    repository_refusal,
)
from ._consent import CONSENT_KINDS, Consent, ConsentSubject

NETWORK_FILE = ".agent-desk/network.toml"
_LIMIT = 64 * 1024


def _error(why: str) -> ConfigError:
    return ConfigError(f"{NETWORK_FILE}: {why}",
                       hint='write allow = ["pypi.org", "*.pythonhosted.org", "@python"]: domains and presets '
                            "only (your own list, in the project settings, may hold anything)")


def read_repo_entries(project_dir: str) -> list[str] | None:
    """The patterns the repository's file lists, checked (None: no file). A link, a malformed file or a
    pattern a repository may not list is a ConfigError naming the file and the pattern."""
    raw = read_beneath(project_dir, NETWORK_FILE, limit=_LIMIT)
    if raw is None:
        return None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _error(f"not TOML ({exc})") from None
    unknown = sorted(set(data) - {"allow"})
    if unknown:
        raise _error(f"unknown key(s) {', '.join(unknown)} (only allow: the mode is yours to set)")
    entries = data.get("allow", [])
    NetworkAllowlist.parse(entries)  # a malformed pattern: the setting's own error
    for entry in entries:
        why = repository_refusal(entry)
        if why is not None:
            raise _error(f"a repository cannot list {entry!r}: {why}")
    return sorted({str(e).strip().lower() for e in entries})


def canonical_text(entries: list[str]) -> str:
    """What the consent is bound to: the patterns, one a line, sorted (comments and order do not matter)."""
    return "".join(f"{e}\n" for e in entries)


def network_consents(project: ProjectInfo) -> list[Consent]:
    """The repository's list against the person's approval (none when there is no file). A file that cannot be
    used is shown with its error as the subject: it can be seen, never approved."""
    record = consent_record(ConsentKind.NETWORK, project.path)
    approved = record.sha256 if record else None
    try:
        entries = read_repo_entries(project.path)
    except AgentDeskError as exc:
        text = f"# {exc.user_message()}\n"
        digest = hashlib.sha256(text.encode()).hexdigest()
        return [Consent(ConsentKind.NETWORK, project.path, "", ConsentStatus.of(digest, approved), text, digest,
                        approved, record.text if record else None)]
    if entries is None:
        return []
    text = canonical_text(entries)
    digest = hashlib.sha256(text.encode()).hexdigest()
    return [Consent(ConsentKind.NETWORK, project.path, "", ConsentStatus.of(digest, approved), text, digest,
                    approved, record.text if record else None)]


def _check(consent: Consent) -> None:
    entries = read_repo_entries(consent.project_dir)  # a file that cannot be used: its error
    if entries is None or hashlib.sha256(canonical_text(entries).encode()).hexdigest() != consent.digest:
        raise ConfigError(f"{NETWORK_FILE} changed since it was shown: nothing approved", hint="review it again")


def _record(project: ProjectInfo, consent: Consent, revoke: bool) -> None:
    record = None if revoke or consent.digest is None or consent.current is None else \
        ConsentRecord(consent.digest, consent.current, time.time())
    record_consent(ConsentKind.NETWORK, project.path, "", record)


def approve_hint(project_dir: str) -> str:
    return (f"the repository's {NETWORK_FILE} lists it, not approved by you: agent-desk consent approve --kind "
            f"{ConsentKind.NETWORK.value} --project {project_dir}")


def _warning(consent: Consent) -> str:
    what = "was never approved" if consent.status is ConsentStatus.NEW else "changed since you approved it"
    return (f"the repository's network list ({consent.project_dir}/{NETWORK_FILE}) {what}: its domains are not "
            f"reachable; only your own list applies. Review and approve it with: agent-desk consent approve "
            f"--kind {ConsentKind.NETWORK.value} --project {consent.project_dir}")


@dataclass(frozen=True, slots=True)
class RepoNetwork:
    """The repository's list for the gate: what applies (approved exactly as it is now) and what waits."""

    approved: NetworkAllowlist
    waiting: NetworkAllowlist


def repo_network(project_dir: str) -> RepoNetwork:
    """Blocking (files). A file that cannot be used applies nothing and waits for nothing."""
    try:
        entries = read_repo_entries(project_dir)
    except AgentDeskError:
        entries = None
    if not entries:
        return RepoNetwork(NetworkAllowlist(), NetworkAllowlist())
    record = consent_record(ConsentKind.NETWORK, project_dir)
    digest = hashlib.sha256(canonical_text(entries).encode()).hexdigest()
    parsed = NetworkAllowlist.parse(entries)
    if record is not None and record.sha256 == digest:
        return RepoNetwork(parsed, NetworkAllowlist())
    return RepoNetwork(NetworkAllowlist(), parsed)


CONSENT_KINDS[ConsentKind.NETWORK] = ConsentSubject(NETWORK_FILE, network_consents, _check, _record, _warning)
