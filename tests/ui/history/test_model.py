"""The history's lazy model over a real store (SQLite and PostgreSQL): keyset paging under the model tester,
and filters."""

from __future__ import annotations

from desktop_app.ui.history import HistoryModel
from tests.ui.helpers import fill


def test_history_model_pages_lazily_and_passes_the_model_tester(qtmodeltester, qtbot, run, store):
    run(fill(store, 130))
    asked = []
    list_records = store.list_records

    async def spy(q):
        asked.append((q.offset, q.after))
        return await list_records(q)

    store.list_records = spy
    model = HistoryModel(store, page=50)
    with qtbot.waitSignal(model.loaded) as loaded:
        run(model.search())
    assert loaded.args == [50, 130]
    assert model.rowCount() == 50 and model.canFetchMore()
    assert model.index(0, 0).data().startswith("2025-")  # newest first
    assert model.row(0).id == "call_0129"
    model.fetchMore()
    assert not model.canFetchMore()  # one page in flight at a time
    qtbot.waitUntil(lambda: model.rowCount() == 100)
    model.fetchMore()
    qtbot.waitUntil(lambda: model.rowCount() == 130)
    assert not model.canFetchMore()
    # Pages after the first start after the last row's key, never at an offset.
    assert [offset for offset, _ in asked] == [0, 0, 0] and asked[0][1] is None
    assert asked[1][1] == model.row(49).page_key and asked[2][1] == model.row(99).page_key
    qtmodeltester.check(model)


def test_history_filters_by_tool_state_time_and_text(qtbot, run, store):
    run(fill(store, 60))
    model = HistoryModel(store)
    run(model.search(tool="bash_run"))
    assert model.total == 20 and {model.row(i).name for i in range(model.rowCount())} == {"bash_run"}
    run(model.search(states=["FAILED"]))
    assert model.total == 6
    run(model.search(since=1_750_000_000 + 50))
    assert model.total == 10
    run(model.search(text="target33"))
    assert [model.row(i).id for i in range(model.rowCount())] == ["call_0033"]
