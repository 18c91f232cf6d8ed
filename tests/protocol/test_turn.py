"""The turn model: server events in, typed changes out (sans-IO, no clock)."""

from __future__ import annotations

from gemini_split.protocol import (
    ApiStats,
    ClientInfo,
    ClientsChanged,
    Error,
    Finished,
    RequestStarted,
    Retrying,
    TextDelta,
    ThinkingDelta,
    ToolCompleted,
    ToolDecided,
    ToolDelta,
    ToolError,
    ToolExecutionRequest,
    ToolFailure,
    ToolStarted,
    Usage,
)
from gemini_split.protocol.turn import (
    ApprovalDecided,
    Notice,
    RetryScheduled,
    TextAdded,
    ThoughtAdded,
    ToolCallEnded,
    ToolCallOutput,
    ToolCallRequested,
    ToolCallStarted,
    Turn,
    TurnBegan,
    TurnEnded,
)


def test_text_and_thoughts_become_changes_and_the_text_is_kept():
    turn = Turn()
    assert turn.apply(RequestStarted(request_id="r1", prompt="hi", client="laptop")) == [
        TurnBegan(request_id="r1", prompt="hi", client="laptop")]
    assert turn.apply(ThinkingDelta(request_id="r1", content="hmm")) == [ThoughtAdded(request_id="r1", text="hmm")]
    assert turn.apply(TextDelta(request_id="r1", content="Hel")) == [TextAdded(request_id="r1", text="Hel")]
    turn.apply(TextDelta(request_id="r1", content="lo"))
    assert turn.text == "Hello"
    assert turn.request_id == "r1" and turn.prompt == "hi" and turn.client == "laptop"


def test_a_tool_call_hands_over_the_text_before_it_and_the_text_starts_afresh():
    turn = Turn()
    turn.apply(TextDelta(request_id="r1", content="Let me look."))
    [started] = turn.apply(ToolStarted(request_id="r1", call_id="c1", tool="read_file",
                                       parameters={"file_path": "a"}), now=10.0)
    assert started == ToolCallStarted(request_id="r1", call_id="c1", name="read_file",
                                      args={"file_path": "a"}, text_before="Let me look.")
    assert turn.text == "" and list(turn.running) == ["c1"] and turn.tool_calls == 1
    turn.apply(TextDelta(request_id="r1", content="Done."))
    assert turn.text == "Done."


def test_tool_output_and_end_carry_the_call_and_its_duration_from_the_given_clock():
    turn = Turn()
    turn.apply(ToolStarted(request_id="r1", call_id="c1", tool="run_shell_command"), now=10.0)
    [out] = turn.apply(ToolDelta(request_id="r1", call_id="c1", content="ok\npart"))
    assert isinstance(out, ToolCallOutput) and out.text == "ok\npart" and out.call is not None
    assert (out.call.lines, out.call.partial, out.call.all_lines(), out.call.streamed) == (
        ["ok"], "part", ["ok", "part"], True)
    turn.apply(ToolDelta(request_id="r1", call_id="c1", content="ial\n"))
    assert out.call.all_lines() == ["ok", "partial"]
    [ended] = turn.apply(ToolCompleted(request_id="r1", call_id="c1", tool="run_shell_command", result="ok"),
                         now=12.5)
    assert isinstance(ended, ToolCallEnded)
    assert (ended.ok, ended.result, ended.error, ended.duration) == (True, "ok", None, 2.5)
    assert ended.call is not None and ended.call.name == "run_shell_command"
    assert turn.running == {}


def test_a_failed_call_ends_with_its_error_and_no_duration_without_a_clock():
    turn = Turn()
    turn.apply(ToolStarted(request_id="r1", call_id="c1", tool="write_file"))
    failure = ToolFailure(code="refused", message="not allowed")
    [ended] = turn.apply(ToolError(request_id="r1", call_id="c1", tool="write_file", error=failure), now=3.0)
    assert (ended.ok, ended.error, ended.duration) == (False, failure, None)


def test_an_end_for_a_call_never_seen_starting_is_still_reported():
    [ended] = Turn().apply(ToolCompleted(request_id="r1", call_id="zz", tool="glob", result=[]), now=1.0)
    assert isinstance(ended, ToolCallEnded) and ended.call is None and ended.duration is None


def test_a_tool_execution_request_takes_the_text_unless_it_is_a_handover():
    turn = Turn()
    turn.apply(TextDelta(request_id="r1", content="First."))
    [asked] = turn.apply(ToolExecutionRequest(id="c1", request_id="r1", tool="glob", parameters={"pattern": "*"}))
    assert asked == ToolCallRequested(request_id="r1", call_id="c1", name="glob", args={"pattern": "*"},
                                      handover=False, text_before="First.")
    turn.apply(TextDelta(request_id="r1", content="Second."))
    [again] = turn.apply(ToolExecutionRequest(id="c1", request_id="r1", tool="glob", handover=True))
    assert again.handover and again.text_before == "" and turn.text == "Second."


def test_the_end_reports_usage_retries_and_the_last_message():
    turn = Turn()
    turn.apply(Retrying(request_id="r1", attempt=1, max_attempts=3, delay=0.5, error="503"))
    assert turn.retries == 1
    turn.apply(ToolStarted(request_id="r1", call_id="c1", tool="glob"))
    turn.apply(TextDelta(request_id="r1", content="Answer"))
    usage, api = Usage(total_tokens=7), ApiStats(requests=2)
    [ended] = turn.apply(Finished(request_id="r1", usage=usage, turns=2, api=api))
    assert ended == TurnEnded(request_id="r1", reason="stop", usage=usage, api=api, turns=2, retries=1,
                              text="Answer")
    assert turn.ended == ended and turn.text == "Answer"


def test_an_error_naming_a_request_ends_the_turn_and_one_naming_none_is_a_notice():
    turn = Turn()
    assert turn.apply(Error(code="overloaded", message="slow down")) == [
        Notice(code="overloaded", message="slow down", fatal=False)]
    [ended] = turn.apply(Error(request_id="r1", code="model_error", message="boom", fatal=False))
    assert (ended.reason, ended.error_code, ended.error_message, ended.usage) == (
        "error", "model_error", "boom", None)


def test_the_answer_keeps_every_message_apart_by_a_blank_line():
    turn = Turn()
    turn.apply(TextDelta(request_id="r1", content="Looking.\n"))
    turn.apply(ToolStarted(request_id="r1", call_id="c1", tool="glob"))
    turn.apply(ToolStarted(request_id="r1", call_id="c2", tool="glob"))
    turn.apply(TextDelta(request_id="r1", content="Found it."))
    assert turn.answer == "Looking.\n\nFound it." and turn.text == "Found it."


def test_a_late_event_of_the_ended_request_still_counts_in_it():
    turn = Turn()
    turn.apply(ToolStarted(request_id="r1", call_id="c1", tool="glob"))
    turn.apply(Finished(request_id="r1"))
    turn.apply(ToolDecided(request_id="r1", call_id="c9", decision="cancelled"))
    assert turn.tool_calls == 1 and turn.ended is not None


def test_a_call_forgotten_is_no_longer_running():
    turn = Turn()
    turn.apply(ToolStarted(request_id="r1", call_id="c1", tool="glob"))
    assert turn.forget("c1").name == "glob"
    assert turn.running == {} and turn.forget("c1") is None


def test_the_next_turn_starts_afresh_after_an_end():
    turn = Turn()
    turn.apply(TextDelta(request_id="r1", content="old"))
    turn.apply(Retrying(request_id="r1", attempt=1, max_attempts=3, delay=0.5, error="503"))
    turn.apply(ToolStarted(request_id="r1", call_id="c1", tool="glob"))
    turn.apply(Finished(request_id="r1", reason="cancelled"))
    turn.apply(TextDelta(request_id="r2", content="new"))
    assert (turn.request_id, turn.text, turn.running, turn.retries, turn.ended) == ("r2", "new", {}, 0, None)


def test_retries_and_decisions_are_changes_and_session_events_are_not():
    turn = Turn()
    assert turn.apply(Retrying(request_id="r1", attempt=2, max_attempts=5, delay=1.5, error="x")) == [
        RetryScheduled(request_id="r1", attempt=2, max_attempts=5, delay=1.5, error="x")]
    assert turn.apply(ToolDecided(request_id="r1", call_id="c1", decision="deny", by="phone")) == [
        ApprovalDecided(request_id="r1", call_id="c1", decision="deny", by="phone")]
    joined = ClientsChanged(change="joined", client=ClientInfo(label="phone"), clients=2)
    assert turn.apply(joined) == []


def test_hostile_text_is_kept_as_it_came_for_the_front_end_to_make_safe():
    turn = Turn()
    [added] = turn.apply(TextDelta(request_id="r1", content="\x1b]0;pwned\x07"))
    assert added.text == "\x1b]0;pwned\x07" and turn.text == "\x1b]0;pwned\x07"
