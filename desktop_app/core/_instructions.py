"""Project instructions: AGENTS.md and CLAUDE.md at the project root (and the user's own AGENTS.md in the
settings folder), read at session start into the system prompt, capped (the rest named as left out). A
repository's files shape the agent, so they go in only as the person approved them (a consent kind)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._errors import ConfigError
from ._safe_files import read_beneath

INSTRUCTION_FILES = ("AGENTS.md", "CLAUDE.md")
DEFAULT_MAX_INSTRUCTION_BYTES = 32 * 1024
_READ_LIMIT = 4 * 1024 * 1024  # a bigger file is refused whole (named), not read


@dataclass(slots=True)
class InstructionFile:
    """One file: where it is, how big, how much of it reached the prompt, and why not all (or none)."""

    label: str  # "AGENTS.md", or "your AGENTS.md"
    path: str
    size: int
    used: int = 0
    why_not: str = ""

    def to_dict(self) -> dict[str, Any]:
        out = {"file": self.label, "path": self.path, "bytes": self.size, "used": self.used}
        return {**out, "left_out": self.why_not} if self.why_not else out


@dataclass(slots=True)
class Instructions:
    """What a session's prompt gets: the files (loaded or not, and why) and their capped text."""

    files: list[InstructionFile] = field(default_factory=list)
    parts: list[tuple[str, str]] = field(default_factory=list)  # (label, text) in the prompt

    def prompt(self) -> str:
        if not self.parts:
            return ""
        body = "\n\n".join(f"<instructions file=\"{label}\">\n{text}\n</instructions>" for label, text in self.parts)
        return ("Instructions the user and the project give for working here (follow them unless they conflict "
                f"with the user's requests or the desk's rules):\n{body}")

    def summary(self) -> str:
        """One line for the window and the audit: which files were loaded, and what was left out."""
        loaded = [f"{f.label} ({f.used:,} bytes)" for f in self.files if f.used]
        out = [f"{f.label}: {f.why_not}" for f in self.files if f.why_not]
        text = ("instructions loaded: " + ", ".join(loaded)) if loaded else "no instructions loaded"
        return text + (f"; left out: {'; '.join(out)}" if out else "")


def read_project_instructions(project_dir: str | Path) -> dict[str, bytes]:
    """The project's instruction files as they are now (links refused: ConfigError), by name."""
    out: dict[str, bytes] = {}
    for name in INSTRUCTION_FILES:
        data = read_beneath(project_dir, name, limit=_READ_LIMIT)
        if data is not None:
            out[name] = data
    return out


def instructions_digest(files: dict[str, bytes]) -> str | None:
    """The digest a person approves: every file's name and bytes; None when there is none."""
    if not files:
        return None
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode() + b"\0" + str(len(files[name])).encode() + b"\0" + files[name])
    return h.hexdigest()


def instructions_text(files: dict[str, bytes]) -> str:
    """The files as one text, for the person to review."""
    return "".join(f"# ---- {name} ----\n{data.decode('utf-8', 'replace')}\n" for name, data in sorted(files.items()))


def build_instructions(project_dir: str | Path, project_files: dict[str, bytes], *, approved: bool,
                       user_file: Path | None = None, max_bytes: int = DEFAULT_MAX_INSTRUCTION_BYTES) -> Instructions:
    """The prompt's instructions: the user's own first, then the project's (only when `approved`), within
    `max_bytes` in all; a file cut short or left out says so."""
    found: list[tuple[InstructionFile, bytes | None]] = []
    if user_file is not None:
        try:
            data = user_file.read_bytes() if user_file.is_file() else None
        except OSError as e:
            raise ConfigError(f"cannot read your instructions {user_file}: {e.strerror or e}") from e
        if data is not None:
            found.append((InstructionFile("your AGENTS.md", str(user_file), len(data)), data))
    for name, data in sorted(project_files.items(), key=lambda kv: INSTRUCTION_FILES.index(kv[0])):
        f = InstructionFile(name, str(Path(project_dir) / name), len(data))
        if not approved:
            f.why_not = "not approved (review it: agent-desk consent approve --kind instructions)"
        found.append((f, data if approved else None))
    out, room = Instructions(), max_bytes
    for f, data in found:
        out.files.append(f)
        if data is None:
            continue
        if room <= 0:
            f.why_not = f"over the {max_bytes:,}-byte cap ({f.size:,} bytes left out)"
            continue
        text = data[:room].decode("utf-8", "ignore")
        f.used = len(text.encode())
        room -= f.used
        if f.used < f.size:
            f.why_not = f"cut at the {max_bytes:,}-byte cap ({f.size - f.used:,} bytes left out)"
            text += f"\n[... {f.size - f.used:,} bytes of {f.label} left out: over the cap]"
        out.parts.append((f.label, text))
    return out
