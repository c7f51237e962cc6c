"""The tool-call timeline of the current session: its table model, state and tool filter, and dock."""

from ._details import render_call_details
from ._dock import TimelineDock
from ._filter import BUILTIN_TOOLS, STATE_FILTERS, TimelineFilter
from ._model import TimelineModel, TimelineRow

__all__ = ["BUILTIN_TOOLS", "STATE_FILTERS", "TimelineDock", "TimelineFilter", "TimelineModel", "TimelineRow",
           "render_call_details"]
