"""One search language on both databases: the same queries over the same records find the same hits, in the
same order, on SQLite (FTS5) and PostgreSQL (tsvector); keyset pages; PostgreSQL's plans use its indexes."""

from __future__ import annotations

import dataclasses
import random
import unicodedata

import pytest
from sqlalchemy import text

from desktop_app.store import AuditQuery, SqlStore
from desktop_app.store._query import build_sql
from desktop_app.store._search import _WORD, WORD_MAX, fts_match, like_patterns, tsquery, words

from .conftest import make_record, run_to_completion

# (tool, input, result text) of each record, created at t = 1, 2, 3, ...
DOCS = [
    ("bash", {"command": "grep -rn needle src/alpha"}, "found the needle"),
    ("fs_read", {"path": "/workspace/src/main.py"}, "def main(): pass"),
    ("fs_write", {"path": "/workspace/notes.md", "content": "ünïcode Straße ÉCOLE"}, "wrote"),
    ("bash", {"command": "echo 100% done_ok"}, "100% done_ok"),
    ("bash", {"command": "echo 100 percent done ok"}, "plain"),
    ("fs_read", {"path": "/etc/hosts"}, "127.0.0.1 localhost example.com user@example.com"),
    ("bash", {"command": "curl https://example.com/a-b_c?x=1"}, "it's \"quoted\" and back\\slash"),
    ("fs_write", {"path": "/workspace/日本語.txt", "content": "日本語 テキスト"}, "wrote"),
    ("bash", {"command": "make build"}, "error: missing target AND NOT OR NEAR"),
    ("fs_read", {"path": "/workspace/alphabet.txt"}, "abc & def | !ghi <-> jkl:*"),
    ("bash", {"command": "x" * 3000}, "a very long word"),
    ("fs_read", {"path": "/workspace/src/main.rs"}, "main main main"),
]
QUERIES = [
    "needle", "NEEDLE", "src/main.py", "main", "main.*", "src/ma*", "alpha*", "alph", "unicode", "strasse",
    "straße", "ecole", "école", "100%", "100% done", "done_ok", "done ok", "_", "%", "%%", "\\", "'", '"',
    '"quoted"', "it's", "example.com", "user@example.com", "127.0.0.1", "a-b_c", "https://example.com",
    "日本語", "テキスト", "missing target", "target missing", "AND", "NOT", "NEAR", "OR", '"weird" AND NOT (',
    "& def", "!ghi", "<->", "jkl:*", "def | ghi", "x" * 3000, "x" * 600, "x*", "a very", "*", "  *  ", "-",
    "main main", "pass def", "def main", "ab*", "ABC", "localhost", "0 1", "1",
]


@pytest.fixture
async def both(tmp_path, postgres_url):
    """The same records in a SQLite store and a PostgreSQL store."""
    stores = [await SqlStore.open(tmp_path / "a.db"), await SqlStore.open(postgres_url)]
    for i, (name, inp, out) in enumerate(DOCS):
        rec = make_record(name, created_at=float(i + 1), **inp)
        for s in stores:
            copy = dataclasses.replace(rec, trail=[])
            await run_to_completion(s, copy, result_text=out)
    yield stores
    for s in stores:
        await s.close()


async def _hits(store: SqlStore, q: AuditQuery) -> list[float]:
    return [r.created_at for r in await store.list_records(q)]


async def test_same_queries_same_hits_on_both_databases(both) -> None:
    lite, pg = both
    found = {}
    for query in QUERIES:
        q = AuditQuery(text=query, limit=None)
        got = await _hits(lite, q)
        assert await _hits(pg, q) == got, query
        assert await pg.count(q) == await lite.count(q) == len(got), query
        found[query] = got
    # What the language means, checked once for both.
    assert found["main"] == [12.0, 2.0] and found["src/main.py"] == [2.0]
    assert found["src/ma*"] == [12.0, 2.0] and found["alpha*"] == [10.0, 1.0] and found["alph"] == []
    assert found["unicode"] == found["ecole"] == found["école"] == [3.0]
    assert found["100%"] == [5.0, 4.0] and found["done_ok"] == [5.0, 4.0]  # punctuation splits words
    assert found["%"] == found["_"] == found["\\"] == found["'"] == found["*"] == [float(i) for i in range(12, 0, -1)]
    assert found["NOT"] == found["NEAR"] == [9.0] and found['"weird" AND NOT ('] == []
    assert found["target missing"] == [9.0] and found["pass def"] == [2.0]  # every word, any order
    assert found["x" * 3000] == found["x" * 600] == [11.0] and found["x*"] == [11.0, 7.0]  # long words cut alike
    assert found["日本語"] == [8.0] and found["user@example.com"] == [6.0]


def test_query_text_never_reaches_the_database_as_syntax() -> None:
    for query in QUERIES:
        match, tsq = fts_match(query), tsquery(query)
        for p in like_patterns(query):
            assert "%" not in p[1:-1].replace("!%", "") and "_" not in p.replace("!_", "")
        assert match is None or match.count('"') % 2 == 0
        if tsq is not None:  # only quoted letters and digits between the operators we put there
            stripped = tsq.replace("<->", " ").replace(":*", " ").replace("&", " ")
            for lexeme in stripped.replace("(", " ").replace(")", " ").split():
                assert lexeme[0] == lexeme[-1] == "'" and lexeme[1:-1].isalnum(), (query, lexeme)


async def test_keyset_pages_equal_offset_pages_at_any_depth(store: SqlStore) -> None:
    # Ties on created_at: three records per second, so the key's second part decides.
    for i in range(30):
        await run_to_completion(store, make_record(command=f"echo word{i % 4} {i}", created_at=float(i // 3)))
    for filters in ({}, {"text": "word1"}, {"text": "echo"}, {"tool": "bash", "states": "COMPLETED"}):
        every = [r.id for r in await store.list_records(AuditQuery(limit=None, **filters))]
        paged, after = [], None
        while True:
            rows = await store.list_records(AuditQuery(limit=4, after=after, **filters))
            if not rows:
                break
            paged += [r.id for r in rows]
            after = rows[-1].page_key
            full = await store.query(AuditQuery(limit=4, after=rows[0].page_key, **filters))
            assert [r.id for r in full] == every[len(paged) - len(rows) + 1:][:4]
        assert paged == every, filters
        assert await store.count(AuditQuery(after=after, **filters)) == len(every)  # count ignores the key
        offset_page = await store.list_records(AuditQuery(limit=5, offset=7, **filters))
        assert [r.id for r in offset_page] == every[7:12]
        # An offset without a limit (SQLite needs LIMIT -1; PostgreSQL refuses it and needs none).
        assert [r.id for r in await store.list_records(AuditQuery(limit=None, offset=7, **filters))] == every[7:]


async def test_a_bad_page_key_is_a_clear_error(store: SqlStore) -> None:
    from desktop_app.core import StoreError

    with pytest.raises(StoreError, match="page key") as info:
        await store.list_records(AuditQuery(after=("x", "y")))  # type: ignore[arg-type]
    assert "page_key" in info.value.hint


@pytest.mark.parametrize(("q", "index"), [
    (AuditQuery(text="needle"), "ix_tool_calls_search_vector"),
    (AuditQuery(text="needle src/alpha*", tool="bash"), "Index Scan using ix_tool_calls_"),
    (AuditQuery(session_id="s", after=(5.0, 10)), "ix_tool_calls_session_created"),
    (AuditQuery(after=(5.0, 10)), "ix_tool_calls_created"),
])
async def test_postgresql_plans_use_the_indexes(postgres_url: str, q: AuditQuery, index: str) -> None:
    """PostgreSQL's own plans (EXPLAIN), with sequential scans priced out as on a large table."""
    store = await SqlStore.open(postgres_url)
    try:
        p = build_sql(q, dialect="postgresql")
        sql = f"EXPLAIN SELECT t.id FROM {p.source}{p.where}{p.page(q)}"

        def plan(c):
            c.execute(text("SET LOCAL enable_seqscan = off"))
            return " | ".join(r[0] for r in c.execute(text(sql), p.params))

        got = await store._read(plan)
        assert index in got, got
    finally:
        await store.close()


async def test_the_like_fallback_runs_on_both_databases(both) -> None:
    """Another database gets substrings of the same phrases, with an ESCAPE both of these accept too."""
    for store in both:
        for query, hits in (("src/main.py", 1), ("main", 2), ("100%", 2), ("done_ok", 2), ("%", 12), ("'", 12)):
            q = AuditQuery(text=query, limit=None)
            p = build_sql(q, dialect="other")
            sql = f"SELECT count(*) FROM {p.source}{p.where}"
            assert await store._read(lambda c, s=sql, p=p: c.execute(text(s), p.params).scalar()) == hits, query


def _words_by_definition(text: str) -> list[str]:
    """What the index's words are by definition: lower case, decomposed, every combining mark (Mn) dropped one
    character at a time, composed again, split, each word cut at WORD_MAX."""
    decomposed = unicodedata.normalize("NFD", text.lower())
    folded = unicodedata.normalize("NFC", "".join(c for c in decomposed if unicodedata.category(c) != "Mn"))
    return [w[:WORD_MAX] for w in _WORD.findall(folded)]


def test_the_index_words_are_those_of_the_definition() -> None:
    """words() folds without a Python step per character (an ASCII text is only lowered; the rest goes through a
    translate table): the same words as the definition, for mixed scripts, combining marks, lone surrogates,
    letters whose lower case changes length, long words, and every code point of Unicode."""
    rng = random.Random(29)
    pool = ("abcXYZ019 \n\t./_-:" "éÉàçñøÅİıßẞΣσςДж中文日本語한국어😀ǅﬁ" "\u0301\u0308\u20dd\u0345\u0e31\ud800\udfff")
    samples = ["", "\u212aelvin", "x" * (WORD_MAX + 100) + " y", "É" * (WORD_MAX + 3), "Straße ÉCOLE ünïcode",
               "e\u0301cole"]
    samples += ["".join(rng.choice(pool) for _ in range(rng.randint(1, 80))) for _ in range(2000)]
    every = "".join(map(chr, range(0x110000)))
    samples += [every[i:i + 4096] for i in range(0, len(every), 4096)]
    for sample in samples:
        assert words(sample) == _words_by_definition(sample), repr(sample[:40])
