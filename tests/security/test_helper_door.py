"""The helper's door gives a process in the sandbox nothing it did not have (issue 29, part 4). The desk listens
and the helper connects, so the desk never connects to anything the sandbox could name or make; the folder is the
desk's, private on the host and read-only in the container, so nothing inside can make, replace or pre-empt the
socket; the socket exists only while a helper starts, and the desk keeps only the connection whose peer is the
process the engine names as that helper: a stranger that connects (its name is in the helper's command line) is
closed unread, forged hello and answers included, and a flood of them costs only the door (the exec stream carries
the helper). No command or background process inherits the helper's end."""

from __future__ import annotations

import asyncio
import os
import stat

import pytest

from desktop_app.sandbox.docker._helper_door import CONTAINER_DIR, MAX_STRANGERS, HelperDoor, door_root

pytestmark = pytest.mark.docker

# Every way a process inside might put something of its own where the desk's socket goes.
TAMPER = r"""
import os, socket, sys
d = sys.argv[1]
def attempt(name, fn):
    try:
        fn()
        print(name, "DONE")
    except OSError as e:
        print(name, "refused", e.errno)
def listen():
    s = socket.socket(socket.AF_UNIX); s.bind(d + "/first.sock"); s.listen(1)
attempt("list", lambda: print("entries", len(os.listdir(d))))
attempt("listen", listen)
attempt("file", lambda: open(d + "/x.sock", "w"))
attempt("mkdir", lambda: os.mkdir(d + "/sub"))
attempt("symlink", lambda: os.symlink("/var/run/docker.sock", d + "/link.sock"))
attempt("fifo", lambda: os.mkfifo(d + "/fifo"))
attempt("rename", lambda: os.rename("/tmp", d + "/tmp"))
attempt("chmod", lambda: os.chmod(d, 0o777))
"""

# A stranger at the door: connects, writes a forged hello and answer, and says what it got back.
STRANGER = r"""
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
print("connected", flush=True)
s.sendall(b'{"id":0,"ev":"hello","version":2,"pid":1,"door":true}\n{"id":1,"ok":true,"result":"FORGED"}\n')
try:
    got = s.recv(100)
except ConnectionResetError:  # closed with the forgery unread
    got = b""
print("closed" if got == b"" else "GOT %r" % got, flush=True)
"""

# The one the engine names: connects and introduces itself; or forks first and lets its child connect.
NAMED = r"""
import os, socket, sys
if sys.argv[2] == "child" and os.fork():
    os.wait()
    sys.exit(0)
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"named %d" % os.getpid())
s.recv(1)
"""

FLOOD = r"""
import socket, sys
n = 0
while True:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sys.argv[1])
    except OSError:
        break
    n += 1
    if n == 1:
        print("flooding", flush=True)
    s.close()
print("flooded", n, flush=True)
"""


async def _script(sb, source: str, *args: str) -> str:
    """Run `source` with python3 in the sandbox in the background (it may block on the door); its id."""
    await sb.write_file(".attack.py", source.encode())
    return await sb.start_background(" ".join(["python3", ".attack.py", *args]))


async def _log_says(sb, pid: str, text: str, within: float = 20.0) -> str:
    """The background process's output once it holds `text` (or `within` passed)."""
    end = asyncio.get_running_loop().time() + within
    while True:
        out = (await sb.logs(pid)).output
        if text in out or asyncio.get_running_loop().time() > end:
            return out
        await asyncio.sleep(0.02)


async def test_the_door_folder_is_private_read_only_and_empty(make_docker_sandbox, docker_client) -> None:
    sb = await make_docker_sandbox()
    folder = sb._door.path
    same_user = sb._uid == os.getuid()
    for part, mode in ((door_root(), 0o700), (folder, 0o700 if same_user else 0o711)):
        st = part.lstat()
        assert stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == mode, part
    assert list(folder.iterdir()) == []
    mounts = docker_client.api.inspect_container(sb.container_id)["Mounts"]
    door = [m for m in mounts if m["Destination"] == CONTAINER_DIR]
    assert len(door) == 1 and door[0]["RW"] is False and door[0]["Source"] == str(folder)
    assert not any("docker.sock" in m["Source"] for m in mounts)
    await sb.write_file(".tamper.py", TAMPER.encode())
    res = await sb.exec(f"python3 .tamper.py {CONTAINER_DIR}")
    said = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    # the container's user lists the folder only when it is the desk's user (0700, its own): there is nothing in it
    assert said["list"] == "DONE" if same_user else said["list"].startswith("refused"), res.stdout
    assert said.get("entries", "0") == "0"
    for attempt in ("listen", "file", "mkdir", "symlink", "fifo", "rename", "chmod"):
        assert said[attempt].startswith("refused"), (attempt, res.stdout, res.stderr)
    assert list(folder.iterdir()) == [] and stat.S_IMODE(folder.lstat().st_mode) == (0o700 if same_user else 0o711)


async def test_no_command_holds_the_helpers_end(make_docker_sandbox) -> None:
    """The helper holds a socket (its door); the commands it starts, in the foreground or not, hold none."""
    sb = await make_docker_sandbox()
    fds = "for f in /proc/$$/fd/*; do readlink $f; done; true"
    helper = await sb.exec(f"for f in /proc/{sb._channel.hello['pid']}/fd/*; do readlink $f; done")
    assert "socket:" in helper.stdout
    res = await sb.exec(fds)
    assert res.exit_code == 0 and "socket:" not in res.stdout and res.stdout.count("\n") >= 3
    bg = await sb.start_background(f"{fds}; echo end")
    out = await _log_says(sb, bg, "end")
    assert "end" in out and "socket:" not in out


@pytest.mark.parametrize("named", ["self", "child"])
async def test_strangers_at_the_door_are_closed_unread(make_docker_sandbox, docker_client, named: str) -> None:
    """Three processes connect first and write a forged hello and answer; the desk keeps the connection of the
    process the engine names (not even that one's child), reads nothing of the strangers', and the socket is gone
    after: a fourth stranger finds no door."""
    sb = await make_docker_sandbox()
    door = HelperDoor(sb._door)
    strangers = [await _script(sb, STRANGER, door.container_path) for _ in range(3)]
    for pid in strangers:
        assert "connected" in await _log_says(sb, pid, "connected")
    api = docker_client.api
    await sb.write_file(".named.py", NAMED.encode())
    exec_id = api.exec_create(sb.container_id, ["python3", "/workspace/.named.py", door.container_path, named],
                              user=f"{sb._uid}:{sb._gid}")["Id"]  # fmt: skip
    api.exec_start(exec_id, detach=True)
    pid = api.exec_inspect(exec_id)["Pid"]
    conn = await asyncio.to_thread(door.take, pid, 5.0 if named == "self" else 1.0)  # "child": none will come
    try:
        if named == "child":
            assert conn is None  # its child connected: not the process the engine names
        else:
            assert conn is not None and conn.recv(100).startswith(b"named ")  # not a stranger's forged hello
    finally:
        if conn is not None:
            conn.close()
    for pid in strangers:
        out = await _log_says(sb, pid, "closed")
        assert "closed" in out and "GOT" not in out, out
    assert not door.host_path.exists()
    late = await sb.exec(f"python3 .attack.py {door.container_path}")
    assert late.exit_code != 0 and ("FileNotFoundError" in late.stderr or "ConnectionRefused" in late.stderr)


async def test_a_flood_at_the_door_costs_only_the_door(make_docker_sandbox) -> None:
    """A process that connects again and again while a helper starts: the desk closes each unread, gives up
    after MAX_STRANGERS, long before its deadline, and takes none of them (the helper then goes through the
    exec stream: see tests/sandbox/test_helper_door.py); the flood ends when the door is gone."""
    sb = await make_docker_sandbox()
    door = HelperDoor(sb._door)
    flood = await _script(sb, FLOOD, door.container_path)
    assert "flooding" in await _log_says(sb, flood, "flooding")
    started = asyncio.get_running_loop().time()
    taken = await asyncio.to_thread(door.take, 999_999_999, 30.0)
    assert taken is None and asyncio.get_running_loop().time() - started < 20 and not door.host_path.exists()
    out = await _log_says(sb, flood, "flooded")
    assert int(out.split("flooded", 1)[1].split()[0]) > MAX_STRANGERS
