"""Issue 28 item 5: keys brought by the client, and a server pinned to one
way of reaching Gemini.

``serve --allow-client-credentials`` runs each client's sessions on the key
that client sent (``gemini-split --server … --send-api-key``): the fake
Gemini server accepts only that key, and the key's bytes appear nowhere the
server writes (its store, its log, ``/metrics``). Real ``gemini-split``
processes throughout.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import httpx
import pytest
import trio

from gemini_split.client.protocol_client import ProtocolClient
from gemini_split.transport.memory_pair import open_memory_pair
from gemini_split.protocol import Caller
from gemini_split.server.model.callers import CallerRefused, network_caller_model
from gemini_split.testing import redis_server
from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.transport import ConnectFailed

from .test_vertex_cli import environ, run, serve

pytestmark = pytest.mark.timeout(90)

CLIENT_KEY = "AIzaSy-the-clients-own-key-0123456789"
SERVER_KEY = "AIzaSy-the-servers-key-9876543210"


def _everything_the_server_wrote(tmp_path, lines: list[str], metrics: str) -> bytes:
    """The store's files (SQLite's, or Redis's append-only file), the log
    and ``/metrics``."""
    written = b"".join(p.read_bytes() for p in (tmp_path / "state").rglob("*") if p.is_file())
    return written + "".join(lines).encode() + metrics.encode()


@pytest.fixture(params=["sqlite", "redis"])
def store(request, tmp_path):
    if request.param == "sqlite":
        yield ["--state-dir", str(tmp_path / "state")]
        return
    if not redis_server.available():
        pytest.skip("redis-server is not installed")
    with redis_server.RedisServer(tmp_path / "state") as redis:
        yield ["--store", redis.url]


def test_a_client_brings_its_own_key_and_it_is_used_for_its_session_only_and_never_written(tmp_path, store):
    with FakeGemini(api_key=CLIENT_KEY) as fake:
        server_env = environ(tmp_path, GOOGLE_GEMINI_BASE_URL=fake.url)  # no key of its own
        with serve(tmp_path, server_env, "--allow-client-credentials", *store, "--debug",
                   "--grpc", "127.0.0.1:0") as (_, address, lines):
            client_env = environ(tmp_path, GEMINI_API_KEY=CLIENT_KEY)
            sent = run(["--server", address, "--send-api-key", "-p", "hello with my key"], client_env, tmp_path)
            keyless = run(["--server", address, "-p", "and without it"], environ(tmp_path), tmp_path)
            resumed = run(["--server", address, "--send-api-key", "-r", "latest", "-p", "again"], client_env,
                          tmp_path)
            http = address.replace("ws://", "http://")
            metrics = httpx.get(f"{http}/metrics", timeout=10).text
    assert sent.returncode == 0, sent.stderr
    assert sent.stdout == "Echo: hello with my key\n"
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "Echo: again\n"
    assert len(fake.requests) == 2  # both made with the client's key (the fake refuses any other)
    # A client that sent none is told what to do; nothing went to Gemini.
    assert keyless.returncode == 41
    assert "--send-api-key" in keyless.stderr
    assert "its clients bring their own Gemini API key" in keyless.stderr
    assert CLIENT_KEY.encode() not in _everything_the_server_wrote(tmp_path, lines, metrics)
    assert b"Echo: again" in _everything_the_server_wrote(tmp_path, [], "")  # the store was searched
    # Said once, not once per listener.
    assert "".join(lines).count("the model is reached through none (each client sends its own key)") == 1


def test_a_server_without_the_flag_refuses_a_sent_key_clearly_and_logs_nothing_of_it(tmp_path):
    with FakeGemini(api_key=SERVER_KEY) as fake:
        server_env = environ(tmp_path, GEMINI_API_KEY=SERVER_KEY, GOOGLE_GEMINI_BASE_URL=fake.url)
        with serve(tmp_path, server_env, "--state-dir", str(tmp_path / "state"), "--debug") as (_, address, lines):
            refused = run(["--server", address, "--send-api-key", "-p", "hi"],
                          environ(tmp_path, GEMINI_API_KEY=CLIENT_KEY), tmp_path)
    assert refused.returncode == 41, refused.stderr
    assert "--allow-client-credentials" in refused.stderr
    assert not fake.requests
    assert CLIENT_KEY not in "".join(lines)


def test_send_api_key_needs_a_server_and_a_key(tmp_path):
    alone = run(["--send-api-key", "-p", "hi"], environ(tmp_path, GEMINI_API_KEY=CLIENT_KEY), tmp_path)
    assert alone.returncode == 2 and "--send-api-key goes with --server" in alone.stderr
    nokey = run(["--server", "ws://127.0.0.1:9", "--send-api-key", "-p", "hi"], environ(tmp_path), tmp_path)
    assert nokey.returncode == 41 and "--send-api-key: set GEMINI_API_KEY" in nokey.stderr


def test_the_client_never_sends_its_key_over_a_stream_that_is_not_private():
    async def main() -> None:
        client_end, _server_end = open_memory_pair(buffer=4, client_peer="ws://203.0.113.5:8080",
                                                   server_peer="client", client_max=1 << 20, server_max=1 << 20)
        client_end.private = False  # as a ws:// connection to another machine is
        client = ProtocolClient(client_end, executor=SimpleNamespace(asker=None, hooks=None, user=None))  # type: ignore[arg-type]
        client.caller, client.send_api_key = Caller(api_key=CLIENT_KEY), True
        with pytest.raises(ConnectFailed, match="not sending your API key to ws://203.0.113.5:8080"):
            await client.handshake()

    trio.run(main)


def test_a_server_takes_only_a_key_and_only_over_a_private_connection():
    with pytest.raises(CallerRefused, match="only over TLS"):
        network_caller_model(Caller(api_key=CLIENT_KEY), private=False, base_url=None)
    for other in (Caller(api_key=CLIENT_KEY, base_url="http://attacker.example"),
                  Caller(api_key=CLIENT_KEY, google_cloud={"GOOGLE_CLOUD_PROJECT": "p"}),
                  Caller(api_key=CLIENT_KEY, model="gemini-2.5-pro")):
        with pytest.raises(CallerRefused, match="only an API key"):
            network_caller_model(other, private=True, base_url=None)


def test_auth_method_pins_how_the_server_reaches_gemini(tmp_path):
    with FakeGemini(api_key=SERVER_KEY) as fake:
        # The environment says Vertex AI, the operator says the key.
        env = environ(tmp_path, GEMINI_API_KEY=SERVER_KEY, GOOGLE_GEMINI_BASE_URL=fake.url,
                      GOOGLE_GENAI_USE_VERTEXAI="true")
        with serve(tmp_path, env, "--auth-method", "api-key", "--debug") as (_, address, lines):
            done = run(["--server", address, "-p", "hi"], environ(tmp_path), tmp_path)
    assert done.returncode == 0, done.stderr + "".join(lines)
    assert any(re.search(r"Gemini API key from \$GEMINI_API_KEY", line) for line in lines)
    no_key = run(["serve", "--auth-method", "api-key", "--listen", "127.0.0.1:0"], environ(tmp_path), tmp_path)
    assert no_key.returncode == 41 and "GEMINI_API_KEY" in no_key.stderr
    mixed = run(["serve", "--auth-method", "vertex-ai", "--allow-client-credentials"], environ(tmp_path), tmp_path)
    assert mixed.returncode == 2 and "does not go with --auth-method vertex-ai" in mixed.stderr
