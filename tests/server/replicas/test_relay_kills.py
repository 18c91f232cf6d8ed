"""Issue 34.2 under repetition: the replica relaying three watchers is
killed (SIGKILL) again and again, and no watcher is ever told that the
live session is gone.

Real processes: a runner replica (the driver attached there keeps the
session on it) and, per round, a fresh relaying replica, on one real
redis-server. The watchers are real clients (``attach --watch``'s:
attached by id as observers, reconnecting on their own) behind a TCP
proxy standing for the load balancer: it sends them to the relay, and
once the relay is gone, to the runner, as nginx would. ``RELAY_KILLS``
sets the number of rounds (50 by default).

A relay never calls the model, so the relays run a ``scripted:`` one and
start without importing google-genai; the next round's relay starts
while a round runs."""

from __future__ import annotations

import json
import os
from contextlib import ExitStack

import pytest
import trio

from gemini_split.client.connect import open_client
from gemini_split.protocol import Finished, RequestStarted, TextDelta
from gemini_split.testing import redis_server as rs
from gemini_split.testing.fake_gemini import FakeGemini

from tests.faultproxy import FaultProxy
from tests.server.resume.test_resume_e2e import _free_port
from tests.e2e.test_serve_e2e import API_KEY
from .replicas import replica
from .test_replicas_nginx import ALICE, LEASE_TTL, _settings

pytestmark = [pytest.mark.skipif(not rs.available(), reason=rs.MISSING), pytest.mark.slow]

KILLS = int(os.environ.get("RELAY_KILLS", "50"))
WATCHERS = 3


class Watcher:
    """One watcher: what it showed (each seq once and in order, the text
    and end of each request), and whether it gave up."""

    def __init__(self):
        self.seqs: list[int] = []
        self.text: dict[str, str] = {}
        self.finished: set[str] = set()
        self.gave_up: str | None = None

    async def __call__(self, event) -> None:
        if event.seq is not None:
            assert not self.seqs or event.seq > self.seqs[-1], f"seq {event.seq} after {self.seqs[-1]}"
            self.seqs.append(event.seq)
        if isinstance(event, RequestStarted):
            self.text.setdefault(event.request_id, "")
        elif isinstance(event, TextDelta):
            self.text[event.request_id] = self.text.get(event.request_id, "") + event.content
        elif isinstance(event, Finished):
            self.finished.add(event.request_id)

    async def watch(self, settings, attached: trio.Event) -> None:
        async with open_client(settings, on_event=self) as client:
            attached.set()
            await client.wait_closed()
            self.gave_up = client.closed_reason or "closed"


@pytest.mark.timeout(120 + 10 * KILLS)
async def test_watchers_of_a_relay_killed_again_and_again_are_never_told_the_session_is_gone(
        tmp_path, redis_server):
    url = redis_server.url_with_prefix()
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": {ALICE: {"userId": "alice"}}}))
    never_called = tmp_path / "relay-script.json"
    never_called.write_text("[]")
    script = [{"text": f"answer {i}"} for i in range(KILLS + 1)]
    common = ("--lease-ttl", LEASE_TTL, "--auth-config", str(auth))
    with ExitStack() as stack:
        fake = stack.enter_context(FakeGemini(script=script, api_key=API_KEY))
        runner_port = _free_port()
        stack.enter_context(replica(tmp_path, fake, url, runner_port, *common, name="runner"))

        def start_relay(n: int):
            port = _free_port()
            cm = replica(tmp_path, fake, url, port, *common, "--model", f"scripted:{never_called}", name=f"relay{n}")
            return port, cm, cm.__enter__()

        async with trio.open_nursery() as nursery:
            proxy = FaultProxy("127.0.0.1", runner_port)
            proxy_port = await nursery.start(proxy.serve)
            driver_settings = _settings(tmp_path, f"ws://127.0.0.1:{runner_port}", new_session_id="relay-test2")
            async with open_client(driver_settings) as driver:
                assert (await driver.run_turn("first")).error is None
                sid = driver.connected.session_id
                relay = await trio.to_thread.run_sync(start_relay, 1)
                for n in range(1, KILLS + 1):
                    relay_port, relay_cm, relay_proc = relay
                    async with trio.open_nursery() as starting:
                        if n < KILLS:  # the next relay starts meanwhile
                            later: list = []
                            starting.start_soon(_start_soon, start_relay, n + 1, later)
                        proxy.target = ("127.0.0.1", relay_port)
                        await _round(tmp_path, proxy_port, runner_port, proxy, relay_proc, driver, sid, n)
                        relay_cm.__exit__(None, None, None)
                    if n < KILLS:
                        relay = later[0]
            nursery.cancel_scope.cancel()
    assert len(fake.requests) == KILLS + 1  # every prompt ran once, on the runner


async def _start_soon(start, n: int, into: list) -> None:
    into.append(await trio.to_thread.run_sync(start, n))


async def _round(tmp_path, proxy_port, runner_port, proxy, relay, driver, sid, n) -> None:
    """Three watchers attach through the relay, the relay is killed, they
    come back through the proxy (to the runner), and each sees the
    driver's next turn whole."""
    async with trio.open_nursery() as nursery:
        watchers = [Watcher() for _ in range(WATCHERS)]
        attached = [trio.Event() for _ in watchers]
        for i, watcher in enumerate(watchers):
            settings = _settings(tmp_path, f"ws://127.0.0.1:{proxy_port}", resume=sid, attach=True,
                                 role="observer", label=f"watcher {i}")
            nursery.start_soon(watcher.watch, settings, attached[i])
        for event in attached:
            await event.wait()
        proxy.target = ("127.0.0.1", runner_port)  # the balancer's next choice once the relay is gone
        relay.kill()
        await trio.to_thread.run_sync(relay.wait)
        outcome = await driver.run_turn(f"round {n}")
        assert outcome.error is None, outcome.error
        with trio.fail_after(30):
            for watcher in watchers:
                while outcome.request_id not in watcher.finished:
                    assert watcher.gave_up is None, f"round {n}: {watcher.gave_up}"
                    await trio.sleep(0.02)
        for watcher in watchers:
            assert watcher.text[outcome.request_id] == f"answer {n}", f"round {n}"
            assert watcher.gave_up is None, f"round {n}: {watcher.gave_up}"
        nursery.cancel_scope.cancel()
    log_text = (tmp_path / f"relay{n}.log").read_text()
    assert f"session {sid}: relayed to replica" in log_text, log_text
