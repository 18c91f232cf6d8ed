"""The request tracker: sans-IO, no event loop. One tracker, applied to a
session's logged events, says what a client attaching is told; the
connection's rules use the same tracker (test_connection.py)."""

from __future__ import annotations

from gemini_split.protocol import (
    Error,
    Finished,
    RequestStarted,
    RequestState,
    RequestTracker,
    TextDelta,
    ToolAwaitingApproval,
    ToolCallAnswered,
    ToolDecided,
    ToolExecutionRequest,
)
from gemini_split.protocol.tracker import DECIDED_KEPT


def _call(call_id: str, request_id: str = "r1") -> ToolExecutionRequest:
    return ToolExecutionRequest(id=call_id, request_id=request_id, tool="read_file")


def _question(call_id: str, request_id: str = "r1") -> ToolAwaitingApproval:
    return ToolAwaitingApproval(request_id=request_id, call_id=call_id, tool="run_shell_command", description="ls")


def test_an_idle_session_tells_an_attaching_client_nothing_runs():
    tracker = RequestTracker()
    assert (tracker.active_request_id, tracker.pending_tool_calls, tracker.pending_approvals) == (None, (), ())


def test_a_running_request_with_unanswered_calls_and_open_questions_is_told_sorted():
    tracker = RequestTracker()
    for event in [RequestStarted(request_id="r1"), TextDelta(request_id="r1", content="hi"),
                  _call("c2"), _call("c1"), _call("c3"), ToolCallAnswered(request_id="r1", call_id="c3"),
                  _question("q2"), _question("q1")]:
        tracker.apply(event)
    assert tracker.active_request_id == "r1"
    assert tracker.pending_tool_calls == ("c1", "c2")
    assert tracker.pending_approvals == ("q1", "q2")


def test_a_decided_or_expired_question_is_no_longer_pending_and_remembers_how():
    tracker = RequestTracker()
    for event in [RequestStarted(request_id="r1"), _question("q1"), _question("q2"),
                  ToolDecided(request_id="r1", call_id="q1", decision="approve"),
                  ToolDecided(request_id="r1", call_id="q2", decision="expired")]:
        tracker.apply(event)
    assert tracker.pending_approvals == ()
    assert tracker.decided == {"q1": "decided", "q2": "expired"}


def test_the_end_of_a_request_clears_its_calls_and_settles_its_questions_as_ended():
    for end in (Finished(request_id="r1"), Error(request_id="r1", code="model_error", message="no")):
        tracker = RequestTracker()
        for event in [RequestStarted(request_id="r1"), _call("c1"), _question("q1"), end]:
            tracker.apply(event)
        assert (tracker.active_request_id, tracker.pending_tool_calls, tracker.pending_approvals) == (None, (), ())
        assert tracker.decided == {"q1": "ended"}


def test_an_error_of_no_request_or_of_another_request_leaves_the_running_one():
    tracker = RequestTracker()
    for event in [RequestStarted(request_id="r1"), _call("c1"),
                  Error(code="storage_error", message="not saved"),
                  Error(request_id="r0", in_reply_to="r0", code="busy", message="busy")]:
        tracker.apply(event)
    assert tracker.active_request_id == "r1"
    assert tracker.pending_tool_calls == ("c1",)


def test_a_new_request_starts_with_nothing_pending():
    tracker = RequestTracker()
    for event in [RequestStarted(request_id="r1"), _call("c1"), _question("q1"), RequestStarted(request_id="r2")]:
        tracker.apply(event)
    assert (tracker.active_request_id, tracker.pending_tool_calls, tracker.pending_approvals) == ("r2", (), ())


def test_restore_keeps_a_copy_and_the_settled_questions():
    state = RequestState("r1", {"c1"}, {"q1"})
    tracker = RequestTracker()
    tracker.restore(state, {"q0": "decided"})
    tracker.call_answered("c1")
    assert state.pending_calls == {"c1"}
    assert tracker.pending_tool_calls == ()
    assert tracker.decided == {"q0": "decided"}


def test_only_the_most_recent_settled_questions_are_remembered():
    tracker = RequestTracker()
    for i in range(DECIDED_KEPT + 5):
        tracker.settled(f"q{i}", "decided")
    assert len(tracker.decided) == DECIDED_KEPT
    assert "q0" not in tracker.decided and f"q{DECIDED_KEPT + 4}" in tracker.decided
