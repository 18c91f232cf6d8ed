"""The protocol state machine, end to end between two Connections.

Plain synchronous tests (h11's ``ConnectionPair`` pattern): a client and a
server :class:`Connection` pass text to each other. Each rule is checked in
both directions: what we may not *send* raises :class:`LocalProtocolError`
before anything leaves; what the peer may not send raises
:class:`RemoteProtocolError` (with the reply it should get) when it arrives.
"""

from __future__ import annotations

import itertools

import pytest

from gemini_split.protocol import (
    Cancel,
    Connected,
    Connection,
    Error,
    ErrorCode,
    Finished,
    GenerateContentRequest,
    GetHistory,
    GetState,
    Hello,
    History,
    HookRequest,
    HookResponse,
    LocalProtocolError,
    Phase,
    RemoteProtocolError,
    RequestStarted,
    RequestState,
    Retrying,
    State,
    TextDelta,
    ThinkingDelta,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecided,
    ToolDecision,
    ToolDelta,
    ToolDiscovery,
    ToolError,
    ToolExecutionRequest,
    ToolExecutionResponse,
    ToolFailure,
    ToolStarted,
    encode,
)

_ids = itertools.count(1)


def m(cls, **fields):
    """A message stamped the way the I/O layer stamps it."""
    fields.setdefault("id", f"m-{next(_ids)}")
    fields.setdefault("timestamp", 1_700_000_000_000)
    return cls(**fields)


class Pair:
    """A client and a server Connection wired back to back."""

    def __init__(self):
        self.client = Connection("client")
        self.server = Connection("server")
        self.seq = 0

    def client_sends(self, message):
        return self.server.receive(self.client.send(message))

    def server_sends(self, message):
        return self.client.receive(self.server.send(message))

    def event(self, cls, **fields):
        """A session event as the server's event log stamps it."""
        self.seq += 1
        return m(cls, seq=self.seq, **fields)

    def open(self):
        self.client_sends(m(Hello))
        self.server_sends(m(Connected, session_id="s-1"))
        return self

    def start(self, prompt="hi"):
        """A request sent, and announced (1.2: ``request_started``)."""
        request = m(GenerateContentRequest, prompt=prompt)
        self.client_sends(request)
        self.server_sends(self.event(RequestStarted, request_id=request.id, prompt=prompt))
        return request.id

    def both(self, attribute):
        return getattr(self.client, attribute), getattr(self.server, attribute)


def refused_on_receive(receiver, message):
    """What a receiver says to a message a misbehaving peer wrote directly."""
    with pytest.raises(RemoteProtocolError) as info:
        receiver.receive(encode(message))
    return info.value


def refused_on_send(sender, message):
    with pytest.raises(LocalProtocolError) as info:
        sender.send(message)
    return info.value


# --- handshake -----------------------------------------------------------------


def test_a_handshake_opens_both_ends():
    pair = Pair()
    assert pair.both("phase") == (Phase.AWAITING_HELLO, Phase.AWAITING_HELLO)
    hello = m(Hello, client="test/1")
    assert pair.client_sends(hello) == hello
    assert pair.both("phase") == (Phase.AWAITING_CONNECTED, Phase.AWAITING_CONNECTED)
    pair.server_sends(m(Connected, session_id="s-1"))
    assert pair.both("phase") == (Phase.OPEN, Phase.OPEN)
    assert pair.server.hello == hello and pair.client.connected.session_id == "s-1"
    assert pair.both("request") == (None, None)


def test_nothing_but_hello_comes_first():
    pair = Pair()
    error = refused_on_send(pair.client, m(GenerateContentRequest, prompt="hi"))
    assert error.code is ErrorCode.UNEXPECTED_MESSAGE
    error = refused_on_receive(pair.server, m(GenerateContentRequest, prompt="hi"))
    assert error.code is ErrorCode.UNEXPECTED_MESSAGE
    assert error.fatal and "expected hello" in str(error)
    assert pair.server.phase is Phase.AWAITING_HELLO
    pair.client_sends(m(Hello))  # the refused message changed nothing


def test_an_unknown_major_version_is_refused_both_ways():
    pair = Pair()
    assert refused_on_send(pair.client, m(Hello, protocol_version="2.0")).code is ErrorCode.UNSUPPORTED_VERSION
    error = refused_on_receive(pair.server, m(Hello, protocol_version="2.0"))
    assert error.code is ErrorCode.UNSUPPORTED_VERSION and error.fatal
    pair.client_sends(m(Hello, protocol_version="1.7"))  # a newer minor is fine
    assert refused_on_send(pair.server, m(Connected, session_id="s", protocol_version="0.9")).code \
        is ErrorCode.UNSUPPORTED_VERSION
    error = refused_on_receive(pair.client, m(Connected, session_id="s", protocol_version="3.1"))
    assert error.code is ErrorCode.UNSUPPORTED_VERSION and error.fatal


def test_the_server_waits_for_connected_before_anything_else():
    pair = Pair()
    pair.client_sends(m(Hello))
    assert refused_on_send(pair.server, m(TextDelta, request_id="r", content="x")).code is ErrorCode.UNEXPECTED_MESSAGE
    assert refused_on_receive(pair.client, m(TextDelta, request_id="r", content="x")).fatal
    assert refused_on_send(pair.client, m(ToolDiscovery)).code is ErrorCode.UNEXPECTED_MESSAGE
    assert refused_on_receive(pair.server, m(ToolDiscovery)).code is ErrorCode.UNEXPECTED_MESSAGE


def test_a_refused_handshake_closes_both_ends():
    pair = Pair()
    pair.client_sends(m(Hello, token="wrong"))
    refusal = pair.server_sends(m(Error, code="unauthorized", message="missing or invalid token", fatal=True))
    assert refusal.code == "unauthorized"
    assert pair.both("phase") == (Phase.CLOSED, Phase.CLOSED)
    refused_on_send(pair.server, m(Connected, session_id="s"))
    refused_on_receive(pair.client, m(Connected, session_id="s"))


def test_the_server_may_refuse_a_connection_before_any_hello():
    pair = Pair()
    pair.server_sends(m(Error, code="unexpected_message", message="no hello within 10 seconds", fatal=True))
    assert pair.both("phase") == (Phase.CLOSED, Phase.CLOSED)
    refused_on_send(pair.client, m(Hello))


def test_each_role_sends_only_its_own_messages():
    pair = Pair().open()
    error = refused_on_receive(pair.server, m(TextDelta, request_id="r", content="spoofed"))
    assert error.code is ErrorCode.UNEXPECTED_MESSAGE and "never sent by a client" in str(error)
    assert not error.fatal
    assert "never sent by a server" in str(refused_on_receive(pair.client, m(Cancel)))
    refused_on_send(pair.client, m(Finished, request_id="r"))
    refused_on_send(pair.server, m(GetState))
    refused_on_send(pair.client, m(Hello))  # and hello only once


def test_undecodable_text_is_the_peers_error_fatal_only_during_the_handshake():
    pair = Pair()
    with pytest.raises(RemoteProtocolError) as info:
        pair.server.receive("{not json")
    assert info.value.code is ErrorCode.INVALID_JSON and info.value.fatal
    pair.open()
    with pytest.raises(RemoteProtocolError) as info:
        pair.server.receive('{"type": "no_such_thing", "id": "x", "timestamp": 1}')
    assert info.value.code is ErrorCode.UNKNOWN_TYPE and not info.value.fatal
    with pytest.raises(RemoteProtocolError) as info:
        pair.client.receive("[]")
    assert info.value.code is ErrorCode.INVALID_MESSAGE and not info.value.fatal


def test_a_message_over_the_size_limit_is_refused_both_ways():
    pair = Pair()
    pair.client = Connection("client", max_message_size=200)
    pair.server = Connection("server", max_message_size=200)
    pair.open()
    big = m(GenerateContentRequest, prompt="x" * 300)
    assert refused_on_send(pair.client, big).code is ErrorCode.MESSAGE_TOO_LARGE
    assert refused_on_receive(pair.server, big).code is ErrorCode.MESSAGE_TOO_LARGE
    assert pair.both("request") == (None, None)


def test_an_unstamped_message_is_never_sent():
    pair = Pair().open()
    error = refused_on_send(pair.client, GenerateContentRequest(prompt="hi"))
    assert error.code is ErrorCode.MISSING_FIELD and "not stamped" in str(error)
    refused_on_send(pair.client, ToolDiscovery(id="m-0"))
    refused_on_send(pair.client, m(ToolDiscovery, id=""))
    assert pair.client.request is None


# --- one request at a time, ended exactly once ------------------------------------


def test_a_request_runs_until_exactly_one_finished():
    pair = Pair().open()
    rid = pair.start()
    assert pair.client.request.request_id == pair.server.request.request_id == rid
    for cls in (TextDelta, ThinkingDelta):
        pair.server_sends(pair.event(cls, request_id=rid, content="x"))
    pair.server_sends(pair.event(Retrying, request_id=rid, attempt=1, max_attempts=3, delay=1.0, error="503"))
    pair.server_sends(pair.event(Finished, request_id=rid))
    assert pair.both("request") == (None, None)
    error = refused_on_send(pair.server, pair.event(Finished, request_id=rid))
    assert "no request is running" in str(error)
    assert "no request is running" in str(refused_on_receive(pair.client, pair.event(Finished, request_id=rid)))
    rid2 = pair.start()  # idle again: the next request may start
    assert pair.server.request.request_id == rid2


def test_an_error_for_the_request_ends_it_instead_of_finished():
    pair = Pair().open()
    rid = pair.start(prompt="   ")
    reply = pair.server_sends(pair.event(Error, request_id=rid, in_reply_to=rid, code="invalid_request",
                                         message="the prompt is empty"))
    assert reply.code == "invalid_request"
    assert pair.both("request") == (None, None)
    refused_on_send(pair.server, pair.event(Finished, request_id=rid))
    refused_on_send(pair.server, pair.event(Error, request_id=rid, code="internal_error", message="twice"))


def test_a_second_request_while_one_runs_is_busy():
    pair = Pair().open()
    rid = pair.start()
    second = m(GenerateContentRequest, prompt="again")
    assert refused_on_send(pair.client, second).code is ErrorCode.BUSY
    error = refused_on_receive(pair.server, second)  # a client without a Connection sent it anyway
    assert error.code is ErrorCode.BUSY and not error.fatal
    assert (error.in_reply_to, error.request_id) == (second.id, second.id)
    assert rid in str(error)
    assert pair.server.request.request_id == rid
    # The refusal is owed exactly once, and does not end the running request.
    pair.server.send(pair.event(Error, request_id=second.id, in_reply_to=second.id, code="busy", message=str(error)))
    assert pair.server.request.request_id == rid
    refused_on_send(pair.server, pair.event(Error, request_id=second.id, code="busy", message="again"))


def test_events_belong_to_the_running_request():
    pair = Pair().open()
    assert refused_on_send(pair.server, pair.event(TextDelta, request_id="r-0", content="x")).field == "request_id"
    refused_on_receive(pair.client, pair.event(TextDelta, request_id="r-0", content="x"))
    rid = pair.start()
    kinds = [
        (ToolStarted, {"call_id": "c", "tool": "t"}),
        (ToolDelta, {"call_id": "c", "content": "out"}),
        (ToolCompleted, {"call_id": "c", "tool": "t"}),
        (ToolError, {"call_id": "c", "tool": "t", "error": ToolFailure(code="refused", message="no")}),
        (TextDelta, {"content": "x"}),
    ]
    for cls, fields in kinds:
        error = refused_on_send(pair.server, pair.event(cls, request_id="other", **fields))
        assert f"request {rid!r} is running" in str(error)
        refused_on_receive(pair.client, pair.event(cls, request_id=None, **fields))
        pair.server_sends(pair.event(cls, request_id=rid, **fields))


def test_the_running_request_sent_again_is_that_request_not_busy():
    """A client that reconnected resends its prompt, same id (issue 44):
    the server's connection takes it as the request it is, which goes on
    to its one end."""
    pair = Pair().open()
    rid = pair.start()
    again = m(GenerateContentRequest, id=rid, prompt="hi")
    assert pair.server.receive(encode(again)).id == rid  # not refused
    assert pair.server.request.request_id == rid
    pair.server_sends(pair.event(Finished, request_id=rid))
    assert pair.both("request") == (None, None)


def test_a_request_sent_again_as_its_end_goes_out_leaves_neither_end_waiting():
    """The resend crosses the request's end on the wire (issue 44): the
    client sends its prompt again (same id) before it has read the
    ``request_started`` and ``finished`` the server has already written.
    The server's connection takes it as that request, ended (no reply is
    owed), and the client's as submitted, then announced and ended: both
    ends are idle after it and the next prompt is not ``busy``."""
    pair = Pair().open()  # the client's new connection; its prompt, sent on the old one, runs on
    request = m(GenerateContentRequest, prompt="hi")
    started = pair.server.send(pair.event(RequestStarted, request_id=request.id, prompt="hi"))
    finished = pair.server.send(pair.event(Finished, request_id=request.id))
    pair.server.receive(pair.client.send(request))  # sent again, before reading what crossed it
    pair.client.receive(started)
    pair.client.receive(finished)
    assert pair.both("request") == (None, None)
    assert pair.client_sends(m(GenerateContentRequest, prompt="next")).prompt == "next"  # not busy


def test_another_prompt_under_the_running_or_last_ended_requests_id_is_not_taken_for_it():
    """Only the same id *and* prompt is that request: a client that numbers
    its ids afresh reuses the last one with a new prompt — submitted, owed
    its answer, never silently dropped; under the running one's id — busy."""
    pair = Pair().open()
    rid = pair.start()
    assert "still running" in str(refused_on_receive(pair.server, m(GenerateContentRequest, id=rid, prompt="other")))
    pair.server_sends(pair.event(Finished, request_id=rid))
    pair.client_sends(m(GenerateContentRequest, id=rid, prompt="another"))
    # Submitted on both ends: the session's refusal of the reused id is its answer.
    pair.server_sends(m(Error, request_id=rid, in_reply_to=rid, code="invalid_field", message="id reused"))
    assert pair.client_sends(m(GenerateContentRequest, prompt="next")).prompt == "next"  # nothing left waiting


def test_cancel_is_a_request_the_server_answers_with_the_ending():
    pair = Pair().open()
    pair.client_sends(m(Cancel))  # nothing runs: harmless
    rid = pair.start()
    pair.client_sends(m(Cancel, request_id="another"))
    pair.client_sends(m(Cancel, request_id=rid))
    assert pair.server.request.request_id == rid  # still running until the server ends it
    pair.server_sends(pair.event(Finished, request_id=rid, reason="cancelled"))
    assert pair.both("request") == (None, None)


# --- tool calls ------------------------------------------------------------------


def test_a_tool_response_answers_a_pending_call_once():
    pair = Pair().open()
    rid = pair.start()
    call = pair.event(ToolExecutionRequest, request_id=rid, tool="read_file", parameters={"path": "a"})
    pair.server_sends(call)
    assert pair.client.request.pending_calls == pair.server.request.pending_calls == {call.id}
    refused_on_send(pair.server, pair.event(ToolExecutionRequest, id=call.id, request_id=rid, tool="x"))
    answer = m(ToolExecutionResponse, request_id=call.id, result={"ok": True})
    pair.client_sends(answer)
    assert pair.client.request.pending_calls == pair.server.request.pending_calls == set()
    again = m(ToolExecutionResponse, request_id=call.id, result={"ok": True})
    assert "no tool call" in str(refused_on_send(pair.client, again))
    error = refused_on_receive(pair.server, again)
    assert error.code is ErrorCode.UNEXPECTED_MESSAGE and error.in_reply_to == again.id and not error.fatal
    refused_on_send(pair.client, m(ToolExecutionResponse, request_id="never-asked", result=1))


def test_tool_progress_is_accepted_only_while_its_call_waits_for_its_answer():
    """(1.5) A remote agent's text so far (``tool_progress``) is about a call
    still pending: before its answer, any number; after it, or for a call
    never asked, refused as unexpected."""
    from gemini_split.protocol import ToolProgress

    pair = Pair().open()
    rid = pair.start()
    call = pair.event(ToolExecutionRequest, request_id=rid, tool="peer", parameters={"query": "q"}, agent_id=1)
    pair.server_sends(call)
    for text in ("part 1", "part 2"):
        pair.client_sends(m(ToolProgress, request_id=call.id, content=text))
    assert pair.server.request.pending_calls == {call.id}  # progress answers nothing
    pair.client_sends(m(ToolExecutionResponse, request_id=call.id, result="done"))
    late = m(ToolProgress, request_id=call.id, content="more")
    assert "no tool call" in str(refused_on_send(pair.client, late))
    error = refused_on_receive(pair.server, late)
    assert error.code is ErrorCode.UNEXPECTED_MESSAGE and not error.fatal
    refused_on_send(pair.client, m(ToolProgress, request_id="never-asked", content="x"))


def test_calls_still_pending_when_the_request_ends_can_no_longer_be_answered():
    pair = Pair().open()
    rid = pair.start()
    call = pair.event(ToolExecutionRequest, request_id=rid, tool="run_shell_command")
    pair.server_sends(call)
    pair.client_sends(m(Cancel, request_id=rid))
    pair.server_sends(pair.event(Finished, request_id=rid, reason="cancelled"))
    late = m(ToolExecutionResponse, request_id=call.id, result="done anyway")
    refused_on_send(pair.client, late)
    assert refused_on_receive(pair.server, late).code is ErrorCode.UNEXPECTED_MESSAGE


def test_a_tool_decision_answers_a_call_awaiting_approval_once():
    pair = Pair().open()
    rid = pair.start()
    refused_on_send(pair.client, m(ToolDecision, call_id="c-1", approved=True))
    error = refused_on_receive(pair.server, m(ToolDecision, call_id="c-1", approved=True))
    assert "awaiting approval" in str(error)
    pair.server_sends(pair.event(ToolAwaitingApproval, request_id=rid, call_id="c-1", tool="write_file"))
    refused_on_send(pair.server, pair.event(ToolAwaitingApproval, request_id=rid, call_id="c-1", tool="write_file"))
    assert pair.client.request.awaiting_decision == {"c-1"}
    pair.client_sends(m(ToolDecision, call_id="c-1", approved=False))
    # The server settles it (tool_decided: it may refuse a decision, e.g.
    # arguments_changed, and the call waits on); then no decision is taken.
    pair.server_sends(pair.event(ToolDecided, request_id=rid, call_id="c-1", decision="deny", by="laptop"))
    assert pair.client.request.awaiting_decision == pair.server.request.awaiting_decision == set()
    error = refused_on_receive(pair.server, m(ToolDecision, call_id="c-1", approved=True))
    assert error.code is ErrorCode.ALREADY_DECIDED and "awaiting approval" in str(error)
    refused_on_send(pair.client, m(ToolDecision, call_id="c-1", approved=True))


# --- replies ---------------------------------------------------------------------


def _hooks_pair(**hello) -> Pair:
    pair = Pair()
    pair.client_sends(m(Hello, **hello))
    pair.server_sends(m(Connected, session_id="s-1"))
    return pair


def test_a_hook_request_goes_only_to_a_1_4_client_that_offered_tool_hooks():
    for hello in ({}, {"capabilities": ("tool_hooks",), "protocol_version": "1.3"},
                  {"capabilities": ("tool_hooks",), "role": "observer"}):
        pair = _hooks_pair(**hello)
        request_id = pair.start() if hello.get("role") != "observer" else None
        if request_id is None:  # an observer cannot prompt: another client's request
            pair.server_sends(pair.event(RequestStarted, request_id="r-1"))
            request_id = "r-1"
        ask = m(HookRequest, request_id=request_id, hook_id="h-1", event="BeforeTool")
        error = refused_on_send(pair.server, ask)
        assert error.code is ErrorCode.UNEXPECTED_MESSAGE and "tool_hooks" in str(error), hello
        assert refused_on_receive(pair.client, ask).code is ErrorCode.UNEXPECTED_MESSAGE


def test_a_hook_response_answers_a_hook_request_of_the_running_request_once():
    pair = _hooks_pair(capabilities=("tool_hooks",))
    request_id = pair.start()
    never = m(HookResponse, hook_id="h-never")
    assert refused_on_send(pair.client, never).code is ErrorCode.UNEXPECTED_MESSAGE
    assert refused_on_receive(pair.server, never).code is ErrorCode.UNEXPECTED_MESSAGE
    pair.server_sends(m(HookRequest, request_id=request_id, hook_id="h-1", event="BeforeTool",
                        input={"tool_name": "run_shell_command"}))
    again = m(HookRequest, request_id=request_id, hook_id="h-1", event="AfterTool")
    assert refused_on_send(pair.server, again).code is ErrorCode.INVALID_FIELD
    pair.client_sends(m(HookResponse, hook_id="h-1", output={"decision": "deny", "reason": "no"}))
    error = refused_on_receive(pair.server, m(HookResponse, hook_id="h-1"))
    assert error.code is ErrorCode.UNEXPECTED_MESSAGE and not error.fatal and error.field == "hook_id"
    # one still waiting when the request ends can no longer be answered
    pair.server_sends(m(HookRequest, request_id=request_id, hook_id="h-2", event="AfterTool"))
    pair.server_sends(pair.event(Finished, request_id=request_id))
    assert refused_on_send(pair.client, m(HookResponse, hook_id="h-2")).code is ErrorCode.UNEXPECTED_MESSAGE


def test_a_hook_request_names_a_tool_event():
    pair = _hooks_pair(capabilities=("tool_hooks",))
    request_id = pair.start()
    text = ('{"type":"hook_request","id":"x","timestamp":1,"request_id":"%s","hook_id":"h",'
            '"event":"BeforeModel"}' % request_id)
    with pytest.raises(RemoteProtocolError) as info:
        pair.client.receive(text)
    assert info.value.code is ErrorCode.INVALID_FIELD


def test_get_state_and_get_history_are_answered_exactly_once():
    pair = Pair().open()
    ask_state, ask_history = m(GetState), m(GetHistory)
    pair.client_sends(ask_state)
    pair.client_sends(ask_history)
    assert pair.client.owed_replies == pair.server.owed_replies == {ask_state.id, ask_history.id}
    pair.server_sends(pair.event(History, in_reply_to=ask_history.id))
    pair.server_sends(pair.event(State, in_reply_to=ask_state.id, session_id="s-1"))
    assert pair.both("owed_replies") == (frozenset(), frozenset())
    error = refused_on_send(pair.server, pair.event(State, in_reply_to=ask_state.id))
    assert error.field == "in_reply_to"
    refused_on_receive(pair.client, pair.event(State, in_reply_to=ask_state.id))
    refused_on_send(pair.server, pair.event(History, in_reply_to="asked-nothing"))
    # Unasked (no in_reply_to): the snapshot after replay_unavailable.
    pair.server_sends(pair.event(History))


def test_a_restore_is_answered_once_by_checkpoints_never_unasked():
    from gemini_split.protocol import Checkpoints, Restore

    pair = Pair().open()
    ask = m(Restore, session_id="s-1", checkpoint_id="2025-06-22T10-00-00_000Z-a.txt-write_file", apply=True)
    pair.client_sends(ask)
    assert pair.both("owed_replies") == ({ask.id}, {ask.id})
    pair.server_sends(m(Checkpoints, in_reply_to=ask.id, restored=True))
    assert pair.both("owed_replies") == (frozenset(), frozenset())
    assert refused_on_send(pair.server, m(Checkpoints, in_reply_to=ask.id)).field == "in_reply_to"
    refused_on_send(pair.server, m(Checkpoints))  # a reply to one client, never an event of the session


def test_a_reply_id_is_owed_once():
    pair = Pair().open()
    ask = m(GetState)
    pair.client_sends(ask)
    assert refused_on_send(pair.client, m(GetState, id=ask.id)).field == "id"
    duplicate = refused_on_receive(pair.server, m(GetHistory, id=ask.id))
    assert duplicate.field == "id"
    # The refusal cannot name the duplicate: that id names the first ask,
    # whose reply is still owed and still goes out.
    assert duplicate.in_reply_to is None
    pair.server_sends(pair.event(Error, code=duplicate.code.value, message=str(duplicate)))
    pair.server_sends(pair.event(State, in_reply_to=ask.id))


def test_an_error_may_answer_an_owed_reply():
    pair = Pair().open()
    ask = m(GetHistory)
    pair.client_sends(ask)
    pair.server_sends(pair.event(Error, in_reply_to=ask.id, code="internal_error", message="no"))
    assert pair.both("owed_replies") == (frozenset(), frozenset())


def test_an_error_about_a_bad_message_changes_no_request():
    pair = Pair().open()
    rid = pair.start()
    pair.server_sends(pair.event(Error, code="unknown_type", message="unknown message type 'x'"))
    pair.client_sends(m(Error, code="unknown_type", message="a client may say so too"))
    assert pair.client.request.request_id == pair.server.request.request_id == rid


def test_a_fatal_error_closes_the_connection():
    pair = Pair().open()
    rid = pair.start()
    pair.server_sends(pair.event(Error, request_id=rid, code="shutting_down", message="stopped"))
    pair.server_sends(pair.event(Error, code="shutting_down", message="the server is shutting down", fatal=True))
    assert pair.both("phase") == (Phase.CLOSED, Phase.CLOSED)
    refused_on_send(pair.server, pair.event(TextDelta, request_id=rid, content="x"))
    refused_on_send(pair.client, m(GenerateContentRequest, prompt="hi"))
    refused_on_receive(pair.client, pair.event(State, in_reply_to="x"))


# --- seq -------------------------------------------------------------------------


def test_session_events_arrive_in_strictly_increasing_seq():
    pair = Pair().open()
    rid = pair.start()
    pair.server_sends(m(TextDelta, request_id=rid, content="a", seq=5))
    assert pair.both("last_seq") == (5, 5)
    error = refused_on_send(pair.server, m(TextDelta, request_id=rid, content="b", seq=5))
    assert error.field == "seq"
    assert refused_on_receive(pair.client, m(TextDelta, request_id=rid, content="b", seq=4)).field == "seq"
    pair.server_sends(m(Finished, request_id=rid, seq=9))
    assert pair.both("last_seq") == (9, 9)


def test_restore_continues_a_session_on_a_fresh_connection():
    pair = Pair().open()
    running = RequestState("r-7", pending_calls={"call-1"})
    for end in (pair.client, pair.server):
        end.restore(running, last_seq=41)
    running.pending_calls.clear()  # the connections keep their own copy
    pair.client_sends(m(ToolExecutionResponse, request_id="call-1", result="ok"))
    refused_on_send(pair.server, m(TextDelta, request_id="r-7", content="old", seq=41))
    pair.server_sends(m(Finished, request_id="r-7", seq=42))
    assert pair.both("request") == (None, None)


def test_the_tests_cover_every_rule_of_the_table():
    from gemini_split.protocol import connection

    rules = {rule.__name__ for _, rule in connection._RULES.values()}
    assert rules <= {name for name in dir(connection) if name.startswith("_")}
    clients = {cls for who, cls in connection._RULES if who == "client"}
    servers = {cls for who, cls in connection._RULES if who == "server"}
    from gemini_split.protocol import CLIENT_MESSAGES, SERVER_MESSAGES

    # Every message type has a row for the role that sends it.
    assert clients == set(CLIENT_MESSAGES) | {Error}
    assert servers == set(SERVER_MESSAGES)
