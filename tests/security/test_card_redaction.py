"""Claim: redaction applies to everything a call's card shows (issue 28 item 7). Every built-in tool's card,
an MCP call's and a plugin's default, before the call and with its result, built through the desk's catalogue
with a redactor, holds no secret in any field, its label or its title, whichever input field or result detail
the secret came in (plain, inside a URL's query, a diff's line, a nested list, a JSON argument, a stderr line);
and the audit report's entries (the same cards) carry none either, though the records handed to it do."""

from __future__ import annotations

import json
import time

import pytest

from desktop_app.core import Redactor, SessionInfo, ToolCallRecord, ToolCallState, ToolLabels, tool
from desktop_app.runtime import ReportScope, report_html, tool_labels
from desktop_app.runtime._plugins import PluginTool
from desktop_app.runtime._report import AuditReport, SessionPart
from desktop_app.store import VerifyResult

SECRET = "sk-ant-api03-" + "Zq7" * 14  # shaped like an Anthropic key: one of the redactor's own patterns
AWS = "AKIA" + "Q7X2" * 4  # an AWS access key id


@tool()
async def deploy_notes(target: str, notes: list[str]) -> str:
    """A plugin's tool with no card of its own."""
    return "ok"


def inputs(secret: str) -> dict[str, dict]:
    return {
        "bash_run": {"command": f"curl -H 'x-api-key: {secret}' https://api.example.org"},
        "bash_logs": {"process_id": secret},
        "fs_read": {"path": f"keys/{secret}.txt"},
        "fs_write": {"path": "a.env", "content": f"A=1\nKEY={secret}\n"},
        "fs_edit": {"path": "a.env", "old_string": "KEY=", "new_string": f"KEY={secret}"},
        "fs_multi_edit": {"edits": [{"path": "b.env", "old_string": "x", "new_string": f"y\n{secret}"}]},
        "fs_grep": {"pattern": secret, "glob": f"*{secret}*"},
        "notebook_edit": {"path": "n.ipynb", "edit_mode": "replace", "index": 0,
                          "new_source": f"client = Anthropic(api_key='{secret}')"},
        "todo_write": {"todos": [{"id": "1", "content": f"rotate {secret}", "status": "pending"}]},
        "web_fetch": {"url": f"https://example.org/cb?token={secret}&x=1"},
        "ask_user": {"question": f"Is {secret} yours?", "choices": [secret]},
        "exit_plan_mode": {"plan": f"# Plan\nset the key to {secret}"},
        "git_commit": {"message": f"add key {secret}", "paths": [f"{secret}.txt"]},
        "task_run": {"task": f"use {secret}", "name": "scout"},
        "mcp__vault__put_secret": {"name": "k", "value": secret, "meta": {"nested": [secret]}},
        "deploy_notes": {"target": secret, "notes": [f"key {secret}"]},
    }


def results(secret: str) -> dict[str, dict]:
    text = {"content": [{"type": "text", "text": f"{secret}\nmore"}], "is_error": False}
    return {
        "bash_run": {**text, "details": {"exit_code": 1, "cwd": "/workspace", "stdout": secret,
                                         "stderr": f"error: bad key {secret}"}},
        "fs_edit": {**text, "details": {"diff": f"--- a/a.env\n+++ b/a.env\n@@ -1 +1 @@\n-KEY=\n+KEY={secret}\n"}},
        "web_fetch": {**text, "details": {"status": 200, "url": f"https://example.org/?t={secret}", "bytes": 3}},
        "git_commit": {**text, "details": {"commit": "abc", "branch": "main", "files": [f"{secret}.txt"]}},
        "fs_read": {"content": [{"type": "text", "text": json.dumps({"ok": False, "error": f"no {secret}"})}],
                    "is_error": True},
    }


@pytest.mark.parametrize("secret", [SECRET, AWS])
def test_no_card_shows_a_secret_in_any_field(secret: str) -> None:
    plugin = ToolLabels([PluginTool(deploy_notes, "deployer", "1.0")])  # the desk's own stays as it is
    redact = Redactor().redact
    outcomes = results(secret)
    for name, raw in inputs(secret).items():
        labels = plugin if name == "deploy_notes" else tool_labels()
        for result in (None, outcomes.get(name, {"content": [{"type": "text", "text": secret}]})):
            card = labels.summary(name, raw, result, redact)
            shown = json.dumps(card.to_dict(), ensure_ascii=False)
            assert secret not in shown, (name, shown)
            assert "[REDACTED]" in shown, name  # the secret was there, and is hidden, not dropped silently
            unredacted = json.dumps(labels.summary(name, raw, result).to_dict(), ensure_ascii=False)
            assert secret in unredacted or secret.replace("/", "\\/") in unredacted, name  # the test's own check


def test_the_reports_entries_are_the_cards_redacted() -> None:
    calls = []
    for i, (name, raw) in enumerate(inputs(SECRET).items()):
        rec = ToolCallRecord(name=name, input=raw, id=f"call_{i}", session_id="ses_1", project_id="prj_1")
        rec.transition(ToolCallState.EXECUTING, actor="executor")
        rec.transition(ToolCallState.COMPLETED, actor="executor")
        rec.result = results(SECRET).get(name)
        calls.append(rec)
    part = SessionPart(SessionInfo(id="ses_1", project_id="prj_1", title="t"), None, calls=calls)
    report = AuditReport(ReportScope(), time.time(), "auditor", "/tmp/audit.db", [part],
                         VerifyResult(ok=True, count=len(calls)), None)
    page = report_html(report)
    assert SECRET not in page and page.count("[REDACTED]") >= len(calls)
    for label in ("Run command", "Edit file", "Fetch web page", "Commit changes", "Put secret (vault)"):
        assert label in page, label
