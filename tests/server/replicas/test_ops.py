"""Issue 20 §3, operations: /health, /ready, /metrics on a replica, and a
replica that loses Redis (refuses new sessions, keeps streaming, writes what
it buffered when Redis is back, ends a request whose events no longer fit)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest
import trio

from gemini_split.client.connect import ClientSettings, Endpoint, ToolSettings, open_client
from gemini_split.client.protocol_client import HandshakeFailed
from gemini_split.protocol import TextDelta
from gemini_split.server.store.redis import RedisStore
from gemini_split.testing import redis_server as rs
from gemini_split.testing.fake_gemini import FakeGemini

from tests.server.resume.test_resume_e2e import _free_port
from .replicas import replica

pytestmark = pytest.mark.skipif(not rs.available(), reason=rs.MISSING)

ANSWER = "".join(f"line {i:03d} of a long streamed answer\n" for i in range(200))


def _get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def _until(check, timeout: float = 15.0) -> None:
    with trio.fail_after(timeout):
        while not await trio.to_thread.run_sync(check):
            await trio.sleep(0.1)


def _metrics(port: int) -> dict[str, float]:
    status, body = _get(port, "/metrics")
    assert status == 200, body
    return {line.split()[0]: float(line.split()[1]) for line in body.splitlines() if line and line[0] != "#"}


def _settings(tmp_path, port: int) -> ClientSettings:
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    return ClientSettings(endpoint=Endpoint(server=f"ws://127.0.0.1:{port}", reconnect_timeout=0),
                          tools=ToolSettings(workspace=workspace))


@pytest.mark.timeout(120)
async def test_health_ready_and_metrics_follow_redis_going_away_and_coming_back(tmp_path):
    server = rs.RedisServer(tmp_path / "redis").start()
    port = _free_port()
    try:
        with FakeGemini(script=[{"text": "hello"}]) as fake, replica(tmp_path, fake, server.url, port):
            await _until(lambda: '"store":"ok"' in _get(port, "/health")[1])
            status, body = _get(port, "/health")
            assert status == 200 and "store_latency_ms" in body
            assert _get(port, "/ready") == (200, "ready\n")
            async with open_client(_settings(tmp_path, port)) as client:
                assert (await client.run_turn("hi")).error is None
                m = _metrics(port)
                assert m["gemini_split_sessions_live"] == 1 and m["gemini_split_clients_attached"] == 1
                assert m["gemini_split_events_total"] >= 2 and m["gemini_split_store_up"] == 1
                assert m["gemini_split_leases_held"] == 1 and m["gemini_split_store_ping_seconds_count"] >= 1
                assert m["gemini_split_leases_taken_total"] == 1 and m["gemini_split_leases_lost_total"] == 0
                assert m['gemini_split_sessions{state="idle"}'] == 1
                assert m['gemini_split_sessions{state="running"}'] == 0
                assert m["gemini_split_store_overflow_stops_total"] == 0
            server.stop()
            await _until(lambda: _get(port, "/ready")[0] == 503)
            assert '"store":"unreachable"' in _get(port, "/health")[1]
            assert _metrics(port)["gemini_split_store_up"] == 0
            # A new session is refused, clearly.
            with pytest.raises(HandshakeFailed) as err:
                async with open_client(_settings(tmp_path, port)):
                    pass
            assert err.value.code == "storage_error" and "unreachable" in str(err.value)
            server.start()
            await _until(lambda: _get(port, "/ready")[0] == 200)
            async with open_client(_settings(tmp_path, port)) as client:
                assert client.connected.session_id
    finally:
        server.stop()


@pytest.mark.timeout(120)
async def test_a_running_answer_pauses_while_redis_is_away_and_goes_on_whole_when_it_is_back(tmp_path):
    """Among replicas a client is shown only what Redis has (a replica that
    dies never showed an event the next one numbers again): while Redis is
    away the answer waits in the replica's memory, and it all comes once
    Redis is back."""
    server = rs.RedisServer(tmp_path / "redis").start()
    port = _free_port()
    texts: list[str] = []

    async def on_event(event) -> None:
        if isinstance(event, TextDelta):
            texts.append(event.content)

    try:
        script = [{"text": ANSWER, "chunks": 200, "chunk_delay": 0.02}]
        with FakeGemini(script=script) as fake, replica(tmp_path, fake, server.url, port):
            async with open_client(_settings(tmp_path, port), on_event=on_event) as client:
                sid = client.connected.session_id
                async with trio.open_nursery() as nursery:
                    outcome: list = []

                    async def turn() -> None:
                        outcome.append(await client.run_turn("a long one"))

                    nursery.start_soon(turn)
                    while len(texts) < 20:
                        await trio.sleep(0.01)
                    server.stop()
                    await _until(lambda: _get(port, "/ready")[0] == 503)
                    await trio.sleep(0.5)  # what Redis had before it went is on its way
                    seen_while_away = len(texts)
                    await trio.sleep(1.5)
                    paused = len(texts) == seen_while_away
                    server.start()
            assert paused, "events were shown that Redis did not have"
            assert outcome[0].error is None, outcome[0].error
        assert "".join(texts) == ANSWER
        # Every event reached Redis, in order.
        store = RedisStore(server.url)
        await store.open()
        try:
            logged = await store.events_after(sid, 0)
        finally:
            await store.aclose()
        events = [json.loads(e.data) for e in logged]
        assert [e.seq for e in logged] == list(range(1, len(logged) + 1))
        assert "".join(e["content"] for e in events if e["type"] == "text_delta") == ANSWER
        # (after it, only who joined or left: clients_changed)
        assert [e for e in events if e["type"] != "clients_changed"][-1]["type"] == "finished"
    finally:
        server.stop()


@pytest.mark.timeout(120)
async def test_past_the_buffer_the_request_ends_with_an_error_never_a_silent_loss(tmp_path):
    """While Redis is away each session's answer waits (shown only once
    stored), so the replica's buffer holds about one batch per session:
    more sessions than it holds, and the ones that lost events end with
    ``storage_error`` once Redis is back — never silently short."""
    server = rs.RedisServer(tmp_path / "redis").start()
    port = _free_port()
    sessions = 8
    texts: list[list[str]] = [[] for _ in range(sessions)]
    outcomes: list = []
    ended = [False] * sessions

    def on_event_of(n: int):
        async def on_event(event) -> None:
            if isinstance(event, TextDelta):
                texts[n].append(event.content)
        return on_event

    async def one(n: int) -> None:
        async with open_client(_settings(tmp_path, port), on_event=on_event_of(n)) as client:
            async with trio.open_nursery() as nursery:
                async def turn() -> None:
                    outcomes.append(await client.run_turn("a long one"))
                    ended[n] = True
                nursery.start_soon(turn)

    try:
        script = [{"text": ANSWER, "chunks": 200, "chunk_delay": 0.02}] * sessions
        with FakeGemini(script=script) as fake, \
                replica(tmp_path, fake, server.url + "?max_buffered_events=4", port):
            async with trio.open_nursery() as nursery:
                for n in range(sessions):
                    nursery.start_soon(one, n)
                # Every answer under way (on a loaded machine Redis can lag
                # enough for a buffer of 4 to overflow already: that
                # request has ended, with the same storage_error).
                while not all(len(t) >= 5 or done for t, done in zip(texts, ended)):
                    await trio.sleep(0.01)
                server.stop()
                # What an operator sees: the stops counted on /metrics.
                await _until(lambda: _metrics(port)["gemini_split_store_overflow_stops_total"] >= 1)
                server.start()
        assert len(outcomes) == sessions
        errors = [o.error for o in outcomes if o.error is not None]
        assert errors and all(e.code == "storage_error" and "buffer" in e.message for e in errors), errors
        # What each client was shown is its answer's start, without a hole.
        assert all(ANSWER.startswith("".join(t)) for t in texts)
        assert any(len("".join(t)) < len(ANSWER) for t in texts)
    finally:
        server.stop()
