"""The projects tree model and its session search, under Qt's model tester."""

from __future__ import annotations

import time

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
