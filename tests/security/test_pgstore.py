"""Attacks on the PostgreSQL store: a database password never shown or logged on any error path; search text
that is SQL, FTS5 or tsquery syntax is only words (fuzzed, same hits on both databases); a tool result built
to overflow PostgreSQL's tsvector still saves."""

from __future__ import annotations

import dataclasses
import logging
import random

import pytest
from sqlalchemy.engine import make_url

from desktop_app.core import StoreError
from desktop_app.store import AuditQuery, SqlStore
from tests.store.conftest import make_record, run_to_completion

SECRET = "Pa55-w0rd_7f3a"


def _chain(exc: BaseException | None) -> str:
    text = ""
    while exc is not None:
        text += f"{exc!r} {exc} {getattr(exc, 'hint', '')}\n"
        exc = exc.__cause__ or exc.__context__
    return text


@pytest.mark.parametrize("url", [
    f"postgresql+psycopg://me:{SECRET}@127.0.0.1:1/audit",
    f"postgresql+psycopg://me@127.0.0.1:1/audit?password={SECRET}",
    f"postgresql+psycopg://me:{SECRET}@127.0.0.1:notaport/audit",
    f"postgresql+nosuchdriver://me:{SECRET}@127.0.0.1/audit",
    f"nosuchdb://me:{SECRET}@host/audit",
])
async def test_a_password_is_never_shown_or_logged(url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StoreError) as info:
        await (await SqlStore.open(url)).close()
    shown = info.value.user_message()
    assert SECRET not in shown and SECRET not in _chain(info.value), shown
    assert SECRET not in caplog.text


async def test_a_password_in_a_working_url_stays_out_of_errors(postgres_url: str) -> None:
    u = make_url(postgres_url)
    url = str(u.set(password=SECRET, database="missing_db").render_as_string(hide_password=False))
    with pytest.raises(StoreError) as info:
        await SqlStore.open(url)
    assert "missing_db" in str(info.value) and SECRET not in _chain(info.value)


_ALPHABET = [*"abcxyz019 _%*\"'\\()&|!<->:;,./@#$^[]{}~`-+=?", "AND", "OR", "NOT", "NEAR", "é", "ß", "日"]


async def test_fuzzed_search_text_is_only_words_and_finds_the_same_on_both(tmp_path, postgres_url) -> None:
    stores = [await SqlStore.open(tmp_path / "f.db"), await SqlStore.open(postgres_url)]
    rng = random.Random(1313)
    try:
        for i in range(40):
            words = " ".join("".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 6))) for _ in range(5))
            rec = make_record(command=words, created_at=float(i + 1))
            for s in stores:
                await run_to_completion(s, dataclasses.replace(rec, trail=[]), result_text=words[::-1])
        for _ in range(300):
            query = "".join(rng.choice(_ALPHABET) for _ in range(rng.randint(1, 14)))
            q = AuditQuery(text=query, limit=None)
            hits = [[r.id for r in await s.list_records(q)] for s in stores]  # raises on a syntax error
            assert hits[0] == hits[1], query
        stored = [await s.count(AuditQuery()) for s in stores]
        assert stored == [40, 40]  # and nothing was changed by a query
    finally:
        for s in stores:
            await s.close()


async def test_a_result_built_to_overflow_the_tsvector_still_saves(postgres_url: str) -> None:
    # Every word unique and as wide as UTF-8 gets (4 bytes a character): the index text stays under
    # PostgreSQL's 1 MB of lexemes because the store caps it at 200,000 characters.
    words = " ".join(chr(0x20000 + k // 300) + chr(0x20000 + k % 300) for k in range(90_000))
    store = await SqlStore.open(postgres_url)
    try:
        rec = await run_to_completion(store, make_record(command="flood"), result_text=words)
        assert (await store.get_record(rec.id)) is not None
        assert await store.count(AuditQuery(text="flood")) == 1
        assert (await store.verify()).ok
    finally:
        await store.close()
