"""The tool-call state machine: legal edges only, outcomes on terminal states, a trail entry per move."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from desktop_app.core import IllegalTransition, Outcome, ToolCallRecord, ToolCallState
from desktop_app.core._record import TERMINAL_STATES, TRANSITIONS


def test_happy_path_leaves_a_trail_and_timing():
    r = ToolCallRecord(name="fs_read", input={"path": "a"})
    r.transition(ToolCallState.EXECUTING, actor="executor")
    r.transition(ToolCallState.COMPLETED, actor="executor")
    assert [e.state for e in r.trail] == [ToolCallState.EXECUTING, ToolCallState.COMPLETED]
    assert r.outcome is Outcome.OK
    assert r.duration_ms is not None and r.duration_ms >= 0
    assert r.terminal


def test_illegal_transition_raises_and_changes_nothing():
    r = ToolCallRecord(name="x", input={})
    r.transition(ToolCallState.EXECUTING, actor="e")
    with pytest.raises(IllegalTransition):
        r.transition(ToolCallState.APPROVAL_REQUIRED, actor="e")
    assert r.state is ToolCallState.EXECUTING and len(r.trail) == 1


@pytest.mark.parametrize(
    ("state", "outcome"),
    [
        (ToolCallState.FAILED, Outcome.OK),
        (ToolCallState.DENIED, Outcome.TIMEOUT),
        (ToolCallState.COMPLETED, Outcome.USER),
        (ToolCallState.FAILED, None),
    ],
)
def test_terminal_states_need_their_own_outcomes(state, outcome):
    r = ToolCallRecord(name="x", input={})
    before = ToolCallState.APPROVAL_REQUIRED if state is ToolCallState.DENIED else ToolCallState.EXECUTING
    r.transition(before, actor="e")
    with pytest.raises(IllegalTransition):
        r.transition(state, actor="e", outcome=outcome)


def test_terminal_states_have_no_way_out():
    for state in TERMINAL_STATES:
        assert TRANSITIONS[state] == frozenset()


def test_round_trip_through_dict_keeps_every_field():
    r = ToolCallRecord(name="bash_run", input={"command": "ls"}, session_id="s", project_id="p")
    r.transition(ToolCallState.APPROVAL_REQUIRED, actor="policy", note="mode ask")
    r.approval.decision = "allow"
    r.transition(ToolCallState.APPROVED, actor="user")
    back = ToolCallRecord.from_dict(r.to_dict())
    assert back.to_dict() == r.to_dict()


@given(st.lists(st.tuples(st.sampled_from(list(ToolCallState)), st.sampled_from([*list(Outcome), None])), max_size=12))
def test_no_sequence_of_events_reaches_an_illegal_state(steps):
    """Whatever is attempted, the record only ever follows TRANSITIONS and terminal states carry outcomes."""
    r = ToolCallRecord(name="x", input={})
    path = [r.state]
    for to, outcome in steps:
        before = r.state
        try:
            r.transition(to, actor="prop", outcome=outcome)
        except IllegalTransition:
            assert r.state is before
            continue
        assert to in TRANSITIONS[before]
        path.append(to)
    assert len(r.trail) == len(path) - 1
    if r.state in TERMINAL_STATES:
        assert r.outcome is not None
        assert r.completed_at is not None
    else:
        assert r.outcome is None
    # once terminal, nothing more was appended
    terminal_at = next((i for i, s in enumerate(path) if s in TERMINAL_STATES), None)
    if terminal_at is not None:
        assert terminal_at == len(path) - 1
