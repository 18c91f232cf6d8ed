"""The HTTP front of the server: read the request head, answer what is not a
WebSocket upgrade.

Every TCP connection starts here. The request head is parsed with h11 (the
HTTP/1.1 parser wsproto itself uses); bytes a client sends after the head
(``rest``) go on to the WebSocket engine. Anything that is not a WebSocket
upgrade gets one plain HTTP answer and the connection is closed:

* ``GET /health`` (or HEAD) → 200 ``application/json``, the server's health
  dict, no auth. Nothing else is revealed (no Server header, no versions of
  libraries, no sessions beyond the count the server puts in the dict).
* garbage, or a body framed two ways (Content-Length with Transfer-Encoding)
  → 400; a request line over 8 KiB → 414; a head over 16 KiB → 431 (however
  the bytes arrive);
* an upgrade missing a WebSocket header → 400; a wrong WebSocket version → 426
* any other GET → 426 Upgrade Required; other methods → 405.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import h11
import trio

from .wire import RECEIVE_SIZE

log = logging.getLogger(__name__)

#: Largest request head accepted (request line and headers); a browser's is
#: a few KiB. Over it: 414 when the request line alone is too long, else 431.
MAX_HEAD_SIZE = 16 * 1024
#: Largest request line (method, target, version) accepted.
MAX_REQUEST_LINE = 8 * 1024

#: Bytes that may start a request: a method is an HTTP token (RFC 9110 §5.6.2).
_TOKEN_BYTES = frozenset(b"!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


@dataclass(frozen=True)
class RequestHead:
    method: str
    target: str  # path and query: may hold ?auth=TOKEN, never log it
    headers: tuple[tuple[str, str], ...]  # names lower-cased
    rest: bytes  # bytes the client sent after the head (early WebSocket frames)

    @property
    def path(self) -> str:
        """The target without its query: safe to log."""
        return self.target.partition("?")[0]

    def header(self, name: str) -> str | None:
        """The value of header ``name`` (repeated headers joined by commas)."""
        values = [value for key, value in self.headers if key == name]
        return ", ".join(values) if values else None

    def has_token(self, name: str, token: str) -> bool:
        value = self.header(name) or ""
        return token in (part.strip().lower() for part in value.split(","))

    @property
    def wants_websocket(self) -> bool:
        return self.has_token("upgrade", "websocket")


class BadRequest(Exception):
    """The peer sent something that is not an acceptable HTTP/1.1 request
    head. ``status`` is the answer: 400, 414 (request line too long) or 431
    (head too large). The message never quotes the request (it may hold a
    token)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


async def read_request_head(stream: trio.abc.Stream) -> RequestHead | None:
    """Read one request head; None if the peer closed first. Raises
    BadRequest for garbage, a head over MAX_HEAD_SIZE or a request line over
    MAX_REQUEST_LINE (however the bytes arrive: in one read or many), and a
    request that frames a body two ways (Content-Length with
    Transfer-Encoding, RFC 9112 §6.1)."""
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_SIZE)
    received = bytearray()
    while True:
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError as exc:
            _check_sizes(bytes(received))
            # h11 quotes the offending line, which may hold ?auth=TOKEN: keep
            # only its description.
            raise BadRequest(str(exc).partition(":")[0], exc.error_status_hint) from None
        if event is h11.NEED_DATA:
            _check_sizes(bytes(received))
            data = await stream.receive_some(RECEIVE_SIZE)
            received += data
            if not _could_be_a_request(received):
                raise BadRequest("not an HTTP request")
            parser.receive_data(data)  # b"" tells h11 the peer closed
            continue
        if isinstance(event, h11.Request):
            rest = parser.trailing_data[0]
            _check_sizes(bytes(received[: len(received) - len(rest)]), complete=True)
            names = {name.lower() for name, _ in event.headers}
            if b"content-length" in names and b"transfer-encoding" in names:
                raise BadRequest("Content-Length and Transfer-Encoding together")
            return RequestHead(
                method=event.method.decode("ascii", "replace"),
                target=event.target.decode("ascii", "replace"),
                headers=tuple(
                    (name.decode("ascii", "replace").lower(), value.decode("latin-1"))
                    for name, value in event.headers
                ),
                rest=bytes(rest),
            )
        return None  # the connection ended before a request


def _check_sizes(head: bytes, *, complete: bool = False) -> None:
    """Raise BadRequest (414 or 431) if ``head`` — the whole head, or what has
    arrived of it — is over the limits."""
    line_end = head.find(b"\r\n")
    line = len(head) if line_end < 0 else line_end
    if line > MAX_REQUEST_LINE:
        raise BadRequest(f"request line over {MAX_REQUEST_LINE} bytes", 414)
    if len(head) > MAX_HEAD_SIZE or (not complete and len(head) >= MAX_HEAD_SIZE):
        raise BadRequest(f"request head over {MAX_HEAD_SIZE} bytes", 431)


def _could_be_a_request(received: bytes | bytearray) -> bool:
    """False once the first bytes cannot start a request line (binary
    garbage, a TLS hello on the plain port): answered at once rather than
    after MAX_HEAD_SIZE bytes or the handshake timeout."""
    start = bytes(received).lstrip(b"\r\n")[:32]
    method, space, _ = start.partition(b" ")
    return all(byte in _TOKEN_BYTES for byte in method) and (bool(space) or len(start) < 32)


def websocket_handshake_problem(head: RequestHead) -> tuple[int, str, list[tuple[str, str]]] | None:
    """Why an upgrade request could not be a WebSocket handshake (status, text,
    headers), or None when it can."""
    if head.method != "GET":
        return 400, "a WebSocket upgrade must be a GET request", []
    if not head.has_token("connection", "upgrade"):
        return 400, "missing header 'Connection: Upgrade'", []
    if head.header("sec-websocket-version") != "13":
        return 426, "unsupported WebSocket version: this server speaks 13", [
            ("Sec-WebSocket-Version", "13")
        ]
    if not head.header("sec-websocket-key"):
        return 400, "missing header 'Sec-WebSocket-Key'", []
    return None


def plain_response(
    status: int,
    body: bytes,
    *,
    content_type: str = "text/plain; charset=utf-8",
    headers: list[tuple[str, str]] | None = None,
    head_only: bool = False,
) -> bytes:
    """One complete HTTP/1.1 response that closes the connection."""
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
    for name, value in [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),
        ("Connection", "close"),
        *(headers or []),
    ]:
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body)


def text(message: str) -> bytes:
    return (message + "\n").encode("utf-8")


def answer_plain_request(
    head: RequestHead, health: Callable[[], dict[str, Any]] | None,
    *, ready: Callable[[], bool] | None = None, metrics: Callable[[], str] | None = None,
) -> tuple[int, bytes]:
    """The status and whole response for a request that is not an upgrade:
    ``/health`` (JSON), ``/ready`` (200 or 503, for load balancers) and
    ``/metrics`` (Prometheus text) when the server gives them."""
    head_only = head.method == "HEAD"
    if head.method not in ("GET", "HEAD"):
        return 405, plain_response(
            405, text("only GET is served here"), headers=[("Allow", "GET, HEAD")]
        )
    if head.path == "/ready":
        try:
            is_ready = ready() if ready is not None else True
        except Exception:
            log.exception("the readiness check failed")
            is_ready = False
        status = 200 if is_ready else 503
        return status, plain_response(status, text("ready" if is_ready else "not ready"), head_only=head_only)
    if head.path == "/metrics" and metrics is not None:
        try:
            body, status = metrics().encode("utf-8"), 200
        except Exception:
            log.exception("the metrics report failed")
            body, status = b"", 500
        return status, plain_response(status, body, content_type="text/plain; version=0.0.4; charset=utf-8",
                                      head_only=head_only)
    if head.path != "/health":
        return 426, plain_response(
            426,
            text("this is a gemini-split WebSocket endpoint; connect with ws:// or wss:// (status: GET /health)"),
            headers=[("Upgrade", "websocket")],
            head_only=head_only,
        )
    try:
        report = health() if health is not None else {"status": "ok"}
        body = json.dumps(report, separators=(",", ":")).encode("utf-8")
        status = 200
    except Exception:
        log.exception("the health report failed")
        body, status = b'{"status":"error"}', 500
    return status, plain_response(
        status, body, content_type="application/json", head_only=head_only
    )
