"""Event log and coalescing: sans-IO, no event loop. (The connection's
state machine is tested in test_connection.py.)"""

from __future__ import annotations

import pytest

from gemini_split.protocol import (
    EventLog,
    ReplayUnavailable,
    TextDelta,
    ThinkingDelta,
    ToolDelta,
    ToolStarted,
    coalesce,
    decode,
)
from gemini_split.stamping import stamp


def test_event_log_numbers_from_one_and_replays_after_a_seq():
    log = EventLog(capacity=100)
    events = [log.append(stamp(TextDelta(content=str(i))))[0] for i in range(5)]
    assert [e.seq for e in events] == [1, 2, 3, 4, 5]
    assert [e.content for e in log.since(3)] == ["3", "4"]
    assert log.since(5) == []
    assert [e.seq for e in log.since(0)] == [1, 2, 3, 4, 5]


def test_event_log_says_when_a_replay_is_no_longer_possible():
    log = EventLog(capacity=3)
    for i in range(10):
        log.append(stamp(TextDelta(content=str(i))))
    assert [e.seq for e in log.since(7)] == [8, 9, 10]
    with pytest.raises(ReplayUnavailable) as info:
        log.since(2)
    assert "3..7 are no longer kept" in str(info.value)


def test_event_log_gives_the_text_it_encoded_once():
    log = EventLog()
    event, text = log.append(stamp(TextDelta(request_id="r", content="hé")))
    assert decode(text) == event and event.seq == 1
    assert log.bytes == len(text)


def test_event_log_is_bounded_in_bytes_as_well_as_in_count():
    # Regression (issue 13 §4): 10,000 events of 15 MB each were all kept.
    log = EventLog(capacity=10_000, max_bytes=1_000_000)
    big = "x" * 300_000
    for _ in range(50):
        log.append(stamp(TextDelta(request_id="r", content=big)))
    assert log.bytes <= 1_000_000
    assert len(log) == 3
    assert [e.seq for e in log.since(47)] == [48, 49, 50]
    with pytest.raises(ReplayUnavailable):
        log.since(46)
    # One event larger than the whole budget is numbered but not kept.
    event, _ = log.append(stamp(TextDelta(request_id="r", content="y" * 2_000_000)))
    assert event.seq == 51 and len(log) == 0 and log.bytes == 0
    with pytest.raises(ReplayUnavailable):
        log.since(50)


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


def test_coalesce_stops_a_merged_delta_at_the_limit():
    events = [TextDelta(request_id="r", content="x" * 40) for _ in range(10)]
    out = coalesce(events, limit=100)
    assert [len(e.content) for e in out] == [80, 80, 80, 80, 80]
    assert coalesce([TextDelta(request_id="r", content="y" * 500)], limit=100)[0].content == "y" * 500


def test_coalescing_many_large_deltas_is_linear():
    # Regression (issue 13 §6): merging by repeated concatenation copied the
    # whole merged text for every delta: 10,000 deltas of 5 KB took minutes.
    import time

    events = [TextDelta(request_id="r", content="z" * 5_000) for _ in range(10_000)]
    started = time.process_time()
    out = coalesce(events, limit=10**9)
    assert time.process_time() - started < 2.0
    assert len(out) == 1 and len(out[0].content) == 50_000_000


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
