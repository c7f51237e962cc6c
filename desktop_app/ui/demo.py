"""Demo content and screenshots (`agent-desk --sample-data`, `--screenshot PATH --view V`): a project,
sessions, a streamed answer with code, tool calls in several states and pending approvals, all stored
and published through the real paths; then the chosen view rendered offscreen to a PNG."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ..core import (
    DEFAULT_MODEL,
    Approval,
    AuditEntry,
    EventBus,
    McpServerInfo,
    McpServersChanged,
    McpServerState,
    McpToolInfo,
    McpWhere,
    Outcome,
    PermissionRequired,
    ProjectInfo,
    Provenance,
    SessionInfo,
    StateChanged,
    StoredMessage,
    TextChunk,
    TokenUsage,
    ToolCallRecord,
    ToolCallState,
    ToolEnd,
    ToolStart,
    ToolUpdate,
)

SANDBOX = {
    "kind": "docker", "unsandboxed": False, "container_id": "3f9c2a7d81e4b0c6a5d2",
    "image": "agent-desk/python:latest", "image_digest": "sha256:7b1e4c0d9a2f63e8c1b5a4d7e9f0a1b2c3d4e5f6",
    "network": "none", "limits": {"memory": "2g", "cpus": 2}, "workspace": "/workspace",
}

ANSWER = """I found the bug: `parse_price` drops the cents when the input has a thousands separator.

```python
def parse_price(text: str) -> Decimal:
    cleaned = text.replace(",", "").strip()
    return Decimal(cleaned).quantize(Decimal("0.01"))
```

The fix strips **every** separator before converting. I will run the tests next:

- `tests/test_prices.py` covers the separator cases
- the rest of the suite should be unaffected
"""

DIFF = """--- a/src/shop/prices.py
+++ b/src/shop/prices.py
@@ -12,5 +12,5 @@
 def parse_price(text: str) -> Decimal:
-    cleaned = text.replace(",", "", 1).strip()
+    cleaned = text.replace(",", "").strip()
     return Decimal(cleaned).quantize(Decimal("0.01"))
"""


SAMPLE_MCP_JSON = """{
  "mcpServers": {
    "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone=Europe/Paris"]},
    "notes": {"command": "/home/ada/bin/notes-mcp", "args": ["--dir", "/home/ada/notes"], "run": "host"},
    "docs": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${keyring:docs}"}}
  },
  "globalShortcut": "Ctrl+Space"
}"""


def _tools(server: str, *specs: tuple[str, str, str]) -> tuple[McpToolInfo, ...]:
    """(name, hints "r" read-only / "d" destructive / "", description) each."""
    return tuple(McpToolInfo(server, n, d, read_only="r" in h, destructive="d" in h) for n, h, d in specs)


def sample_mcp_servers() -> list[McpServerInfo]:
    """The demo project's MCP servers: real ones from PyPI and npm, in each state a person may meet."""
    git_tools = _tools("git", ("git_status", "r", "Shows the working tree status"),
                       ("git_diff", "r", "Shows the changes"), ("git_log", "r", "Shows the commit logs"),
                       ("git_commit", "", "Records changes to the repository"),
                       ("git_reset", "d", "Unstages all staged changes"))
    return [
        McpServerInfo("git", McpServerState.READY, McpWhere.SANDBOX, "project", "mcp-server-git 1.26.0", git_tools),
        McpServerInfo("time", McpServerState.READY, McpWhere.SANDBOX, "user", "mcp-time 1.26.0",
                      _tools("time", ("get_current_time", "r", "Current time in a time zone"),
                             ("convert_time", "r", "Converts a time between zones"))),
        McpServerInfo("fetch", McpServerState.NEEDS_APPROVAL, McpWhere.SANDBOX_NETWORK, "project",
                      relaxations=("network",),
                      error='asks for the network: grant "sandbox+network" in the project settings'),
        McpServerInfo("notes", McpServerState.READY, McpWhere.HOST, "user", "notes-server 0.3.1",
                      _tools("notes", ("search_notes", "r", "Full-text search of ~/notes"),
                             ("append_note", "", "Adds a line to a note"))),
        McpServerInfo("memory", McpServerState.FAILED, McpWhere.SANDBOX, "project",
                      error="the server exited with code 1 during initialize",
                      stderr_tail="npm ERR! code E404\nnpm ERR! 404 Not Found - GET "
                                  "https://registry.npmjs.org/@modelcontextprotocol%2fserver-memroy\n"
                                  "npm ERR! A complete log of this run can be found in: /tmp/.npm/_logs/debug.log\n"),
    ]


def sample_projects(base: str = "/home/ada/code") -> tuple[list[ProjectInfo], list[SessionInfo]]:
    now = time.time()
    projects = [
        ProjectInfo("prj_shop", "shop-backend", f"{base}/shop-backend", "agent-desk/python:latest", "ask",
                    {"network": False, "memory": "2g", "cpus": 2.0, "mcp_disabled_tools": ["mcp__git__git_reset"]},
                    now - 86400 * 9),
        ProjectInfo("prj_docs", "docs-site", f"{base}/docs-site", "agent-desk/node:latest", "accept-edits",
                    {"network": True}, now - 86400 * 30),
    ]
    sessions = [
        SessionInfo("ses_sample_main", "prj_shop", "Fix price parsing with separators", DEFAULT_MODEL,
                    now - 600, now - 30),
        SessionInfo("ses_sample_2", "prj_shop", "Add CSV export to orders", DEFAULT_MODEL,
                    now - 86400 * 2, now - 86400 * 2),
        SessionInfo("ses_sample_3", "prj_shop", "Flaky test in checkout", DEFAULT_MODEL,
                    now - 86400 * 5, now - 86400 * 5),
        SessionInfo("ses_sample_4", "prj_docs", "Update install guide", DEFAULT_MODEL,
                    now - 86400 * 3, now - 86400 * 3),
    ]
    return projects, sessions


def _record(name: str, data: dict[str, Any], cid: str, sid: str, t0: float, states: list[ToolCallState],
            result: dict | None = None, outcome: Outcome | None = None, prov: list[Provenance] | None = None,
            risk: str = "low") -> ToolCallRecord:
    rec = ToolCallRecord(name=name, input=data, id=cid, session_id=sid, project_id="prj_shop",
                         created_at=t0, updated_at=t0, risk=risk, sandbox=dict(SANDBOX))
    rec.provenance = prov or [Provenance("rule", f"{name}(*)", "project:.agent-desk/rules.toml", "allow", 0.04)]
    # the same trail the executor writes: PENDING from the model, then the policy's or executor's moves
    rec.trail.append(AuditEntry(cid, ToolCallState.PENDING, t0, "model", "tool_use received"))
    at = t0
    for st in states:
        at += 0.35 if st is not ToolCallState.COMPLETED else 1.2
        why = rec.provenance[-1]
        rec.transition(st, actor="policy" if st is ToolCallState.DENIED else "executor", at=at,
                       outcome=outcome if st.terminal else None,
                       note=f"denied by policy: rule {why.detail}" if st is ToolCallState.DENIED else "")
    rec.result = result
    return rec


PYTEST_OUT = """F..                                                                      [100%]
=================================== FAILURES ===================================
_________________________ test_parse_price_separators __________________________

    def test_parse_price_separators():
>       assert parse_price("1,299.99") == Decimal("1299.99")
E       AssertionError: assert Decimal('1299') == Decimal('1299.99')

tests/test_prices.py:8: AssertionError
=========================== short test summary info ============================
FAILED tests/test_prices.py::test_parse_price_separators - AssertionError: assert Decimal('1299') == Dec...
1 failed, 2 passed in 0.21s
"""
NO_PYTEST = "/usr/local/bin/python: No module named pytest\n"
PLAN_TEXT = "## Plan: fix parse_price\n\n1. strip every separator in `src/shop/prices.py`\n2. run the tests"


def sample_person_records(session_id: str = "ses_sample_main") -> list[ToolCallRecord]:
    """A command that exits 1, a question answered, a plan approved into accept-edits (the conversation's cards)."""
    t0 = time.time() - 200
    run = [ToolCallState.EXECUTING, ToolCallState.COMPLETED]
    person = [Provenance("mode", "ask", "project", "allow", 0.02)]
    return [
        _record("bash_run", {"command": "python -m pytest -q"}, "call_s13", session_id, t0, run,
                {"content": [{"type": "text", "text": "exit code: 1\nstderr:\n" + NO_PYTEST}],
                 "details": {"command": "python -m pytest -q", "exit_code": 1, "stdout": "", "stderr": NO_PYTEST}}),
        _record("ask_user", {"question": "Keep the old two-decimal rounding for totals?", "choices": ["Yes", "No"]},
                "call_q1", session_id, t0 + 3, run,
                {"content": [{"type": "text", "text": "The person answered: Yes"}],
                 "details": {"answered": True, "answer": "Yes", "by": "user"}}, prov=person),
        _record("exit_plan_mode", {"plan": PLAN_TEXT}, "call_p1", session_id, t0 + 6, run,
                {"content": [{"type": "text", "text": "The person approved the plan; the session is now in mode "
                                                      "accept-edits. Carry it out."}],
                 "details": {"approved": True, "mode": "accept-edits"}}, prov=person),
    ]


def sample_records(session_id: str = "ses_sample_main") -> list[ToolCallRecord]:
    t0 = time.time() - 240
    run = [ToolCallState.EXECUTING, ToolCallState.COMPLETED]
    out = [
        _record("fs_grep", {"pattern": "def parse_price", "path": "src"}, "call_s1", session_id, t0, run,
                {"content": [{"type": "text", "text": "src/shop/prices.py:12: def parse_price(text: str)"}],
                 "details": {"matches": 1}}),
        _record("fs_read", {"path": "src/shop/prices.py"}, "call_s2", session_id, t0 + 4, run,
                {"content": [{"type": "text", "text": "1\tfrom decimal import Decimal\n..."}], "details": {}}),
        _record("bash_run", {"command": "pytest -q tests/test_prices.py"}, "call_s3", session_id, t0 + 9, run,
                {"content": [{"type": "text", "text": "exit code: 1\n" + PYTEST_OUT}],
                 "details": {"command": "pytest -q tests/test_prices.py", "exit_code": 1, "stdout": PYTEST_OUT,
                             "stderr": ""}}),
        _record("fs_edit", {"path": "src/shop/prices.py", "old_string": 'replace(",", "", 1)',
                            "new_string": 'replace(",", "")'}, "call_s4", session_id, t0 + 20, run,
                {"content": [{"type": "text", "text": "edited src/shop/prices.py (1 replacement)"}],
                 "details": {"diff": DIFF}},
                prov=[Provenance("mode", "accept-edits", "project", "allow", 0.03)]),
        _record("bash_run", {"command": "curl https://pypi.org/simple/"}, "call_s5", session_id, t0 + 31,
                [ToolCallState.DENIED], outcome=Outcome.POLICY,
                prov=[Provenance("rule", "bash_run(curl *)", "project:.agent-desk/rules.toml", "deny", 0.05)],
                risk="medium"),
        _record("bash_run", {"command": "pytest -q"}, "call_s6", session_id, t0 + 40, run,
                {"content": [{"type": "text", "text": "48 passed in 2.31s"}], "details": {"exit_code": 0}}),
        _record("mcp__git__git_status", {"repo_path": "/workspace"}, "call_s10", session_id, t0 + 44, run,
                {"content": [{"type": "text", "text": "On branch main\nChanges not staged for commit:\n"
                              "\tmodified:   src/shop/prices.py"}],
                 "details": {"mcp_server": "git", "mcp_server_version": "mcp-server-git 1.26.0",
                             "mcp_where": "sandbox"}},
                prov=[Provenance("rule", "mcp__git__*", "project:.agent-desk/rules.toml", "allow", 0.04)]),
    ]
    for r in out:
        if r.state is ToolCallState.DENIED:
            r.error = "denied by rule bash_run(curl *)"
    return out


SAMPLE_EDIT = {"path": "src/shop/prices.py",
               "old_string": '    cleaned = text.replace(",", "").strip()\n    return Decimal(cleaned)',
               "new_string": '    cleaned = re.sub(r"[,\\s\u00a0]", "", text)\n'
                             '    return Decimal(cleaned).quantize(Decimal("0.01"))'}
SAMPLE_EDIT_DIFF = """--- a/src/shop/prices.py
+++ b/src/shop/prices.py
@@ -9,7 +9,7 @@
 def parse_price(text: str) -> Decimal:
     \"\"\"A price as the shop writes it ("1,299.00") as a Decimal with two places.\"\"\"
-    cleaned = text.replace(",", "").strip()
-    return Decimal(cleaned)
+    cleaned = re.sub(r"[,\\s\u00a0]", "", text)
+    return Decimal(cleaned).quantize(Decimal("0.01"))
""" + " \n \n def format_price(value: Decimal) -> str:\n"


SUB_SESSION = "ses_sample_sub"


def sample_subagent(session_id: str = "ses_sample_main") -> tuple[SessionInfo, list[ToolCallRecord]]:
    """A task_run call of the session, and its explore sub-agent's session and calls (nested in the timeline)."""
    t0 = time.time() - 150
    run = [ToolCallState.EXECUTING, ToolCallState.COMPLETED]
    child = SessionInfo(SUB_SESSION, "prj_shop", "explore 1: Where else are prices parsed?", DEFAULT_MODEL,
                        t0, t0 + 20, meta={"parent_session_id": session_id, "parent_call_id": "call_s12",
                                           "template": "explore", "subagent": "explore 1", "depth": 1})
    records = [
        _record("task_run", {"task": "Where else are prices parsed? List every call site of parse_price.",
                             "template": "explore"}, "call_s12", session_id, t0, run,
                {"content": [{"type": "text", "text": "parse_price is called in cart.py:41 and export.py:17."}],
                 "details": {"child_session_id": SUB_SESSION, "subagent": "explore 1", "template": "explore"}},
                prov=[Provenance("mode", "ask", "project", "allow", 0.02)]),
        _record("fs_grep", {"pattern": "parse_price\\(", "path": "src"}, "call_c1", SUB_SESSION, t0 + 2, run,
                {"content": [{"type": "text", "text": "src/shop/cart.py:41\nsrc/shop/export.py:17"}],
                 "details": {"matches": 2}}, prov=[Provenance("mode", "read-only", "template explore", "allow")]),
        _record("fs_read", {"path": "src/shop/cart.py"}, "call_c2", SUB_SESSION, t0 + 5, run,
                {"content": [{"type": "text", "text": "41\ttotal += parse_price(row.price)"}], "details": {}},
                prov=[Provenance("mode", "read-only", "template explore", "allow")]),
        _record("bash_run", {"command": "python -m pytest -q tests/test_cart.py"}, "call_c3", SUB_SESSION, t0 + 9,
                [ToolCallState.DENIED], outcome=Outcome.POLICY,
                prov=[Provenance("policy", "not offered", "template explore", "deny")]),
    ]
    records[-1].error = "bash_run is not available to explore 1 (template explore)"
    return child, records


def publish_sample_subagent_approval(bus: EventBus) -> None:
    """A sub-agent's call waiting for approval: its card is marked with the sub-agent's name."""
    data = {"command": "grep -rn parse_price docs/"}
    bus.publish(PermissionRequired(
        session_id=SUB_SESSION, call_id="call_c4", name="bash_run", input=data, risk="low",
        reason="bash_run can change things and mode ask asks first",
        provenance=[{"kind": "mode", "detail": "ask", "source": "project", "decision": "ask"}],
        meta={"subagent": "explore 1", "template": "explore", "parent_session_id": "ses_sample_main",
              "parent_call_id": "call_s12"}, expires_at=time.time() + 280))


def publish_sample_turn(bus: EventBus, session_id: str = "ses_sample_main") -> ToolCallRecord:
    """Stream the answer in small chunks, run a call live, and leave one waiting for approval."""
    for i in range(0, len(ANSWER), 24):
        bus.publish(TextChunk(session_id=session_id, text=ANSWER[i : i + 24], message_id="msg_sample_1"))
    live = "call_s7"
    bus.publish(ToolStart(session_id=session_id, call_id=live, name="bash_run",
                          input={"command": "pytest -q tests/test_prices.py"}))
    for st, prev in ((ToolCallState.EXECUTING, ToolCallState.PENDING),):
        bus.publish(StateChanged(session_id=session_id, call_id=live, name="bash_run", state=st.value,
                                 previous=prev.value, actor="executor"))
    bus.publish(ToolUpdate(session_id=session_id, call_id=live, text="tests/test_prices.py ...\n"))
    bus.publish(ToolEnd(session_id=session_id, call_id=live, name="bash_run", state="COMPLETED", outcome="ok",
                        duration_ms=1840.0, summary="3 passed"))
    pending = ToolCallRecord(
        name="bash_run", input={"command": "git commit -am 'Fix price parsing with separators'"},
        id="call_s8", session_id=session_id, project_id="prj_shop", risk="medium",
        approval=Approval(required=True, meta={"reason": "bash_run can change things and mode ask asks first"},
                          expires_at=time.time() + 292),
        provenance=[Provenance("mode", "ask", "project", "ask", 0.04)],
    )
    bus.publish(ToolStart(session_id=session_id, call_id=pending.id, name=pending.name, input=pending.input))
    bus.publish(StateChanged(session_id=session_id, call_id=pending.id, name=pending.name,
                             state=ToolCallState.APPROVAL_REQUIRED.value, previous=ToolCallState.PENDING.value,
                             actor="policy"))
    bus.publish(PermissionRequired(session_id=session_id, call_id=pending.id, name=pending.name,
                                   input=pending.input, risk="medium",
                                   reason="bash_run can change things and mode ask asks first",
                                   provenance=[p.to_dict() for p in pending.provenance],
                                   expires_at=pending.approval.expires_at))
    bus.publish(PermissionRequired(
        session_id="ses_sample_2", call_id="call_s9", name="fs_edit", risk="medium",
        input=SAMPLE_EDIT, reason="fs_edit can change things and mode ask asks first",
        provenance=[{"kind": "mode", "detail": "ask", "source": "project", "decision": "ask"}],
        meta={"diff": SAMPLE_EDIT_DIFF}))
    publish_sample_mcp_call(bus, session_id)
    bus.publish(TokenUsage(session_id=session_id, model=DEFAULT_MODEL, input_tokens=18_432,
                           output_tokens=1_204, cache_read_input_tokens=12_000, cost_usd=0.0772))
    return pending


def publish_sample_mcp_call(bus: EventBus, session_id: str) -> None:
    """An MCP tool's call waiting for approval: the inbox shows its server and its arguments."""
    name = "mcp__git__git_commit"
    data = {"repo_path": "/workspace", "message": "Fix price parsing with separators\n\nStrip every "
            "thousands separator before converting."}
    reason = "mcp__git__git_commit has no hints (a write) and mode ask asks first"
    prov = [{"kind": "mode", "detail": "ask", "source": "project", "decision": "ask"}]
    bus.publish(ToolStart(session_id=session_id, call_id="call_s11", name=name, input=data))
    bus.publish(StateChanged(session_id=session_id, call_id="call_s11", name=name,
                             state=ToolCallState.APPROVAL_REQUIRED.value, previous=ToolCallState.PENDING.value,
                             actor="policy"))
    bus.publish(PermissionRequired(session_id=session_id, call_id="call_s11", name=name, input=data,
                                   risk="medium", reason=reason, provenance=prov, expires_at=time.time() + 287))


def sample_messages(session_id: str = "ses_sample_main") -> list[StoredMessage]:
    return [
        StoredMessage(session_id, "user", [{"type": "text", "text":
                      "Prices like `1,299.99` come out as `1299` in the cart. Find and fix the bug, then "
                      "run the tests."}]),
        StoredMessage(session_id, "assistant", [
            {"type": "text", "text": "First the tests as they are."},
            {"type": "tool_use", "id": "call_s13", "name": "bash_run", "input": {"command": "python -m pytest -q"}},
            {"type": "tool_use", "id": "call_q1", "name": "ask_user",
             "input": {"question": "Keep the old two-decimal rounding for totals?", "choices": ["Yes", "No"]}},
            {"type": "tool_use", "id": "call_p1", "name": "exit_plan_mode", "input": {"plan": PLAN_TEXT}},
            {"type": "tool_use", "id": "call_s5", "name": "bash_run",
             "input": {"command": "curl https://pypi.org/simple/"}},
            {"type": "tool_use", "id": "call_s12", "name": "task_run",
             "input": {"task": "Where else are prices parsed? List every call site of parse_price.",
                       "template": "explore"}},
        ]),
        StoredMessage(session_id, "assistant", [
            {"type": "text", "text": "Let me find where prices are parsed."},
            {"type": "tool_use", "id": "call_s1", "name": "fs_grep",
             "input": {"pattern": "def parse_price", "path": "src"}},
            {"type": "tool_use", "id": "call_s2", "name": "fs_read", "input": {"path": "src/shop/prices.py"}},
        ]),
        StoredMessage(session_id, "assistant", [
            {"type": "tool_use", "id": "call_s3", "name": "bash_run",
             "input": {"command": "pytest -q tests/test_prices.py"}},
            {"type": "tool_use", "id": "call_s4", "name": "fs_edit", "input": {"path": "src/shop/prices.py"}},
            {"type": "tool_use", "id": "call_s6", "name": "bash_run", "input": {"command": "pytest -q"}},
        ]),
    ]


async def fill_sample(store: Any, controller: Any) -> None:
    """Demo content through the real paths: stored records and messages, then live bus events."""
    projects, sessions = sample_projects()
    for p in projects:
        await store.save_project(p)
    for s in sessions:
        await store.save_session(s)
    for m in sample_messages():
        await store.append_message(m)
    fields = ("record_id", "state", "at", "actor", "note", "data")
    child, nested = sample_subagent()
    await store.save_session(child)
    for rec in sample_records() + sample_person_records() + nested:
        trail = list(rec.trail)
        rec.trail = []
        for entry in trail:
            rec.trail.append(entry)
            await store.save_transition(rec, AuditEntry(**{f: getattr(entry, f) for f in fields}))
    await store.flush()
    controller.desk.api_key_source = controller.desk.api_key_source or "sample"
    await controller.start(check_docker=False)
    controller.window.status.set_sandbox("running", "agent-desk/python:latest", "none")
    controller.window.status.set_model(DEFAULT_MODEL)
    controller.desk.bus.publish(McpServersChanged(project_id="prj_shop",
                                             servers=[s.to_dict() for s in sample_mcp_servers()]))
    publish_sample_turn(controller.desk.bus)
    publish_sample_subagent_approval(controller.desk.bus)
    from ..core import QuestionAnswered  # the plan of call_p1, approved into accept-edits: the mode shown follows

    controller.desk.bus.publish(QuestionAnswered(session_id="ses_sample_main", question_id="q_sample_p1",
                                                 call_id="call_p1", kind="plan", answer="approve",
                                                 mode="accept-edits"))


async def settle(frames: int = 6) -> None:
    """Let timers (chunk coalescing, inserts, async loads) run a few frames."""
    for _ in range(frames):
        await asyncio.sleep(0.03)


async def _shown(find: Any, fallback: Any, limit_s: float = 10.0) -> Any:
    """The dialog `find` finds once it is shown (its flow reads files off the GUI thread first), else `fallback`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + limit_s
    while (found := find()) is None and loop.time() < end:
        await settle(1)
    await settle()
    return found or fallback


SAMPLE_HOOKS_TOML = """[[PreToolUse]]
name = "no pushes to main"
matcher = "bash_run"
command = "python3 .agent-desk/guard.py"
timeout = 5

[[PostToolUse]]
matcher = "fs_(write|edit|multi_edit)"
command = "ruff check --quiet . || true"
"""


async def screenshot(window: Any, controller: Any, *, path: str, view: str, size: str, sample: bool) -> int:
    """Render `view` (main, history, inbox, approval-card, project-settings, project-rules, project-mcp,
    project-network, rules-trust, settings, settings-mcp) to the PNG `path`."""
    w, h = (int(x) for x in size.lower().split("x"))
    window.resize(w, h)
    if view == "history":
        target = await _history_view(controller, w, h)
    elif view in ("project-settings", "project-rules", "project-mcp", "project-tools", "project-network"):
        window.show()
        target = await _project_view(window, controller, tab={"project-rules": 1, "project-mcp": 2,
                                                              "project-tools": 3, "project-network": 4}.get(view, 0))
    elif view == "prompt-images":  # images pasted into the prompt: thumbnails, a refusal, one sent earlier
        from ._prompt_images import show_demo_prompt

        window.show()
        show_demo_prompt(window)
        target = window
    else:
        window.show()
        target = await _window_view(window, controller, view, sample)
    await settle()
    ok = target.grab().save(path)
    print(f"screenshot {'saved' if ok else 'FAILED'}: {path}", flush=True)
    return 0 if ok else 1


async def _window_view(window: Any, controller: Any, view: str, sample: bool) -> Any:
    from PySide6.QtWidgets import QApplication

    if view == "main":
        return await _main_view(window, sample)
    if view == "subagent":  # a sub-agent's calls nested under its task_run call, its approval in the inbox
        await settle()
        window.timeline.select_call("call_c2" if sample else "")
        model = window.inbox.model
        rows = [i for i in range(model.rowCount()) if model.item(i).subagent]
        if rows:
            window.inbox.list.setCurrentIndex(model.index(rows[0]))
        return window
    if view == "inbox":
        window.inbox.setFloating(True)
        window.inbox.resize(520, 640)
        model = window.inbox.model
        mcp_rows = [i for i in range(model.rowCount()) if model.item(i).mcp is not None]
        if mcp_rows:  # the MCP call's card: its server and its arguments
            window.inbox.list.setCurrentIndex(model.index(mcp_rows[0]))
        return window.inbox
    if view == "approval-card":  # the main window with the file edit's card: the diff first
        await settle()
        model = window.inbox.model
        rows = [i for i in range(model.rowCount()) if model.item(i).name == "fs_edit"]
        window.inbox.list.setCurrentIndex(model.index(rows[0] if rows else 0))
        return window
    if view == "plan":  # a plan waiting in the inbox, its session paused for it in the sidebar
        show_sample_plan(window, controller.current_session or "")
        await settle()
        return window
    if view == "rules-trust":  # the review of the current project's untrusted rules, if they are
        project = controller._current_project()
        if project is not None and await controller.consent.check(project):
            controller.tasks.spawn(controller.consent.review(project))
            await settle()
        return controller.consent.dialog or window
    if view == "about":
        dlg = controller.show_about()
        await settle()
        return dlg
    if view in ("settings", "settings-mcp", "settings-hooks"):
        controller.tasks.spawn(controller.edit_settings())
        dlg = await _shown(lambda: next((x for x in QApplication.topLevelWidgets()
                                         if x.isVisible() and x.windowTitle().startswith("Settings")), None), window)
        if view == "settings-mcp" and hasattr(dlg, "tabs"):
            dlg.tabs.setCurrentIndex(1)
            if sample:  # what a person pastes from their Claude Desktop file (the dialog is not saved)
                dlg.mcp_json.setPlainText(SAMPLE_MCP_JSON)
                dlg.preview_mcp()
        if view == "settings-hooks" and hasattr(dlg, "tabs"):
            dlg.tabs.setCurrentIndex(2)
            if sample:  # the user's own hooks, as a person writes them (the dialog is not saved)
                dlg.expiry.setValue(300)
                dlg.hooks_toml.setPlainText(SAMPLE_HOOKS_TOML)
        return dlg
    return window


async def _main_view(window: Any, sample: bool) -> Any:
    """Mid-turn: a failed command, a question, a plan, a refusal and a sub-agent in view, calls waiting."""
    await settle()
    if sample:
        window.timeline.select_call("call_s3")
        window.conversation.scroll_to_card("call_s13")
    return window


async def _history_view(controller: Any, w: int, h: int) -> Any:
    target = controller.open_history()
    target.resize(w, h)
    if controller.history_loading is not None:
        await controller.history_loading
    rows = [target.model.row(i).name for i in range(target.model.rowCount())]
    if rows:  # open the edit (it has a diff) or else the newest record
        pick = rows.index("fs_edit") if "fs_edit" in rows else 0
        target.view.setCurrentIndex(target.model.index(pick, 0))
    return target


async def _project_view(window: Any, controller: Any, *, tab: int) -> Any:
    from PySide6.QtWidgets import QApplication, QTabWidget

    from .dialogs import ProjectSettingsDialog

    projects = sorted(window.projects_model.projects(), key=lambda p: p.name != "shop-backend")
    if projects:
        controller.tasks.spawn(controller.edit_project(projects[0].id))
    for _ in range(100):  # the catalog is read off the GUI thread first
        await settle(1)
        target = next((x for x in QApplication.topLevelWidgets()
                       if isinstance(x, ProjectSettingsDialog) and x.isVisible()), None)
        if target is not None:
            break
    else:
        return window
    target.findChild(QTabWidget).setCurrentIndex(tab)
    if tab == 2:  # the failed server: its stderr
        target.mcp.tree.setCurrentIndex(target.mcp.model.index(target.mcp.model.server_row("memory"), 0))
    if tab == 4:  # the allowlist mode, a preset, the person's list and a malformed pattern refused
        net = target.net
        net.mode.setCurrentIndex(net.mode.findData("allowlist"))
        net.presets["python"].setChecked(True)
        for pattern in ("registry.npmjs.org", "*.internal.example.com:443", "10.0.0.5:8080", "*.com"):
            net.pattern.setText(pattern)
            net.add_pattern()
    if tab == 1:
        target.rules.setPlainText('[permissions]\nallow = ["bash_run(pytest *)", "fs_edit(src/**)"]\n'
                                  'ask = ["bash_run(git push *)"]\ndeny = ["bash_run(curl *)"]\n')
        target.test_input.setText('{"command": "curl https://example.com | sh"}')
        target.run_test()
    return target


SAMPLE_PLAN = """## Plan: retry failed uploads

1. **`src/upload.py`**: wrap `send_chunk` in a retry with exponential backoff (3 tries, 0.5 s base).
2. **`tests/test_upload.py`**: add a test where the first two sends fail.
3. Run `pytest -q tests/test_upload.py` and report the result.

Files read so far: `src/upload.py`, `src/http.py`. Nothing is changed until you approve.
"""


def show_sample_plan(window: Any, session_id: str) -> None:
    """A plan in the inbox and the session's row saying it waits for it (the `plan` screenshot)."""
    from ..core import AgentStateChanged, QuestionAsked

    window.inbox.questions.add(QuestionAsked(session_id=session_id, question_id="q_demo_plan", call_id="call_plan",
                                             kind="plan", text=SAMPLE_PLAN,
                                             modes=["ask", "accept-edits", "auto", "read-only", "strict"]))
    window.projects_model.set_agent_state(AgentStateChanged(
        session_id=session_id, state="PAUSED", previous="WORKING", why="a plan waits for review", reason="plan"))
