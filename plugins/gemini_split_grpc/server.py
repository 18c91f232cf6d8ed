"""The gRPC listener: grpcio's server on its own threads, each ``Chat``
stream run by :func:`.face.run_chat` in the Trio loop.

Each stream's session is opened by the native client the server's command
passes in ``options.extra["open_client"]`` (see :data:`.face.OpenClient`),
connected to ``handler`` through a private in-process ``loopback:``
listener this listener serves; a one-use token issued per stream makes that
connection the gRPC caller's principal.

Threads and Trio
----------------

grpcio calls the ``Chat`` handler on one of its pool's threads. That thread
starts the stream's Trio task (``trio.from_thread.run_sync`` with the run's
token), then only takes responses: each crossing into Trio returns every
response waiting in the stream's memory channel (at most
:data:`BATCH`), which the thread yields to grpcio. The Trio task pulls
requests itself, with ``trio.to_thread.run_sync(next, …)`` under the
listener's own ``CapacityLimiter`` (never Trio's default one, which other
code shares). When the RPC ends for any reason — the client cancels, its
deadline passes, the connection breaks, the server stops — grpcio's
termination callback cancels the stream's task with
``TrioToken.run_sync_soon``, which cancels the running turn.

Rules applied to every stream
-----------------------------

* With ``options.authenticate``, an interceptor takes the token from the
  ``authorization: Bearer TOKEN`` metadata and refuses a missing or wrong one
  with ``UNAUTHENTICATED`` before any session exists (tokens compared in
  constant time by the authenticator; never logged).
* ``grpcs://`` serves TLS with ``tls_cert`` / ``tls_key``.
* Messages: grpcio refuses one over ``max_message_size`` plus
  :data:`SIZE_SLACK` itself (``RESOURCE_EXHAUSTED``); the face answers one
  over ``max_message_size`` with ``ErrorResponse`` and the same status.
* At most ``extra["max_streams"]`` (64) streams at once
  (``RESOURCE_EXHAUSTED`` beyond), and ``max_connections_per_user`` per
  principal.
* Keepalive: the server pings every ``keepalive_interval`` seconds and drops
  a connection whose pong takes over ``keepalive_timeout``.
"""

from __future__ import annotations

import logging
import secrets
import threading
import time
from concurrent import futures
from dataclasses import dataclass
from typing import Any

import grpc
import trio

from gemini_split.errors import ConfigurationError
from gemini_split.transport import ConnectionHandler, Principal, ServeOptions, TransportError, get_transport
from gemini_split.transport.throttle import FailedAuthThrottle, Network, client_source, parse_networks

from . import gemini_pb2 as pb
from .address import GrpcAddress
from .face import CONFIG_KEYS, End, FacePolicy, Native, error_response, parse_request, run_chat

log = logging.getLogger(__name__)

SERVICE = "gemini.v1.GeminiService"
CHAT = f"/{SERVICE}/Chat"
#: Streams served at once unless ``extra["max_streams"]`` says otherwise.
DEFAULT_MAX_STREAMS = 64
#: Responses taken into a gRPC thread per crossing.
BATCH = 256
#: Responses a stream holds for its gRPC thread before the session waits.
RESPONSE_BUFFER = 16
#: Bytes grpcio accepts beyond ``max_message_size``, so that a message a
#: little over the limit gets an ErrorResponse rather than a bare status.
SIZE_SLACK = 64 * 1024
#: Seconds running streams get to end when the listener stops.
STOP_GRACE = 1.0


@dataclass
class _Stream:
    responses: trio.MemoryReceiveChannel[Any]
    scope: trio.CancelScope


class _ChatService:
    """The Trio side of the listener: starts one task per stream."""

    def __init__(self, policy: FacePolicy, options: ServeOptions, max_streams: int):
        #: How streams reach the server; set once the private listener serves.
        self.native: Native | None = None
        self.policy = policy
        self.per_user = options.max_connections_per_user
        self.token = trio.lowlevel.current_trio_token()
        self.limiter = trio.CapacityLimiter(max_streams)
        #: Where streams start; None once the listener stops taking them.
        self.nursery: trio.Nursery | None = None
        self.open_by_user: dict[str, int] = {}

    # --- in a gRPC thread ------------------------------------------------------------

    def chat(self, request_iterator: Any, context: grpc.ServicerContext, principal: Principal | None) -> Any:
        """grpcio's ``Chat`` behaviour: a generator of responses."""
        try:
            stream = trio.from_thread.run_sync(self._start, request_iterator, context.peer(), principal,
                                               trio_token=self.token)
        except trio.RunFinishedError:
            stream = None
        if stream is None:
            context.abort(grpc.StatusCode.UNAVAILABLE, "shutting_down: the server is shutting down")
        if isinstance(stream, End):
            yield error_response(stream.code, "too_many_streams", stream.details)
            context.abort(stream.code, f"too_many_streams: {stream.details}")

        def cancel() -> None:
            try:
                self.token.run_sync_soon(stream.scope.cancel)
            except trio.RunFinishedError:
                pass

        context.add_callback(cancel)
        while True:
            try:
                batch = trio.from_thread.run(_take, stream.responses, trio_token=self.token)
            except (trio.EndOfChannel, trio.ClosedResourceError, trio.RunFinishedError, trio.Cancelled):
                context.abort(grpc.StatusCode.UNAVAILABLE, "shutting_down: the server is shutting down")
            for item in batch:
                if isinstance(item, End):
                    if item.code != grpc.StatusCode.OK:
                        context.set_code(item.code)
                        context.set_details(item.details)
                    return
                yield item

    # --- in Trio ------------------------------------------------------------------------

    def _start(self, request_iterator: Any, peer: str, principal: Principal | None) -> _Stream | End | None:
        if self.nursery is None or self.native is None:
            return None
        user = principal.user_id if principal is not None else None
        if user is not None and self.per_user and self.open_by_user.get(user, 0) >= self.per_user:
            return End(grpc.StatusCode.RESOURCE_EXHAUSTED,
                       f"{user} already has {self.per_user} streams open (serve --max-connections-per-user)")
        send, receive = trio.open_memory_channel[Any](RESPONSE_BUFFER)
        scope = trio.CancelScope()
        self.nursery.start_soon(self._run, request_iterator, peer, principal, send, scope)
        if user is not None:
            self.open_by_user[user] = self.open_by_user.get(user, 0) + 1
        return _Stream(receive, scope)

    async def _run(self, request_iterator: Any, peer: str, principal: Principal | None,
                   send: trio.MemorySendChannel[Any], scope: trio.CancelScope) -> None:
        async def receive_request() -> pb.ClientRequest | None:
            return await trio.to_thread.run_sync(_next, request_iterator, limiter=self.limiter,
                                                 abandon_on_cancel=True)

        try:
            with scope:
                assert self.native is not None
                end = await run_chat(principal=principal, peer=peer, native=self.native, policy=self.policy,
                                     receive_request=receive_request, send_response=send.send)
                await send.send(end)
        except Exception:
            log.exception("gRPC stream from %s failed", peer)
            with trio.move_on_after(STOP_GRACE):
                await send.send(End(grpc.StatusCode.INTERNAL, "internal_error: the server failed; see its log"))
        finally:
            send.close()
            if principal is not None and principal.user_id in self.open_by_user:
                self.open_by_user[principal.user_id] -= 1
                if not self.open_by_user[principal.user_id]:
                    del self.open_by_user[principal.user_id]


async def _serve_native(nursery: trio.Nursery, handler: ConnectionHandler, open_client: Any,
                        options: ServeOptions) -> Native:
    """Serve ``handler`` on a private ``loopback:`` listener in ``nursery``
    for the streams' native clients. With ``options.authenticate``, each
    stream gets a one-use token there that stands for its principal (the
    gRPC interceptor has checked the caller's own token already)."""
    waiting: dict[str, Principal] = {}

    def token_for(principal: Principal | None) -> str | None:
        if principal is None:
            return None
        token = secrets.token_urlsafe(32)
        waiting[token] = principal
        return token

    def authenticate(token: str | None) -> Principal | None:
        return waiting.pop(token, None) if token else None

    private = ServeOptions(authenticate=authenticate if options.authenticate is not None else None,
                           max_message_size=options.max_message_size)
    loopback = get_transport("loopback:")
    bound = await nursery.start(loopback.serve, "loopback:", handler, private)
    return Native(open_client=open_client, address=bound, token_for=token_for)


async def _take(responses: trio.MemoryReceiveChannel[Any]) -> list[Any]:
    """The next response and whatever else is waiting (at most BATCH)."""
    batch = [await responses.receive()]
    while len(batch) < BATCH:
        try:
            batch.append(responses.receive_nowait())
        except (trio.WouldBlock, trio.EndOfChannel):
            break
    return batch


def _next(request_iterator: Any) -> pb.ClientRequest | None:
    """The next request, or None once the client has half-closed (or the
    RPC is over)."""
    try:
        return next(request_iterator)
    except StopIteration:
        return None
    except grpc.RpcError:
        return None


class _Authenticate(grpc.ServerInterceptor):
    """Binds each ``Chat`` call to the principal its bearer token proves;
    refuses the call (``UNAUTHENTICATED``) when there is none. Token
    guessing is slowed per client address as on the WebSocket listener
    (:class:`~gemini_split.transport.throttle.FailedAuthThrottle`, the address a
    trusted proxy reports in ``x-forwarded-for`` / ``x-real-ip``): the token
    is always checked, a correct one always accepted, and a wrong one from
    an address out of tries gets ``RESOURCE_EXHAUSTED`` with a
    ``retry-after`` trailer instead of ``UNAUTHENTICATED``."""

    def __init__(self, service: _ChatService, authenticate: Any, throttle: FailedAuthThrottle | None = None,
                 trusted_proxies: tuple[Network, ...] = ()):
        self.service = service
        self.authenticate = authenticate
        self.throttle = throttle or FailedAuthThrottle()
        self.trusted_proxies = trusted_proxies
        self._lock = threading.Lock()  # interceptors run on grpcio's threads

    def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        if details.method != CHAT:
            return continuation(details)  # grpcio answers UNIMPLEMENTED
        if self.authenticate is None:
            return self._handler(None)
        metadata = details.invocation_metadata
        token = _bearer(metadata)

        def admit(requests: Any, context: grpc.ServicerContext) -> Any:
            principal = self.authenticate(token)
            if principal is None:
                host = _peer_host(context.peer())
                wait = 0
                if token:
                    source = client_source(host, forwarded_for=_metadata(metadata, "x-forwarded-for"),
                                           real_ip=_metadata(metadata, "x-real-ip"), trusted=self.trusted_proxies)
                    with self._lock:
                        wait = self.throttle.retry_after(source, time.monotonic())
                        if not wait:
                            self.throttle.failed(source, time.monotonic())
                if wait:
                    log.info("gRPC: refused a stream from %s: too many failed tokens", host,
                             extra={"refusal": "gRPC throttled"})
                    context.set_trailing_metadata((("retry-after", str(wait)),))
                    context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED,
                                  f"too many failed tokens from this address; retry in {wait}s")
                log.info("gRPC: refused a stream from %s with a missing or invalid token", host,
                         extra={"refusal": "gRPC unauthenticated"})
                context.abort(grpc.StatusCode.UNAUTHENTICATED, "unauthorized: missing or invalid token")
            yield from self.service.chat(requests, context, principal)

        return grpc.stream_stream_rpc_method_handler(
            admit, request_deserializer=parse_request,
            response_serializer=pb.ServerResponse.SerializeToString)

    def _handler(self, principal: Principal | None) -> Any:
        return grpc.stream_stream_rpc_method_handler(
            lambda requests, context: self.service.chat(requests, context, principal),
            request_deserializer=parse_request,
            response_serializer=pb.ServerResponse.SerializeToString,
        )


def _peer_host(peer: str) -> str:
    """``ipv4:127.0.0.1:5000`` / ``ipv6:[::1]:5000`` → the address alone
    (anything else, e.g. a Unix socket, as it is)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return peer


def _metadata(metadata: Any, name: str) -> str | None:
    """Every value of ``name`` in the call's metadata, joined by commas."""
    values = [value for key, value in metadata or () if key == name and isinstance(value, str)]
    return ", ".join(values) if values else None


def _bearer(metadata: Any) -> str | None:
    for key, value in metadata or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, token = value.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return token.strip()
    return None


def _credentials(options: ServeOptions) -> grpc.ServerCredentials:
    if not options.tls_cert or not options.tls_key:
        raise ConfigurationError("grpcs:// needs a certificate and its key (--tls-cert and --tls-key)")
    try:
        with open(options.tls_cert, "rb") as f:
            cert = f.read()
        with open(options.tls_key, "rb") as f:
            key = f.read()
    except OSError as exc:
        raise ConfigurationError(f"cannot read the TLS certificate or key: {exc}") from None
    return grpc.ssl_server_credentials([(key, cert)])


async def serve(address: str, handler: ConnectionHandler, options: ServeOptions, *,
                task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve ``gemini.v1.GeminiService/Chat`` on ``address`` until
    cancelled (see the module docstring)."""
    where = GrpcAddress.parse(address)
    extra = options.extra
    open_client = extra.get("open_client")
    if open_client is None:
        raise ConfigurationError("the gRPC listener needs the native client that opens its streams' sessions "
                                 "(ServeOptions.extra['open_client']; gemini-split serve passes it)")
    max_streams = int(extra.get("max_streams", DEFAULT_MAX_STREAMS))
    policy = FacePolicy(
        max_message_size=options.max_message_size,
        check_model=extra.get("check_model"),
        server_tools=bool(extra.get("server_tools")),
        allowed_config=frozenset(extra.get("allowed_config", ())),
        agents=tuple(extra.get("agents", ())),
    )
    unknown = sorted(policy.allowed_config - CONFIG_KEYS.keys())
    if unknown:
        raise ConfigurationError(f"--grpc-allow-config: {unknown[0]!r} is not an advanced_config key this "
                                 f"server knows (known: {', '.join(sorted(CONFIG_KEYS))})")
    try:
        trusted_proxies = parse_networks(options.trusted_proxies)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    service = _ChatService(policy, options, max_streams)
    credentials = _credentials(options) if where.secure else None
    limit = options.max_message_size + SIZE_SLACK
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_streams, thread_name_prefix="grpc-chat"),
        interceptors=[_Authenticate(service, options.authenticate, FailedAuthThrottle(
            burst=int(extra.get("auth_failure_burst", 10)),
            refill_per_second=float(extra.get("auth_failure_refill_per_second", 1 / 6)),
        ), trusted_proxies)],
        maximum_concurrent_rpcs=max_streams,
        options=[
            ("grpc.max_receive_message_length", limit),
            ("grpc.max_send_message_length", limit),
            ("grpc.keepalive_time_ms", int(options.keepalive_interval * 1000)),
            ("grpc.keepalive_timeout_ms", int(options.keepalive_timeout * 1000)),
            ("grpc.http2.min_ping_interval_without_data_ms", 5000),
            ("grpc.so_reuseport", 0),
        ],
    )
    # No handler is registered for other methods: grpcio answers UNIMPLEMENTED.
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, {}),))
    try:
        port = (server.add_secure_port(where.netloc, credentials) if credentials is not None
                else server.add_insecure_port(where.netloc))
    except RuntimeError as exc:
        raise TransportError(f"cannot listen on {where.netloc}: {exc}") from None
    if not port:
        raise TransportError(f"cannot listen on {where.netloc} (in use, or not an address of this machine)")
    server.start()
    try:
        async with trio.open_nursery() as nursery:
            # The streams' sessions are served here, not in a stream's own
            # cancel scope: when an RPC ends, its session must still read the
            # cancel the face sends it (then the close).
            service.native = await _serve_native(nursery, handler, open_client, options)
            service.nursery = nursery
            try:
                task_status.started(where.with_port(port).url)
                await trio.sleep_forever()
            finally:
                service.nursery = None
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(lambda: server.stop(STOP_GRACE).wait())
