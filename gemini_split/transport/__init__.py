"""The transport interface and the plugin registry that finds transports.

A transport carries protocol messages as text, one message per frame (a
WebSocket text frame, a line on stdio, an item on an in-process channel). It
knows nothing of what the text means; the codec does that above it.

Transports are plugins. Each registers under the entry-point group
``gemini_split.transports``; the entry point's *name is the URL scheme* it
serves (``loopback``, ``ws``, ``wss``, ``stdio``…) and its target is a
:class:`Transport` instance (or a zero-argument callable returning one)::

    [project.entry-points."gemini_split.transports"]
    myscheme = "my_package:transport"

Only the plugin a given address needs is imported, so a one-shot run never
pays for WebSocket code. A plugin that fails to load is reported with a
warning naming it, and the rest go on working.

The package also holds how the registry finds plugins (:mod:`.discovery`)
and what several transports share: :mod:`.framing` (JSON lines, sans-IO:
stdio and unix), :mod:`.memory_pair` (two in-process ends: the
loopback transport's) and :mod:`.throttle` (failed tokens per address: WebSocket and
gRPC).
"""

from __future__ import annotations

import ipaddress
import logging
import warnings
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

import msgspec

from gemini_split.errors import ConfigurationError, GeminiSplitError
from gemini_split.protocol import DEFAULT_MAX_MESSAGE_SIZE

from .discovery import EntryPoint, entry_points

ENTRY_POINT_GROUP = "gemini_split.transports"

log = logging.getLogger(__name__)


# --- errors -----------------------------------------------------------------


class TransportError(GeminiSplitError):
    """A transport could not do what was asked. The cause is in ``__cause__``."""


class ConnectFailed(TransportError):
    """The connection could not be opened: refused, unreachable, bad TLS,
    rejected credentials, a command that would not start."""


class AuthenticationFailed(ConnectFailed):
    """The server refused our credentials."""


class ConnectionClosed(TransportError):
    """This end closed the connection (``aclose`` was called) and then used it.

    As trio's ``ClosedResourceError``: it follows from our own action, so it
    is never the peer's fault; the peer ending the connection is
    :class:`ConnectionBroken`. ``reason`` is the reason this end gave to
    ``aclose`` when it is known.
    """

    def __init__(self, reason: str = "connection closed", code: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.code = code


class ConnectionBroken(TransportError):
    """The peer closed the connection, or the network (or the process on the
    other end) broke it.

    As trio's ``BrokenResourceError``: the cause, when there is one, is in
    ``__cause__``. ``reason`` says why (the peer's close reason when it gave
    one); ``code`` is a transport-specific close code (WebSocket: 1000
    normal, 1006 no close frame, 1009 too big…) or ``None``.
    """

    def __init__(self, reason: str = "connection closed by the peer", code: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.code = code


class MessageTooLarge(TransportError):
    """A message exceeded the connection's size limit."""


class UnknownScheme(ConfigurationError):
    """No installed transport serves the scheme of an address."""


# --- the interface ------------------------------------------------------------


class MessageStream(ABC):
    """One open connection carrying text messages both ways.

    Contract:

    * ``send`` delivers whole messages in order. It may wait for the peer
      (back-pressure); it never splits or merges messages.
    * ``receive`` returns the next whole message. It raises
      :class:`ConnectionBroken` once the peer has closed or the link broke,
      and :class:`MessageTooLarge` for a message over ``max_message_size``
      (the message is dropped unread; message-framed transports such as
      WebSocket then close the connection, line-framed ones such as stdio go
      on, so the receiver can answer with a protocol error).
    * ``send`` raises :class:`ConnectionBroken` once the peer has gone.
    * ``aclose`` is idempotent; after it, ``send`` and ``receive`` raise
      :class:`ConnectionClosed` (this end closed it).
    * Calls of ``send`` may overlap ``receive`` from another task; two
      concurrent ``send`` calls are serialised by the transport.
    """

    #: Who is on the other side, for logs and errors (never contains secrets).
    peer: str = "?"
    #: Who the transport authenticated (e.g. a token's ``userId``), or None.
    principal: Principal | None = None
    #: The paired browser (``serve --web``) whose cookie admitted this
    #: connection, by id; None for every other client. A cookie never
    #: mints cookies: such a connection may not pair another browser.
    paired_browser: str | None = None
    #: The transport proved that the peer runs as the same user as this
    #: process (a Unix socket's ``SO_PEERCRED``). Only then may a ``hello``
    #: hand the server the caller's own key and settings (``hello.caller``).
    same_user: bool = False
    #: A secret may cross this stream: it is encrypted (TLS) or never leaves
    #: this machine (a loopback address, a Unix socket, pipes to a local
    #: command, the same process). A client sends its own API key
    #: (``--send-api-key``) only over such a stream, and a server takes one
    #: only from such a stream.
    private: bool = False
    #: Late-joiner replay parameters the transport received outside the
    #: protocol (the WebSocket URL's ``?limit=&since=&before=``), as text;
    #: ``hello.replay`` wins over them. Never credentials.
    replay_query: Mapping[str, str] = MappingProxyType({})

    @abstractmethod
    async def send(self, message: str) -> None: ...

    async def send_many(self, messages: Sequence[str]) -> None:
        """Send ``messages`` in order, each a whole message, exactly as
        ``send`` would one after the other (the same errors; on an error,
        a prefix of them was sent). A transport that can put several
        messages in one write overrides it (the WebSocket server writes
        their frames with one ``send()`` call): a server fanning one
        session out to many clients hands each client's writer whatever
        its outbox holds."""
        for message in messages:
            await self.send(message)

    @abstractmethod
    async def receive(self) -> str: ...

    @abstractmethod
    async def aclose(self, reason: str = "closed") -> None: ...

    async def __aenter__(self) -> MessageStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a name or an address, without brackets) is this
    machine's loopback: ``localhost``, ``127.0.0.0/8``, ``::1``."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Principal(msgspec.Struct, frozen=True):
    """An authenticated user of a server."""

    user_id: str
    permissions: tuple[str, ...] = ()


Authenticator = Callable[[str | None], Principal | None]
"""Given the presented token (or None), the principal it proves, or None to
refuse. Must compare in constant time."""

ConnectionHandler = Callable[[MessageStream], Awaitable[None]]


class ConnectOptions(msgspec.Struct):
    """How a client connects. Transports ignore what does not apply to them."""

    token: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    connect_timeout: float = 10.0
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class ServeOptions(msgspec.Struct):
    """How a server listens. ``authenticate`` is None when auth is off."""

    authenticate: Authenticator | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    allowed_origins: tuple[str, ...] = ()
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    max_connections_per_user: int = 0  # 0: no cap
    keepalive_interval: float = 20.0
    keepalive_timeout: float = 20.0
    #: Called for a health request on transports that can answer one.
    health: Callable[[], dict[str, Any]] | None = None
    #: ``GET /ready``: whether to take new sessions now (False: 503, e.g. a
    #: replica whose Redis is unreachable); None: always ready.
    ready: Callable[[], bool] | None = None
    #: ``GET /metrics``: Prometheus text exposition; None: 404.
    metrics: Callable[[], str] | None = None
    #: Proxies (CIDR or address strings) whose ``X-Forwarded-For`` /
    #: ``X-Real-IP`` say which client a request is from, for the failed-token
    #: throttle (``serve --trusted-proxy``; :func:`gemini_split.transport.throttle.client_source`).
    trusted_proxies: tuple[str, ...] = ()
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class Transport(ABC):
    """A plugin that opens and serves :class:`MessageStream` connections."""

    #: Human name for messages, e.g. "WebSocket".
    name: str = "?"

    @abstractmethod
    async def open_connection(
        self, address: str, options: ConnectOptions
    ) -> MessageStream:
        """Connect to ``address`` (a URL whose scheme this transport serves).

        Raises :class:`ConnectFailed` (or :class:`AuthenticationFailed`)
        with a message that says what to check.
        """

    @abstractmethod
    async def serve(
        self,
        address: str,
        handler: ConnectionHandler,
        options: ServeOptions,
        *,
        task_status: Any,
    ) -> None:
        """Accept connections on ``address`` and run ``handler`` for each in
        its own task, until cancelled. Never returns.

        Calls ``task_status.started(bound_address)`` once listening, with the
        address clients should use (e.g. the real port when 0 was asked).
        The handler's stream is closed when the handler returns. A handler
        that raises is logged; it never takes the listener or other
        connections down.
        """


# --- the registry ---------------------------------------------------------------


def scheme_of(address: str) -> str:
    """The scheme of a transport address: ``ws://h:1`` → ``ws``,
    ``stdio:ssh box …`` → ``stdio``."""
    scheme, sep, _ = address.partition(":")
    if not sep or not scheme or not scheme.replace("+", "").replace("-", "").isalnum():
        raise UnknownScheme(
            f"{address!r} is not a server address: expected SCHEME:…, "
            f"e.g. ws://127.0.0.1:8080 (schemes: {', '.join(available_schemes())})"
        )
    return scheme.lower()


class TransportRegistry:
    """Transports by scheme, loaded on first use from entry points.

    ``register`` adds one directly (tests, embedding programs); a registered
    transport wins over an entry point of the same scheme.
    """

    def __init__(self, group: str = ENTRY_POINT_GROUP):
        self.group = group
        self._loaded: dict[str, Transport] = {}

    def register(self, scheme: str, transport: Transport) -> None:
        self._loaded[scheme.lower()] = transport

    def schemes(self) -> list[str]:
        """Every scheme known, without importing any plugin."""
        names = {ep.name for ep in entry_points(self.group)}
        return sorted(names | set(self._loaded))

    def get(self, scheme: str) -> Transport:
        """The transport for ``scheme``; raises :class:`UnknownScheme`."""
        scheme = scheme.lower()
        if scheme in self._loaded:
            return self._loaded[scheme]
        candidates = [
            ep
            for ep in entry_points(self.group)
            if ep.name.lower() == scheme
        ]
        for ep in candidates:
            transport = self._load(ep)
            if transport is not None:
                if len(candidates) > 1:
                    warnings.warn(
                        f"several transport plugins serve {scheme!r}; using "
                        f"{ep.value} from {_dist_name(ep)}",
                        stacklevel=2,
                    )
                self._loaded[scheme] = transport
                return transport
        known = ", ".join(self.schemes()) or "none"
        raise UnknownScheme(
            f"no transport for scheme {scheme!r} (installed: {known})"
        )

    def _load(self, ep: EntryPoint) -> Transport | None:
        try:
            target = ep.load()
            transport = target() if callable(target) and not isinstance(target, Transport) else target
            if not isinstance(transport, Transport):
                raise TypeError(f"{ep.value} is not a Transport")
        except Exception as exc:  # a broken plugin must not break the program
            warnings.warn(
                f"transport plugin {ep.name!r} ({ep.value}, from {_dist_name(ep)}) "
                f"failed to load and is skipped: {type(exc).__name__}: {exc}",
                stacklevel=3,
            )
            return None
        return transport


def _dist_name(ep: EntryPoint) -> str:
    return ep.dist_name or "an unknown distribution"


_registry = TransportRegistry()


def default_registry() -> TransportRegistry:
    return _registry


def available_schemes() -> list[str]:
    return _registry.schemes()


def get_transport(address: str) -> Transport:
    """The transport that serves ``address``'s scheme."""
    return _registry.get(scheme_of(address))


async def open_connection(address: str, options: ConnectOptions | None = None) -> MessageStream:
    """Connect to ``address`` with whichever transport serves its scheme."""
    return await get_transport(address).open_connection(address, options or ConnectOptions())


async def run_handler(handler: ConnectionHandler, stream: MessageStream) -> None:
    """Run a server's connection handler the way every transport must:
    close the stream afterwards, and log (never propagate) a handler's
    failure so one bad connection cannot take the listener down."""
    try:
        await handler(stream)
    except (ConnectionClosed, ConnectionBroken) as exc:
        log.info("connection from %s closed: %s", stream.peer, exc.reason)
    except Exception:
        log.exception("connection handler for %s failed", stream.peer)
    finally:
        await stream.aclose()
