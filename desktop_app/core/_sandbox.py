"""The Sandbox protocol: where every command and file operation of a tool actually happens."""

# ruff: noqa: ASYNC109  (a command's `timeout` is the sandbox's own deadline, passed down to it)

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

WORKSPACE = "/workspace"
DEFAULT_IMAGE = "agent-desk/minimal:latest"  # the catalog's "minimal" image
DEFAULT_TIMEOUT_S = 120.0
MAX_TIMEOUT_S = 600.0
DEFAULT_OUTPUT_LIMIT = 1_000_000  # bytes kept per stream; the rest is dropped and `truncated` is set
DEFAULT_READ_LIMIT = 10 * 1024 * 1024
CONFLICT_SUFFIX = ".sandbox-conflict"  # beside a host file, the sandbox's copy of a synced-workspace conflict

OutputCallback = Callable[[str, str], None]  # (stream, text)


@dataclass(slots=True)
class ExecResult:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    truncated: bool = False
    duration_ms: float = 0.0
    oom_killed: bool = False
    killed_signal: int | None = None


@dataclass(slots=True)
class FileStat:
    path: str  # relative to the workspace
    type: str  # file | dir | symlink | other
    size: int
    mtime: float
    mode: int = 0


@dataclass(slots=True)
class GrepMatch:
    path: str
    line: int
    text: str


@dataclass(slots=True)
class BackgroundLogs:
    process_id: str
    output: str
    running: bool
    exit_code: int | None
    truncated: bool = False


@dataclass(slots=True)
class SandboxDescription:
    """What proves where a call ran; stored on every record and shown by the UI."""

    kind: str  # docker | local (which Sandbox ran it; "engine" always means the Docker engine)
    unsandboxed: bool
    container_id: str = ""
    image: str = ""
    image_digest: str = ""
    network: str = "none"
    limits: dict[str, Any] = field(default_factory=dict)
    relaxations: list[str] = field(default_factory=list)
    workspace: str = WORKSPACE
    host_path: str = ""
    # The Docker engine's address: unix:///var/run/docker.sock, tcp://build-host:2376, ... (records written
    # before the kind had its own name stored the kind as "engine": this is a field of its own).
    engine_address: str = ""
    workspace_sync: str = ""  # "synced": the workspace is a volume on the engine, copied to and from host_path

    def where(self) -> str:
        """In words, where the call's files were: "remote engine, synced workspace (tcp://…)" or ""."""
        if self.workspace_sync != "synced":
            return ""
        return f"remote engine, synced workspace ({self.engine_address or 'unknown engine'})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "unsandboxed": self.unsandboxed,
            "container_id": self.container_id,
            "image": self.image,
            "image_digest": self.image_digest,
            "network": self.network,
            "limits": self.limits,
            "relaxations": self.relaxations,
            "workspace": self.workspace,
            "host_path": self.host_path,
            "engine_address": self.engine_address,
            "workspace_sync": self.workspace_sync,
            "where": self.where(),
        }


@dataclass(slots=True)
class SyncReport:
    """What one sync of a synced workspace moved between the host folder and the engine's volume, and what
    it would not bring back. Paths are relative to the project folder."""

    to_host: list[str] = field(default_factory=list)  # written or deleted on the host
    to_sandbox: list[str] = field(default_factory=list)  # written or deleted in the volume
    conflicts: list[str] = field(default_factory=list)  # changed on both sides: the host's copy was kept
    refused: list[str] = field(default_factory=list)  # "path: why" never brought back to the host
    duration_ms: float = 0.0

    def problems(self) -> str:
        """The conflicts and refusals in words for the model and the person; "" when there are none."""
        lines = [f"CONFLICT {p}: changed on the host and in the sandbox; the host's copy was kept, the "
                 f"sandbox's copy is beside it as {p}{CONFLICT_SUFFIX} (when it was a file)" for p in self.conflicts]
        lines += [f"NOT BROUGHT BACK {r}" for r in self.refused]
        return "\n".join(lines)



@runtime_checkable
class ProcessChannel(Protocol):
    """A long-lived process in the sandbox with its stdin and stdout attached, for a program that speaks
    over stdio for the whole session (an MCP server): one channel, not a new exec per message."""

    async def read(self) -> bytes:
        """The next bytes of its stdout; b"" once it has ended."""
        ...

    async def write(self, data: bytes) -> None:
        """Bytes to its stdin. Raises SandboxError once the process has ended."""
        ...

    def stderr_tail(self) -> str:
        """The last few KB of its stderr, for an error that names why it died."""
        ...

    @property
    def returncode(self) -> int | None:
        """Its exit status once it has ended, else None."""
        ...

    async def close(self) -> None:
        """End it and every process it started; idempotent."""
        ...


@runtime_checkable
class Sandbox(Protocol):
    """Paths are relative to the workspace (or absolute inside it); anything resolving outside is refused
    with PathOutsideWorkspace, resolved in the sandbox's own view (symlinks included)."""

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    def describe(self) -> SandboxDescription: ...

    async def exec(
        self,
        command: str | list[str],
        cwd: str = WORKSPACE,
        env: Mapping[str, str] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        on_output: OutputCallback | None = None,
        output_limit: int = DEFAULT_OUTPUT_LIMIT,
    ) -> ExecResult: ...

    async def read_file(self, path: str, *, offset: int = 0, limit: int = DEFAULT_READ_LIMIT) -> bytes: ...

    async def write_file(self, path: str, data: bytes, *, make_dirs: bool = True) -> FileStat: ...

    async def read_text(self, path: str, *, limit: int = DEFAULT_READ_LIMIT) -> str: ...

    async def write_text(self, path: str, text: str) -> FileStat: ...

    async def stat(self, path: str) -> FileStat | None: ...

    async def real_path(self, path: str) -> str:
        """The path a write of `path` would really touch, in the container's view (`/workspace/...`):
        `.`, `..`, `//` and symlinks resolved inside the sandbox as the kernel would, a path that does
        not exist yet through its existing parent. A path relative is relative to the workspace.
        Raises PathOutsideWorkspace when the resolution ends outside the workspace."""
        ...

    async def list_dir(self, path: str = ".") -> list[FileStat]: ...

    async def glob(
        self, pattern: str, path: str = ".", *, limit: int = 200, include_ignored: bool = False,
        newest_first: bool = False,
    ) -> list[FileStat]:
        """Matches in path order, or the newest first with `newest_first` (that one looks at every match's
        time); what .gitignore files ignore only with `include_ignored`."""
        ...

    async def grep(
        self,
        pattern: str,
        path: str = ".",
        *,
        glob: str | None = None,
        ignore_case: bool = False,
        max_results: int = 200,
        include_ignored: bool = False,
    ) -> list[GrepMatch]: ...

    async def start_background(
        self, command: str, cwd: str = WORKSPACE, env: Mapping[str, str] | None = None
    ) -> str: ...

    async def logs(self, process_id: str) -> BackgroundLogs: ...

    async def kill(self, process_id: str) -> BackgroundLogs: ...

    async def open_process(
        self, argv: list[str], *, cwd: str = WORKSPACE, env: Mapping[str, str] | None = None
    ) -> ProcessChannel:
        """Start `argv` as the sandbox's user, under the sandbox's own confinement, with stdio attached."""
        ...
