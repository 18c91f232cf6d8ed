"""The model's HTTP/1.1 client (server/model/http1.py) against servers that
misbehave as real ones do: closing kept-alive connections, going silent,
refusing, and over real TLS (a throwaway CA from trustme)."""

from __future__ import annotations

import socket
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import h11
import httpx2 as httpx
import pytest
import trio

from gemini_split.dns_cache import CachingResolver
from gemini_split.server.model.base import ModelError, ModelRequest, TextChunk
from gemini_split.server.model.gemini import GeminiModel
from gemini_split.server.model.http1 import Http1Client
from gemini_split.testing.fake_gemini import FakeGemini

TIMEOUT = httpx.Timeout(5.0)
HEADERS = [(b"Content-Type", b"application/json")]


class Server:
    """A loopback HTTP/1.1 server (h11 on its side too) that answers each
    request with ``b"answer N"`` (N counting requests), keeping the
    connection open, unless told otherwise:

    - ``close_after_answer``: close each connection once it has answered;
    - ``drop_request``: on this request number, close without answering;
    - ``silent``: never answer;
    - ``huge_header``: answer with a 1 MB header;
    - ``error_body``: answer 500 with a body of this many bytes.
    """

    def __init__(self, *, close_after_answer: bool = False, drop_request: int | None = None, silent: bool = False,
                 huge_header: bool = False, error_body: int = 0):
        self.close_after_answer = close_after_answer
        self.drop_request = drop_request
        self.silent = silent
        self.huge_header = huge_header
        self.error_body = error_body
        self.accepted = 0
        self.requests = 0
        self.closed_by_client = 0
        self.url = ""

    async def start(self, nursery: trio.Nursery) -> Server:
        listeners = await nursery.start(trio.serve_tcp, self._serve, 0)
        self.url = f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}/v1/x"
        return self

    async def _serve(self, stream: trio.SocketStream) -> None:
        self.accepted += 1
        conn = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    if not data:
                        self.closed_by_client += 1
                        return
                    conn.receive_data(data)
                    continue
                if type(event) is not h11.EndOfMessage:
                    continue
                self.requests += 1
                if self.silent:
                    await trio.sleep_forever()
                if self.requests == self.drop_request:
                    return
                body = b"x" * self.error_body if self.error_body else b"answer %d" % self.requests
                extra = [("X-Huge", "a" * 1_000_000)] if self.huge_header else []
                status = 500 if self.error_body else 200
                await stream.send_all(
                    conn.send(h11.Response(status_code=status, headers=[("Content-Length", str(len(body))), *extra]))
                    + conn.send(h11.Data(data=body)) + conn.send(h11.EndOfMessage()))
                if self.close_after_answer:
                    return
                conn.start_next_cycle()


@asynccontextmanager
async def serving(**options: Any) -> AsyncIterator[tuple[Server, Http1Client]]:
    """A :class:`Server` (with ``options``) and a client, both closed on the way out."""
    async with trio.open_nursery() as nursery:
        server = await Server(**options).start(nursery)
        client = Http1Client(ssl.create_default_context())
        try:
            yield server, client
        finally:
            await client.aclose()
            nursery.cancel_scope.cancel()


async def answer(client: Http1Client, url: str) -> bytes:
    response = await client.post(httpx.URL(url), HEADERS, b"{}", TIMEOUT)
    try:
        assert response.status_code == 200
        return b"".join([block async for block in response.blocks()])
    finally:
        await response.aclose()


@pytest.mark.timeout(20)
async def test_requests_one_after_another_reuse_one_kept_alive_connection():
    async with serving() as (server, client):
        assert [await answer(client, server.url) for _ in range(3)] == [b"answer 1", b"answer 2", b"answer 3"]
        assert server.accepted == 1 and client.idle_connections == 1


@pytest.mark.timeout(20)
async def test_a_request_after_the_server_closed_the_kept_alive_connection_is_answered_on_a_new_one():
    async with serving(close_after_answer=True) as (server, client):
        assert await answer(client, server.url) == b"answer 1"
        await trio.sleep(0.1)  # the server's close has arrived
        assert await answer(client, server.url) == b"answer 2"
        assert server.accepted == 2


@pytest.mark.timeout(20)
async def test_a_request_the_server_dropped_unanswered_on_a_kept_alive_connection_is_sent_once_more():
    """The race a quiet check cannot see: the server closes a kept-alive
    connection as the next request reaches it. Nothing came back, so the
    request goes once more on a new connection."""
    async with serving(drop_request=2) as (server, client):
        assert await answer(client, server.url) == b"answer 1"
        assert await answer(client, server.url) == b"answer 3"
        assert (server.accepted, server.requests) == (2, 3)


@pytest.mark.timeout(20)
async def test_a_new_connection_dropped_unanswered_is_an_error_not_a_retry():
    async with serving(drop_request=1) as (server, client):
        with pytest.raises(httpx.ReadError, match="closed the connection before answering"):
            await answer(client, server.url)
        assert (server.accepted, server.requests) == (1, 1)
        assert client.connections == 0


@pytest.mark.timeout(20)
async def test_a_response_closed_before_its_end_closes_its_connection():
    async with serving() as (server, client):
        response = await client.post(httpx.URL(server.url), HEADERS, b"{}", TIMEOUT)
        await response.aclose()  # the body was never read: the connection cannot carry another request
        assert client.connections == 0
        assert await answer(client, server.url) == b"answer 2"
        assert server.accepted == 2


@pytest.mark.timeout(20)
async def test_close_idle_closes_the_kept_alive_connections_and_the_next_request_opens_one():
    async with serving() as (server, client):
        await answer(client, server.url)
        await client.close_idle()
        assert client.connections == 0
        with trio.fail_after(5):
            while server.closed_by_client != 1:
                await trio.sleep(0.01)
        assert await answer(client, server.url) == b"answer 2"
        assert server.accepted == 2


@pytest.mark.timeout(20)
async def test_a_silent_server_is_a_read_timeout_and_a_closed_port_a_connect_error():
    async with serving(silent=True) as (server, client):
        with pytest.raises(httpx.ReadTimeout):
            await client.post(httpx.URL(server.url), HEADERS, b"{}", httpx.Timeout(5.0, read=0.3))
        assert client.connections == 0
    client = Http1Client(ssl.create_default_context())  # the server has gone: nothing listens on its port
    with pytest.raises(httpx.ConnectError, match="Connection refused"):
        await client.post(httpx.URL(server.url), HEADERS, b"{}", TIMEOUT)
    await client.aclose()
    with pytest.raises(httpx.ConnectError, match="closed"):
        await client.post(httpx.URL(server.url), HEADERS, b"{}", TIMEOUT)


@pytest.mark.timeout(20)
async def test_a_response_head_past_h11s_bound_is_a_protocol_error_and_closes_its_connection():
    async with serving(huge_header=True) as (server, client):
        with pytest.raises(httpx.RemoteProtocolError):
            await client.post(httpx.URL(server.url), HEADERS, b"{}", TIMEOUT)
        assert client.connections == 0


@pytest.mark.timeout(20)
async def test_an_error_is_read_up_to_a_mebibyte_of_its_body_and_its_connection_closed():
    from gemini_split.server.model.http1 import MAX_ERROR_BODY

    async with serving(error_body=8 * MAX_ERROR_BODY) as (server, client):
        response = await client.post(httpx.URL(server.url), HEADERS, b"{}", TIMEOUT)
        try:
            error = await response.as_httpx()
        finally:
            await response.aclose()
        assert (error.status_code, len(error.content)) == (500, MAX_ERROR_BODY)
        assert client.connections == 0  # the rest was never read: the connection cannot be reused


@pytest.mark.timeout(30)
async def test_a_model_answers_over_https_from_a_server_its_ca_trusts_and_not_otherwise(monkeypatch, tmp_path):
    import trustme

    ca = trustme.CA()
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(server_context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    request = ModelRequest(model="gemini-2.5-flash", contents=[{"role": "user", "parts": [{"text": "hi"}]}])
    with FakeGemini([{"text": "over TLS"}] * 2, api_key="k", ssl_context=server_context) as fake:
        assert fake.url.startswith("https://")
        monkeypatch.setenv("SSL_CERT_FILE", str(ca_file))
        model = GeminiModel("k", base_url=fake.url)
        try:
            texts = [c.text for c in [c async for c in model.stream(request)] if isinstance(c, TextChunk)]
        finally:
            await model.aclose()
        assert texts == ["over TLS"]
        monkeypatch.delenv("SSL_CERT_FILE")
        stranger = GeminiModel("k", base_url=fake.url)
        try:
            with pytest.raises(ModelError, match="certificate verify failed"):
                [c async for c in stranger.stream(request)]
        finally:
            await stranger.aclose()


@pytest.mark.timeout(30)
async def test_a_proxy_named_by_the_environment_carries_the_models_requests(monkeypatch):
    """``HTTP_PROXY``: the request goes to the proxy (here the fake itself,
    which reads the absolute URL a proxy is sent), not to the API's host,
    which does not exist."""
    request = ModelRequest(model="gemini-2.5-flash", contents=[{"role": "user", "parts": [{"text": "hi"}]}])
    with FakeGemini([{"text": "through the proxy"}], api_key="k") as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        model = GeminiModel("k", base_url="http://gemini.invalid:9")
        try:
            texts = [c.text for c in [c async for c in model.stream(request)] if isinstance(c, TextChunk)]
        finally:
            await model.aclose()
        assert texts == ["through the proxy"]
        assert len(proxy.requests) == 1


@pytest.mark.timeout(20)
async def test_connections_by_name_share_one_lookup_through_serves_resolver():
    """Five requests at once to ``localhost`` (five new connections) make one
    lookup when serve's resolver is installed (gemini_split/dns_cache.py);
    the same name looked up by anyone else in the run is not answered from it."""
    calls = []

    def lookup(host, *args):
        calls.append(host)
        return socket.getaddrinfo(host, *args)

    previous = trio.socket.set_custom_hostname_resolver(CachingResolver(lookup=lookup))
    try:
        async with serving() as (server, client):
            url = server.url.replace("127.0.0.1", "localhost")
            answers = []

            async def one() -> None:
                answers.append(await answer(client, url))

            async with trio.open_nursery() as nursery:
                for _ in range(5):
                    nursery.start_soon(one)
            assert sorted(answers) == [b"answer %d" % i for i in range(1, 6)]
            assert server.accepted == 5 and calls == [b"localhost"]
            await trio.socket.getaddrinfo("localhost", 80)  # not the model's: a lookup of its own
            assert calls == [b"localhost", b"localhost"]
    finally:
        trio.socket.set_custom_hostname_resolver(previous)
