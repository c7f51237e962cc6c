"""The history's tests run on a real store on each database (tests/conftest.py's `store_url`)."""

from __future__ import annotations

import pytest


@pytest.fixture
def store(store_url, run):
    from desktop_app.store import SqlStore

    s = run(SqlStore.open(store_url))
    yield s
    run(s.close())
