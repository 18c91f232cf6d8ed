"""``serve --web``: the browser page and its sign-in, on the WebSocket listener.

The WebSocket front (plugins/gemini_split_websocket/front.py) hands every
plain HTTP request to :meth:`WebFace.answer` first; what it does not serve
(``/health``, ``/ready``, ``/metrics``) falls through to the front; any
other path is 404. The
contract with the page (``gemini_split/web/static/``, docs/web.md):

* ``GET /`` and ``GET /pair`` → ``index.html``; ``GET /static/<file>`` → the
  files that exist in ``static/`` when the server starts (a fixed allowlist:
  nothing else, no path traversal), with Content-Type, ETag and
  ``Cache-Control: no-cache`` (revalidated: a new version shows at once);
* ``POST /api/pair`` ``{"code": …}`` → 200 ``{"user", "browser", "page"}``
  with ``Set-Cookie: gs_browser=…; HttpOnly; SameSite=Strict; Path=/;
  Max-Age=…`` (``Secure`` under TLS), or 400/410 ``{"error":
  "unknown"|"used"|"expired", "message": …}``; 429 for a wrong code after
  too many from one address (a valid code is always taken). ``page`` is the
  browser's page token: the page keeps it in its origin's own storage and
  presents it with the cookie — the ``X-GS-Page`` header on ``fetch``, the
  ``?page=`` parameter on the WebSocket. The two together sign a browser
  in; a cookie alone (which the browser sends to every port of the host)
  does not;
* ``GET /api/me`` (cookie and page token) → ``{"user", "server",
  "protocol_version", "server_tools"}``, 401 ``{"error": "signed_out"}``
  without a valid pair;
* ``POST /api/logout`` (cookie and page token) → 200, the browser
  forgotten, the cookie cleared;
* state-changing requests (POST) need ``Origin`` equal to the server's own
  origin and ``Content-Type: application/json`` (else 403 / 415): a form on
  another site cannot post them;
* every response carries :data:`SECURITY_HEADERS` (a strict CSP: no inline
  script, no eval; no framing; nosniff; no Referer).

The browser's WebSocket is admitted by :meth:`WebFace.admit_cookie` (called
by the front's admission): the cookie and the page token instead of a
token, only from the server's own origin.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
import logging
import mimetypes
from http import HTTPStatus
from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import trio

from gemini_split.errors import GeminiSplitError
from gemini_split.protocol import PROTOCOL_VERSION
from gemini_split.transport.throttle import FailedAuthThrottle

from .pairing import Browser, Pairing, PairingError

log = logging.getLogger(__name__)

COOKIE = "gs_browser"
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
SECURITY_HEADERS = (
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
    ("Cross-Origin-Opener-Policy", "same-origin"),
)
#: What the WebSocket front answers itself (health and readiness checks).
FRONT_PATHS = frozenset({"/health", "/ready", "/metrics"})
#: Largest request body read (a pairing code is ~32 bytes).
MAX_BODY = 4096
#: Files served from static/ at most (the allowlist is what exists there).
MAX_STATIC_FILES = 500

_TYPES = {
    ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
    ".mjs": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
    ".json": "application/json", ".svg": "image/svg+xml", ".png": "image/png", ".ico": "image/x-icon",
    ".woff2": "font/woff2", ".txt": "text/plain; charset=utf-8", ".webmanifest": "application/manifest+json",
}


class Head(Protocol):
    """What the front parsed of a request (front.RequestHead)."""

    method: str
    target: str
    rest: bytes

    @property
    def path(self) -> str: ...

    def header(self, name: str) -> str | None: ...


@dataclass(frozen=True)
class _File:
    body: bytes
    content_type: str
    etag: str


@dataclass
class WebFace:
    """The web face of one server. ``me`` gives ``/api/me``'s server fields
    (``server``, ``protocol_version``, ``server_tools``)."""

    pairing: Pairing
    me: Callable[[], dict[str, Any]] = lambda: {}
    throttle: Any = None  # a transport.throttle.FailedAuthThrottle for failed codes
    files: dict[str, _File] = field(default_factory=dict)
    #: Open WebSocket connections of each browser: revoking one cancels them.
    _sockets: dict[str, set[trio.CancelScope]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.files:
            self.files = load_static()
        if self.throttle is None:
            self.throttle = FailedAuthThrottle(burst=10, refill_per_second=1 / 6)
        self.pairing.on_revoke = self._close_sockets

    # --- the browser's WebSocket --------------------------------------------

    def is_browser_request(self, head: Head, secure: bool) -> bool:
        """Whether this upgrade comes from the page: its Origin is the
        server's own (then only the cookie admits it)."""
        origin = head.header("origin")
        return origin is not None and _same_origin(origin, head, secure)

    async def admit_cookie(self, head: Head) -> Browser | None:
        """The paired browser the request's cookie and page token sign in
        together, or None. Raises the store's error (a GeminiSplitError)
        when it cannot say."""
        return await self.pairing.browser_for(cookie_of(head), page_token_of(head))

    def hold_socket(self, browser_id: str, scope: trio.CancelScope) -> Callable[[], None]:
        """Register an open connection of ``browser_id`` (cancelled when it
        is revoked); returns the function that unregisters it."""
        self._sockets.setdefault(browser_id, set()).add(scope)

        def release() -> None:
            scopes = self._sockets.get(browser_id)
            if scopes is not None:
                scopes.discard(scope)
                if not scopes:
                    del self._sockets[browser_id]
        return release

    def _close_sockets(self, browser_id: str) -> None:
        for scope in self._sockets.pop(browser_id, set()):
            scope.cancel()

    # --- plain HTTP -----------------------------------------------------------

    async def answer(self, head: Head, stream: trio.abc.Stream, *, secure: bool, peer_host: str,
                     source: Callable[[], str] | None = None) -> bytes | None:
        """The whole response to ``head``, or None when it is not the web's
        (the front answers it). Reads a POST's body from ``stream``."""
        try:
            return await self._answer(head, stream, secure=secure, peer_host=peer_host, source=source)
        except GeminiSplitError as exc:  # the store (Redis away, disk full): say so, keep serving
            log.warning("%s %s: %s", head.method, head.path, exc)
            return _json(503, {"error": "unavailable", "message": "the server cannot reach its store of paired "
                               "browsers; try again shortly"}, [("Retry-After", "5")])

    async def _answer(self, head: Head, stream: trio.abc.Stream, *, secure: bool, peer_host: str,
                      source: Callable[[], str] | None) -> bytes | None:
        path = head.path
        if path in ("/", "/index.html", "/pair"):
            return self._static(head, "index.html")
        if path.startswith("/static/"):
            return self._static(head, path[len("/static/"):])
        if path == "/api/me":
            if head.method not in ("GET", "HEAD"):
                return _json(405, {"error": "method"}, [("Allow", "GET, HEAD")])
            browser = await self.admit_cookie(head)
            if browser is None:
                return _json(401, {"error": "signed_out", "message": "this browser is not paired: "
                                   "run gemini-split pair and open its link"})
            return _json(200, {**self.me(), "user": browser.user, "browser": browser.id})
        if path in ("/api/pair", "/api/logout"):
            if head.method != "POST":
                return _json(405, {"error": "method"}, [("Allow", "POST")])
            problem = _csrf_problem(head, secure)
            if problem is not None:
                status, message = problem
                return _json(status, {"error": "forbidden", "message": message})
            try:
                body = await read_body(head, stream)
            except ValueError as exc:
                return _json(413 if "large" in str(exc) else 400, {"error": "bad_request", "message": str(exc)})
            if path == "/api/logout":
                browser = await self.admit_cookie(head)
                if browser is not None:
                    await self.pairing.revoke(browser.user, browser.id)
                return _json(200, {"ok": True}, [("Set-Cookie", _cookie("", 0, secure))])
            return await self._pair(head, body, secure, (source or (lambda: peer_host))())
        if path.startswith("/api/"):
            return _json(404, {"error": "not_found"})
        if path in FRONT_PATHS:
            return None
        return response(404, b"not found\n", head_only=head.method == "HEAD")

    async def _pair(self, head: Head, body: bytes, secure: bool, source: str) -> bytes:
        """Redeem a code. As tokens are (``FailedAuthThrottle``): a valid
        code is always taken, whatever the address's bucket says (behind a
        proxy without ``--trusted-proxy`` every user shares one address); a
        wrong one from an address with no try left gets 429 instead."""
        try:
            code = json.loads(body).get("code")
        except (ValueError, AttributeError):
            code = None
        if not isinstance(code, str) or not code or len(code) > 200:
            return _json(400, {"error": "bad_request", "message": 'send {"code": "…"} as JSON'})
        try:
            browser, cookie, page = await self.pairing.redeem(code, head.header("user-agent") or "")
        except PairingError as exc:
            now = trio.current_time()
            wait = self.throttle.retry_after(source, now)
            if wait:
                return _json(429, {"error": "throttled",
                                   "message": f"too many failed pairing codes; retry in {wait}s"},
                             [("Retry-After", str(wait))])
            self.throttle.failed(source, now)
            log.info("a pairing code was refused (%s) from %s", exc.reason, source)
            return _json(410 if exc.reason in ("used", "expired") else 400,
                         {"error": exc.reason, "message": str(exc)})
        max_age = int(self.pairing.cookie_seconds)
        return _json(200, {"user": browser.user, "browser": browser.id, "page": page},
                     [("Set-Cookie", _cookie(cookie, max_age, secure))])

    def _static(self, head: Head, name: str) -> bytes:
        if head.method not in ("GET", "HEAD"):
            return _json(405, {"error": "method"}, [("Allow", "GET, HEAD")])
        file = self.files.get(name)
        if file is None:
            return response(404, b"not found\n")
        if head.header("if-none-match") == file.etag:
            return response(304, b"", headers=[("ETag", file.etag), ("Cache-Control", "no-cache")], head_only=True)
        return response(200, file.body, content_type=file.content_type,
                        headers=[("ETag", file.etag), ("Cache-Control", "no-cache")],
                        head_only=head.method == "HEAD")


def load_static(directory: Any = None) -> dict[str, _File]:
    """The page's files (from ``directory``, default the package's
    ``static/``), read once: the allowlist of what ``/static/`` serves
    (relative paths with ``/``; no dot-files)."""
    files: dict[str, _File] = {}
    root = directory if directory is not None else resources.files("gemini_split.web").joinpath("static")

    def walk(node: Any, prefix: str) -> None:
        if not node.is_dir():
            return
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name.startswith(".") or len(files) >= MAX_STATIC_FILES:
                continue
            name = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, name + "/")
                continue
            body = child.read_bytes()
            suffix = "." + child.name.rpartition(".")[2] if "." in child.name else ""
            ctype = _TYPES.get(suffix) or mimetypes.guess_type(child.name)[0] or "application/octet-stream"
            files[name] = _File(body, ctype, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')

    try:
        walk(root, "")
    except (FileNotFoundError, NotADirectoryError):
        pass
    return files


async def read_body(head: Head, stream: trio.abc.Stream, limit: int = MAX_BODY) -> bytes:
    """A request's body (Content-Length framing only), at most ``limit``
    bytes; raises ValueError."""
    if head.header("transfer-encoding"):
        raise ValueError("chunked bodies are not accepted: send Content-Length")
    try:
        length = int(head.header("content-length") or "0")
    except ValueError:
        raise ValueError("bad Content-Length") from None
    if length < 0:
        raise ValueError("bad Content-Length")
    if length > limit:
        raise ValueError(f"body too large (over {limit} bytes)")
    body = bytearray(head.rest[:length])
    while len(body) < length:
        data = await stream.receive_some(length - len(body))
        if not data:
            raise ValueError("the body ended early")
        body += data
    return bytes(body)


def cookie_of(head: Head) -> str | None:
    """The ``gs_browser`` cookie's value, or None."""
    for part in (head.header("cookie") or "").replace(",", ";").split(";"):
        name, eq, value = part.strip().partition("=")
        if eq and name == COOKIE and value:
            return value
    return None


#: The header the page sends its page token in (``fetch``), and the query
#: parameter (the WebSocket, which takes no header from a page).
PAGE_HEADER, PAGE_PARAM = "x-gs-page", "page"


def page_token_of(head: Head) -> str | None:
    """The page token the request presents (header, else query), or None."""
    token = head.header(PAGE_HEADER)
    if token:
        return token.strip()
    query = head.target.partition("?")[2]
    for part in query.split("&"):
        name, eq, value = part.partition("=")
        if eq and name == PAGE_PARAM and value:
            return urllib.parse.unquote(value)
    return None


def own_origin(head: Head, secure: bool) -> str | None:
    host = (head.header("host") or "").strip().lower()
    if not host or any(c in host for c in "/\\@ "):
        return None
    return f"{'https' if secure else 'http'}://{host}"


def _same_origin(origin: str, head: Head, secure: bool) -> bool:
    own = own_origin(head, secure)
    if own is None:
        return False
    given = origin.strip().lower().rstrip("/")
    default = ":443" if secure else ":80"
    return given == own or given + default == own or given == own.removesuffix(default)


def _csrf_problem(head: Head, secure: bool) -> tuple[int, str] | None:
    origin = head.header("origin")
    if origin is None or not _same_origin(origin, head, secure):
        return 403, "this request must come from the server's own page (Origin)"
    ctype = (head.header("content-type") or "").partition(";")[0].strip().lower()
    if ctype != "application/json":
        return 415, "send Content-Type: application/json"
    return None


def _cookie(value: str, max_age: int, secure: bool) -> str:
    return (f"{COOKIE}={value}; Max-Age={max_age}; Path=/; HttpOnly; SameSite=Strict"
            + ("; Secure" if secure else ""))


def _json(status: int, payload: dict[str, Any], headers: list[tuple[str, str]] | None = None) -> bytes:
    return response(status, json.dumps(payload).encode("utf-8"), content_type="application/json",
                    headers=headers)


def response(status: int, body: bytes, *, content_type: str = "text/plain; charset=utf-8",
             headers: list[tuple[str, str]] | None = None, head_only: bool = False) -> bytes:
    """One complete response that closes the connection, with the security
    headers."""
    names = {name.lower() for name, _ in headers or []}
    lines = [f"HTTP/1.1 {status} {HTTPStatus(status).phrase}"]
    for name, value in [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        *([] if "cache-control" in names else [("Cache-Control", "no-store")]),
        ("Connection", "close"),
        *SECURITY_HEADERS,
        *(headers or []),
    ]:
        lines.append(f"{name}: {value}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head_only else body)


def web_face_for(service: Any, *, pair_ttl: float, cookie_days: float,
                 static_dir: str | None = None) -> WebFace:
    """``serve --web``'s face for ``service``: paired browsers kept in its
    session store (SQLite, Redis shared by replicas, or memory); the page
    from ``static_dir`` when given (development), else the package's. The
    server runs ``service.pairing.run`` once the store is open."""
    pairing = Pairing(service.store.paired_browsers(), code_ttl=pair_ttl, cookie_days=cookie_days)
    service.pairing = pairing

    def me() -> dict[str, Any]:
        return {"server": "gemini-split", "protocol_version": PROTOCOL_VERSION,
                "server_tools": service.server_tools is not None}

    return WebFace(pairing=pairing, me=me, files=load_static(Path(static_dir)) if static_dir else {})
