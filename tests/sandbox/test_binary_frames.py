"""Bulk bytes on the helper channel: a binary frame after its line (`"bin": N`), never base64 in JSON. The
host's reader cuts messages out of Docker's stream however recv splits it; the helper reads and writes
the frames; a real sandbox round-trips large, empty and non-UTF-8 bytes."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from desktop_app.sandbox.docker._helper_archive import helper_archive
from desktop_app.sandbox.docker._helper_channel import HelperChannel, _PendingRequest, _request_bytes

NOT_UTF8 = bytes(range(256)) * 3 + b"\xff\xfe\x00\n\r\x80"


def docker_stream(payload: bytes, sizes: list[int]) -> bytes:
    """`payload` as the engine sends it: stdout frames of the given sizes, an empty stderr frame between."""
    out, pos = bytearray(), 0
    for n in [*sizes, len(payload)]:
        part = payload[pos : pos + n]
        pos += len(part)
        out += bytes([1, 0, 0, 0]) + len(part).to_bytes(4, "big") + part
        out += bytes([2, 0, 0, 0]) + (0).to_bytes(4, "big")
        if pos >= len(payload):
            break
    return bytes(out)


messages_st = st.lists(
    st.tuples(st.dictionaries(st.sampled_from(["a", "b"]), st.integers(), max_size=2), st.none() | st.binary()),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(messages_st, st.lists(st.integers(min_value=1, max_value=40), max_size=30),
       st.lists(st.integers(min_value=1, max_value=97), max_size=30))  # fmt: skip
def test_any_split_gives_the_same_messages(messages, frame_sizes, recv_sizes) -> None:
    wire = bytearray()
    for i, (body, blob) in enumerate(messages):
        head = {"id": i, "ok": True, "result": body}
        if blob is not None:
            head = {"bin": len(blob), **head}
        wire += json.dumps(head, separators=(",", ":")).encode() + b"\n" + (blob or b"")
    data = docker_stream(bytes(wire), frame_sizes)
    channel = HelperChannel(api=None, container_id="x", pool=None)
    got, pos = [], 0
    for n in [*recv_sizes, len(data)]:
        got += channel._feed(data[pos : pos + n])
        pos += n
    assert len(got) == len(messages)
    for (line, blob), (body, want) in zip(got, messages, strict=True):
        assert json.loads(line)["result"] == body and blob == want


def test_a_request_carries_its_bytes_as_a_frame() -> None:
    line, blob = _request_bytes(7, "write", {"path": "a", "data": NOT_UTF8})
    assert blob == NOT_UTF8
    head = json.loads(line)
    assert head == {"bin": len(NOT_UTF8), "id": 7, "op": "write", "args": {"path": "a"}}
    line, blob = _request_bytes(8, "stat", {"path": "a"})
    assert blob == b"" and "bin" not in json.loads(line)


def _helper(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    archive = tmp_path / "helper.pyz"
    archive.write_bytes(helper_archive())
    root = tmp_path / "ws"
    root.mkdir()
    proc = subprocess.Popen([sys.executable, "-I", "-S", str(archive), str(root)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE)  # fmt: skip
    assert proc.stdout is not None
    assert json.loads(proc.stdout.readline())["ev"] == "hello"
    return proc, root


def _answer(proc: subprocess.Popen) -> tuple[dict, bytes]:
    assert proc.stdout is not None
    msg = json.loads(proc.stdout.readline())
    return msg, proc.stdout.read(msg["bin"]) if "bin" in msg else b""


@pytest.mark.parametrize("data", [b"", NOT_UTF8, os.urandom(3 << 20)], ids=["empty", "not-utf8", "3mb"])
def test_the_helper_reads_and_writes_frames(tmp_path: Path, data: bytes) -> None:
    proc, root = _helper(tmp_path)
    assert proc.stdin is not None
    line, blob = _request_bytes(1, "write", {"path": "f.bin", "data": data})
    proc.stdin.write(line + blob)
    proc.stdin.flush()
    wrote, _ = _answer(proc)  # requests run concurrently: the read goes once the write has answered
    assert wrote["ok"] and wrote["result"]["size"] == len(data), wrote
    proc.stdin.write(json.dumps({"id": 2, "op": "read", "args": {"path": "f.bin"}}).encode() + b"\n")
    proc.stdin.flush()
    read, got = _answer(proc)
    assert read["ok"] and read["result"] == {"size": len(data)} and got == data
    assert (root / "f.bin").read_bytes() == data
    proc.stdin.close()
    assert proc.wait(10) == 0


def test_a_frame_over_the_limit_is_refused_and_the_stream_goes_on(tmp_path: Path) -> None:
    proc, _ = _helper(tmp_path)
    assert proc.stdin is not None
    big = 128 * 1024 * 1024 + 1
    proc.stdin.write(json.dumps({"bin": big, "id": 1, "op": "write", "args": {"path": "x"}}).encode() + b"\n")
    chunk = b"\0" * (1 << 20)
    for _ in range(big // len(chunk)):
        proc.stdin.write(chunk)
    proc.stdin.write(b"\0" * (big % len(chunk)))
    proc.stdin.write(json.dumps({"id": 2, "op": "ping", "args": {}}).encode() + b"\n")
    proc.stdin.flush()
    refused, _ = _answer(proc)
    assert refused["id"] == 1 and not refused["ok"] and "over" in refused["error"]["message"]
    pong, _ = _answer(proc)
    assert pong["id"] == 2 and pong["ok"]
    proc.stdin.close()
    assert proc.wait(10) == 0


@pytest.mark.docker
@pytest.mark.parametrize("data", [b"", NOT_UTF8, os.urandom(5 << 20)], ids=["empty", "not-utf8", "5mb"])
async def test_files_round_trip_through_a_real_sandbox(docker_sandbox, data: bytes) -> None:
    stat = await docker_sandbox.write_file("dir/f.bin", data)
    assert stat.size == len(data)
    assert await docker_sandbox.read_file("dir/f.bin") == data
    assert await docker_sandbox.read_file("dir/f.bin", offset=3, limit=5) == data[3:8]
    res = await docker_sandbox.exec("sha256sum dir/f.bin")
    assert res.stdout.split()[0] == hashlib.sha256(data).hexdigest()


async def test_a_failing_output_callback_loses_no_answer_of_its_batch() -> None:
    """The channel is read on the event loop and delivers its own loop's messages at once: a caller's output
    callback that raises is reported, and the rest of the batch (the answer) still arrives."""
    channel = HelperChannel(api=None, container_id="x", pool=None)
    loop = asyncio.get_running_loop()
    seen: list[dict] = []
    loop.set_exception_handler(lambda _loop, ctx: seen.append(ctx))
    try:
        fut = loop.create_future()

        def boom(_msg: dict) -> None:
            raise RuntimeError("a callback bug")

        channel._pending[1] = _PendingRequest(loop, fut, boom)
        channel._home = loop  # as attach() leaves it
        for line in (b'{"id":1,"ev":"output","stream":"stdout","data":"x"}', b'{"id":1,"ok":true,"result":{}}'):
            channel._dispatch(line)
        assert fut.done() and fut.result()["ok"] is True
        assert [str(c["exception"]) for c in seen] == ["a callback bug"]
    finally:
        loop.set_exception_handler(None)
