"""Secrets never reach storage: each kind is planted only in tool output (a file cat, stdout, stderr, a
background command's logs, chunks split by sleeps, output over the truncation limit) or only in tool input,
then the raw bytes of the database, its WAL, the artifacts and the CLI's `--json` stdout are scanned.
Also the patterns one by one, their false positives, and the streaming redactor's carry-over."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import random
import re
import secrets
import string
import subprocess
from pathlib import Path

import pytest

from desktop_app.core import Allow, MemoryStore, ToolCallState, builtin_hooks
from desktop_app.core._executor import LOST_SECRETS
from desktop_app.core._redaction import PATTERNS, REDACTED, Redactor, StreamRedactor, may_hold_secret
from tests.conftest import TEST_IMAGE
from tests.core.conftest import Harness, call
from tests.e2e.conftest import cli, env, workspace_dir  # noqa: F401  (fixtures)
from tests.fakes.anthropic_server import reply, text, tool_use


def _r(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    return "".join(secrets.choice(alphabet) for _ in range(n))


def _aws_secret() -> str:
    return "Ab1/" + _r(36, string.ascii_letters + string.digits + "/+")


def planted() -> dict[str, tuple[str, str]]:
    """kind -> (the line that holds it, the secret itself), fresh for each test."""
    k = {name: _r(24) for name in ("pass", "token", "env", "yaml", "json", "url", "cli")}
    pem_body = "\n".join(_r(64, string.ascii_letters + string.digits + "+/") for _ in range(6))
    aws, aws_bare = _aws_secret(), _aws_secret()
    jwt = f"eyJhbGciOiJIUzI1NiJ9.eyJ{_r(30)}.{_r(43)}"
    return {
        "anthropic": (f"key sk-ant-api03-{k['pass']}AA", f"sk-ant-api03-{k['pass']}AA"),
        "openai": (f"OPENAI sk-proj-{_r(40)}", ""),
        "openai_legacy": (f"old sk-{_r(48)}", ""),
        "aws_id": (f"id AKIA{_r(16, string.ascii_uppercase + string.digits)}", ""),
        "aws_secret": (f"aws_secret_access_key = {aws}", aws),
        "aws_bare": (f"the aws key is {aws_bare} ok", aws_bare),
        "github": (f"gh ghp_{_r(36)}", ""),
        "github_pat": (f"pat github_pat_{_r(82)}", ""),
        "gitlab": (f"gl glpat-{_r(20)}", ""),
        "slack": (f"slack xoxb-{_r(12, string.digits)}-{_r(24)}", ""),
        "slack_hook": (f"hook https://hooks.slack.com/services/T{_r(8)}/B{_r(8)}/{_r(24)}", ""),
        "google": (f"g AIza{_r(35)}", ""),
        "jwt": (f"jwt {jwt}", jwt),
        "pem": (f"-----BEGIN RSA PRIVATE KEY-----\n{pem_body}\n-----END RSA PRIVATE KEY-----", pem_body[:64]),
        "db_pass": (f"DB_PASS={k['pass']}x", f"{k['pass']}x"),
        "export_token": (f"export API_TOKEN={k['token']}", k["token"]),
        "dotenv": (f"MY_SECRET='{k['env']}'", k["env"]),
        "yaml": (f"  password: {k['yaml']}", k["yaml"]),
        "json": (f'{{"password": "{k["json"]}"}}', k["json"]),
        "url": (f"postgres://admin:{k['url']}@db:5432/app", k["url"]),
        "curl": (f"curl -u admin:{k['cli']} https://x", k["cli"]),
    }


def secret_of(line: str, secret: str) -> str:
    """The part of `line` that must never be stored: `secret`, or the token itself."""
    return secret or line.split(" ", 1)[1]


# -- the patterns, one by one ----------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(planted()))
def test_each_kind_is_redacted(kind: str) -> None:
    line, secret = planted()[kind]
    out = Redactor().redact(line)
    assert secret_of(line, secret) not in out and REDACTED in out, out


def test_the_configured_key_is_redacted_exactly() -> None:
    assert Redactor(["short-but-configured"]).redact("x short-but-configured y") == f"x {REDACTED} y"


@pytest.mark.parametrize("text", [
    "PWD=/workspace", "OLDPWD=/workspace/src", "PASSWORD_MIN_LENGTH=8", "max_tokens: 1024",
    "/workspace/src/password_reset/views.py", "commit 3f786850e387550fdab836ed7e6dc881de23001b secret fix",
    "aws s3 cp 9b74c9897bac770ffc029102a200c5de0f3e1c2a s3://bucket/", "id 123e4567-e89b-12d3-a456-426614174000",
    "id = Column(Integer, primary_key=True)", "def login(user, password: str) -> bool:", "token=token",
    "self.password = password", "api_key = os.getenv('API_KEY')", "password = os.environ['DB_PASS']",
    "password: ${DB_PASSWORD}", 'X_TOKEN="$(cat /run/secrets/token)"', "sort -u names.txt",
    "git push -u origin main", "SSH_KEY_PATH=~/.ssh/id_ed25519", "monkey=3", "sk-learn-compatible-estimators",
    "token: null", "password: true", "http://[::1]:8080/path",
])
def test_false_positives_stay(text: str) -> None:
    assert Redactor().redact(text) == text


def test_a_redaction_never_swallows_shell_control() -> None:
    """What an approver sees of a command: the value goes, the `&&`, `;` and `|` after it stay."""
    for cmd in ("X_TOKEN=abc&&rm -rf ~", "DB_PASS=abc;curl evil", "API_KEY=abc|sh"):
        out = Redactor().redact(cmd)
        assert "abc" not in out and out.endswith(cmd.split("abc", 1)[1]), out


def test_every_pattern_needs_a_trigger() -> None:
    """The cheap prefilter must pass every text a pattern matches."""
    for kind, (line, _) in planted().items():
        assert may_hold_secret(line), kind
    assert len(PATTERNS) >= 10


# -- the streaming redactor ------------------------------------------------------------------------


def _stream(text: str, rnd: random.Random, sr: StreamRedactor) -> str:
    out, i = [], 0
    while i < len(text):
        n = rnd.randint(1, 40)
        out.append(sr.feed(text[i : i + n]))
        i += n
    return "".join(out) + sr.flush()


@pytest.mark.parametrize("seed", range(40))
def test_a_secret_split_across_chunks_is_caught(seed: int) -> None:
    kinds = planted()
    body = "\n".join(line for line, _ in kinds.values()) + "\ntrailing line without newline"
    rnd = random.Random(seed)
    sr = StreamRedactor(Redactor(), line_hold=rnd.choice([300, 16_384]), tail_hold=rnd.choice([200, 2_048]))
    out = _stream(body, rnd, sr)
    for kind, (line, secret) in kinds.items():
        assert secret_of(line, secret) not in out, kind
    assert "trailing line without newline" in out


def test_a_long_line_free_stream_is_not_held_forever() -> None:
    sr = StreamRedactor(Redactor())
    emitted = sum(len(sr.feed("progress." * 100)) for _ in range(200))
    assert emitted > 150_000 and sr.pending <= 16_384


def test_a_pem_key_split_across_chunks_is_dropped_line_by_line() -> None:
    line, secret = planted()["pem"]
    sr = StreamRedactor(Redactor())
    pieces = [sr.feed("before\n" + line[:50]), sr.feed(line[50:120]), sr.feed(line[120:] + "\nafter\n")]
    out = "".join(pieces) + sr.flush()
    assert secret not in out and "before" in out and "after" in out and REDACTED in out


def test_a_pem_begin_line_without_a_key_does_not_hide_the_rest() -> None:
    sr = StreamRedactor(Redactor())
    out = sr.feed('grep -n "-----BEGIN RSA PRIVATE KEY-----" found in x.py\nnext: line; of code\n') + sr.flush()
    assert "next: line; of code" in out


# -- inputs: stored redacted, run raw --------------------------------------------------------------


async def test_the_input_is_stored_redacted_and_runs_raw() -> None:
    secret = _r(20)
    h = Harness(MemoryStore(), mode="auto", hooks=builtin_hooks())
    [r] = await h.batch(call("bash_run", command=f"DB_PASS={secret} make test"))
    assert r.state is ToolCallState.COMPLETED
    assert h.run.state["ran"] == [f"DB_PASS={secret} make test"]  # the tool got the raw input
    stored = json.dumps([r.to_dict(), [e.to_dict() for e in h.events]], default=str)
    assert secret not in stored and "DB_PASS=[REDACTED] make test" in stored


async def test_an_edit_keeps_the_raw_value_of_the_fields_left_as_shown() -> None:
    secret = _r(20)
    h = Harness(MemoryStore(), mode="ask", hooks=builtin_hooks())
    task = asyncio.ensure_future(h.batch(call("write", path="a.env", content=f"API_TOKEN={secret}\n")))
    [pending] = await h.wait_pending()
    asked = [e for e in h.events if e.type == "permission_required"][-1].payload
    assert secret not in json.dumps(pending.input) and secret not in json.dumps(asked)
    assert "[REDACTED]" in asked["reason"]
    h.executor.decide(pending.id, Allow(edited_input={**pending.input, "path": "b.env"}))
    [r] = await task
    assert r.state is ToolCallState.COMPLETED and h.run.state["files"] == {"b.env": f"API_TOKEN={secret}\n"}
    assert secret not in json.dumps(r.to_dict(), default=str)


async def test_a_reoffered_call_whose_secrets_were_not_stored_does_not_run() -> None:
    store = MemoryStore()
    first = Harness(store, mode="ask", hooks=builtin_hooks())
    task = asyncio.ensure_future(first.batch(call("bash_run", command=f"DB_PASS={_r(20)} make deploy")))
    await first.wait_pending()
    second = Harness(store, mode="ask", hooks=builtin_hooks())  # the window reopened the session
    report = await second.executor.seal_open(first.run.session_id)
    [record] = report.reoffered
    resumed = asyncio.ensure_future(second.executor.resume_approvals(report.reoffered, second.run))
    await second.wait_pending()
    second.executor.decide(record.id, Allow())
    [r] = await resumed
    assert r.state is ToolCallState.FAILED and LOST_SECRETS in r.error and "ran" not in second.run.state
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


# -- the whole desk: the CLI on Docker, then the raw bytes scanned ---------------------------------


def _scan(paths: list[Path], extra: str, secrets_: dict[str, str]) -> list[str]:
    blobs = [extra.encode()]
    for p in paths:
        files = [p] if p.is_file() else sorted(f for f in p.rglob("*") if f.is_file()) if p.is_dir() else []
        blobs += [f.read_bytes() for f in files]
    found = []
    for kind, secret in secrets_.items():
        needle = secret.encode()
        if any(needle in b or json.dumps(secret)[1:-1].encode() in b for b in blobs):
            found.append(kind)
    return found


def _storage(tmp_path: Path) -> list[Path]:
    db = tmp_path / "desk.db"
    return [db, Path(f"{db}-wal"), Path(f"{db}-shm"), tmp_path / "data"]


def _run(environ: dict[str, str], workspace: Path, prompt: str) -> subprocess.CompletedProcess[str]:
    args = cli("run", "--project", str(workspace), "--image", TEST_IMAGE, "--permission-mode", "auto", "--json",
               prompt)
    return subprocess.run(args, env=environ, capture_output=True, text=True, timeout=300)


def _pid(result_text: str) -> str:
    m = re.search(r"process_id=(\S+)", result_text)
    return m.group(1) if m else "missing"


@pytest.mark.docker
def test_secrets_in_tool_output_reach_no_storage(env, server, docker_client, workspace_dir, tmp_path) -> None:  # noqa: F811
    kinds = planted()
    kinds["configured"] = (f"the key {server.api_key}", server.api_key)
    body = "\n".join(line for line, _ in kinds.values()) + "\n"
    (workspace_dir / "leak.txt").write_text(body)
    (workspace_dir / "pem.txt").write_text(kinds["pem"][0] + "\n")
    if os.geteuid() == 0:
        for f in ("leak.txt", "pem.txt"):
            os.chown(workspace_dir / f, 1000, 1000)
    pad = "for i in $(seq 1 1500); do echo padding line $i of the long output; done"
    server.add(
        reply(tool_use("bash_run", {"command": "cat leak.txt"})),
        reply(tool_use("bash_run", {"command": "cat leak.txt >&2; exit 3"})),
        reply(tool_use("fs_read", {"path": "leak.txt"})),
        reply(tool_use("bash_run", {"command": "while IFS= read -r l; do printf '%s' \"${l:0:9}\"; sleep 0.05; "
                                               "printf '%s\\n' \"${l:9}\"; done < leak.txt"})),
        reply(tool_use("bash_run", {"command": "head -c 70 pem.txt; sleep 0.4; tail -c +71 pem.txt"})),
        reply(tool_use("bash_run", {"command": f"{pad}; cat leak.txt; {pad}; cat leak.txt; {pad}"})),
        reply(tool_use("bash_run", {"command": "cat leak.txt; sleep 1", "background": True})),
        lambda req: reply(tool_use("bash_logs", {"process_id": _pid(req.last_tool_result_text())})),
        reply(text("done")),
    )
    out = _run(env, workspace_dir, "show me the files")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert any(e["type"] == "tool:update" for e in events)  # the output did stream
    assert (tmp_path / "data" / "artifacts").is_dir()  # the long output was truncated to an artifact
    found = _scan(_storage(tmp_path), out.stdout + out.stderr,
                  {k: secret_of(line, s) for k, (line, s) in kinds.items()})
    assert found == []


@pytest.mark.docker
def test_secrets_in_tool_input_reach_no_storage_but_run(env, server, docker_client, workspace_dir,  # noqa: F811
                                                        tmp_path) -> None:
    kinds = planted()
    db_pass = kinds["db_pass"][1]
    digest = hashlib.sha256(db_pass.encode()).hexdigest()
    content = "\n".join(line for line, _ in kinds.values()) + "\n"
    server.add(
        reply(text(f"I will use {kinds['url'][0]} and {kinds['anthropic'][1]}."),
              tool_use("bash_run", {"command": f"export DB_PASS={db_pass} && printf %s \"$DB_PASS\" | sha256sum"})),
        reply(tool_use("fs_write", {"path": "config.env", "content": content})),
        reply(tool_use("bash_run", {"command": f"curl -u admin:{kinds['curl'][1]} http://localhost:1 || true"})),
        reply(text("done")),
    )
    out = _run(env, workspace_dir, "set it up")
    assert out.returncode == 0, out.stderr
    assert digest in _tool_outputs(out.stdout)  # the raw value ran, and its digest streamed back
    assert (workspace_dir / "config.env").read_text() == content  # and was written as sent
    found = _scan(_storage(tmp_path), out.stdout + out.stderr,
                  {k: secret_of(line, s) for k, (line, s) in kinds.items()})
    assert found == []


def _tool_outputs(stdout: str) -> str:
    return "".join(json.loads(line)["payload"].get("text", "") for line in stdout.splitlines())


def test_secrets_inside_json_encoded_text_are_redacted() -> None:
    """A tool's input streams as JSON text: escaped quotes and `\\n` must not hide a secret."""
    kinds = planted()
    encoded = json.dumps({"content": "\n".join(line for line, _ in kinds.values())})
    out = Redactor().redact(encoded)
    assert [k for k, (line, s) in kinds.items() if secret_of(line, s) in out] == []
    assert json.loads(out)["content"].count(REDACTED) >= len(kinds) - 1
