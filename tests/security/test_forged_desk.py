"""Verify is strict about identity: on an installation with a witness, a desk that anyone able to write the
database can make (a new key, appending entries after the witnessed head, or claiming this installation's
user@host) fails `agent-desk audit verify` (exit 1) with its entries named, on SQLite and on PostgreSQL;
`--trust-key` accepts another desk on purpose; this installation's second key (the CLI's beside the
window's) and a desk the witness already knew stay good."""

from __future__ import annotations

import asyncio
import json
import os
import socket

import pytest

from desktop_app import cli
from desktop_app.config import witness_dir
from desktop_app.core import ProjectInfo, SessionInfo
from desktop_app.runtime import head_signer, open_store
from desktop_app.store import HeadSigner, SqlStore
from desktop_app.store.integrity._signing import _user
from desktop_app.store.integrity._witness import witness_name
from tests.store.conftest import make_record, run_to_completion


@pytest.fixture
def url(store_url: str, desk_env, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("AGENT_DESK_DB", raising=False)
    return store_url


async def _write(url: str, signer: HeadSigner | None, n: int, session: str) -> None:
    """`n` tool calls written by `signer` (None: this installation, as the CLI and the window write)."""
    store = await (open_store(url) if signer is None else SqlStore.open(url, signer=signer))
    try:
        await store.save_project(ProjectInfo("prj_1", "p", "/tmp/p"))
        await store.save_session(SessionInfo(session, "prj_1"))
        for i in range(n):
            await run_to_completion(store, make_record(command=f"echo {i}", session_id=session))
    finally:
        await store.close()


def _verify(url: str, capsys, *trust: str) -> tuple[int, str]:
    args = ["audit", "--db", url, "verify"]
    for k in trust:
        args += ["--trust-key", k]
    code = cli.main(args)
    out = capsys.readouterr()
    return code, out.out + out.err


def _forger(**name: str) -> HeadSigner:
    """A key made by whoever can write the database: no witness here (it is not this installation's)."""
    return HeadSigner(os.urandom(32), **name)


ME = {"user": _user(), "host": socket.gethostname()}


@pytest.mark.parametrize("name", [ME, {"user": "mallory", "host": "evil"}], ids=["claims-my-name", "stranger"])
def test_entries_by_a_key_this_installation_never_registered_fail(url: str, capsys, name: dict) -> None:
    asyncio.run(_write(url, None, 2, "ses_1"))
    assert _verify(url, capsys)[0] == 0
    forger = _forger(**name)
    asyncio.run(_write(url, forger, 2, "ses_forged"))  # 8 entries (with its 2 ROWS), after the witnessed entry 8
    code, said = _verify(url, capsys)
    assert code == 1, said
    problem = "impersonation" if name is ME else "unknown-desk"
    assert f"BROKEN ({problem})" in said and forger.key_id in said
    assert "entries 9..16" in said or "signed: 9..16" in said  # the entries it signed, named
    assert f"--trust-key {forger.key_id}" in said  # and how to accept it, on purpose
    code, said = _verify(url, capsys, forger.key_id)
    assert code == 0 and "accepted on purpose" in said and forger.key_id in said, said


def test_a_key_claiming_my_name_fails_even_registered_before_the_witness(url: str, capsys) -> None:
    """Registered early, or with a first entry it claims: still not this installation's key."""
    forger = _forger(**ME)
    asyncio.run(_write(url, forger, 1, "ses_forged"))  # the forger writes first: entries 1..5 (2 ROWS entries)
    asyncio.run(_write(url, None, 1, "ses_1"))  # then this installation, which witnesses entry 10
    code, said = _verify(url, capsys)
    assert code == 1 and "BROKEN (impersonation)" in said and "1..5" in said, said


def test_my_second_key_and_a_desk_the_witness_knew_stay_good(url: str, capsys) -> None:
    other_key_of_mine = HeadSigner(os.urandom(32), witness_dir=witness_dir(), **ME)  # the CLI's file key
    known = _forger(user="bob", host="build-box")  # a desk sharing the database before my last write
    asyncio.run(_write(url, known, 1, "ses_bob"))
    asyncio.run(_write(url, None, 1, "ses_1"))
    asyncio.run(_write(url, other_key_of_mine, 1, "ses_2"))
    code, said = _verify(url, capsys)
    assert code == 0, said
    asyncio.run(_write(url, known, 1, "ses_bob"))  # bob writes again, after my witness: known, so good
    code, said = _verify(url, capsys)
    assert code == 0, said


def test_a_witness_from_before_it_named_keys_still_refuses_a_new_desk(url: str, capsys) -> None:
    asyncio.run(_write(url, None, 1, "ses_1"))
    store = asyncio.run(open_store(url))
    where = store._identity
    asyncio.run(store.close())
    w = witness_dir() / witness_name(where, head_signer().key_id)
    data = json.loads(w.read_text())
    del data["keys"]  # as an older version wrote it
    w.write_text(json.dumps(data))
    assert _verify(url, capsys)[0] == 0
    forger = _forger(user="mallory", host="evil")
    asyncio.run(_write(url, forger, 1, "ses_forged"))
    code, said = _verify(url, capsys)
    assert code == 1 and "BROKEN (unknown-desk)" in said and "6..10" in said, said


def test_the_flag_is_documented(capsys) -> None:
    cli.main(["audit", "verify", "--help"])
    assert "--trust-key" in capsys.readouterr().out


def test_a_desk_that_registers_while_mine_is_open_is_known_to_my_next_witness(url: str, capsys) -> None:
    """My notary keeps the registered keys between its commits; a commit by another desk in between (which is
    where a key is registered) makes it read them again, so my witness names bob's key: his later entries stay
    good, a stranger's still fail."""

    async def run() -> None:
        mine = await open_store(url)
        bob = await SqlStore.open(url, signer=_forger(user="bob", host="build-box"))
        try:
            await mine.save_project(ProjectInfo("prj_1", "p", "/tmp/p"))
            await mine.save_session(SessionInfo("ses_1", "prj_1"))
            await bob.save_session(SessionInfo("ses_bob", "prj_1"))
            for writer, session in [(mine, "ses_1"), (mine, "ses_1"), (bob, "ses_bob"), (mine, "ses_1")]:
                await run_to_completion(writer, make_record(command="echo", session_id=session))
            await mine.close()  # my witness: my last head, and the keys as my last commit found them
            await run_to_completion(bob, make_record(command="echo", session_id="ses_bob"))  # after it
        finally:
            await bob.close()
            await mine.close()

    asyncio.run(run())
    code, said = _verify(url, capsys)
    assert code == 0, said
    forger = _forger(user="mallory", host="evil")
    asyncio.run(_write(url, forger, 1, "ses_forged"))
    code, said = _verify(url, capsys)
    assert code == 1 and "BROKEN (unknown-desk)" in said and forger.key_id in said, said
