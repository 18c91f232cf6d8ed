"""Resume at the server: the real AgentService on the loopback transport, a
scripted model, and raw clients that say exactly what they want in hello."""

from __future__ import annotations

import gc
import logging
import time
import weakref
from contextlib import asynccontextmanager

import trio

from gemini_split.protocol import (
    ClientsChanged,
    Connected,
    DeleteSession,
    GetHistory,
    ListSessions,
    Sessions,
    Error,
    Finished,
    GenerateContentRequest,
    Hello,
    History,
    State,
    TextDelta,
    ToolExecutionRequest,
    ToolExecutionResponse,
)
from gemini_split.stamping import stamp
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.store import open_store
from gemini_split.server.store.memory import MemoryStore
from gemini_split.testing.service import open_test_service
from gemini_split.transport import ConnectOptions, Principal, get_transport

from tests.server.helpers import RawClient


@asynccontextmanager
async def hello(address, **fields):
    """A raw connection after ``hello(**fields)``; yields (raw, first reply)."""
    stream = await get_transport(address).open_connection(address, ConnectOptions())
    raw = RawClient(stream)
    try:
        await raw.send(Hello(client="raw-test", **fields))
        yield raw, await raw.receive()
    finally:
        await stream.aclose()


def _text(events) -> str:
    return "".join(e.content for e in events if isinstance(e, TextDelta))


async def test_a_client_resumes_with_every_event_after_its_last_seq_then_live_events():
    model = ScriptedModel([{"text": "".join(f"w{i} " for i in range(40)), "chunks": 40, "chunk_delay": 0.01}])
    async with open_test_service(model) as (service, address):
        async with hello(address) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            first = [await raw.receive() for _ in range(3)]
        # the client is gone; the request goes on
        async with hello(address, session_id=connected.session_id, resume_token=connected.resume_token,
                         last_seq=first[-1].seq) as (raw, again):
            assert isinstance(again, Connected) and again.resumed and again.session_id == connected.session_id
            rest = await raw.receive_until(lambda m: isinstance(m, Finished))
    seqs = [e.seq for e in first + rest]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert _text(first + rest) == "".join(f"w{i} " for i in range(40))


async def test_a_wrong_token_another_users_session_and_an_unknown_id_get_the_same_answer():
    tokens = {"alice-token": Principal("alice"), "bob-token": Principal("bob")}
    model = ScriptedModel([{"text": "alice's answer"}])
    async with open_test_service(model, authenticate=tokens.get) as (_, address):
        async with hello(address, token="alice-token") as (raw, alice):
            await raw.send(GenerateContentRequest(prompt="secret"))
            await raw.receive_until(lambda m: isinstance(m, Finished))
        answers = []
        for fields in (
            dict(token="alice-token", session_id=alice.session_id, resume_token="not-the-token", last_seq=0),
            dict(token="bob-token", session_id=alice.session_id, resume_token=alice.resume_token, last_seq=0),
            dict(token="bob-token", session_id=alice.session_id),
            dict(token="bob-token", session_id="s-00000000deadbeef", last_seq=0),
        ):
            async with hello(address, **fields) as (_, reply):
                answers.append(reply)
        async with hello(address, token="alice-token", session_id=alice.session_id,
                         resume_token=alice.resume_token, last_seq=0) as (raw, ok):
            replayed = await raw.receive_until(lambda m: isinstance(m, Finished))
    for reply, fields in zip(answers, ("", "", "", "")):
        assert isinstance(reply, Error) and reply.fatal and reply.code == "unknown_session"
    messages = {a.message.replace(alice.session_id, "ID").replace("s-00000000deadbeef", "ID") for a in answers}
    assert len(messages) == 1
    assert ok.resumed and _text(replayed) == "alice's answer"


async def test_events_no_longer_kept_are_said_with_a_state_and_history_to_redraw():
    model = ScriptedModel([{"text": "".join(f"w{i} " for i in range(30)), "chunks": 30, "chunk_delay": 0.002}])
    async with open_test_service(model, replay_capacity=5) as (_, address):
        async with hello(address) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            await raw.receive_until(lambda m: isinstance(m, Finished))
        async with hello(address, session_id=connected.session_id, resume_token=connected.resume_token,
                         last_seq=1) as (raw, again):
            seen = await raw.receive_until(lambda m: isinstance(m, History))
            # (The first connection's leaving may come first: the server
            # notices it when it notices.)
            unavailable, state, history = [m for m in seen if not isinstance(m, ClientsChanged)]
    assert again.resumed
    assert isinstance(unavailable, Error) and unavailable.code == "replay_unavailable" and not unavailable.fatal
    assert isinstance(state, State) and state.session_id == connected.session_id and not state.busy
    assert isinstance(history, History) and [m["role"] for m in history.messages] == ["user", "model"]


async def test_a_tool_call_to_a_client_that_left_is_asked_again_on_reattach_and_answered_once():
    model = ScriptedModel([
        {"function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}]},
        {"text": "done"},
    ])
    async with open_test_service(model, tool_timeout=30) as (_, address):
        async with hello(address) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="read it"))
            [call] = [m for m in await raw.receive_until(lambda m: isinstance(m, ToolExecutionRequest))
                      if isinstance(m, ToolExecutionRequest)]
        # gone without answering; back with everything already seen
        async with hello(address, session_id=connected.session_id, resume_token=connected.resume_token,
                         last_seq=call.seq) as (raw, again):
            # (After the old connection's leaving, when the server notices it.)
            *_, again_call = await raw.receive_until(lambda m: isinstance(m, ToolExecutionRequest))
            assert again_call.id == call.id
            # 1.2: asked again of this client only (handed over: its prompt's
            # client left), not logged for everyone.
            assert again_call.handover and again_call.seq is None
            await raw.send(ToolExecutionResponse(request_id=call.id, result="contents"))
            await raw.send(ToolExecutionResponse(request_id=call.id, result="contents again"))
            seen = await raw.receive_until(lambda m: isinstance(m, Finished))
    refused = [m for m in seen if isinstance(m, Error)]
    assert len(refused) == 1 and refused[0].code == "unexpected_message"
    assert _text(seen) == "done"


async def test_a_request_running_when_the_server_died_ends_with_interrupted_on_resume(tmp_path):
    state_dir = tmp_path / "state"
    model = ScriptedModel([{"text": "first answer"}, {"text": "y" * 100, "chunks": 100, "chunk_delay": 0.05}])
    store = open_store(state_dir)
    async with open_test_service(model, store=store) as (service, address):
        async with hello(address) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="one"))
            await raw.receive_until(lambda m: isinstance(m, Finished))
            second = stamp(GenerateContentRequest(prompt="two"))
            await raw.send(second)
            seen = await raw.receive_until(lambda m: isinstance(m, TextDelta))
            await store.flush()
            # the server "dies": its nursery is cancelled mid-request
    restarted_store = open_store(state_dir)
    async with open_test_service(ScriptedModel([]), store=restarted_store) as (service, address):
        async with hello(address, session_id=connected.session_id, resume_token=connected.resume_token,
                         last_seq=seen[-1].seq) as (raw, again):
            ended = await raw.receive_until(lambda m: isinstance(m, Error | Finished))
            await raw.send(GenerateContentRequest(prompt="three"))
            third = await raw.receive_until(lambda m: isinstance(m, Finished))
    assert again.resumed
    assert isinstance(ended[-1], Error) and ended[-1].code == "interrupted" and ended[-1].request_id == second.id
    assert _text(third) == "Echo: three"


async def test_list_and_delete_show_and_touch_only_the_callers_own_sessions(tmp_path):
    tokens = {"alice-token": Principal("alice"), "bob-token": Principal("bob")}
    model = ScriptedModel([{"text": "a1"}, {"text": "a2"}, {"text": "b1"}])
    async with open_test_service(model, store=open_store(tmp_path / "state"), authenticate=tokens.get) as (_, address):
        ids = {}
        for who, prompt in (("alice", "first plan"), ("alice", "second plan"), ("bob", "bob's plan")):
            async with hello(address, token=f"{who}-token") as (raw, connected):
                await raw.send(GenerateContentRequest(prompt=prompt))
                await raw.receive_until(lambda m: isinstance(m, Finished))
                ids[prompt] = connected.session_id
        async with hello(address, token="bob-token") as (bob, _):
            await bob.send(ListSessions())
            [bob_list] = [m for m in await bob.receive_until(lambda m: isinstance(m, Sessions))]
            await bob.send(DeleteSession(session_id=ids["first plan"]))
            refused = await bob.receive()
            await bob.send(DeleteSession(session_id="s-00000000deadbeef"))
            unknown = await bob.receive()
        async with hello(address, token="alice-token") as (alice, mine):
            await alice.send(ListSessions())
            listed = await alice.receive()
            await alice.send(DeleteSession(session_id=ids["first plan"]))
            after = await alice.receive()
            await alice.send(DeleteSession(session_id=mine.session_id))
            own = await alice.receive()
    assert [s.title for s in bob_list.sessions] == ["bob's plan"]
    assert [s.title for s in listed.sessions] == ["second plan", "first plan"]
    assert listed.sessions[0].turns == 1 and listed.sessions[0].updated >= listed.sessions[1].updated
    assert [s.title for s in after.sessions] == ["second plan"]
    for error in (refused, unknown):
        assert isinstance(error, Error) and error.code == "unknown_session" and not error.fatal
    assert refused.message.replace(ids["first plan"], "ID") == unknown.message.replace("s-00000000deadbeef", "ID")
    assert isinstance(own, Error) and own.code == "invalid_request"


async def test_resume_latest_picks_the_callers_most_recent_session():
    model = ScriptedModel([{"text": "one"}, {"text": "two"}])
    async with open_test_service(model) as (_, address):
        async with hello(address, session_id="latest") as (_, none_yet):
            pass
        for prompt in ("older", "newer"):
            async with hello(address) as (raw, connected):
                await raw.send(GenerateContentRequest(prompt=prompt))
                await raw.receive_until(lambda m: isinstance(m, Finished))
        async with hello(address, session_id="latest") as (raw, latest):
            await raw.send(GetHistory())
            *_, history = await raw.receive_until(lambda m: isinstance(m, History))
    assert isinstance(none_yet, Error) and none_yet.code == "unknown_session"
    assert none_yet.message == "no earlier session to resume"
    assert latest.resumed and latest.session_id == connected.session_id and latest.resume_token
    assert history.messages[0]["parts"][0]["text"] == "newer"


class _BusyStore(MemoryStore):
    """A store whose token writes take a while (a busy Redis or disk)."""

    async def set_token_hash(self, session_id: str, token_hash: str) -> None:
        await trio.sleep(0.2)
        await super().set_token_hash(session_id, token_hash)


async def test_two_clients_attaching_by_id_at_once_share_one_restored_session_and_both_tokens_work():
    """Two attaches by id of an unloaded session at the same moment (say,
    after a replica took it over): one session is restored, both clients
    are its views, and the token each was given lets it back in."""
    model = ScriptedModel([{"text": "one"}])
    async with open_test_service(model, store=_BusyStore(), detached_grace=0.2) as (service, address):
        async with hello(address) as (raw, first):
            await raw.send(GenerateContentRequest(prompt="first"))
            await raw.receive_until(lambda m: isinstance(m, Finished))
        with trio.fail_after(5):
            while service.manager.live:  # unloaded once idle and detached
                await trio.sleep(0.05)
        replies: list = []
        both_in = trio.Event()

        async def attach(label: str) -> None:
            async with hello(address, session_id=first.session_id, label=label) as (_, connected):
                replies.append(connected)
                if len(replies) == 2:
                    both_in.set()
                await both_in.wait()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(attach, "laptop")
            nursery.start_soon(attach, "phone")
        again = []
        for connected in replies:
            async with hello(address, session_id=first.session_id, resume_token=connected.resume_token) as (
                    _, reply):
                again.append(reply)
    assert all(isinstance(c, Connected) for c in replies), replies
    assert sorted(c.clients for c in replies) == [1, 2]  # the second joined the first one's session
    refused = [r.message for r in again if not isinstance(r, Connected)]
    assert not refused, refused


async def test_latest_is_the_last_conversation_with_an_answer_not_a_session_stopped_before_its_first(tmp_path):
    state_dir = tmp_path / "state"
    model = ScriptedModel([{"text": "the answer"}, {"text": "y" * 100, "chunks": 100, "chunk_delay": 0.05}])
    store = open_store(state_dir)
    async with open_test_service(model, store=store) as (_, address):
        async with hello(address) as (raw, conversation):
            await raw.send(GenerateContentRequest(prompt="the conversation"))
            await raw.receive_until(lambda m: isinstance(m, Finished))
        async with hello(address) as (raw, stopped):
            await raw.send(GenerateContentRequest(prompt="never answered"))
            await raw.receive_until(lambda m: isinstance(m, TextDelta))
            await store.flush()
            # the server "dies" mid-answer: that session has no completed turn
    async with open_test_service(ScriptedModel([]), store=open_store(state_dir)) as (_, address):
        # Once resumed (it ends interrupted), it is the most recently updated one.
        async with hello(address, session_id=stopped.session_id, resume_token=stopped.resume_token) as (raw, _):
            await raw.receive_until(lambda m: isinstance(m, Error))
        async with hello(address, session_id="latest") as (raw, latest):
            await raw.send(GetHistory())
            *_, history = await raw.receive_until(lambda m: isinstance(m, History))
    assert isinstance(latest, Connected) and latest.session_id == conversation.session_id
    assert history.messages[0]["parts"][0]["text"] == "the conversation"


async def test_latest_finds_a_session_answering_its_first_prompt_now():
    model = ScriptedModel([{"text": "y" * 100, "chunks": 100, "chunk_delay": 0.02}])
    async with open_test_service(model) as (_, address):
        async with hello(address) as (raw, first):
            await raw.send(GenerateContentRequest(prompt="a long first answer"))
            await raw.receive_until(lambda m: isinstance(m, TextDelta))
            async with hello(address, session_id="latest", role="observer") as (_, watching):
                pass
    assert isinstance(watching, Connected) and watching.session_id == first.session_id


async def test_a_session_answering_its_first_prompt_is_listed_with_that_prompt_as_its_title(tmp_path):
    """Not "Empty conversation" (``--list-sessions``) until the turn is
    saved: the title is in the record the first request writes."""
    model = ScriptedModel([{"text": "y" * 100, "chunks": 100, "chunk_delay": 0.02}])
    async with open_test_service(model, store=open_store(tmp_path / "state")) as (_, address):
        async with hello(address) as (raw, first):
            await raw.send(GenerateContentRequest(prompt="refactor the parser\nand more"))
            await raw.receive_until(lambda m: isinstance(m, TextDelta))
            async with hello(address) as (other, _):
                for _ in range(100):  # the record is written beside the first delta
                    await other.send(ListSessions())
                    listed = await other.receive()
                    if any(s.id == first.session_id for s in listed.sessions):
                        break
                    await trio.sleep(0.02)
    (running,) = [s for s in listed.sessions if s.id == first.session_id]
    assert running.title == "refactor the parser" and running.running and running.turns == 0


async def test_a_short_id_resumes_the_callers_session_and_an_ambiguous_one_lists_the_candidates():
    """The banner and toolbar show a short id (``s-74545a``): any prefix
    that begins exactly one of the caller's sessions stands for it; one that
    begins several is refused with the candidates — the caller's own only."""
    alice, bob = Principal("alice"), Principal("bob")
    tokens = {"alice-token": alice, "bob-token": bob}
    model = ScriptedModel([{"text": "one"}, {"text": "two"}, {"text": "bob's"}])
    async with open_test_service(model, authenticate=tokens.get) as (service, address):
        ids = []
        for token in ("alice-token", "alice-token", "bob-token"):
            async with hello(address, token=token) as (raw, connected):
                await raw.send(GenerateContentRequest(prompt="hi"))
                await raw.receive_until(lambda m: isinstance(m, Finished))
                ids.append(connected.session_id)
        alices, bobs = ids[:2], ids[2:]
        short = alices[0][:8]
        assert not alices[1].startswith(short)  # (16 random hex digits: they differ in the first 6)
        async with hello(address, token="alice-token", session_id=short) as (_, by_prefix):
            pass
        async with hello(address, token="alice-token", session_id="s-") as (_, ambiguous):
            pass
        async with hello(address, token="alice-token", session_id=bobs[0][:8]) as (_, others):
            pass
    assert isinstance(by_prefix, Connected) and by_prefix.session_id == alices[0]
    assert isinstance(ambiguous, Error) and ambiguous.code == "unknown_session"
    assert all(sid in ambiguous.message for sid in alices) and bobs[0] not in ambiguous.message
    assert "begins 2 of your sessions" in ambiguous.message
    # Bob's session is not found by its prefix: the same answer as no session at all.
    assert isinstance(others, Error) and others.code == "unknown_session"
    assert others.message == f"no session {bobs[0][:8]!r} (it may have expired or been deleted)"


async def test_a_detached_session_leaves_memory_after_ten_seconds_and_comes_back_whole(autojump_clock):
    """Issue 45 item 8: what a session holds is released soon after its last
    client leaves (by default 10 s later; it was 5 min, and a burst of
    clients kept a server's memory up that long), while a client back
    within those seconds finds it live. The store keeps it: resuming later
    restores its whole conversation, nothing lost."""
    model = ScriptedModel([{"text": "the answer to keep"}])
    async with open_test_service(model) as (service, address):
        async with hello(address) as (raw, first):
            await raw.send(GenerateContentRequest(prompt="remember this"))
            await raw.receive_until(lambda m: isinstance(m, Finished))
            held = weakref.ref(service.manager.live[first.session_id])
        await trio.sleep(8)
        still_live = first.session_id in service.manager.live
        await trio.sleep(3)
        unloaded = first.session_id not in service.manager.live
        gc.collect()
        released = held() is None  # nothing else kept the session's objects alive
        async with hello(address, session_id=first.session_id, resume_token=first.resume_token) as (raw, back):
            await raw.send(GetHistory())
            *_, history = await raw.receive_until(lambda m: isinstance(m, History))
    assert still_live and unloaded and released
    assert isinstance(back, Connected) and back.resumed and back.session_id == first.session_id
    assert [m["parts"][0]["text"] for m in history.messages] == ["remember this", "the answer to keep"]


async def test_once_many_sessions_were_unloaded_and_it_went_quiet_the_server_gives_memory_back(
        autojump_clock, caplog):
    """After a burst of clients (here 50) has left and their sessions were
    unloaded, the server gives the freed memory back to the system once,
    and says so in its log (gemini_split/memory.py)."""
    caplog.set_level(logging.INFO, logger="gemini_split.memory")
    async with open_test_service(ScriptedModel([])) as (service, address):
        for _ in range(50):
            async with hello(address) as (_, connected):
                assert isinstance(connected, Connected)
        await trio.sleep(11)  # every one unloaded
        assert not service.manager.live
        before_quiet = [r.getMessage() for r in caplog.records if "gave memory back" in r.getMessage()]
        await trio.sleep(15)
        given: list[str] = []
        for _ in range(200):  # it runs in a worker thread: real time, not the test's clock
            given = [r.getMessage() for r in caplog.records if "gave memory back" in r.getMessage()]
            if given:
                break
            await trio.to_thread.run_sync(time.sleep, 0.05)
    assert before_quiet == []  # not while sessions are still being unloaded
    assert len(given) == 1 and given[0].startswith("50 sessions unloaded: gave memory back to the system"), given
