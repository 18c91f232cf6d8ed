"""A real server for the gRPC tests, and a client that records everything.

The server is the real ``AgentService`` with the real google-genai model
against the fake Gemini server, behind the gRPC listener found through the
transport registry (``grpc://`` / ``grpcs://``). The client is grpcio with
the stubs the test generated from the proto (``third_party``), run on a
worker thread: grpcio's client blocks.
"""

from __future__ import annotations

import json
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
import trio

from gemini_split.client.face_client import open_face_client
from gemini_split.server.auth import load_auth_config
from gemini_split.server.config import ServerConfig
from gemini_split.server.model.gemini import GeminiModel
from gemini_split.server.service import AgentService
from gemini_split.transport import ServeOptions, get_transport

ALICE = "alice-token-0123456789"
BOB = "bob-token-0123456789"


def write_auth_config(path) -> str:
    path.write_text(json.dumps({"tokens": {ALICE: {"userId": "alice"}, BOB: {"userId": "bob"}}}))
    return str(path)


@asynccontextmanager
async def grpc_server(fake, *, auth_config=None, tls=None, extra=None, config=None, max_message_size=None,
                      per_user=0, server_tools=None, trusted_proxies=()):
    """Serve ``gemini.v1`` on a free loopback port; yields ``(service, address)``.
    ``tls``: ``(cert_file, key_file)`` for grpcs://."""
    authenticate = load_auth_config(auth_config) if auth_config else None
    service = AgentService(GeminiModel("test-key", base_url=fake.url), config or ServerConfig(),
                           authenticate=authenticate, server_tools=server_tools)
    options = ServeOptions(authenticate=authenticate, extra={"open_client": open_face_client, **(extra or {})},
                           max_connections_per_user=per_user,
                           trusted_proxies=tuple(trusted_proxies))
    if tls:
        options.tls_cert, options.tls_key = tls
    if max_message_size:
        options.max_message_size = max_message_size
    scheme = "grpcs" if tls else "grpc"
    async with trio.open_nursery() as nursery:
        await nursery.start(service.run)
        address = await nursery.start(get_transport(f"{scheme}://x").serve, f"{scheme}://127.0.0.1:0",
                                      service.handle_connection, options)
        yield service, address
        nursery.cancel_scope.cancel()


@dataclass
class Outcome:
    responses: list[Any] = field(default_factory=list)
    code: grpc.StatusCode | None = None
    details: str = ""
    trailers: dict[str, str] = field(default_factory=dict)

    def kinds(self) -> list[str]:
        return [r.WhichOneof("response") for r in self.responses]

    def text(self) -> str:
        return "".join(r.text_response.content for r in self.responses if r.WhichOneof("response") == "text_response")

    def errors(self) -> list[Any]:
        return [r.error for r in self.responses if r.WhichOneof("response") == "error"]


def open_channel(address: str, *, ca: bytes | None = None) -> grpc.Channel:
    target = address.split("://", 1)[1]
    if address.startswith("grpcs://"):
        return grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=ca),
                                   options=[("grpc.ssl_target_name_override", "localhost")])
    return grpc.insecure_channel(target)


def chat_sync(tp, address: str, requests, *, token: str | None = None, ca: bytes | None = None,
              timeout: float = 15, raw: bool = False, metadata: list[tuple[str, str]] = ()) -> Outcome:
    """Run one Chat stream to its end; ``requests`` are ClientRequest
    messages (or bytes with ``raw``); ``metadata`` is sent besides the token."""
    outcome = Outcome()
    metadata = ([("authorization", f"Bearer {token}")] if token else []) + list(metadata) or None
    with open_channel(address, ca=ca) as channel:
        if raw:
            call = channel.stream_stream("/gemini.v1.GeminiService/Chat", request_serializer=lambda b: b,
                                         response_deserializer=tp.pb2.ServerResponse.FromString)
        else:
            call = tp.grpc.GeminiServiceStub(channel).Chat
        try:
            for response in call(iter(requests), timeout=timeout, metadata=metadata):
                outcome.responses.append(response)
            outcome.code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            outcome.code, outcome.details = exc.code(), exc.details() or ""
            outcome.trailers = dict(exc.trailing_metadata() or ())
    return outcome


async def chat(tp, address: str, requests, **kwargs) -> Outcome:
    return await trio.to_thread.run_sync(lambda: chat_sync(tp, address, list(requests), **kwargs))


def start(tp, prompt: str = "", **fields) -> Any:
    return tp.pb2.ClientRequest(start_request=tp.pb2.StartRequest(prompt=prompt, **fields))


def prompt(tp, text: str) -> Any:
    return tp.pb2.ClientRequest(prompt=text)


class ServerThread:
    """``grpc_server`` on its own thread and Trio run, for tests whose main
    thread runs the command line (which needs the main thread for signals).
    ``with ServerThread(fake, **kwargs) as server: server.address``."""

    def __init__(self, fake, **kwargs):
        import threading

        self._kwargs = kwargs
        self._fake = fake
        self._ready = threading.Event()
        self._thread = threading.Thread(target=lambda: trio.run(self._main), daemon=True)
        self.address = ""
        self.service = None
        self._stop = None
        self._token = None
        self._error: BaseException | None = None

    async def _main(self) -> None:
        self._stop = trio.Event()
        self._token = trio.lowlevel.current_trio_token()
        try:
            async with grpc_server(self._fake, **self._kwargs) as (service, address):
                self.service, self.address = service, address
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:
            self._error = exc
            self._ready.set()
            raise

    def __enter__(self) -> ServerThread:
        self._thread.start()
        assert self._ready.wait(15), "the gRPC server did not start"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc) -> None:
        self._token.run_sync_soon(self._stop.set)
        self._thread.join(15)
