"""Issue 20, "How it is checked": two ``serve`` replicas on one real Redis,
behind a real nginx running deploy/nginx.conf; real clients; replicas
killed with SIGKILL mid-answer."""

from __future__ import annotations

import json
import signal
from contextlib import ExitStack

import pytest
import trio

from gemini_split.client.connect import ClientSettings, Endpoint, SessionChoice, ToolSettings, open_client
from gemini_split.client.protocol_client import HandshakeFailed
from gemini_split.protocol import Error, Hello, TextDelta, encode
from gemini_split.stamping import stamp
from gemini_split.transport import ConnectOptions, open_connection
from gemini_split.testing import nginx as ngx
from gemini_split.testing import redis_server as rs
from gemini_split.testing.fake_gemini import FakeGemini

from tests.faultproxy import FaultProxy
from tests.server.resume.test_resume_e2e import _free_port
from tests.e2e.test_serve_e2e import API_KEY
from .replicas import replica

pytestmark = [
    pytest.mark.skipif(not rs.available(), reason=rs.MISSING),
    pytest.mark.skipif(not ngx.available(), reason=ngx.MISSING),
]

ALICE, BOB = "alice-token-0123456789", "bob-token-9876543210"
#: Short, so a dead runner's sessions move on quickly; not so short that a
#: replica starved of CPU for a moment (the suite's busy tail on 2 CPUs)
#: misses its renewals (every ttl/3) and loses the lease mid-test.
LEASE_TTL = "3s"
#: The long answer: 240 deltas, 15 ms apart.
ANSWER = "".join(f"line {i:03d} of a long streamed answer\n" for i in range(240))


class Cluster:
    """Redis (shared), two replicas, nginx in front of them, the fake Gemini."""

    def __init__(self, tmp_path, redis_server, stack: ExitStack, script):
        self.tmp_path = tmp_path
        self.url = redis_server.url_with_prefix()
        self.prefix = self.url.rsplit("prefix=", 1)[1]
        self.redis_port = redis_server.port
        auth = tmp_path / "auth.json"
        auth.write_text(json.dumps({"tokens": {ALICE: {"userId": "alice"}, BOB: {"userId": "bob"}}}))
        self.fake = stack.enter_context(FakeGemini(script=script, api_key=API_KEY))
        self.ports = [_free_port(), _free_port()]
        self.procs = [
            stack.enter_context(replica(tmp_path, self.fake, self.url, port, "--lease-ttl", LEASE_TTL,
                                        "--auth-config", str(auth), name=f"replica{i}"))
            for i, port in enumerate(self.ports)
        ]
        self.nginx = stack.enter_context(ngx.Nginx(tmp_path / "nginx", self.ports))

    async def holder_pid(self, session_id: str) -> int:
        """The pid of the replica holding the session's lease (its id is
        host-pid-random)."""
        value = await _redis_get(self.redis_port, f"{self.prefix}{{{session_id}}}:lease")
        assert value, f"no lease for {session_id}"
        return int(value.rsplit("-", 2)[1])

    def kill(self, pid: int) -> int:
        """SIGKILL the replica with this pid; returns its index."""
        for i, proc in enumerate(self.procs):
            if proc.pid == pid:
                proc.send_signal(signal.SIGKILL)
                proc.wait(timeout=10)
                return i
        raise AssertionError(f"no replica with pid {pid}")


async def _redis_get(port: int, key: str) -> str | None:
    """GET over a raw RESP exchange (the test checks the store's layout
    independently of the store's code)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        k = key.encode()
        await stream.send_all(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k))
        data = b""
        while not data.endswith(b"\r\n") or (data.startswith(b"$") and data.count(b"\r\n") < 2
                                              and not data.startswith(b"$-1")):
            data += await stream.receive_some(4096)
    if data.startswith(b"$-1"):
        return None
    return data.split(b"\r\n")[1].decode()


def _settings(tmp_path, server: str, **session) -> ClientSettings:
    """Settings reaching ``server`` as Alice; ``session``: the session choice's fields."""
    workspace = tmp_path / "ws"
    workspace.mkdir(exist_ok=True)
    settings = ClientSettings(endpoint=Endpoint(server=server, reconnect_timeout=30),
                              session=SessionChoice(**session), tools=ToolSettings(workspace=workspace))
    settings.endpoint.connect.token = ALICE
    return settings


class Seen:
    """What a client showed: text per request, every seq in order."""

    def __init__(self):
        self.seqs: list[int] = []
        self.text: list[str] = []
        self.errors: list[Error] = []
        self.first_delta = trio.Event()
        self.deltas = 0

    async def __call__(self, event) -> None:
        if event.seq is not None:
            assert not self.seqs or event.seq > self.seqs[-1], f"seq {event.seq} after {self.seqs[-1]}"
            self.seqs.append(event.seq)
        if isinstance(event, TextDelta):
            self.text.append(event.content)
            self.deltas += 1
            self.first_delta.set()
        if isinstance(event, Error):
            self.errors.append(event)


@pytest.mark.timeout(120)
async def test_the_runner_dies_mid_answer_the_client_resumes_through_nginx_and_the_request_is_interrupted(
        tmp_path, redis_server):
    with ExitStack() as stack:
        cluster = Cluster(tmp_path, redis_server, stack, [{"text": ANSWER, "chunks": 240, "chunk_delay": 0.015}])
        seen = Seen()
        async with open_client(_settings(tmp_path, cluster.nginx.url), on_event=seen) as client:
            sid = client.connected.session_id
            async with trio.open_nursery() as nursery:
                outcome: list = []

                async def turn() -> None:
                    outcome.append(await client.run_turn("tell me a long story"))

                nursery.start_soon(turn)
                while seen.deltas < 40:
                    await trio.sleep(0.01)
                cluster.kill(await cluster.holder_pid(sid))
        result = outcome[0]
    # Everything the client showed is the script's beginning, each delta once;
    # the request ended interrupted (it is not run again).
    shown = "".join(seen.text)
    assert ANSWER.startswith(shown) and len(shown) >= len("".join(ANSWER.splitlines(True)[:40]))
    assert result.error is not None and result.error.code == "interrupted", result
    assert len(cluster.fake.requests) == 1


@pytest.mark.timeout(120)
async def test_the_relay_dies_mid_answer_and_the_request_completes_with_the_exact_script(tmp_path, redis_server):
    with ExitStack() as stack:
        cluster = Cluster(tmp_path, redis_server, stack, [{"text": ANSWER, "chunks": 240, "chunk_delay": 0.015}])
        seen = Seen()
        async with trio.open_nursery() as outer:
            # A cut between the client and nginx moves the client to the
            # other replica (nginx: round robin), which relays.
            proxy = FaultProxy("127.0.0.1", cluster.nginx.port)
            proxy_port = await outer.start(proxy.serve)
            async with open_client(_settings(tmp_path, f"ws://127.0.0.1:{proxy_port}"), on_event=seen) as client:
                sid = client.connected.session_id
                async with trio.open_nursery() as nursery:
                    outcome: list = []

                    async def turn() -> None:
                        outcome.append(await client.run_turn("tell me a long story"))

                    nursery.start_soon(turn)
                    while seen.deltas < 30:
                        await trio.sleep(0.01)
                    runner = await cluster.holder_pid(sid)
                    proxy.cut()
                    relay_pid = next(p.pid for p in cluster.procs if p.pid != runner)
                    while seen.deltas < 80:  # now through the relay
                        await trio.sleep(0.01)
                    assert await cluster.holder_pid(sid) == runner
                    relay_index = cluster.kill(relay_pid)
            outer.cancel_scope.cancel()
        result = outcome[0]
    assert result.error is None, result.error
    assert "".join(seen.text) == ANSWER
    assert proxy.connections >= 2
    # It was the relay that died: it had served the client the middle part.
    assert f"session {sid}: relayed to replica" in (tmp_path / f"replica{relay_index}.log").read_text()


async def _watch_raw(address: str, session_id: str, until_seq: trio.Event, got: list[dict]) -> None:
    """A second client at the wire: hello naming the session (by id, as
    its owner), then every event as it arrives, decoded, in order."""
    stream = await open_connection(address, ConnectOptions(token=ALICE))
    async with stream:
        await stream.send(encode(stamp(Hello(session_id=session_id, client="watcher"))))
        connected = json.loads(await stream.receive())
        assert connected["type"] == "connected" and connected["session_id"] == session_id, connected
        while True:
            event = json.loads(await stream.receive())
            got.append(event)
            if event.get("type") == "finished":
                until_seq.set()
                return


@pytest.mark.timeout(120)
async def test_a_second_client_through_the_other_replica_sees_the_same_events_in_the_same_order(
        tmp_path, redis_server):
    with ExitStack() as stack:
        cluster = Cluster(tmp_path, redis_server, stack, [{"text": ANSWER, "chunks": 240, "chunk_delay": 0.01}])
        first = Seen()
        port_a, port_b = cluster.ports
        wire: list[dict] = []
        async with open_client(_settings(tmp_path, f"ws://127.0.0.1:{port_a}"), on_event=first) as c1:
            sid = c1.connected.session_id
            async with trio.open_nursery() as nursery:
                outcome: list = []

                async def turn() -> None:
                    outcome.append(await c1.run_turn("tell me a long story"))

                nursery.start_soon(turn)
                while first.deltas < 20:
                    await trio.sleep(0.005)
                done = trio.Event()
                nursery.start_soon(_watch_raw, f"ws://127.0.0.1:{port_b}", sid, done, wire)
                await done.wait()
        assert outcome[0].error is None
    assert "".join(first.text) == ANSWER
    # Joined mid-answer through the other replica: from there on, exactly
    # the first client's events, in the same order, each once.
    seqs = [e["seq"] for e in wire if e.get("seq") is not None]
    assert len(seqs) > 10 and seqs == [s for s in first.seqs if s >= seqs[0]]
    assert ANSWER.endswith("".join(e["content"] for e in wire if e["type"] == "text_delta"))


@pytest.mark.timeout(120)
async def test_a_prompt_and_a_cancel_sent_through_the_relay_run_on_the_runner(tmp_path, redis_server):
    script = [{"text": "first answer"}, {"text": "relayed answer"}, {"text": ANSWER, "chunks": 240, "chunk_delay": 0.02}]
    with ExitStack() as stack:
        cluster = Cluster(tmp_path, redis_server, stack, script)
        port_a, port_b = cluster.ports
        # The first client stays attached on A: A keeps the session (a
        # session with a client attached is not handed over).
        async with open_client(_settings(tmp_path, f"ws://127.0.0.1:{port_a}")) as c1:
            assert (await c1.run_turn("first")).error is None
            sid = c1.connected.session_id
            runner = await cluster.holder_pid(sid)
            seen = Seen()
            async with open_client(_settings(tmp_path, f"ws://127.0.0.1:{port_b}", resume=sid), on_event=seen) as c2:
                outcome = await c2.run_turn("second, through B")
                assert outcome.error is None and "".join(seen.text) == "relayed answer"
                async with trio.open_nursery() as nursery:
                    cancelled: list = []

                    async def turn() -> None:
                        cancelled.append(await c2.run_turn("a long one"))

                    nursery.start_soon(turn)
                    while seen.deltas < 5:
                        await trio.sleep(0.01)
                    await c2.cancel()
                assert cancelled[0].cancelled, cancelled[0]
            assert await cluster.holder_pid(sid) == runner  # it never moved
    log_b = (tmp_path / f"replica{cluster.ports.index(port_b)}.log").read_text()
    assert f"session {sid}: relayed to replica" in log_b
    assert len(cluster.fake.requests) == 3  # each prompt ran once


@pytest.mark.timeout(90)
async def test_another_users_token_sees_nothing_on_either_replica(tmp_path, redis_server):
    with ExitStack() as stack:
        cluster = Cluster(tmp_path, redis_server, stack, [{"text": "alice's answer"}])
        async with open_client(_settings(tmp_path, cluster.nginx.url)) as c1:
            outcome = await c1.run_turn("a private question")
            assert outcome.error is None
            sid = c1.connected.session_id
            for port in cluster.ports:
                for target in (sid, "latest"):
                    settings = _settings(tmp_path, f"ws://127.0.0.1:{port}", resume=target)
                    settings.endpoint.connect.token = BOB
                    with pytest.raises(HandshakeFailed) as err:
                        async with open_client(settings):
                            pass
                    assert err.value.code == "unknown_session"


@pytest.mark.timeout(90)
async def test_nginx_terminates_tls_with_the_deployment_config(tmp_path, redis_server):
    import trustme

    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_path, key_path, ca_path = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.private_key_pem.write_to_path(key_path)
    cert.cert_chain_pems[0].write_to_path(cert_path)
    ca.cert_pem.write_to_path(ca_path)
    with ExitStack() as stack:
        cluster = Cluster(tmp_path, redis_server, stack, [{"text": "over TLS"}])
        tls = stack.enter_context(ngx.Nginx(tmp_path / "nginx-tls", cluster.ports, cert=cert_path, key=key_path))
        assert tls.url.startswith("wss://")
        settings = _settings(tmp_path, tls.url)
        settings.endpoint.connect.ca_file = str(ca_path)
        seen = Seen()
        async with open_client(settings, on_event=seen) as client:
            outcome = await client.run_turn("hello")
    assert outcome.error is None and "".join(seen.text) == "over TLS"
