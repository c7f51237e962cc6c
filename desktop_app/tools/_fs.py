"""The file tools: fs_read, fs_write, fs_edit, fs_multi_edit, fs_glob, fs_grep (all through ctx.sandbox)."""

from __future__ import annotations

import base64
import posixpath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..core import (
    WORKSPACE,
    CallField,
    ImageBlock,
    PathOutsideWorkspace,
    Risk,
    SandboxError,
    TextBlock,
    ToolContext,
    ToolInput,
    ToolResult,
    value_text,
)
from ._common import (
    BuiltinTool,
    Refusal,
    diff_counts,
    display_path,
    forget_host_change,
    need_sandbox,
    read_all,
    read_hashes,
    sha256,
    unified_diff,
    workspace_path,
)
from ._edits import (
    EditSpec,
    dry_run_edits,
    dry_run_write,
    line_count,
    plan_edits,
    plan_write,
    write_planned,
)

DEFAULT_READ_LINES = 2000
MAX_READ_BYTES = 256 * 1024
MAX_LINE_CHARS = 2000
# Raw bytes; base64 grows it by 4/3, which keeps an image under the API's 5 MB per image.
MAX_IMAGE_BYTES = 3_750_000
BINARY_SNIFF_BYTES = 8192
GLOB_LIMIT = 200
GREP_LINE_CHARS = 500
GREP_OUTPUT_BYTES = 256 * 1024

_FS_TIMEOUT_S = 60.0
PATH_HELP = f"File path, relative to {WORKSPACE} (or absolute under {WORKSPACE})."


def image_media_type(head: bytes) -> str | None:
    """png, jpeg, gif or webp by magic bytes, else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if len(head) >= 12 and head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return None


def looks_binary(data: bytes) -> bool:
    """NUL bytes, or mostly control characters, in the first 8 KB. Text that is not UTF-8 (Latin-1, say)
    is text: `decode_text` shows it."""
    head = data[:BINARY_SNIFF_BYTES]
    if b"\x00" in head:
        return True
    controls = sum(1 for b in head if b < 32 and b not in _TEXT_CONTROLS)
    return bool(head) and controls * 10 > len(head) * 3


_TEXT_CONTROLS = frozenset(b"\t\n\r\f\b\x1b")


def decode_text(data: bytes) -> tuple[str, str | None]:
    """The text of a file, and the encoding it was read as when that is not UTF-8 (Latin-1, which reads
    every byte; a character cut at the end of a ranged read stays UTF-8)."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError as exc:
        if exc.start >= len(data) - 3 and exc.reason == "unexpected end of data":
            return data.decode("utf-8", errors="replace"), None
    return data.decode("latin-1"), "latin-1"


def _lines(text: str) -> list[str]:
    if not text:
        return []
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()
    return lines


async def _missing(ctx: ToolContext, path: str) -> Refusal:
    """A not-found refusal, with files of the same name as a hint when there are some."""
    recs = ["use fs_glob to find the file", "to create it use fs_write"]
    name = posixpath.basename(path)
    try:
        similar = await need_sandbox(ctx).glob(f"**/{name}", ".", limit=5) if name else []
    except Exception:  # a hint is optional; the refusal is what matters
        similar = []
    if similar:
        recs.insert(0, "files with that name: " + ", ".join(s.path for s in similar))
    return Refusal(f"{display_path(path)} does not exist", recs, path=display_path(path))


class FsReadInput(ToolInput):
    path: str = Field(description=PATH_HELP)
    offset: int | None = Field(
        default=None, ge=1, description="1-based line number to start from (default 1)."
    )
    limit: int | None = Field(
        default=None, ge=1, description=f"Number of lines to return (default {DEFAULT_READ_LINES})."
    )


def _image(data: bytes, media: str, base: dict[str, Any]) -> ToolResult:
    shown = base["path"]
    if len(data) > MAX_IMAGE_BYTES:
        raise Refusal(
            f"{shown} is a {media} of {len(data)} bytes, over the {MAX_IMAGE_BYTES} byte image cap",
            ["make a smaller copy with bash_run (e.g. python Pillow or ImageMagick) and read that"],
            **base,
        )
    return ToolResult(
        content=[
            TextBlock(f"{shown}: {media}, {len(data)} bytes"),
            ImageBlock(media, base64.b64encode(data).decode("ascii")),
        ],
        details={**base, "kind": "image", "media_type": media},
    )


def _numbered(data: bytes, args: FsReadInput, base: dict[str, Any]) -> ToolResult:
    """The lines asked for, numbered like `cat -n`, within the line and byte caps."""
    shown = base["path"]
    decoded, encoding = decode_text(data)
    if encoding is not None:
        base = {**base, "encoding": encoding}
    lines = _lines(decoded)
    total = len(lines)
    start = args.offset or 1
    if total == 0:
        return ToolResult.text(f"{shown} is empty (0 lines).", **base, kind="text", total_lines=0,
                               start_line=0, end_line=0, truncated=False)
    if start > total:
        raise Refusal(
            f"offset {start} is past the end of {shown}, which has {total} lines",
            [f"use an offset between 1 and {total}"],
            **base,
            total_lines=total,
        )
    out, end, cut_lines = _page(lines, start, args.limit or DEFAULT_READ_LINES)
    truncated = end < total
    text = "\n".join(out)
    if truncated:
        text += (
            f"\n\n[lines {start}-{end} of {total}; {total - end} more lines. "
            f"To continue, call fs_read with offset={end + 1}.]"
        )
    if cut_lines:
        text += f"\n[{cut_lines} line(s) longer than {MAX_LINE_CHARS} characters were cut]"
    if encoding is not None:
        text += f"\n[{shown} is not UTF-8: shown as {encoding}; fs_edit refuses it, convert it with iconv first]"
    return ToolResult.text(
        text, **base, kind="text", total_lines=total, start_line=start, end_line=end, truncated=truncated
    )


def _page(lines: list[str], start: int, want: int) -> tuple[list[str], int, int]:
    """Numbered rows from line `start` until `want` lines or MAX_READ_BYTES; with the last line number
    shown and how many long lines were cut."""
    out: list[str] = []
    size = cut_lines = 0
    end = start - 1
    for i in range(start - 1, min(len(lines), start - 1 + want)):
        line = lines[i].removesuffix("\r")
        if len(line) > MAX_LINE_CHARS:
            line = f"{line[:MAX_LINE_CHARS]}… [line cut: {len(line)} characters]"
            cut_lines += 1
        row = f"{i + 1:>6}\t{line}"
        row_bytes = len(row.encode("utf-8", errors="replace")) + 1
        if out and size + row_bytes > MAX_READ_BYTES:
            break
        out.append(row)
        size += row_bytes
        end = i + 1
    return out, end, cut_lines


class FsRead(BuiltinTool, name="fs_read", group="group:fs", input_model=FsReadInput, read_only=True,
             timeout_s=_FS_TIMEOUT_S, risk=Risk.LOW):
    label = "Read file"
    description = (
        "Read a file in the workspace. Text comes back numbered like `cat -n` (line number, tab, line); "
        f"at most {DEFAULT_READ_LINES} lines or {MAX_READ_BYTES // 1024} KB per call: use offset (1-based "
        "line) and limit to page through long files. PNG, JPEG, GIF and WebP images are returned as images. "
        "Binary files are refused. Read a file before changing it with fs_write or fs_edit."
    )

    async def _run(self, args: FsReadInput, ctx: ToolContext) -> ToolResult:
        sandbox = need_sandbox(ctx)
        path = workspace_path(args.path)
        shown = display_path(path)
        st = await sandbox.stat(path)
        if st is None:
            raise await _missing(ctx, path)
        if st.type == "dir":
            raise Refusal(f"{shown} is a directory", ["use fs_glob (e.g. pattern '*') to list it"])
        data = await read_all(sandbox, path, st.size)
        digest = sha256(data)
        base = {"path": shown, "size": len(data), "sha256": digest}
        media = image_media_type(data[:16])
        if media is None and looks_binary(data):
            raise Refusal(
                f"{shown} looks like a binary file ({len(data)} bytes); fs_read shows text and images only",
                [
                    f"use bash_run with `file {shown}` or `xxd {shown} | head` to inspect it",
                    "if it is text in another encoding, convert it with iconv in bash_run",
                ],
                **base,
            )
        if media is not None:
            result = _image(data, media, base)  # an image over the cap is refused, and not counted as read
            read_hashes(ctx)[path] = digest
            forget_host_change(ctx, path)
            return result
        read_hashes(ctx)[path] = digest
        forget_host_change(ctx, path)
        return _numbered(data, args, base)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        fields = [CallField("Path", value_text(raw.get("path", "?")), "path")]
        start, limit = raw.get("offset"), raw.get("limit")
        if isinstance(start, int) or isinstance(limit, int):
            first = start if isinstance(start, int) and start > 0 else 1
            fields.append(CallField("Lines", f"{first}-{first + limit - 1}" if isinstance(limit, int) and limit > 0
                                    else f"from {first}"))
        return tuple(fields)

    def summarize(self, raw: dict[str, Any]) -> str:
        s = f"fs_read {raw.get('path', '?')}"
        if raw.get("offset") or raw.get("limit"):
            start = raw.get("offset") or 1
            limit = raw.get("limit")
            s += f" (lines {start}-{start + limit - 1})" if limit else f" (from line {start})"
        return s


class FsWriteInput(ToolInput):
    path: str = Field(description=PATH_HELP)
    content: str = Field(description="The complete new contents of the file.")


class FsWrite(BuiltinTool, name="fs_write", group="group:fs", input_model=FsWriteInput, read_only=False,
              timeout_s=_FS_TIMEOUT_S, risk=Risk.MEDIUM):
    label = "Write file"
    description = (
        "Create a file or replace all of its contents; parent folders are created. An existing file "
        "must have been read with fs_read in this session and be unchanged since, "
        "otherwise the write is refused. Prefer fs_edit for changes to part of a file."
    )

    async def _run(self, args: FsWriteInput, ctx: ToolContext) -> ToolResult:
        sandbox = need_sandbox(ctx)
        change = await plan_write(sandbox, args.path, args.content, ctx)
        await write_planned(sandbox, [change], ctx)
        verb = "Updated" if change.before.exists else "Created"
        n = line_count(args.content)
        return ToolResult.text(
            f"{verb} {change.display} ({n} line{'' if n == 1 else 's'}, +{change.added} -{change.removed}).",
            **change.details(),
            bytes=len(change.new_data),
        )

    async def dry_run(self, args: FsWriteInput, ctx: ToolContext) -> str | None:
        return await dry_run_write(ctx, args.path, args.content)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        content = raw.get("content")
        text = content if isinstance(content, str) else ""
        n = line_count(text)
        return (CallField("Path", value_text(raw.get("path", "?")), "path"),
                CallField("Size", f"{n} line{'s' if n != 1 else ''}, {len(text)} characters"),
                CallField("Content", value_text(text), "code"))

    def outcome_fields(self, raw: dict[str, Any], result: dict[str, Any]) -> tuple[CallField, ...]:
        return _change_outcome(result) or super().outcome_fields(raw, result)

    def summarize(self, raw: dict[str, Any]) -> str:
        content = raw.get("content")
        n = line_count(content) if isinstance(content, str) else 0
        return f"fs_write {raw.get('path', '?')} ({n} lines)"


class FsEditInput(ToolInput):
    path: str = Field(description=PATH_HELP)
    old_string: str = Field(description="Exact text to replace (without fs_read's line-number prefixes).")
    new_string: str = Field(description="Text to put in its place; must differ from old_string.")
    replace_all: bool = Field(default=False, description="Replace every match instead of exactly one.")


def _string_counts(old: Any, new: Any) -> tuple[int, int]:
    """+/- line counts an edit of old->new makes, for summaries (no file needed)."""
    if not isinstance(old, str) or not isinstance(new, str):
        return 0, 0
    return diff_counts(unified_diff("x", old + "\n", new + "\n"))


class FsEdit(BuiltinTool, name="fs_edit", group="group:fs", input_model=FsEditInput, read_only=False,
             timeout_s=_FS_TIMEOUT_S, risk=Risk.MEDIUM):
    label = "Edit file"
    description = (
        "Replace exact text in a file. old_string must match exactly once (or pass replace_all=true to "
        "change every match); include enough surrounding lines to make it unique. The file must have "
        "been read with fs_read in this session and be unchanged since."
    )

    async def _run(self, args: FsEditInput, ctx: ToolContext) -> ToolResult:
        sandbox = need_sandbox(ctx)
        spec = EditSpec(args.path, args.old_string, args.new_string, args.replace_all)
        (change,) = await plan_edits(sandbox, [spec], ctx, multi=False)
        await write_planned(sandbox, [change], ctx)
        return ToolResult.text(
            f"Edited {change.display} (+{change.added} -{change.removed}).", **change.details()
        )

    async def dry_run(self, args: FsEditInput, ctx: ToolContext) -> str | None:
        spec = EditSpec(args.path, args.old_string, args.new_string, args.replace_all)
        return await dry_run_edits(ctx, [spec], multi=False)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        path = str(raw.get("path", "?"))
        fields = [CallField("Path", value_text(path), "path"),
                  CallField("Diff", value_text(_string_diff(path, raw.get("old_string"), raw.get("new_string"))),
                            "diff")]
        if raw.get("replace_all"):
            fields.append(CallField("Replaces", "every occurrence"))
        return tuple(fields)

    def outcome_fields(self, raw: dict[str, Any], result: dict[str, Any]) -> tuple[CallField, ...]:
        return _change_outcome(result) or super().outcome_fields(raw, result)

    def summarize(self, raw: dict[str, Any]) -> str:
        added, removed = _string_counts(raw.get("old_string"), raw.get("new_string"))
        all_ = ", all" if raw.get("replace_all") else ""
        return f"fs_edit {raw.get('path', '?')} (+{added} -{removed}{all_})"


class EditItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    path: str = Field(description=f"File path, relative to {WORKSPACE}.")
    old_string: str = Field(description="Exact text to replace.")
    new_string: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(default=False, description="Replace every match instead of exactly one.")


class FsMultiEditInput(ToolInput):
    edits: list[EditItem] = Field(
        min_length=1, max_length=200, description="Edits applied in order; edits to one file chain."
    )


class FsMultiEdit(BuiltinTool, name="fs_multi_edit", group="group:fs", input_model=FsMultiEditInput,
                  read_only=False, timeout_s=_FS_TIMEOUT_S, risk=Risk.MEDIUM):
    label = "Edit files"
    description = (
        "Apply several exact-text edits, across one or more files, all or none: every edit is checked "
        "against the files' contents first (edits to the same file apply in order, each seeing the previous "
        "ones) and nothing is written unless all succeed. Same rules per edit as fs_edit."
    )

    async def _run(self, args: FsMultiEditInput, ctx: ToolContext) -> ToolResult:
        sandbox = need_sandbox(ctx)
        specs = [EditSpec(e.path, e.old_string, e.new_string, e.replace_all) for e in args.edits]
        changes = await plan_edits(sandbox, specs, ctx, multi=True)
        await write_planned(sandbox, changes, ctx)
        added = sum(c.added for c in changes)
        removed = sum(c.removed for c in changes)
        lines = [f"Applied {len(specs)} edits to {len(changes)} file(s) (+{added} -{removed}):"]
        lines += [f"  {c.display} (+{c.added} -{c.removed})" for c in changes]
        return ToolResult.text(
            "\n".join(lines),
            files=[c.details() for c in changes],
            diff="".join(c.diff for c in changes),
            added=added,
            removed=removed,
            edits=len(specs),
        )

    async def dry_run(self, args: FsMultiEditInput, ctx: ToolContext) -> str | None:
        specs = [EditSpec(e.path, e.old_string, e.new_string, e.replace_all) for e in args.edits]
        return await dry_run_edits(ctx, specs, multi=True)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        edits = [e for e in raw.get("edits") or [] if isinstance(e, dict)] if isinstance(raw.get("edits"), list) else []
        paths = list(dict.fromkeys(str(e.get("path", "?")) for e in edits))
        diff = "".join(_string_diff(str(e.get("path", "?")), e.get("old_string"), e.get("new_string")) for e in edits)
        return (CallField("Files", value_text(", ".join(paths)), "path"),
                CallField("Edits", str(len(edits))), CallField("Diff", value_text(diff), "diff"))

    def outcome_fields(self, raw: dict[str, Any], result: dict[str, Any]) -> tuple[CallField, ...]:
        return _change_outcome(result) or super().outcome_fields(raw, result)

    def summarize(self, raw: dict[str, Any]) -> str:
        edits = raw.get("edits")
        if not isinstance(edits, list):
            return "fs_multi_edit"
        files = {e.get("path") for e in edits if isinstance(e, dict)}
        added = removed = 0
        for e in edits:
            if isinstance(e, dict):
                a, r = _string_counts(e.get("old_string"), e.get("new_string"))
                added, removed = added + a, removed + r
        names = ", ".join(sorted(str(f) for f in files)[:3]) + (", …" if len(files) > 3 else "")
        return f"fs_multi_edit {len(edits)} edits in {names} (+{added} -{removed})"


def _where(path: str) -> str:
    return "the workspace" if path == WORKSPACE else display_path(path)


def _relative_pattern(pattern: str) -> str:
    if pattern.startswith(WORKSPACE + "/"):
        pattern = pattern[len(WORKSPACE) + 1 :]
    if pattern.startswith("/") or ".." in pattern.split("/"):
        raise Refusal(
            f"glob pattern {pattern!r} reaches outside the workspace",
            [f"use a pattern relative to {WORKSPACE} (or to `path`), e.g. **/*.py"],
        )
    return pattern


_INCLUDE_IGNORED = ("Also search what .gitignore files (and .ignore, .rgignore) exclude, e.g. build output or "
                    "node_modules. Off by default. An image with neither Python nor ripgrep cannot read them: "
                    "there everything is searched.")


class FsGlobInput(ToolInput):
    pattern: str = Field(min_length=1, description="Glob pattern, e.g. **/*.py or src/**/test_*.ts.")
    path: str | None = Field(default=None, description=f"Folder to search in, relative to {WORKSPACE}.")
    include_ignored: bool = Field(default=False, description=_INCLUDE_IGNORED)
    newest_first: bool = Field(default=False, description=(
        "List the most recently modified first (e.g. to find what changed lately). Off by default: paths "
        "come in path order, which is faster on a big tree."))


class FsGlob(BuiltinTool, name="fs_glob", group="group:fs", input_model=FsGlobInput, read_only=True,
             timeout_s=_FS_TIMEOUT_S, risk=Risk.LOW):
    label = "Find files"
    description = (
        f"Find files by glob pattern (** matches folders at any depth). Returns up to {GLOB_LIMIT} paths "
        f"relative to {WORKSPACE}, in path order (newest first with newest_first). Hidden files are listed; "
        ".git and what .gitignore files exclude are not, unless include_ignored is set."
    )

    async def _run(self, args: FsGlobInput, ctx: ToolContext) -> ToolResult:
        sandbox = need_sandbox(ctx)
        where = workspace_path(args.path or ".")
        pattern = _relative_pattern(args.pattern)
        found = await sandbox.glob(pattern, where, limit=GLOB_LIMIT + 1, include_ignored=args.include_ignored,
                                   newest_first=args.newest_first)
        truncated = len(found) > GLOB_LIMIT
        found = found[:GLOB_LIMIT]
        paths = [f.path for f in found]
        details = {"pattern": args.pattern, "path": display_path(where), "count": len(paths),
                   "truncated": truncated, "paths": paths}
        if not paths:
            return ToolResult.text(f"No files match {args.pattern!r} in {_where(where)}.", **details)
        text = "\n".join(paths)
        if truncated:
            which = "newest" if args.newest_first else "first"
            text += f"\n\n[showing the {GLOB_LIMIT} {which} matches; narrow the pattern or path to see others]"
        return ToolResult.text(text, **details)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        fields = [CallField("Pattern", value_text(raw.get("pattern", "?")), "code"),
                  CallField("Folder", value_text(raw.get("path") or WORKSPACE), "path")]
        if raw.get("include_ignored"):
            fields.append(CallField("Ignored files", "included"))
        return tuple(fields)

    def summarize(self, raw: dict[str, Any]) -> str:
        s = f"fs_glob {raw.get('pattern', '?')}"
        return s + (f" in {raw['path']}" if raw.get("path") else "")


class FsGrepInput(ToolInput):
    pattern: str = Field(min_length=1, description="Regular expression (Rust regex, as ripgrep reads it) to search "
                         "for.")
    path: str | None = Field(default=None, description=f"File or folder to search, relative to {WORKSPACE}.")
    glob: str | None = Field(default=None, description="Only files matching this glob, e.g. *.py.")
    ignore_case: bool = Field(default=False, description="Case-insensitive search.")
    max_results: int = Field(default=200, ge=1, le=2000, description="Most matching lines to return.")
    include_ignored: bool = Field(default=False, description=_INCLUDE_IGNORED)


class FsGrep(BuiltinTool, name="fs_grep", group="group:fs", input_model=FsGrepInput, read_only=True,
             timeout_s=_FS_TIMEOUT_S, risk=Risk.LOW):
    label = "Search files"
    description = (
        "Search file contents with a regular expression. Returns matching lines as path:line:text, by path. "
        "Narrow with path and glob; set ignore_case for case-insensitive search. The pattern is a Rust regex, "
        "run by ripgrep (linear time: no look-around, no backreferences). Where the sandbox has no ripgrep, "
        "a fallback reads the same pattern as Python `re` (RE2 outside a container; GNU grep -E, translated, "
        "in an image without Python): keep to the syntax they share. Binary files, .git and what .gitignore "
        "files exclude are skipped, unless include_ignored is set."
    )

    async def _run(self, args: FsGrepInput, ctx: ToolContext) -> ToolResult:
        sandbox = need_sandbox(ctx)
        where = workspace_path(args.path or ".")
        glob = _relative_pattern(args.glob) if args.glob else None
        try:
            matches = await sandbox.grep(
                args.pattern, where, glob=glob, ignore_case=args.ignore_case, max_results=args.max_results + 1,
                include_ignored=args.include_ignored,
            )
        except SandboxError as exc:
            if isinstance(exc, PathOutsideWorkspace) or "regular expression" not in str(exc):
                raise
            raise Refusal(
                f"fs_grep: {exc}",
                ["escape ( ) [ ] { } . * + ? | \\ with a backslash to match them literally",
                 "the syntax is ripgrep's (Rust regex): no look-around or backreferences"],
            ) from None
        truncated = len(matches) > args.max_results
        matches = matches[: args.max_results]
        rows: list[str] = []
        size = 0
        for m in matches:
            text = m.text.rstrip("\r\n")
            if len(text) > GREP_LINE_CHARS:
                text = text[:GREP_LINE_CHARS] + "…"
            row = f"{m.path}:{m.line}:{text}"
            if size + len(row) > GREP_OUTPUT_BYTES:
                truncated = True
                break
            rows.append(row)
            size += len(row) + 1
        files = sorted({m.path for m in matches})
        details = {"pattern": args.pattern, "path": display_path(where), "glob": args.glob,
                   "count": len(rows), "files": len(files), "truncated": truncated}
        if not rows:
            return ToolResult.text(f"No matches for {args.pattern!r} in {_where(where)}.", **details)
        text = "\n".join(rows)
        if truncated:
            text += (f"\n\n[stopped after {len(rows)} matches; narrow the pattern, path or glob, "
                     "or raise max_results]")
        return ToolResult.text(text, **details)

    def card_fields(self, raw: dict[str, Any]) -> tuple[CallField, ...]:
        fields = [CallField("Pattern", value_text(raw.get("pattern", "?")), "code"),
                  CallField("Folder", value_text(raw.get("path") or WORKSPACE), "path")]
        if raw.get("glob"):
            fields.append(CallField("Files", value_text(raw["glob"]), "code"))
        if raw.get("ignore_case"):
            fields.append(CallField("Case", "ignored"))
        if raw.get("include_ignored"):
            fields.append(CallField("Ignored files", "included"))
        return tuple(fields)

    def summarize(self, raw: dict[str, Any]) -> str:
        s = f"fs_grep {str(raw.get('pattern', '?'))[:80]!r}"
        if raw.get("path"):
            s += f" in {raw['path']}"
        if raw.get("glob"):
            s += f" ({raw['glob']})"
        return s


CARD_DIFF_CHARS = 65_536  # a card is built on the window's thread: a larger edit is described, not diffed


def _string_diff(path: str, old: Any, new: Any) -> str:
    """An edit's own diff (its old text against its new one), for its card before the dry run has the file's."""
    if not isinstance(old, str) or not isinstance(new, str):
        return ""
    if len(old) + len(new) > CARD_DIFF_CHARS:
        return (f"a large edit of {path}: {line_count(old)} lines replaced by {line_count(new)} "
                "(the raw input and the dry run's diff hold it whole)")
    return unified_diff(path.removeprefix(WORKSPACE + "/"), old + "\n", new + "\n")


def _change_outcome(result: dict[str, Any]) -> tuple[CallField, ...]:
    """A file change that was made: its diff as applied (the record keeps it), and its line counts."""
    d = result.get("details") or {}
    if result.get("is_error") or not isinstance(d.get("diff"), str):
        return ()
    added, removed = diff_counts(d["diff"])
    return (CallField("Changed", f"+{added} -{removed} lines"), CallField("Diff", value_text(d["diff"]), "diff"))
