"""SIGKILL the store's process mid-stream: every acknowledged transition is still there, chain intact; and
mid-burst of an agent's calls: nothing ran, and nothing reached the model, before its state was on disk.

About SQLite itself: the crash of a process that holds a SQLite file (on PostgreSQL the server keeps it)."""

from __future__ import annotations

import json
import os
import random
import signal
import socket
import subprocess
import sys
from pathlib import Path

from desktop_app.store import HeadSigner, SqlStore
from tests.fakes.anthropic_server import AnthropicServer, RecordedRequest, reply, text, tool_use
from tests.kit import raw_sql, wait_until

ROOT = Path(__file__).resolve().parents[2]


def _run_and_kill(db: Path, acks_wanted: int) -> list[tuple[int, str, str, str]]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.store.crash_child", str(db)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdout is not None
    try:
        first = proc.stdout.readline()
        assert first == "ready\n", first + proc.stderr.read()
        acks = []
        while len(acks) < acks_wanted:
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            acks.append(line)
        proc.send_signal(signal.SIGKILL)  # no close(), no atexit: the writer dies mid-batch
        rest, _ = proc.communicate(timeout=30)
        acks.extend(rest.splitlines())  # printed before the kill: acknowledged too
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    out = []
    for line in acks:
        parts = line.split()
        if len(parts) == 4:  # a line cut by the kill was never a whole acknowledgement
            out.append((int(parts[0]), parts[1], parts[2], parts[3]))
    return out


async def test_acknowledged_transitions_survive_sigkill(tmp_path: Path) -> None:
    db = tmp_path / "crash.db"
    acks = _run_and_kill(db, 600)
    assert len(acks) >= 600
    store = await SqlStore.open(db)
    try:
        result = await store.verify()
        assert result.ok, result.message
        assert result.count >= max(seq for seq, *_ in acks)
        for seq, record_id, state, h in acks:
            trail = await store.get_trail(record_id)
            assert (seq, state, h) in [(e.seq, e.state.value, e.hash) for e in trail]
        # The reopened store carries on the same chain.
        stats = await store.stats()
        assert stats.last_entry_seq == result.count
    finally:
        await store.close()


BURST_STEPS, BURST_WIDTH = 50, 20  # 1,000 calls: 50 model replies of 20 tool_use blocks each
BURST_ROUNDS = 3


def _forker() -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "tests.store.burst_child"], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _burst_round(child: subprocess.Popen[str], tmp: Path, kill_at: int,
                 seed: bytes) -> tuple[Path, set[int], list[RecordedRequest], int]:
    """One burst in a process forked by `child`, SIGKILLed once the `ran` file holds `kill_at` calls:
    (db, calls that ran, the requests the model saw, that number)."""
    assert child.stdin is not None and child.stdout is not None
    script = [reply(*(tool_use("mark", {"n": s * BURST_WIDTH + k}, id=f"toolu_{s * BURST_WIDTH + k:04d}")
                      for k in range(BURST_WIDTH))) for s in range(BURST_STEPS)]
    script.append(reply(text("done")))
    db, ran_file = tmp / "burst.db", tmp / "ran"
    with AnthropicServer(script) as server:
        child.stdin.write(f"{db} {server.url} {server.api_key} {seed.hex()} {ran_file}\n")
        child.stdin.flush()
        line = child.stdout.readline()
        assert line.startswith("pid "), line
        pid = int(line.split()[1])
        ran_count = lambda: ran_file.read_bytes().count(b"\n") if ran_file.exists() else 0  # noqa: E731
        reached = wait_until(lambda: ran_count() >= kill_at, 120)
        os.kill(pid, signal.SIGKILL)  # mid-burst: no close(), no atexit
        assert reached, f"the burst stalled at {ran_count()} calls"
        assert child.stdout.readline() == f"exit {-signal.SIGKILL}\n"
        requests = list(server.requests)
    ran = {int(line) for line in ran_file.read_text().split("\n")[:-1]}  # a line cut by the kill has no "\n"
    return db, ran, requests, kill_at


async def test_a_burst_killed_anywhere_ran_nothing_unrecorded_and_told_the_model_nothing_unrecorded(
        tmp_path: Path) -> None:
    """SIGKILL during a burst of 1,000 calls, at a random point, in several rounds: every call whose tool ran
    has its EXECUTING state on disk, every tool_result the model received has its call's COMPLETED state on
    disk, and the signed chain verifies once the file is reopened."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    key = os.urandom(32)
    child = _forker()
    try:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
        # random points, and the very end (the burst over, its process idle: a kill the test's polling may also
        # come to when a random point is near the end)
        points = [rng.randrange(1, BURST_STEPS * BURST_WIDTH) for _ in range(BURST_ROUNDS)]
        for round_, kill_at in enumerate([*points, BURST_STEPS * BURST_WIDTH]):
            (tmp_path / str(round_)).mkdir()
            await _check_burst(*_burst_round(child, tmp_path / str(round_), kill_at, key), key,
                               f"round {round_}, killed after {kill_at} calls (random seed {seed})")
    finally:
        child.kill()
        child.communicate(timeout=30)


async def _check_burst(db: Path, ran: set[int], requests: list[RecordedRequest], kill_at: int, key: bytes,
                       where: str) -> None:
    assert len(ran) >= kill_at, where
    store = await SqlStore.open(db, signer=HeadSigner(key, witness_dir=db.parent / "witness"))
    try:
        result = await store.verify()
    finally:
        await store.close()
    assert result.ok, f"{where}: {result.message}"
    rows = raw_sql(db, "SELECT t.input, t.tool_use_id, e.state FROM tool_calls t "
                       "JOIN audit_entries e ON e.record_id = t.id")
    executing = {json.loads(i)["n"] for i, _, state in rows if state == "EXECUTING"}
    completed = {u for _, u, state in rows if state == "COMPLETED"}
    assert ran <= executing, f"{where}: calls ran without their EXECUTING state: {sorted(ran - executing)}"
    told = {b["tool_use_id"] for r in requests for b in r.tool_results()}
    assert told <= completed, f"{where}: results reached the model unrecorded: {sorted(told - completed)}"
    # A result and its call's final state are written in one transaction: a stored result without its
    # COMPLETED state (or a COMPLETED call of the burst's last step without its result) would be a torn commit.
    stored = {b["tool_use_id"] for (content,) in raw_sql(db, "SELECT content FROM messages WHERE role = 'user'")
              for b in json.loads(content) if isinstance(b, dict) and b.get("type") == "tool_result"}
    assert stored <= completed, f"{where}: results stored without their state: {sorted(stored - completed)}"
    assert stored >= told, where
    assert len(told) >= BURST_WIDTH * (len(requests) - 1), where  # each request after the first answers a step


def test_a_request_cut_before_its_body_arrived_never_reached_the_model() -> None:
    """The burst's kill can land while the SDK sends a request: its head arrives and its body never does. That
    request reached no model (a real server would not answer it), so the loopback server records none: the
    burst's count of answered steps is of whole requests only."""
    body = b'{"model": "claude-sonnet-4-6", "messages": []}'
    with AnthropicServer([reply(text("hello"))]) as server:
        host, port = server.url.removeprefix("http://").split(":")
        head = (f"POST /v1/messages HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nx-api-key: {server.api_key}\r\n\r\n").encode()
        for sent in (head, head + body[:10]):  # nothing of the body, then part of it
            with socket.create_connection((host, int(port.rstrip("/")))) as sock:
                sock.sendall(sent)
                sock.shutdown(socket.SHUT_WR)  # the sender is gone
                assert sock.recv(1024) == b""  # no answer: the server closed the connection
        assert server.requests == []
        with socket.create_connection((host, int(port.rstrip("/")))) as sock:  # a whole one is recorded
            sock.sendall(head + body)
            assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        assert [r.body for r in server.requests] == [json.loads(body)]
