"""The JSON-RPC codec and the replay ring, sans-IO: no event loop."""

from __future__ import annotations

import json

import pytest

from gemini_split.acp import jsonrpc
from gemini_split.acp.jsonrpc import Invalid, Request, Response
from gemini_split.acp.ring import Budget, Ring
from gemini_split.protocol import ErrorCode, RemoteProtocolError, Replay
from gemini_split.protocol.replay import replay_from_query

pytestmark = pytest.mark.timeout(10)


@pytest.mark.parametrize("text, code, msg_id", [
    ("{not json", -32700, None),
    ("[1, 2]", -32600, None),  # a batch
    ('[{"jsonrpc": "2.0", "method": "initialize", "id": 1}]', -32600, None),
    ('"hello"', -32600, None),
    ('{"method": "initialize", "id": 1}', -32600, 1),  # no jsonrpc
    ('{"jsonrpc": "1.0", "method": "initialize", "id": "a"}', -32600, "a"),
    ('{"jsonrpc": "2.0", "method": "initialize", "id": 1.5}', -32600, None),
    ('{"jsonrpc": "2.0", "method": "initialize", "id": true}', -32600, None),
    ('{"jsonrpc": "2.0", "method": "initialize", "id": {"x": 1}}', -32600, None),
    ('{"jsonrpc": "2.0", "method": 7, "id": 2}', -32600, 2),
    ('{"jsonrpc": "2.0", "method": "session/new", "id": 3, "params": [1]}', -32602, 3),
    ('{"jsonrpc": "2.0", "id": 4}', -32600, 4),
    ("[" * 5000 + "]" * 5000, -32700, None),  # nested too deeply to decode (issue 35 §6)
    ('{"jsonrpc": "2.0", "method": "x", "id": 5, "params": {"a": ' + "[" * 5000 + "]" * 5000 + "}}", -32700, None),
])
def test_what_is_not_one_request_gets_the_json_rpc_error_code(text, code, msg_id):
    decoded = jsonrpc.decode(text)
    assert isinstance(decoded, Invalid)
    assert (decoded.error.code, decoded.id) == (code, msg_id)
    reply = json.loads(jsonrpc.encode_error(decoded.id, decoded.error))
    assert reply["jsonrpc"] == "2.0" and reply["id"] == msg_id and reply["error"]["code"] == code


def test_a_message_over_the_limit_is_refused_before_it_is_parsed():
    decoded = jsonrpc.decode('{"jsonrpc": "2.0", "method": "x", "params": {"a": "' + "a" * 2000 + '"}}', max_size=1000)
    assert isinstance(decoded, Invalid) and decoded.error.code == -32600 and "too large" in decoded.error.message


def test_requests_notifications_and_responses_decode():
    assert jsonrpc.decode('{"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}') == \
        Request("session/cancel", {"sessionId": "s"}, None)
    assert jsonrpc.decode('{"jsonrpc": "2.0", "method": "initialize", "id": 0}') == Request("initialize", {}, 0)
    assert jsonrpc.decode('{"jsonrpc": "2.0", "id": 5, "result": {"ok": 1}}') == Response(5, {"ok": 1})
    error = jsonrpc.decode('{"jsonrpc": "2.0", "id": 5, "error": {"code": -1, "message": "no"}}')
    assert isinstance(error, Response) and error.error is not None and error.error.code == -1
    # A broken response is not answered (answering could loop between two peers).
    assert jsonrpc.decode('{"jsonrpc": "2.0", "result": 1}').reply is False


def test_limit_replays_the_last_whole_turns_and_never_a_cut_one():
    ring = Ring(5)
    for i, (text, starts) in enumerate([("u1", True), ("a1", False), ("u2", True), ("a2", False), ("a2b", False),
                                        ("u3", True), ("a3", False)]):
        ring.append(text, user_turn=starts, now_ms=1000 + i)
    # u1, a1 left the ring; u2's turn is whole (u2 a2 a2b), u3's too.
    assert ring.replay(Replay()) == ["u2", "a2", "a2b", "u3", "a3"]
    assert ring.replay(Replay(limit=1)) == ["u3", "a3"]
    assert ring.replay(Replay(limit=2)) == ["u2", "a2", "a2b", "u3", "a3"]
    ring.append("a3b", now_ms=1007)  # u2 leaves: its turn is no longer whole
    assert ring.replay(Replay(limit=5)) == ["u3", "a3", "a3b"]
    assert ring.replay(Replay(since=1005)) == ["a3", "a3b"]
    assert ring.replay(Replay(before=1005)) == ["a2", "a2b"]
    assert ring.replay(Replay(limit=0)) == []
    # The time window first, then the last turns that start in it (as the
    # native protocol's late joiners: plan_replay decides both).
    assert ring.replay(Replay(since=1004, limit=1)) == ["u3", "a3", "a3b"]
    assert ring.replay(Replay(before=1005, limit=1)) == []


def test_the_ring_takes_the_native_listeners_query():
    ring = Ring()
    ring.append("u1", user_turn=True, now_ms=1000)
    ring.append("a1", now_ms=1001)
    ring.append("u2", user_turn=True, now_ms=1002)
    assert ring.replay(replay_from_query({"limit": "1", "sessionId": "s-1"})) == ["u2"]
    assert replay_from_query({"sessionId": "s-1"}) is None
    for bad in ({"limit": "many"}, {"before": "-1"}, {"since": "99999999999999999999"}):
        with pytest.raises(RemoteProtocolError, match=next(iter(bad))) as caught:
            replay_from_query(bad)
        assert caught.value.code == ErrorCode.INVALID_FIELD


def test_rings_sharing_a_budget_drop_the_oldest_of_the_fullest_and_give_bytes_back_on_release():
    budget = Budget(100)
    busy, quiet = Ring(50, budget), Ring(50, budget)
    quiet.append("q1", user_turn=True, size=20)
    for i in range(10):
        busy.append(f"b{i}", size=10)
    assert budget.used <= 100
    assert quiet.replay(Replay()) == ["q1"]  # the busy ring paid for its own growth
    assert busy.replay(Replay()) == [f"b{i}" for i in range(2, 10)]
    quiet.append("q2", size=30)  # now the busy ring is the fullest: it gives way
    assert budget.used <= 100 and quiet.replay(Replay()) == ["q1", "q2"]
    assert busy.replay(Replay())[0] == "b5"
    too_big = Ring(50, budget)
    too_big.append("huge", size=500)  # more than the whole budget: not kept at all
    assert too_big.replay(Replay()) == [] and budget.used <= 100
    busy.release()
    assert budget.used == 50 and busy not in budget.rings
