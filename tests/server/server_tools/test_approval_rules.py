"""The approval rows of the protocol's state table (sans-IO, both ends):
``tool_decided`` settles a question for every view, an expired one is told
apart from a decided one, the end of a request settles what it left
waiting, a restored connection remembers what was settled, and a decision
names one of the three verdicts."""

from __future__ import annotations

from gemini_split.protocol import (
    ErrorCode,
    Finished,
    ToolAwaitingApproval,
    ToolDecided,
    ToolDecision,
)

from tests.protocol.test_connection import Pair, m, refused_on_receive, refused_on_send


def _asked(pair: Pair, rid: str, call_id: str) -> None:
    pair.server_sends(pair.event(ToolAwaitingApproval, request_id=rid, call_id=call_id, tool="run_shell_command",
                                 parameters_hash="h"))


def test_an_expired_question_gets_approval_expired_and_a_decided_one_already_decided():
    pair = Pair().open()
    rid = pair.start()
    _asked(pair, rid, "t-1")
    _asked(pair, rid, "t-2")
    pair.server_sends(pair.event(ToolDecided, request_id=rid, call_id="t-1", decision="expired"))
    pair.server_sends(pair.event(ToolDecided, request_id=rid, call_id="t-2", decision="approve", by="phone"))
    assert pair.client.request.awaiting_decision == pair.server.request.awaiting_decision == set()
    late = refused_on_receive(pair.server, m(ToolDecision, call_id="t-1", decision="approve"))
    assert late.code is ErrorCode.APPROVAL_EXPIRED and not late.fatal
    second = refused_on_receive(pair.server, m(ToolDecision, call_id="t-2", decision="deny"))
    assert second.code is ErrorCode.ALREADY_DECIDED
    assert refused_on_receive(pair.server, m(ToolDecision, call_id="t-9", decision="deny")).code is ErrorCode.UNKNOWN_CALL


def test_the_end_of_a_request_settles_the_questions_it_left():
    pair = Pair().open()
    rid = pair.start()
    _asked(pair, rid, "t-1")
    pair.server_sends(pair.event(Finished, request_id=rid, reason="cancelled"))
    assert refused_on_receive(pair.server, m(ToolDecision, call_id="t-1", decision="approve")).code \
        is ErrorCode.ALREADY_DECIDED
    refused_on_send(pair.client, m(ToolDecision, call_id="t-1", decision="approve"))


def test_a_decision_is_one_of_three_verdicts_and_1_1_spellings_mean_the_same():
    pair = Pair().open()
    rid = pair.start()
    _asked(pair, rid, "t-1")
    error = refused_on_receive(pair.server, m(ToolDecision, call_id="t-1", decision="approve_all"))
    assert error.code is ErrorCode.INVALID_FIELD and error.field == "decision"
    assert m(ToolDecision, call_id="t", approved=True, always=True).verdict == "approve_always"
    assert m(ToolDecision, call_id="t", approved=True).verdict == "approve"
    assert m(ToolDecision, call_id="t").verdict == "deny"
    assert m(ToolDecision, call_id="t", approved=True, decision="deny").verdict == "deny"
    # A decision the server may still refuse (arguments_changed) leaves the question open.
    pair.client_sends(m(ToolDecision, call_id="t-1", decision="approve", parameters_hash="wrong"))
    assert pair.server.request.awaiting_decision == {"t-1"}


def test_a_restored_connection_remembers_what_was_settled():
    pair = Pair().open()  # a resumed session's new connection, right after its handshake
    conn = pair.server
    conn.restore(None, last_seq=7, decided={"t-1": "expired", "t-2": "decided"})
    assert refused_on_receive(conn, m(ToolDecision, call_id="t-1", decision="approve")).code \
        is ErrorCode.APPROVAL_EXPIRED
    assert refused_on_receive(conn, m(ToolDecision, call_id="t-2", decision="approve")).code \
        is ErrorCode.ALREADY_DECIDED
