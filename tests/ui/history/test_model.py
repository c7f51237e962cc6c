"""The history's lazy model over a real store (SQLite and PostgreSQL): keyset paging under the model tester,
and filters."""

from __future__ import annotations

from desktop_app.ui._roles import Role
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


def test_paging_far_holds_a_bounded_number_of_rows_and_comes_back_by_key(qtbot, run, store):
    # Memory stays flat: however far the view pages, the model holds at most `keep` pages of records.
    run(fill(store, 300), timeout=120_000)  # 600 commits: slow on a loaded PostgreSQL
    model = HistoryModel(store, page=20, keep=3)
    run(model.search())
    held = []
    while model.canFetchMore():
        with qtbot.waitSignal(model.loaded):
            model.fetchMore()
        held.append(model.rows_held())
    assert model.rowCount() == model.total == 300 and not model.canFetchMore()
    assert max(held) <= 3 * 20 and model.row(299).id == "call_0000"
    assert model.index(0, 2).data() is None  # page 0 was dropped long ago: on its way back
    qtbot.waitUntil(lambda: model.index(0, 2).data() is not None)
    assert model.row(0).id == "call_0299" and model.row(19).id == "call_0280"
    assert model.index(25, 0).data(Role.CALL_ID) is None  # page 1, by the key that ends page 0
    qtbot.waitUntil(lambda: model.index(25, 0).data(Role.CALL_ID) == "call_0274")
    assert model.rows_held() <= 3 * 20
    # Rows far apart, held or not, for an export of a selection; fetched without being kept.
    picked = run(model.rows([0, 150, 299]))
    assert [r.id for r in picked] == ["call_0299", "call_0149", "call_0000"] and model.rows_held() <= 3 * 20


def test_the_history_window_scrolled_to_the_end_holds_a_bounded_number_of_rows(qtbot, run, store):
    from desktop_app.ui.history import HistoryWindow

    run(fill(store, 400), timeout=120_000)
    win = HistoryWindow(store)
    qtbot.addWidget(win)
    win.model.page, win.model.keep = 25, 3
    win.resize(900, 300)  # fewer rows on screen than a page: each scroll to the end moves the scroll bar
    win.show()
    run(win.refresh())
    for _ in range(200):  # as a person dragging the scroll bar down: the view asks for more at the end
        if win.model.rowCount() == 400:
            break
        win.view.scrollToBottom()
        qtbot.wait(1)  # the view's layout and its fetchMore
        qtbot.waitUntil(lambda: win.model.canFetchMore() or win.model.rowCount() == 400)
        assert win.model.rows_held() <= 3 * 25
    assert win.model.rowCount() == 400 and "400 records match · 400 loaded" in win.status.text()
    win.view.scrollToTop()
    qtbot.waitUntil(lambda: win.model.index(0, 0).data(Role.CALL_ID) == "call_0399")
    win.view.selectRow(0)
    win.view.selectionModel().select(win.model.index(399, 0), win.view.selectionModel().SelectionFlag.Select
                                     | win.view.selectionModel().SelectionFlag.Rows)
    assert run(win.selected_ids()) == ["call_0399", "call_0000"]
