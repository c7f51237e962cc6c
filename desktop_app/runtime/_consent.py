"""Consent: the project files the sandbox (or a cloned repository) can write are used only as the person last
approved them: the rules file, the hooks file, each MCP server entry. One `Consent` type for all of them; a kind
is one `ConsentKind` member and one `ConsentSubject` in `CONSENT_KINDS` (how its subjects are read and digested,
checked, recorded and warned about). Every approval is a record in the user's consent.json (config.py), out of
the sandbox's reach and out of a shared audit database; approvals the project settings held before (the hooks
grant, the MCP grants) are read until the first approval or revocation of their kind moves them."""

from __future__ import annotations

import difflib
import hashlib
import json
import logging
import os
import posixpath
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import (
    ConsentRecord,
    Settings,
    config_dir,
    consent_record,
    consent_records,
    record_consent,
    rules_digest,
    trusted_rules,
)
from ..core import (
    HOOKS_FILE,
    PROJECT_SKILLS,
    PROJECT_TEMPLATES,
    WORKSPACE,
    Action,
    AgentDeskError,
    AgentTemplate,
    ConfigError,
    ConsentKind,
    ConsentStatus,
    Instructions,
    ProjectInfo,
    Rule,
    RuleSet,
    UserHookSpec,
    append_project_rule,
    build_instructions,
    hooks_digest,
    instructions_digest,
    instructions_text,
    load_templates,
    parse_user_hooks,
    price_for,
    project_rules_path,
    read_beneath,
    read_project_instructions,
    read_project_rules,
    read_project_skills,
    read_template_folder,
    rules_text_with,
    user_hooks_from_toml,
    write_beneath,
)
from ._project_settings import HOOKS_GRANT_KEY, MCP_GRANT_DIGESTS_KEY, MCP_GRANTS_KEY

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Consent:
    """One subject (kind, project folder, name) against the person's approval. `current` is the subject as read
    (None: absent); `approved_text` is kept for the rules only (the last trusted deny/ask rules still apply)."""

    kind: ConsentKind
    project_dir: str
    name: str  # "" for a project's single file; the server's name for MCP
    status: ConsentStatus
    current: str | None
    digest: str | None  # the sha256 of the current subject
    approved_digest: str | None = None
    approved_text: str | None = None
    asks: str | None = None  # where an MCP server asks to run ("sandbox", "sandbox+network", "host", "http")
    detail: str | None = None  # what else the approval covers, shown after the subject: the hooks' scripts
    rel: str | None = None  # the subject's own file, when the kind has one per subject (a template)

    @property
    def ok(self) -> bool:
        """Whether the subject may be used whole: there is none, or it is exactly what was approved."""
        return self.status in (ConsentStatus.NONE, ConsentStatus.APPROVED)

    @property
    def label(self) -> str:
        """How the person names the subject: "rules", "hooks", "skills", "mcp server NAME", "template NAME"."""
        noun = "mcp server" if self.kind is ConsentKind.MCP else self.kind.value
        return f"{noun} {self.name}" if self.name else noun

    @property
    def file(self) -> str:
        """The file the subject lives in, relative to the project."""
        return self.rel or CONSENT_KINDS[self.kind].file

    def diff(self) -> str:
        """A unified diff from the approved text to the subject (the whole subject when it is new)."""
        file = self.file.rsplit("/", 1)[-1]
        shown = (self.current or "") + (self.detail or "")
        old, new = (self.approved_text or "").splitlines(keepends=True), shown.splitlines(keepends=True)
        return "".join(difflib.unified_diff(old, new, f"trusted {file}", f"{file} on disk"))

    def warning(self) -> str:
        """One line saying what a session does about the unapproved subject, and how to approve it."""
        return CONSENT_KINDS[self.kind].warning(self)


@dataclass(frozen=True, slots=True)
class ConsentSubject:
    """How one kind of subject is found, checked and recorded: a new kind is one of these in CONSENT_KINDS."""

    file: str  # where the subject lives, relative to the project
    read: Callable[[ProjectInfo], list[Consent]]  # each subject of the kind, read and digested (blocking: files)
    check: Callable[[Consent], None]  # a subject that cannot be used is refused (ConfigError), not approved
    record: Callable[[ProjectInfo, Consent, bool], None]  # approve (revoke: True), in consent.json
    warning: Callable[[Consent], str]


def consents(project: ProjectInfo, kind: ConsentKind | None = None) -> list[Consent]:
    """The project's subjects of every kind (or of one), each against the person's approval."""
    return [c for k, subject in CONSENT_KINDS.items() if kind in (None, k) for c in subject.read(project)]


def approve(project: ProjectInfo, consent: Consent, *, revoke: bool = False) -> dict[str, Any]:
    """Approve exactly the subject shown in `consent` (or take the approval back), in consent.json. Returns the
    project's settings without the approval they held before consent.json, if any: the caller saves them when
    they differ (from then on the record alone speaks)."""
    subject = CONSENT_KINDS[consent.kind]
    if not revoke:
        subject.check(consent)
    subject.record(project, consent, revoke)
    return _without_legacy(project.settings, consent.kind, consent.name)


def consent_stamp(project: ProjectInfo) -> tuple[tuple[str, str, str], ...]:
    """The approvals a runtime is built on (hooks and MCP servers: they decide what starts and runs; project
    templates and skills: the catalogs a runtime reads once), to tell
    when a runtime is out of date. Blocking (a file): call it off the loop. The rules are not in it: their
    change reaches an open runtime by reload, without a new sandbox."""
    out = []
    hooks = _approved(ConsentKind.HOOKS, project)
    if hooks is not None:
        out.append((ConsentKind.HOOKS.value, "", hooks))
    try:
        entries = _project_servers(project.path)
    except AgentDeskError:  # a file that cannot be read starts none of its servers: nothing approved to tell
        entries = []
    for entry in entries:
        digest = _approved(ConsentKind.MCP, project, entry.name, entry.asks_for)
        if digest is not None:
            out.append((ConsentKind.MCP.value, entry.name, digest))
    for kind in (ConsentKind.TEMPLATE, ConsentKind.SKILLS):  # what the catalogs of templates and skills hold
        out += [(kind.value, name, r.sha256) for name, r in sorted(consent_records(kind, project.path).items())]
    return tuple(out)


def _approved(kind: ConsentKind, project: ProjectInfo, name: str = "", asks_for: str | None = None) -> str | None:
    """The digest the person approved of this subject: consent.json's record, else what the project settings
    held before consent.json ("" for an MCP grant given for another relaxation: a change, never a match)."""
    record = consent_record(kind, project.path, name)
    if record is not None:
        return record.sha256
    st = project.settings
    if kind is ConsentKind.HOOKS:
        return st.get(HOOKS_GRANT_KEY) or None
    grants = st.get(MCP_GRANTS_KEY) or {}
    if kind is not ConsentKind.MCP or not isinstance(grants, dict) or name not in grants:
        return None
    digest = (st.get(MCP_GRANT_DIGESTS_KEY) or {}).get(name)
    return "" if digest is None or grants.get(name) != asks_for else str(digest)


def _without_legacy(settings: dict[str, Any], kind: ConsentKind, name: str) -> dict[str, Any]:
    if kind is ConsentKind.HOOKS:
        return {k: v for k, v in settings.items() if k != HOOKS_GRANT_KEY}
    if kind is not ConsentKind.MCP or not any(k in settings for k in (MCP_GRANTS_KEY, MCP_GRANT_DIGESTS_KEY)):
        return settings
    out = dict(settings)
    for key in (MCP_GRANTS_KEY, MCP_GRANT_DIGESTS_KEY):
        rest = {k: v for k, v in (settings.get(key) or {}).items() if k != name}
        if rest:
            out[key] = rest
        else:
            out.pop(key, None)
    return out


def _record_digest(kind: ConsentKind, consent: Consent, revoke: bool) -> None:
    """Record the digest shown in `consent` (hooks, an MCP server: no text kept), or take the approval back."""
    record = None if revoke or consent.digest is None else ConsentRecord(consent.digest, None, time.time())
    record_consent(kind, consent.project_dir, consent.name, record)


# the rules file -----------------------------------------------------------------------------------------
# Rules the desk writes itself are trusted as written; a file that changed stays to be reviewed.
def project_rules_trust(project_dir: str | os.PathLike[str]) -> Consent:
    """Read the project's rules file (a link is refused: ConfigError) and compare it with the consent record."""
    path = os.fspath(project_dir)
    current = read_project_rules(path)
    record = trusted_rules(path)  # a rules record keeps its text, checked against its digest
    approved = record.sha256 if record else None
    digest = rules_digest(current) if current is not None else None
    return Consent(ConsentKind.RULES, path, "", ConsentStatus.of(digest, approved), current, digest, approved,
                   record.text if record else None)


def trust_project_rules(consent: Consent) -> None:
    """The person confirmed the rules shown in `consent`: exactly that text is trusted (a file changed since it
    was shown stays untrusted). Rules that cannot be read are refused (ConfigError), not trusted."""
    _check_rules(consent)
    _record_rules(consent.project_dir, consent.current)


def write_project_rules(project_dir: str | os.PathLike[str], text: str) -> Path:
    """Write the project's rules as the person edited them (no link followed), trusted as written."""
    path = write_beneath(project_dir, ".agent-desk/rules.toml", text)
    _record_rules(project_dir, text)
    return path


def append_trusted_rule(project_dir: str | os.PathLike[str], rule: Rule) -> None:
    """"Always allow": add the rule to the file and to the trusted text alike. A file that was untrusted
    stays so (its unconfirmed part is still the difference); a trusted one stays trusted."""
    record = trusted_rules(project_dir)
    append_project_rule(project_dir, rule)
    _record_rules(project_dir, rules_text_with(record.text if record else None, rule))


def project_rules(consent: Consent) -> RuleSet:
    """The project's rules a session uses: the file when trusted. Otherwise only what narrows: the deny and ask
    rules of the file as it is now (a person's deny holds before the file is reviewed) and of the last trusted
    text; no allow rule and no mode until the person trusts the file."""
    path = project_rules_path(consent.project_dir)
    if consent.ok:
        text = consent.current
        return RuleSet.from_text(text, f"project:{path}", where=f"{path}: ") if text is not None else RuleSet()
    narrowing: list[Rule] = []
    if consent.current is not None:
        try:
            narrowing += _narrowing(RuleSet.from_text(consent.current, f"project-untrusted:{path}"))
        except AgentDeskError as e:  # what cannot be read cannot narrow; the trusted text's rules still do
            log.warning("the project's untrusted rules file cannot be read, its deny rules do not apply: %s",
                        e.user_message())
    if consent.approved_text:
        narrowing += _narrowing(RuleSet.from_text(consent.approved_text, f"project-trusted:{path}"))
    return RuleSet(narrowing)


def _narrowing(rules: RuleSet) -> list[Rule]:
    return [r for r in rules.rules if r.action is not Action.ALLOW]


def _check_rules(consent: Consent) -> None:
    if consent.current is not None:
        RuleSet.from_text(consent.current, where=f"{project_rules_path(consent.project_dir)}: ")


def _record_rules(project_dir: str | os.PathLike[str], text: str | None) -> None:
    """The rules keep their text: a later untrusted change still gets the trusted deny/ask rules."""
    record = None if text is None else ConsentRecord(rules_digest(text), text, time.time())
    record_consent(ConsentKind.RULES, project_dir, "", record)


def _rules_record(project: ProjectInfo, consent: Consent, revoke: bool) -> None:
    _record_rules(project.path, None if revoke else consent.current)


_RULES_WHAT = {ConsentStatus.NEW: "were never trusted", ConsentStatus.CHANGED: "changed since you trusted them",
               ConsentStatus.DELETED: "were deleted since you trusted them"}


def _rules_warning(consent: Consent) -> str:
    what = _RULES_WHAT.get(consent.status, "are not trusted")
    return (f"the project's rules ({project_rules_path(consent.project_dir)}) {what}: this session uses "
            f"your own rules, and of the project's only the deny and ask rules (they only narrow). Review and "
            f"trust them with: "
            f"agent-desk rules trust {consent.project_dir}")


# the hooks file -----------------------------------------------------------------------------------------
def project_hooks_trust(project: ProjectInfo) -> Consent:
    """Read the project's hooks file (no link followed: a link is a ConfigError) and the scripts under
    .agent-desk/ its commands name, and compare them with the grant: the grant covers the file and those
    scripts' bytes, so a script changed afterwards is a change to grant again."""
    raw = read_beneath(project.path, HOOKS_FILE, limit=256 * 1024)
    granted = _approved(ConsentKind.HOOKS, project)
    if raw is None:  # a granted file that is gone grants nothing: there is nothing to run
        return Consent(ConsentKind.HOOKS, project.path, "", ConsentStatus.NONE, None, None, granted)
    text = raw.decode("utf-8", "replace")
    scripts = _hook_scripts(project.path, text)
    digest = hooks_digest(raw) if not scripts else hooks_digest(
        raw + b"".join(b"\0" + rel.encode() + b"\0" + hashlib.sha256(body).hexdigest().encode()
                       for rel, body in scripts))
    detail = "".join(f"\n# ---- {rel} (run by a hook above) ----\n{body.decode('utf-8', 'replace')}"
                     for rel, body in scripts) or None
    return Consent(ConsentKind.HOOKS, project.path, "", ConsentStatus.of(digest, granted), text, digest, granted,
                   detail=detail)


# A project hook's command is a plain command line. What it may run from the workspace lives under .agent-desk/,
# which the sandbox sees read-only, and the grant covers those scripts' bytes. A workspace file elsewhere (the
# agent can rewrite it after the grant) and anything built when it runs ($, backticks, globs, escapes) are
# refused: closed, so what the person read is what runs.
_PLAIN_COMMAND = re.compile(r"[A-Za-z0-9_\-./=:,+@%'\"|&;<> \t~]*")
_UNREADABLE = "[the desk cannot read this script: "
_WORD = re.compile(r"[A-Za-z0-9_\-./~+@%]+")


def _hook_scripts(project_dir: str, text: str) -> list[tuple[str, bytes]]:
    """The files under .agent-desk/ the hooks' commands name, with their bytes."""
    try:
        specs = user_hooks_from_toml(text)
    except AgentDeskError:
        return []  # not hooks: refused when granted (_check_hooks says why)
    return _scripts_named(project_dir, [spec.command for spec in specs])


def _scripts_named(project_dir: str, commands: list[str]) -> list[tuple[str, bytes]]:
    """The files under .agent-desk/ the commands name, with their bytes; one that cannot be read (a link, a FIFO,
    too large) with a line saying so, which the grant then covers (and `_hook_refusal` refuses)."""
    named = sorted({rel for command in commands for rel in _named_files(project_dir, command)})
    out = []
    for rel in named:
        if not rel.startswith(".agent-desk/") or os.path.isdir(os.path.join(project_dir, rel)):
            continue
        try:
            out.append((rel, read_beneath(project_dir, rel) or b""))
        except AgentDeskError as e:
            out.append((rel, f"{_UNREADABLE}{e.user_message()}]\n".encode()))
    return out


# Absolute paths a project hook may name: the image's own programs and files, which the sandbox cannot write.
# Anything else absolute (/tmp, /proc/self/cwd, /home) can reach what the agent wrote.
_SYSTEM_PATHS = ("/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", "/opt/", "/etc/")
_DEVICES = ("/dev/null", "/dev/stdin", "/dev/stdout", "/dev/stderr")


def _named_files(project_dir: str, command: str) -> list[str]:
    """The workspace paths (relative, normalised) a command line names as the sandbox resolves them from
    /workspace; a path it cannot place (climbing out with "..", an absolute one outside the image's own
    folders) is named as it is, so that it is refused."""
    out = []
    try:  # the words as the shell splits them (a quoted name with spaces), and every path-like run inside them
        words = [*shlex.split(command), *_WORD.findall(command)]
    except ValueError:  # unbalanced quotes: the shell would not run it either; name it so that it is refused
        return [command]
    for word in words:
        if word.startswith("-") and "/" not in word:
            continue  # an option
        if word.startswith("/"):
            path = "/" + posixpath.normpath(word).lstrip("/")
            if path in _DEVICES or path.startswith(_SYSTEM_PATHS):
                continue
            if path != WORKSPACE and not path.startswith(f"{WORKSPACE}/"):
                out.append(path)
                continue
            word = path.removeprefix(WORKSPACE).lstrip("/") or "."
        rel = posixpath.normpath(word)
        if word.startswith("~") or rel == ".." or rel.startswith("../"):
            out.append(word)  # a home or a folder above the workspace: not the workspace's to grant
        elif rel != "." and os.path.lexists(os.path.join(project_dir, rel)):
            out.append(rel)
    return out


def _hook_refusal(project_dir: str, command: str) -> str | None:
    """Why a project hook's command cannot be granted, or None."""
    if not _PLAIN_COMMAND.fullmatch(command):
        bad = sorted({c for c in command if not _PLAIN_COMMAND.fullmatch(c)})
        return (f"the hook command {command!r} builds what it runs when it runs ({' '.join(bad)}): put it in a "
                f"script under .agent-desk/ and name the script")
    unreadable = [(rel, body) for rel, body in _scripts_named(project_dir, [command])
                  if body.startswith(_UNREADABLE.encode())]
    if unreadable:
        rel, body = unreadable[0]
        why = body.decode().removeprefix(_UNREADABLE).rstrip().removesuffix("]")
        return f"the hook command {command!r} runs {rel}, which the desk cannot read: {why}"
    outside = [rel for rel in _named_files(project_dir, command) if not rel.startswith(".agent-desk/")]
    if outside:
        return (f"the hook command {command!r} names {outside[0]}, a path the agent can write (it can rewrite "
                f"what is there after you grant it): move what the hook runs under .agent-desk/ (read-only to "
                f"the sandbox, and covered by the grant)")
    return None


def user_hook_specs(settings: Settings, project: ProjectInfo) -> tuple[list[UserHookSpec], Consent]:
    """The person's hooks: the settings' first, then the project's file when its grant matches it. Blocking
    (a file): call it off the loop. A hook that cannot be read is a ConfigError: the session does not start
    without hooks the person asked for."""
    specs = parse_user_hooks(settings.hooks or None, "settings: hooks")
    consent = project_hooks_trust(project)
    if consent.status is ConsentStatus.APPROVED and consent.current is not None:
        try:  # a grant given before scripts were checked still holds only for what may be granted now
            _check_hooks(consent)
        except ConfigError as e:
            log.warning("the project's hooks do not run: %s", e.user_message())
            return specs, consent
        specs += user_hooks_from_toml(consent.current, str(Path(project.path) / HOOKS_FILE))
    elif not consent.ok:
        log.warning("%s", consent.warning())
    return specs, consent


def grant_hooks(project: ProjectInfo, consent: Consent, *, revoke: bool = False) -> dict[str, Any]:
    """Grant the hooks file exactly as shown in `consent` (or take the grant back); returns the project's settings
    as `approve` does. A file whose hooks cannot be read is refused (ConfigError), not granted."""
    return approve(project, consent, revoke=revoke)


def _check_hooks(consent: Consent) -> None:
    if consent.current is not None:
        for spec in user_hooks_from_toml(consent.current, str(Path(consent.project_dir) / HOOKS_FILE)):
            why = _hook_refusal(consent.project_dir, spec.command)
            if why is not None:
                raise ConfigError(f"{HOOKS_FILE}: {why}", hint="nothing was granted")


def _hooks_record(project: ProjectInfo, consent: Consent, revoke: bool) -> None:
    _record_digest(ConsentKind.HOOKS, consent, revoke or consent.current is None)


def _hooks_warning(consent: Consent) -> str:
    what = "were never granted" if consent.status is ConsentStatus.NEW else "changed since you granted them"
    return (f"the project's hooks ({Path(consent.project_dir) / HOOKS_FILE}) {what}: they do not run. Review and "
            f"grant them in the project settings (Hooks), or with: agent-desk hooks grant --project "
            f"{consent.project_dir}")


# each MCP server entry ----------------------------------------------------------------------------------
def mcp_consents(project: ProjectInfo) -> list[Consent]:
    """The project's servers (.agent-desk/mcp.json) that ask for a relaxation, each against its grant."""
    out = []
    for entry in _project_servers(project.path):
        if entry.config is not None and entry.asks_for is not None:
            approved = _approved(ConsentKind.MCP, project, entry.name, entry.asks_for)
            shown = json.dumps({entry.name: entry.config.model_dump(mode="json", exclude_defaults=True)}, indent=2)
            out.append(Consent(ConsentKind.MCP, project.path, entry.name, ConsentStatus.of(entry.digest(), approved),
                               shown + "\n", entry.digest(), approved, asks=entry.asks_for))
    return out


def mcp_consented(project: ProjectInfo) -> Callable[[Any], bool]:
    """Whether a server entry may start as it is: it asks for nothing, or the person approved this very entry.
    Reads the approvals now (blocking: a file); the answer is bound to each entry's digest."""
    try:
        approved = {c.name: c.approved_digest for c in mcp_consents(project) if c.approved_digest}
    except AgentDeskError:  # the file cannot be read: none of its servers starts (the hub says why for each)
        approved = {}

    def consented(entry: Any) -> bool:
        return entry.asks_for is None or approved.get(entry.name) == entry.digest()

    return consented


def _project_servers(project_dir: str) -> list[Any]:
    from ..mcp_client import read_project_servers  # when asked: the MCP SDK is slow to import

    return read_project_servers(project_dir)


def _mcp_entry(consent: Consent) -> Any:
    entry = next((e for e in _project_servers(consent.project_dir) if e.name == consent.name), None)
    if entry is None or entry.config is None:
        why = entry.error if entry is not None else f"no server {consent.name!r} in {consent.project_dir}"
        raise ConfigError(why, hint="`agent-desk mcp list` shows the servers")
    return entry


def _check_mcp(consent: Consent) -> None:
    if _mcp_entry(consent).digest() != consent.digest:
        raise ConfigError(f"the server {consent.name!r} changed since it was shown: nothing granted",
                          hint="review it again")


def _mcp_record(project: ProjectInfo, consent: Consent, revoke: bool) -> None:
    if not revoke and _mcp_entry(consent).asks_for is None:  # a server gone from the file can still be revoked
        raise ConfigError(f"server {consent.name!r} asks for no relaxation: nothing to grant")
    _record_digest(ConsentKind.MCP, consent, revoke)


def _mcp_warning(consent: Consent) -> str:
    return (f"the project's MCP server {consent.name} asks for {consent.asks} and is not granted: it does not "
            f"start. Grant it with: agent-desk mcp grant {consent.name} --project {consent.project_dir}")


# each project template ----------------------------------------------------------------------------------
# A repository's template picks the model (its price), the tools, the mode and rules a session or a child runs
# with: it is offered only once approved as its file is now. The person's own and the built-in ones need none.
def template_consents(project: ProjectInfo) -> list[Consent]:
    """Each project template whose name may be loaded, against the approval of its file; the approval shows
    what it changes (model and price, tools, mode, rules)."""
    found, _problems = read_template_folder(project.path, PROJECT_TEMPLATES, "project")
    catalog = load_templates(None, config_dir() / "templates")  # the built-in and the person's own names
    approved = {name: r.sha256 for name, r in consent_records(ConsentKind.TEMPLATE, project.path).items()}
    model = _session_model()
    out = []
    for f in found:
        t = f.template
        if catalog.project_refusal(t) is not None:
            continue  # a refused name or a taken one is not loaded, so there is nothing to approve
        catalog.waiting[t.name] = t
        out.append(Consent(ConsentKind.TEMPLATE, project.path, t.name,
                           ConsentStatus.of(f.digest, approved.get(t.name)), f.data.decode("utf-8"), f.digest,
                           approved.get(t.name), rel=f.rel, detail=template_changes(t, model)))
    return out


def approved_templates(project: ProjectInfo) -> dict[str, str]:
    """The project templates the person approved: name -> the digest of the file approved."""
    return {name: r.sha256 for name, r in consent_records(ConsentKind.TEMPLATE, project.path).items()}


def _session_model() -> str:
    try:
        return Settings.load().model
    except AgentDeskError:
        return Settings().model


def template_changes(t: AgentTemplate, session_model: str) -> str:
    """What a template changes for the sessions and children that run on it, said for the person approving."""
    lines = ["", "# ---- what this template changes ----"]
    if t.model and t.model != session_model:
        lines.append(f"# model: {t.model} instead of {session_model}; {price_difference(t.model, session_model)}")
    else:
        lines.append(f"# model: unchanged ({session_model})")
    lines.append(f"# tools: {', '.join(sorted(t.tools))}" + (" (every tool the project offers)"
                                                             if t.tools == frozenset({'*'}) else ""))
    lines.append(f"# mode: {t.mode.value} (judged beside the project's mode; never wider)" if t.mode
                 else "# mode: the project's")
    lines += [f"# rule: {r.action.value} {r.text}" for r in t.rules] or ["# rules: none added"]
    if t.system_prompt:
        lines.append(f"# system prompt: {len(t.system_prompt)} characters (in the file above)")
    return "\n".join(lines) + "\n"


def price_difference(model: str, session_model: str) -> str:
    """The price of `model` against the session's model, per million tokens (input / output)."""
    mine, theirs = price_for(model), price_for(session_model)
    if mine is None:
        return "its price is unknown to the desk"
    said = f"${mine.input:g} / ${mine.output:g} per million tokens in / out"
    if theirs is None:
        return f"{said} (your model's price is unknown)"
    if theirs.input == mine.input and theirs.output == mine.output:
        return f"{said}, the same as yours"
    ratio = (mine.input + mine.output) / (theirs.input + theirs.output)
    return f"{said} against ${theirs.input:g} / ${theirs.output:g}: {ratio:.2g}x your model's price"


def _check_template(consent: Consent) -> None:
    now = next((c for c in template_consents(_project_of(consent)) if c.name == consent.name), None)
    if now is None or now.digest != consent.digest:
        raise ConfigError(f"the template {consent.name!r} changed or is gone since it was shown: nothing approved",
                          hint="review it again")


def _project_of(consent: Consent) -> ProjectInfo:
    return ProjectInfo(id="", name="", path=consent.project_dir)


def _template_warning(consent: Consent) -> str:
    what = "was never approved" if consent.status is ConsentStatus.NEW else "changed since you approved it"
    return (f"the project's template {consent.name} ({consent.project_dir}/{consent.file}) {what}: it is not "
            f"offered. Review and approve it with: agent-desk consent approve --kind template {consent.name} "
            f"--project {consent.project_dir}")


# the project's skills, as one set --------------------------------------------------------------------------
# One approval covers the set: a repository ships its skills together, the person reviews them in one place,
# and a repository with thousands of skills makes one question, not thousands. Any skill added or changed
# afterwards makes the set wait again.
def skills_consents(project: ProjectInfo) -> list[Consent]:
    found = read_project_skills(project.path)
    approved = _approved_digest(ConsentKind.SKILLS, project)
    if found.digest is None:
        return []  # no skill: nothing to approve (an approval of a set gone grants nothing)
    detail = f"\n# ---- {len(found.folders)} skill(s); at most the limits of your settings reach the prompt ----\n"
    return [Consent(ConsentKind.SKILLS, project.path, "", ConsentStatus.of(found.digest, approved),
                    found.text(), found.digest, approved, detail=detail)]


def _approved_digest(kind: ConsentKind, project: ProjectInfo) -> str | None:
    record = consent_record(kind, project.path)
    return record.sha256 if record else None


def _check_skills(consent: Consent) -> None:
    if read_project_skills(consent.project_dir).digest != consent.digest:
        raise ConfigError("the project's skills changed since they were shown: nothing approved",
                          hint="review them again")


def _skills_warning(consent: Consent) -> str:
    what = "were never approved" if consent.status is ConsentStatus.NEW else "changed since you approved them"
    return (f"the project's skills ({consent.project_dir}/{PROJECT_SKILLS}) {what}: they are not offered. Review "
            f"and approve them with: agent-desk consent approve --kind skills --project {consent.project_dir}")


# the project's instructions, AGENTS.md and CLAUDE.md, as one set ---------------------------------------------
# They shape every session's agent, and a cloned repository ships them: put in the prompt only as approved.
def instructions_consents(project: ProjectInfo) -> list[Consent]:
    found = read_project_instructions(project.path)
    digest = instructions_digest(found)
    if digest is None:
        return []
    approved = _approved_digest(ConsentKind.INSTRUCTIONS, project)
    return [Consent(ConsentKind.INSTRUCTIONS, project.path, "", ConsentStatus.of(digest, approved),
                    instructions_text(found), digest, approved)]


def _check_instructions(consent: Consent) -> None:
    if instructions_digest(read_project_instructions(consent.project_dir)) != consent.digest:
        raise ConfigError("the project's instructions changed since they were shown: nothing approved",
                          hint="review them again")


def _instructions_warning(consent: Consent) -> str:
    what = "were never approved" if consent.status is ConsentStatus.NEW else "changed since you approved them"
    return (f"the project's instructions ({consent.project_dir}/AGENTS.md, CLAUDE.md) {what}: they are not put in "
            f"the agent's prompt. Review and approve them with: agent-desk consent approve --kind instructions "
            f"--project {consent.project_dir}")


def project_instructions(settings: Settings, project: ProjectInfo) -> Instructions:
    """A session's instructions (blocking): your own AGENTS.md (settings folder), then the project's AGENTS.md
    and CLAUDE.md when approved as they are now, capped by `instructions_max_bytes`."""
    found = read_project_instructions(project.path)
    approved = _approved_digest(ConsentKind.INSTRUCTIONS, project)
    ok = approved is not None and approved == instructions_digest(found)
    return build_instructions(project.path, found, approved=ok, user_file=config_dir() / "AGENTS.md",
                              max_bytes=settings.instructions_max_bytes)


def _digest_record(kind: ConsentKind) -> Callable[[ProjectInfo, Consent, bool], None]:
    return lambda project, consent, revoke: _record_digest(kind, consent, revoke)


CONSENT_KINDS: dict[ConsentKind, ConsentSubject] = {
    ConsentKind.RULES: ConsentSubject(".agent-desk/rules.toml", lambda p: [project_rules_trust(p.path)],
                                      _check_rules, _rules_record, _rules_warning),
    ConsentKind.HOOKS: ConsentSubject(HOOKS_FILE, lambda p: [project_hooks_trust(p)],
                                      _check_hooks, _hooks_record, _hooks_warning),
    ConsentKind.MCP: ConsentSubject(".agent-desk/mcp.json", mcp_consents, _check_mcp, _mcp_record, _mcp_warning),
    ConsentKind.TEMPLATE: ConsentSubject(PROJECT_TEMPLATES, template_consents, _check_template,
                                         _digest_record(ConsentKind.TEMPLATE), _template_warning),
    ConsentKind.SKILLS: ConsentSubject(PROJECT_SKILLS, skills_consents, _check_skills,
                                       _digest_record(ConsentKind.SKILLS), _skills_warning),
    ConsentKind.INSTRUCTIONS: ConsentSubject("AGENTS.md", instructions_consents, _check_instructions,
                                             _digest_record(ConsentKind.INSTRUCTIONS), _instructions_warning),
}
