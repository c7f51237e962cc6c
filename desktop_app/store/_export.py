"""Export of audit records: JSONL (each record with its trail) or CSV (flat columns)."""

from __future__ import annotations

import contextlib
import csv
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from desktop_app.core import StoreError, ToolCallRecord, shown_risk, skipped_after, status_word

FORMATS = ("jsonl", "csv")
# A file format: the order is the export's own (people and scripts read these columns), not the table's.
CSV_COLUMNS = (
    "id", "name", "state", "outcome", "session_id", "project_id", "batch_index", "created_at",
    "created_at_iso", "updated_at", "started_at", "completed_at", "duration_ms", "is_error", "error", "risk",
    "read_only", "approval_decision", "approval_decided_by", "input", "result_text", "result", "trail",
    "last_entry_seq", "last_entry_hash",
    # as the window shows it: the word (a call stopped by the person or a crash is "interrupted", one skipped
    # after a denial "skipped"), the sentence for a skipped call, and the model's input a person edited
    "status", "status_note", "model_input",
)


def _iso(t: float | None) -> str:
    return "" if t is None else datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds")


def _result_text(result: dict[str, Any] | None) -> str:
    if not result:
        return ""
    return "\n".join(b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text")


def _shown(rec: ToolCallRecord) -> dict[str, Any]:
    """What the window shows beside the stored fields: the status word and its note, the risk (none for a
    skipped call, never judged), and the model's own input when a person edited it."""
    risk = shown_risk(rec)
    return {"status": status_word(rec.state, rec.outcome),
            "status_note": skipped_after(rec) if risk is None else "",
            "risk": None if risk is None else str(risk), "model_input": rec.model_input}


def record_json(rec: ToolCallRecord) -> dict[str, Any]:
    """A record's JSONL object: its stored fields (those a signed export's digests cover, as stored), with its
    trail, and what the window shows of it (`_shown`)."""
    d = {**rec.to_dict(), **_shown(rec)}
    d["trail"] = [{**e.to_dict(), "seq": e.seq, "hash": e.hash} for e in rec.trail]
    return d


def csv_row(rec: ToolCallRecord) -> list[Any]:
    d = rec.to_dict()
    last = rec.trail[-1] if rec.trail else None
    dumps = lambda v: json.dumps(v, ensure_ascii=False, separators=(",", ":"), default=str)  # noqa: E731
    shown = _shown(rec)
    values = {
        **d,
        **shown,
        "model_input": "" if shown["model_input"] is None else dumps(shown["model_input"]),
        "created_at_iso": _iso(rec.created_at),
        "is_error": int(rec.is_error),
        "read_only": int(rec.read_only),
        "error": rec.error or "",
        "approval_decision": rec.approval.decision or "",
        "approval_decided_by": rec.approval.decided_by or "",
        "input": dumps(rec.input),
        "result_text": _result_text(rec.result),
        "result": "" if rec.result is None else dumps(rec.result),
        "trail": " > ".join(f"{e.state.value}@{_iso(e.at)} by {e.actor}" for e in rec.trail),
        "last_entry_seq": last.seq if last else "",
        "last_entry_hash": last.hash if last else "",
    }
    return ["" if values[c] is None else values[c] for c in CSV_COLUMNS]


# audit-keys: given the record count and the SHA-256 of the lines written, the signed trailer line.
Trailer = Callable[[int, str], dict[str, Any]]


def _write(records: Iterator[ToolCallRecord], fmt: str, stream: IO[str], trailer: Trailer | None = None,
           line_of: Callable[[ToolCallRecord], dict[str, Any]] = record_json) -> int:
    n = 0
    if fmt == "csv":
        w = csv.writer(stream)
        w.writerow(CSV_COLUMNS)
        for rec in records:
            w.writerow(csv_row(rec))
            n += 1
    else:
        digest = hashlib.sha256()
        for rec in records:
            line = json.dumps(line_of(rec), ensure_ascii=False, default=str) + "\n"
            stream.write(line)
            if trailer is not None:
                digest.update(line.encode("utf-8"))
            n += 1
        if trailer is not None:
            stream.write(json.dumps(trailer(n, digest.hexdigest()), ensure_ascii=False) + "\n")
    return n


def write_records(records: Iterable[ToolCallRecord], fmt: str, out: str | os.PathLike[str] | IO[str],
                  trailer: Trailer | None = None,
                  line_of: Callable[[ToolCallRecord], dict[str, Any]] = record_json) -> int:
    """Records as JSONL (with their trails) or CSV, to a stream or atomically to a file; returns the count.
    `trailer` (JSONL only) makes the last line: a signed head and the signature over the lines before it.
    `line_of` makes a record's JSONL object (a signed export adds what its entries' hashes cover)."""
    if fmt not in FORMATS:
        raise StoreError(f"unknown export format {fmt!r}", hint=f"use one of {', '.join(FORMATS)}")
    if trailer is not None and fmt != "jsonl":
        raise StoreError("a signed export is JSONL only", hint="use --format jsonl with --signed")
    records = iter(records)
    if hasattr(out, "write"):
        return _write(records, fmt, out, trailer, line_of)  # type: ignore[arg-type]
    path = Path(out).expanduser()
    # Write beside the target and rename, so a failed export leaves no half file behind.
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:
        raise StoreError(f"cannot write the export to {path}: {exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            n = _write(records, fmt, fh, trailer, line_of)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise StoreError(f"cannot write the export to {path}: {exc}") from exc
        raise
    return n
