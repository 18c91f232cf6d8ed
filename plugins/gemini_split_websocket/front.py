"""The HTTP front of the server: read the request head, answer what is not a
WebSocket upgrade.

Every TCP connection starts here. The request head is parsed with h11 (the
HTTP/1.1 parser wsproto itself uses) and kept byte for byte, so a WebSocket
upgrade can be handed on, unread, to trio-websocket. Anything else gets one
plain HTTP answer and the connection is closed:

* ``GET /health`` (or HEAD) → 200 ``application/json``, the server's health
  dict, no auth. Nothing else is revealed (no Server header, no versions of
  libraries, no sessions beyond the count the server puts in the dict).
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

#: Largest request head accepted; a browser's is a few KiB.
MAX_HEAD_SIZE = 16 * 1024


@dataclass(frozen=True)
class RequestHead:
    method: str
    target: str  # path and query: may hold ?auth=TOKEN, never log it
    headers: tuple[tuple[str, str], ...]  # names lower-cased
    received: bytes  # every byte read so far, to replay

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
    """The peer sent something that is not an HTTP/1.1 request head."""


async def read_request_head(stream: trio.abc.Stream) -> RequestHead | None:
    """Read one request head; None if the peer closed first. Raises
    BadRequest for garbage or a head over MAX_HEAD_SIZE."""
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=MAX_HEAD_SIZE)
    received = bytearray()
    while True:
        try:
            event = parser.next_event()
        except h11.RemoteProtocolError as exc:
            # h11 quotes the offending line, which may hold ?auth=TOKEN: keep
            # only its description.
            raise BadRequest(str(exc).partition(":")[0]) from None
        if event is h11.NEED_DATA:
            data = await stream.receive_some(RECEIVE_SIZE)
            received += data
            parser.receive_data(data)  # b"" tells h11 the peer closed
            continue
        if isinstance(event, h11.Request):
            return RequestHead(
                method=event.method.decode("ascii", "replace"),
                target=event.target.decode("ascii", "replace"),
                headers=tuple(
                    (name.decode("ascii", "replace").lower(), value.decode("latin-1"))
                    for name, value in event.headers
                ),
                received=bytes(received),
            )
        return None  # the connection ended before a request


def websocket_handshake_problem(head: RequestHead) -> tuple[int, str, list[tuple[str, str]]] | None:
    """Why an upgrade request could not be a WebSocket handshake (status, text,
    headers), or None when it can. wsproto would refuse these too, but only
    after trio-websocket had started waiting for a request it will never get."""
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
    head: RequestHead, health: Callable[[], dict[str, Any]] | None
) -> tuple[int, bytes]:
    """The status and whole response for a request that is not an upgrade."""
    head_only = head.method == "HEAD"
    if head.method not in ("GET", "HEAD"):
        return 405, plain_response(
            405, text("only GET is served here"), headers=[("Allow", "GET, HEAD")]
        )
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
