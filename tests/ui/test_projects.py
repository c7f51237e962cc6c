"""The projects tree model and its session search, under Qt's model tester."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt

from desktop_app.core import ProjectInfo, SessionInfo
from desktop_app.ui._projects import ProjectsModel, SessionSearchFilter
from desktop_app.ui._roles import Role


def _projects():
    now = time.time()
    projects = [ProjectInfo("p1", "alpha", "/tmp/a"), ProjectInfo("p2", "beta", "/tmp/b", permission_mode="auto")]
    sessions = [SessionInfo("s1", "p1", "Fix the parser", updated_at=now - 5),
                SessionInfo("s2", "p1", "Write docs", updated_at=now),
                SessionInfo("s3", "p2", "Refactor parser tests", updated_at=now)]
    return projects, sessions


def test_projects_model_passes_the_model_tester(qtmodeltester):
    model = ProjectsModel()
    model.set_data(*_projects())
    qtmodeltester.check(model)
    model.upsert_session(SessionInfo("s4", "p2", "New one"))
    model.upsert_project(ProjectInfo("p3", "gamma", "/tmp/c"))
    qtmodeltester.check(model)
    p1 = model.index(0, 0)
    assert model.rowCount(p1) == 2
    assert model.index(0, 0, p1).data() == "Write docs"  # newest first
    assert "auto" in model.index(1, 0).data(Role.SUBTITLE)  # folder · image · mode


def test_session_search_keeps_the_parent_project(qtmodeltester):
    model = ProjectsModel()
    model.set_data(*_projects())
    proxy = SessionSearchFilter()
    proxy.setSourceModel(model)
    proxy.setFilterFixedString("parser")
    qtmodeltester.check(proxy)
    found = {proxy.index(r, 0, proxy.index(p, 0)).data(Role.ID)
             for p in range(proxy.rowCount()) for r in range(proxy.rowCount(proxy.index(p, 0)))}
    assert found == {"s1", "s3"}


def test_the_sidebar_shows_the_image_name_cut_on_the_right(qapp):
    """A long image tag, narrow sidebar: the line starts with the image's name (its tail is what is cut), and
    the folder is the tooltip's, not a prefix that pushes the image out."""
    from PySide6.QtGui import QFont, QFontMetrics

    from desktop_app.ui._projects import elided_subtitle

    image = "agent-desk/project-calculator-0a1b2c3d:4e5f60718293a4b5"
    model = ProjectsModel()
    model.set_data([ProjectInfo("p1", "calc", "/home/me/src/a/very/long/folder/calc", image=image)], [])
    sub = model.index(0, 0).data(Role.SUBTITLE)
    assert sub.startswith(image) and "/home/me" not in sub
    assert "/home/me/src/a/very/long/folder/calc" in model.index(0, 0).data(Qt.ItemDataRole.ToolTipRole)
    fm = QFontMetrics(QFont())
    shown = elided_subtitle(fm, sub, fm.horizontalAdvance("agent-desk/project-calc"))
    assert shown.startswith("agent-desk/proj") and shown.endswith("…")
