"""A client relayed to the replica that runs its session (issue 20 §2 gaps):
it is one of the session's clients there (``clients_changed``,
``connected.clients``), it gets what ``hello.replay`` asks for, and tool
calls whose client left are handed to it. Two replicas (AgentService +
Replica each, as ``serve --store redis://`` builds them) on a real
redis-server, raw clients on the loopback transport."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from gemini_split.protocol import (
    ClientsChanged,
    Connected,
    Error,
    Finished,
    GenerateContentRequest,
    ListSessions,
    Replay,
    RequestStarted,
    Sessions,
    TextDelta,
    ToolExecutionRequest,
    ToolExecutionResponse,
)
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.service import AgentService
from gemini_split.server.store.redis import RedisStore
from gemini_split.server.replicas.replica import Replica
from gemini_split.testing import redis_server as rs
from gemini_split.transport import ServeOptions, get_transport

from tests.server.attach.test_attach_server import hello
from tests.faces.grpc.conftest import third_party  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.skipif(not rs.available(), reason=rs.MISSING), pytest.mark.timeout(60)]


@asynccontextmanager
async def two_replicas(redis_server, script, server_tools=None, **config):
    """Replicas A and B on one Redis (their own key prefix); yields their
    addresses, A's service first. Sessions opened on A run on A.
    ``server_tools``: both replicas run tools for sessions that ask (as
    ``serve --server-tools`` on each)."""
    url = redis_server.url_with_prefix()
    transport = get_transport("loopback:")
    model = ScriptedModel(script)
    model.auth_description = "the replicas' test credential"  # what connected.model_auth says
    services = []
    async with trio.open_nursery() as nursery:
        addresses = []
        for name in ("a", "b"):
            service = AgentService(model, ServerConfig(model="scripted", **config), store=RedisStore(url),
                                   server_tools=server_tools)
            service.manager.replica = Replica(service.store, replica_id=f"replica-{name}", lease_ttl=1.5)
            await nursery.start(service.run)
            services.append(service)
            addresses.append(await nursery.start(transport.serve, "loopback:", service.handle_connection,
                                                 ServeOptions()))
        try:
            yield services, addresses
        finally:
            nursery.cancel_scope.cancel()
    for service in services:
        with trio.CancelScope(shield=True):
            await service.store.aclose()


async def _turn(client, prompt: str) -> list:
    await client.send(GenerateContentRequest(prompt=prompt))
    return await client.receive_until(lambda m: isinstance(m, Finished))


async def test_a_relayed_client_is_counted_and_the_others_hear_it_join_and_leave(redis_server):
    async with two_replicas(redis_server, [{"text": "hi"}, {"text": "again"}]) as (_, (at_a, at_b)):
        async with hello(at_a, label="laptop") as (local, first):
            *_, done = await _turn(local, "first")  # a session is in the store once it ran a request
            async with hello(at_b, session_id=first.session_id, label="phone", last_seq=done.seq) as (
                    relayed, second):
                joined = await local.receive()
                # It is counted, and it sees who else is there.
                assert isinstance(second, Connected) and second.clients == 2 and second.label == "phone"
                assert [c.label for c in second.attached] == ["laptop", "phone"]
                # It is told how the model is reached, as a client of the runner is.
                assert second.model_auth == first.model_auth == "the replicas' test credential"
                # A prompt from the local client: both see its events, once.
                seen_local = await _turn(local, "hello")
                seen_relayed = await relayed.receive_until(lambda m: isinstance(m, Finished))
            left = await local.receive()
    assert isinstance(joined, ClientsChanged) and joined.change == "joined" and joined.clients == 2
    assert joined.client.label == "phone"
    # Its own arrival comes first (replayed: it is at or before connected's
    # last_seq, as for a local client resuming), then what the local one saw.
    own, *rest = seen_relayed
    assert isinstance(own, ClientsChanged) and own.replayed and own.seq == second.last_seq == joined.seq
    assert [(e.seq, e.TYPE) for e in seen_local] == [(e.seq, e.TYPE) for e in rest]
    assert isinstance(left, ClientsChanged) and left.change == "left" and left.client.label == "phone"
    assert left.clients == 1


async def _events(client) -> list:
    """What arrives until nothing more comes for a moment (a replay)."""
    got = []
    while True:
        with trio.move_on_after(1) as scope:
            got.append(await client.receive())
        if scope.cancelled_caught:
            return got


async def test_the_relay_replays_what_hello_replay_asks_as_the_runner_would(redis_server):
    script = [{"text": f"answer {i}"} for i in range(3)]
    async with two_replicas(redis_server, script) as (_, (at_a, at_b)):
        async with hello(at_a, label="laptop") as (local, first):
            for i in range(3):
                await _turn(local, f"question {i}")
            sid = first.session_id
            plans = {}
            for name, replay in (("last turn", Replay(limit=1)), ("two turns", Replay(limit=2)),
                                 ("by id, no seq: the last turn", None)):
                for where, address in (("runner", at_a), ("relay", at_b)):
                    async with hello(address, session_id=sid, replay=replay, label="late") as (late, connected):
                        assert isinstance(connected, Connected), connected
                        got = await _events(late)
                    # (who joined or left is not the conversation: runner and relay differ there)
                    plans[name, where] = [(e.seq, e.TYPE, e.replayed) for e in got if e.TYPE != "clients_changed"]
            await _events(local)
    for name in ("last turn", "two turns", "by id, no seq: the last turn"):
        relayed, local_view = plans[name, "relay"], plans[name, "runner"]
        assert relayed and all(replayed for *_, replayed in relayed), (name, relayed)
        assert relayed[0][1] == "request_started" and relayed[-1][1] == "finished", (name, relayed)
        assert relayed == local_view, name  # the same events
    assert sum(t == "request_started" for _, t, _ in plans["two turns", "relay"]) == 2
    assert sum(t == "request_started" for _, t, _ in plans["last turn", "relay"]) == 1


async def test_a_tool_call_left_unanswered_is_handed_to_a_client_that_comes_back_through_the_relay(redis_server):
    script = [{"function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}]}, {"text": "done"}]
    async with two_replicas(redis_server, script, tool_timeout=30) as (_, (at_a, at_b)):
        async with hello(at_a, label="laptop") as (origin, first):
            await origin.send(GenerateContentRequest(prompt="read it"))
            *_, call = await origin.receive_until(lambda m: isinstance(m, ToolExecutionRequest))
        # The client left without answering; it comes back on the other
        # replica, which relays to the runner.
        async with hello(at_b, session_id=first.session_id, resume_token=first.resume_token,
                         last_seq=call.seq) as (back, connected):
            assert isinstance(connected, Connected) and connected.pending_tool_calls == (call.id,)
            assert connected.active_request_id == call.request_id
            handed = await back.receive_until(lambda m: isinstance(m, ToolExecutionRequest))
            assert handed[-1].id == call.id and handed[-1].handover and handed[-1].seq is None
            await back.send(ToolExecutionResponse(request_id=call.id, result={"output": "contents"}))
            rest = await back.receive_until(lambda m: isinstance(m, Finished | Error))
    assert isinstance(rest[-1], Finished), rest
    assert "".join(e.content for e in rest if isinstance(e, TextDelta)) == "done"
    assert not any(isinstance(e, RequestStarted) for e in rest)  # the same request went on


async def test_a_call_handed_over_while_the_runner_takes_the_relayed_client_in_reaches_it(redis_server):
    """The runner hands its calls to every driver after each batch of
    events it sends; one may come while it is still taking a relayed
    client in (its store slow to flush before it answers the join). That
    hand-over reaches the client too, after its replay, as a local
    client's would; it is not asked twice."""
    script = [{"function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}]}, {"text": "done"}]
    async with two_replicas(redis_server, script, tool_timeout=30) as ((service_a, _), (at_a, at_b)):
        flush = service_a.store.flush

        async def slow_flush():  # a busy Redis: the join is answered 0.5 s late
            await trio.sleep(0.5)
            await flush()

        service_a.store.flush = slow_flush
        async with hello(at_a, label="laptop") as (origin, first):
            await origin.send(GenerateContentRequest(prompt="read it"))
            *_, call = await origin.receive_until(lambda m: isinstance(m, ToolExecutionRequest))
        async with hello(at_b, session_id=first.session_id, resume_token=first.resume_token,
                         last_seq=call.seq) as (back, connected):
            assert isinstance(connected, Connected) and connected.pending_tool_calls == (call.id,)
            with trio.fail_after(10):
                handed = await back.receive_until(lambda m: isinstance(m, ToolExecutionRequest))
            assert handed[-1].id == call.id and handed[-1].handover and handed[-1].seq is None
            await back.send(ToolExecutionResponse(request_id=call.id, result={"output": "contents"}))
            rest = await back.receive_until(lambda m: isinstance(m, Finished | Error))
    assert isinstance(rest[-1], Finished), rest
    assert not any(isinstance(e, ToolExecutionRequest) for e in rest)  # asked once
    assert "".join(e.content for e in rest if isinstance(e, TextDelta)) == "done"


async def test_the_runner_drops_a_relayed_client_whose_replica_is_gone(redis_server):
    """A relay that dies sends no leave: the runner finds its relay no
    longer listed and drops it (the others hear it leave)."""
    async with two_replicas(redis_server, [{"text": "hi"}]) as ((_, service_b), (at_a, at_b)):
        async with hello(at_a, label="laptop") as (local, first):
            *_, done = await _turn(local, "first")
            async with hello(at_b, session_id=first.session_id, label="phone", last_seq=done.seq):
                joined = await local.receive()
                assert isinstance(joined, ClientsChanged) and joined.clients == 2
                # B "dies": its list of relays expires, and no leave is sent.
                replica_b = service_b.manager.replica
                replica_b.relays.clear()
                replica_b.relay_ended = _nothing  # type: ignore[method-assign]
                await service_b.store.client.delete([replica_b.relays_key(replica_b.id)])
                with trio.fail_after(10):
                    left = await local.receive()
    assert isinstance(left, ClientsChanged) and left.change == "left" and left.client.label == "phone"
    assert left.clients == 1


async def _nothing(*args) -> None:
    return None


async def test_a_client_joining_mid_answer_through_the_relay_gets_every_event_once_without_a_gap(redis_server):
    """Replayed (the turn so far) then live, with nothing between: the
    runner's events up to the attach point are in Redis before the relay
    replays them (its store writes in the background)."""
    script = [{"text": "".join(f"w{i} " for i in range(300)), "chunks": 300, "chunk_delay": 0.01}]
    async with two_replicas(redis_server, [{"text": "first"}, *script]) as ((service_a, _), (at_a, at_b)):
        store = service_a.store
        write_batch = store._write_batch

        async def slow_write_batch(batch):  # a busy Redis: each batch lands 0.2 s late
            await trio.sleep(0.2)
            await write_batch(batch)

        store._write_batch = slow_write_batch
        async with hello(at_a, label="laptop") as (local, first):
            await _turn(local, "first")
            await local.send(GenerateContentRequest(prompt="long"))
            for _ in range(3):
                await local.receive_until(lambda m: isinstance(m, TextDelta))
            async with trio.open_nursery() as nursery:
                # The laptop keeps reading: the session keeps the pace of its
                # fastest local view, and a view that stops reading (but is not
                # yet past its bounds) would hold the relayed client up too.
                nursery.start_soon(local.receive_until, lambda m: isinstance(m, Finished))
                async with hello(at_b, session_id=first.session_id, label="late") as (late, connected):
                    got = await late.receive_until(lambda m: isinstance(m, Finished))
    seqs = [e.seq for e in got if e.seq is not None]
    assert got[0].TYPE == "request_started" and got[0].replayed
    assert seqs == list(range(seqs[0], seqs[-1] + 1)), seqs
    assert any(not e.replayed for e in got)  # some of it came live
    assert all(e.replayed for e in got if e.seq <= connected.last_seq)


async def test_a_grpc_stream_on_another_replica_continues_a_session_the_runner_keeps(redis_server, third_party):
    """The gRPC face is a native client of its own service: a stream on B
    naming a session A runs (a client is attached there) is relayed, and
    its prompt runs on A."""
    import grpc

    from gemini_split.client.face_client import open_face_client

    from tests.faces.grpc.helpers import chat, start

    script = [{"text": "first answer"}, {"text": "second answer, on the runner"}]
    async with two_replicas(redis_server, script) as ((_, service_b), (at_a, _)):
        async with trio.open_nursery() as nursery:
            grpc_b = await nursery.start(get_transport("grpc://x").serve, "grpc://127.0.0.1:0",
                                         service_b.handle_connection,
                                         ServeOptions(extra={"open_client": open_face_client}))
            async with hello(at_a, label="laptop") as (local, first):
                await _turn(local, "first")
                outcome = await chat(third_party, grpc_b, [start(third_party, "second", session_id=first.session_id)])
                seen_local = await local.receive_until(lambda m: isinstance(m, Finished))
            nursery.cancel_scope.cancel()
    assert outcome.code == grpc.StatusCode.OK, (outcome.code, outcome.details)
    assert outcome.text() == "second answer, on the runner"
    assert outcome.responses[0].session_info.session_id == first.session_id
    # The local client saw the relayed prompt run (where the session runs).
    assert any(isinstance(e, RequestStarted) and e.prompt == "second" for e in seen_local)


async def test_a_fatal_error_from_a_relayed_client_ends_its_connection(redis_server):
    """Issue 35 §8: a client's ``error`` with ``fatal: true`` ends the
    protocol; the relay stops forwarding instead of serving on."""
    from gemini_split.transport import ConnectionBroken, ConnectionClosed

    async with two_replicas(redis_server, [{"text": "hi"}]) as (_, (at_a, at_b)):
        async with hello(at_a) as (local, first):
            *_, done = await _turn(local, "first")
            async with hello(at_b, session_id=first.session_id, last_seq=done.seq) as (relayed, second):
                assert isinstance(second, Connected)
                await relayed.send(Error(code="internal", message="client gives up", fatal=True))
                with trio.fail_after(5):
                    with pytest.raises((ConnectionBroken, ConnectionClosed)):
                        while True:
                            await relayed.receive()


async def test_watchers_attached_by_id_through_the_relay_reconnect_on_either_replica_with_their_tokens(redis_server):
    """Issue 34.2: three watchers attached by id through the relay each got
    a token; a relay that died made them reconnect (nginx: to the runner).
    Every watcher — and the driver, whose runner may die next — must be let
    back in: attaching by id never takes the others' tokens away."""
    async with two_replicas(redis_server, [{"text": "hi"}]) as (_, (at_a, at_b)):
        async with hello(at_a, label="driver") as (driver, first):
            *_, done = await _turn(driver, "first")
            tokens = []
            for i in range(3):
                async with hello(at_b, session_id=first.session_id, role="observer", label=f"watcher {i}") as (
                        _, connected):
                    assert isinstance(connected, Connected), connected
                    tokens.append(connected.resume_token)
            answers = {}
            for where, address in (("runner", at_a), ("relay", at_b)):
                for i, token in enumerate([first.resume_token, *tokens]):
                    async with hello(address, session_id=first.session_id, resume_token=token, role="observer",
                                     last_seq=done.seq) as (_, again):
                        answers[where, i] = again
    refused = {key: reply.message for key, reply in answers.items() if not isinstance(reply, Connected)}
    assert not refused, refused
    # The same token as an attach by id on the runner gives: the session's one.
    assert set(tokens) == {first.resume_token}


async def test_attaching_by_id_alone_through_the_relay_is_refused_where_the_runner_would_refuse_it(redis_server):
    """``serve`` without --allow-attach-by-id: joining a session that has
    clients attached takes its token, through the relay as on the runner
    (and the relay never hands the session's token to a client without it)."""
    async with two_replicas(redis_server, [{"text": "hi"}], allow_attach_by_id=False) as (_, (at_a, at_b)):
        async with hello(at_a, label="driver") as (driver, first):
            *_, done = await _turn(driver, "first")
            replies = {}
            for where, address in (("runner", at_a), ("relay", at_b)):
                async with hello(address, session_id=first.session_id) as (_, by_id):
                    replies[where, "by id"] = by_id
                async with hello(address, session_id=first.session_id, resume_token=first.resume_token,
                                 last_seq=done.seq) as (_, with_token):
                    replies[where, "token"] = with_token
    for where in ("runner", "relay"):
        refused = replies[where, "by id"]
        assert isinstance(refused, Error) and refused.code == "unknown_session" and refused.fatal, (where, refused)
        assert isinstance(replies[where, "token"], Connected), (where, replies[where, "token"])
    assert replies["relay", "by id"].message == replies["runner", "by id"].message


async def test_sessions_listed_through_another_replica_name_who_is_attached_on_the_runner(redis_server):
    """(1.5) The runner publishes who is attached to the sessions it holds;
    a replica listing them reads that (issue 33 §3)."""
    async with two_replicas(redis_server, [{"text": "hi"}]) as (_, (at_a, at_b)):
        with trio.fail_after(30):
            async with hello(at_a, label="laptop") as (local, first):
                await _turn(local, "first")
                async with hello(at_b, label="lister") as (lister, _):
                    async def listed():
                        await lister.send(ListSessions())
                        reply = await lister.receive_until(lambda m: isinstance(m, Sessions))
                        return {s.id: s for s in reply[-1].sessions}[first.session_id]

                    # Published when the laptop attached (without waiting on
                    # it): it may take a moment to land.
                    while not (info := await listed()).clients:
                        await trio.sleep(0.05)
                    assert [(c.label, c.role) for c in info.attached] == [("laptop", "driver")]
                    # A client relayed from B counts on the runner, and so in the list.
                    async with hello(at_b, session_id=first.session_id, label="phone",
                                     resume_token=first.resume_token):
                        while (info := await listed()).clients != 2:
                            await trio.sleep(0.05)
                        assert [c.label for c in info.attached] == ["laptop", "phone"]
                    while (info := await listed()).clients != 1:
                        await trio.sleep(0.05)
            async with hello(at_b, label="lister") as (lister, _):
                while (info := await listed()).clients:
                    await trio.sleep(0.05)
                assert info.attached == ()


async def test_a_session_answering_on_one_replica_is_listed_as_running_through_another(redis_server):
    """(1.4 ``running``, carried among replicas like who is attached) A slow
    streamed answer on A: B's list says the session is running while it
    streams, and idle once it has finished — to a 1.5 and a 1.4 lister
    alike (issue 33)."""
    slow = {"text": "a slow answer in many pieces", "chunks": 8, "chunk_delay": 0.25}
    async with two_replicas(redis_server, [{"text": "hi"}, slow]) as (_, (at_a, at_b)):
        with trio.fail_after(30):
            async with hello(at_a, label="laptop") as (local, first):
                await _turn(local, "first")
                async with hello(at_b, label="lister") as (lister, _), \
                        hello(at_b, label="old lister", protocol_version="1.4") as (old_lister, _):
                    async def listed(client):
                        await client.send(ListSessions())
                        reply = await client.receive_until(lambda m: isinstance(m, Sessions))
                        return {s.id: s for s in reply[-1].sessions}[first.session_id]

                    while not (await listed(lister)).clients:  # A has published who is attached
                        await trio.sleep(0.05)
                    assert not (await listed(lister)).running
                    await local.send(GenerateContentRequest(prompt="take your time"))
                    await local.receive_until(lambda m: isinstance(m, TextDelta))
                    while not (info := await listed(lister)).running:
                        await trio.sleep(0.05)
                    assert [c.label for c in info.attached] == ["laptop"]
                    assert (await listed(old_lister)).running
                    finished = await local.receive_until(lambda m: isinstance(m, Finished))
                    assert finished[-1].reason == "stop"
                    while (info := await listed(lister)).running:
                        await trio.sleep(0.05)
                    assert info.clients == 1 and info.turns == 2
                    assert not (await listed(old_lister)).running


async def test_what_a_listing_replica_cannot_trust_in_redis_lists_the_session_idle_without_clients(redis_server):
    """Whatever lies in a session's ``:clients`` key — not JSON, another
    shape, wrong types — the list is still answered: that session idle,
    with no one attached."""
    hostile = ["not json", "[1, 2]", '{"running": "yes", "clients": 5}', '{"clients": [{"role": "observer"}]}',
               '{"running": 1}', "null"]
    async with two_replicas(redis_server, [{"text": "hi"}]) as (services, (at_a, at_b)):
        with trio.fail_after(30):
            async with hello(at_a, label="laptop") as (local, first):
                await _turn(local, "first")
            key = services[0].manager.replica.clients_key(first.session_id)
            async with hello(at_b, label="lister") as (lister, _):
                while await services[1].store.client.exists([key]):  # A has said the laptop left
                    await trio.sleep(0.05)
                for value in hostile:
                    await services[1].store.client.set(key, value)
                    await lister.send(ListSessions())
                    reply = await lister.receive_until(lambda m: isinstance(m, (Sessions, Error)))
                    assert isinstance(reply[-1], Sessions), (value, reply[-1])
                    info = {s.id: s for s in reply[-1].sessions}[first.session_id]
                    assert (info.running, info.clients, info.attached) == (False, 0, ()), value
