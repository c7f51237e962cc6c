"""Built-in tools (fs_*, bash_*, todo_*; task_run and skill, added per runtime), written against the Sandbox
protocol only."""

from __future__ import annotations

from ..core import Tool
from ._bash import BashKill, BashLogs, BashRun
from ._common import READ_HASHES_KEY, TODOS_KEY
from ._fs import (
    FsEdit,
    FsGlob,
    FsGrep,
    FsMultiEdit,
    FsRead,
    FsWrite,
)
from ._git_commit import GitCommit
from ._notebook import NotebookEdit
from ._person import AskUser, ExitPlanMode
from ._preview import preview_diff
from ._skill import SkillTool, skill_tools
from ._task import TaskRun
from ._todo import TodoRead, TodoWrite
from ._web import WebFetch

__all__ = [
    "BUILTIN_TOOLS",
    "READ_HASHES_KEY",
    "TODOS_KEY",
    "AskUser",
    "BashKill",
    "BashLogs",
    "BashRun",
    "ExitPlanMode",
    "FsEdit",
    "FsGlob",
    "FsGrep",
    "FsMultiEdit",
    "FsRead",
    "FsWrite",
    "GitCommit",
    "NotebookEdit",
    "SkillTool",
    "TaskRun",
    "TodoRead",
    "TodoWrite",
    "builtin_tools",
    "preview_diff",
    "skill_tools",
]

BUILTIN_TOOLS: list[Tool] = [
    FsRead(),
    FsWrite(),
    FsEdit(),
    FsMultiEdit(),
    FsGlob(),
    FsGrep(),
    NotebookEdit(),
    BashRun(),
    BashLogs(),
    BashKill(),
    TodoRead(),
    TodoWrite(),
    WebFetch(),
    AskUser(),
    ExitPlanMode(),
]


def builtin_tools() -> list[Tool]:
    """The built-in tools, in the order they are offered to the model."""
    return list(BUILTIN_TOOLS)
