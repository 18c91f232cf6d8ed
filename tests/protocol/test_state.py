"""Connection state, event log and coalescing: sans-IO, no event loop."""

from __future__ import annotations

import pytest

from gemini_split.protocol import (
    Cancel,
    Connected,
    ConnectionState,
    Error,
    ErrorCode,
    EventLog,
    GenerateContentRequest,
    Hello,
    Phase,
    RemoteProtocolError,
    ReplayUnavailable,
    TextDelta,
    ThinkingDelta,
    ToolDelta,
    ToolStarted,
    coalesce,
)


def test_server_accepts_nothing_but_hello_first():
    state = ConnectionState("server")
    with pytest.raises(RemoteProtocolError) as info:
        state.receive(GenerateContentRequest(prompt="hi"))
    assert info.value.code is ErrorCode.UNEXPECTED_MESSAGE
    state.receive(Hello())
    assert state.phase is Phase.OPEN
    state.receive(GenerateContentRequest(prompt="hi"))


def test_server_refuses_messages_only_a_server_sends():
    state = ConnectionState("server")
    state.receive(Hello())
    with pytest.raises(RemoteProtocolError) as info:
        state.receive(TextDelta(content="spoofed"))
    assert "sent by a server" in str(info.value)


def test_hello_with_another_major_version_is_refused():
    state = ConnectionState("server")
    with pytest.raises(RemoteProtocolError) as info:
        state.receive(Hello(protocol_version="2.0"))
    assert info.value.code is ErrorCode.UNSUPPORTED_VERSION
    assert state.phase is Phase.AWAITING_HELLO


def test_client_expects_connected_or_error():
    state = ConnectionState("client")
    state.receive(Error(code="unauthorized", message="no", fatal=True))  # allowed: the refusal
    with pytest.raises(RemoteProtocolError):
        state.receive(TextDelta(content="early"))
    state.receive(Connected(session_id="s"))
    state.receive(TextDelta(content="now fine"))
    with pytest.raises(RemoteProtocolError):
        state.receive(Cancel())  # a client message, sent to a client


def test_either_side_may_send_error():
    state = ConnectionState("server")
    state.receive(Hello())
    state.receive(Error(code="unknown_type", message="what is that"))


def test_event_log_numbers_from_one_and_replays_after_a_seq():
    log = EventLog(capacity=100)
    events = [log.append(TextDelta(content=str(i))) for i in range(5)]
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert [e.content for e in log.since(3)] == ["3", "4"]
    assert log.since(5) == []
    assert [e.seq for e in log.since(0)] == [1, 2, 3, 4, 5]


def test_event_log_says_when_a_replay_is_no_longer_possible():
    log = EventLog(capacity=3)
    for i in range(10):
        log.append(TextDelta(content=str(i)))
    assert [e.seq for e in log.since(7)] == [8, 9, 10]
    with pytest.raises(ReplayUnavailable) as info:
        log.since(2)
    assert "3..7 are no longer kept" in str(info.value)


def test_coalesce_merges_adjacent_deltas_of_one_stream_only():
    events = [
        TextDelta(request_id="r", content="a"),
        TextDelta(request_id="r", content="b"),
        ThinkingDelta(request_id="r", content="t1"),
        ThinkingDelta(request_id="r", content="t2"),
        TextDelta(request_id="r", content="c"),
        TextDelta(request_id="other", content="d"),
        ToolDelta(request_id="r", call_id="1", content="x", stream="stdout"),
        ToolDelta(request_id="r", call_id="1", content="y", stream="stdout"),
        ToolDelta(request_id="r", call_id="1", content="e", stream="stderr"),
        ToolDelta(request_id="r", call_id="2", content="z", stream="stderr"),
        ToolStarted(request_id="r", call_id="3", tool="t"),
        ToolStarted(request_id="r", call_id="4", tool="t"),
    ]
    out = coalesce(events)
    assert [(type(e).__name__, getattr(e, "content", None)) for e in out] == [
        ("TextDelta", "ab"),
        ("ThinkingDelta", "t1t2"),
        ("TextDelta", "c"),
        ("TextDelta", "d"),
        ("ToolDelta", "xy"),
        ("ToolDelta", "e"),
        ("ToolDelta", "z"),
        ("ToolStarted", None),
        ("ToolStarted", None),
    ]
    # Nothing is lost: all the text is still there, in order.
    assert "".join(e.content for e in out if isinstance(e, TextDelta)) == "abcd"


def test_protocol_package_imports_neither_trio_nor_genai():
    import subprocess
    import sys

    code = (
        "import sys, gemini_split.protocol; "
        "bad = [m for m in ('trio', 'google.genai', 'httpx') if m in sys.modules]; "
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
