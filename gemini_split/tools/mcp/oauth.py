"""OAuth 2.1 for remote MCP servers, on the client (gemini-cli's ``/mcp auth``).

The flow itself is the MCP Python SDK's (:class:`mcp.client.auth.OAuthClientProvider`):
on a 401 it discovers the authorization server (``WWW-Authenticate``'s
``resource_metadata``, the protected resource metadata, the authorization
server metadata), registers a client dynamically, sends the user to the
authorization endpoint with PKCE (S256), checks ``state`` and RFC 9207's
``iss``, and exchanges the code. This module gives it what is gemini-cli's:

- the token file, ``mcp-oauth-tokens.json`` in the config directory
  (``~/.gemini``, or ``$GEMINI_SPLIT_HOME``), a JSON list of gemini-cli's
  credentials (``serverName``, ``token{accessToken, tokenType, refreshToken,
  scope, expiresAt}``, ``clientId``, ``tokenUrl``, ``mcpServerUrl``,
  ``updatedAt``) and nothing more — no client secret. Written whole
  (a temporary file renamed over it), mode 0600, directory 0700.
- :func:`authenticate`: the interactive sign-in of ``/mcp auth NAME``. A
  redirect listener on loopback (``http://127.0.0.1:PORT/oauth/callback``,
  or ``oauth.redirectUri``'s port), the browser opened when there is one
  (gemini-cli's rule: not under CI, not without a display on Linux, not
  over SSH elsewhere) and the URL always printed, a fresh client
  registration each time (as gemini-cli: the redirect port changes).
- :func:`auth_for`: the connection's ``httpx2.Auth`` for a configured
  server (``httpUrl``/``url``). It sends the stored token, refreshes it
  when it has expired (gemini-cli's 5-minute margin) and, once, when the
  server answers 401; it never starts a sign-in. When the server still
  refuses, :class:`AuthorizationRequired` says what gemini-cli says:
  ``MCP server 'NAME' requires authentication using: /mcp auth NAME`` (or
  that it rejected the stored token).

Security: tokens live only in the token file and in this process; they are
never logged, and no error message carries one (the SDK's error texts name
endpoints and status codes; a token endpoint's error body is cut from
ours). A server-side session never sees them: MCP servers run on the
client, and ``--tools server`` starts none.
"""

from __future__ import annotations

import contextlib
import html
import json
import logging
import os
import sys
import tempfile
import threading
import time
import urllib.parse
import webbrowser
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import h11
import trio

if TYPE_CHECKING:
    import httpx2

    from gemini_split.userfiles.settings import MCPServerSettings

log = logging.getLogger(__name__)

#: gemini-cli's token file, in the config directory.
TOKENS_FILE_NAME = "mcp-oauth-tokens.json"
CALLBACK_PATH = "/oauth/callback"
#: gemini-cli treats a token as expired this long before it is (ms).
EXPIRY_MARGIN_MS = 5 * 60 * 1000
#: How long ``/mcp auth`` waits for the browser to come back (gemini-cli: 5 minutes).
SIGN_IN_TIMEOUT = 300.0
CLIENT_NAME = "gemini-split MCP Client"


class AuthorizationRequired(Exception):
    """The server refuses this client until the user signs in with ``/mcp auth NAME``."""

    def __init__(self, server: str, *, rejected: bool):
        self.server = server
        self.rejected = rejected
        if rejected:
            text = (f"MCP server '{server}' rejected stored OAuth token. "
                    f"Please re-authenticate using: /mcp auth {server}")
        else:
            text = f"MCP server '{server}' requires authentication using: /mcp auth {server}"
        super().__init__(text)


class SignInFailed(Exception):
    """``/mcp auth`` could not complete; the message says why (never a token)."""


def tokens_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where gemini-cli's token file is: the config directory's ``mcp-oauth-tokens.json``."""
    environ = os.environ if environ is None else environ
    home = environ.get("GEMINI_SPLIT_HOME")
    base = Path(home) if home else Path(environ.get("HOME") or Path.home()) / ".gemini"
    return base / TOKENS_FILE_NAME


def server_url(config: MCPServerSettings) -> str | None:
    """The URL a remote server is reached at (``httpUrl``, else ``url``), or None for stdio."""
    return config.http_url or config.url or None


def uses_oauth(config: MCPServerSettings) -> bool:
    """Whether :func:`auth_for` applies: a remote server with no ``Authorization``
    header of its own and no other ``authProviderType``."""
    if server_url(config) is None:
        return False
    if any(k.lower() == "authorization" for k in config.headers):
        return False
    return config.auth_provider_type in (None, "dynamic_discovery")


# --- the token file -------------------------------------------------------------


#: Serialises this process's read-modify-write of the file (servers refresh in worker threads).
_WRITING = threading.Lock()


class TokenFile:
    """gemini-cli's ``mcp-oauth-tokens.json``: one credential per server name.

    Error handling: an unreadable or malformed file reads as empty (gemini-cli
    does the same, after a warning); a write that fails raises ``OSError``."""

    def __init__(self, path: Path):
        self.path = path

    def entries(self) -> dict[str, dict[str, Any]]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("cannot read %s: %s", self.path, type(exc).__name__)
            return {}
        if not isinstance(data, list):
            return {}
        return {e["serverName"]: e for e in data if isinstance(e, dict) and isinstance(e.get("serverName"), str)}

    def get(self, server: str) -> dict[str, Any] | None:
        return self.entries().get(server)

    def put(self, entry: dict[str, Any]) -> None:
        with _WRITING:
            entries = self.entries()
            entries[entry["serverName"]] = entry
            self._write(list(entries.values()))

    def delete(self, server: str) -> None:
        with _WRITING:
            entries = self.entries()
            if entries.pop(server, None) is not None:
                if entries:
                    self._write(list(entries.values()))
                else:
                    self.path.unlink(missing_ok=True)

    def _write(self, entries: list[dict[str, Any]]) -> None:
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".mcp-oauth-", dir=self.path.parent)  # mkstemp: mode 0600
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(entries, out, indent=2)
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


class _Storage:
    """The SDK's ``TokenStorage`` for one server over :class:`TokenFile`.

    ``fresh`` (``/mcp auth``) starts from nothing: no stored token, no stored
    client id (a new registration), as gemini-cli re-authenticates. A client
    secret (from a registration) is kept in memory only; ``oauth.clientId`` /
    ``clientSecret`` from the settings come first."""

    def __init__(self, file: TokenFile, name: str, config: MCPServerSettings, *, fresh: bool):
        self.file = file
        self.name = name
        self.config = config
        self.fresh = fresh
        self.url = server_url(config) or ""
        self.client_id: str | None = None
        self.client_secret: str | None = None
        self.token_endpoint: str | None = None  # set from the discovered metadata
        self.had_token = False

    def entry(self) -> dict[str, Any] | None:
        return None if self.fresh else self.file.get(self.name)

    async def get_tokens(self) -> Any:
        from mcp.shared.auth import OAuthToken

        entry = self.entry()
        token = entry.get("token") if entry else None
        if not isinstance(token, dict) or not token.get("accessToken"):
            return None
        self.had_token = True
        return OAuthToken(access_token=token["accessToken"], token_type="Bearer",
                          refresh_token=token.get("refreshToken"), scope=token.get("scope"))

    def expires_at_ms(self) -> float | None:
        entry = self.entry()
        token = entry.get("token") if entry else None
        value = token.get("expiresAt") if isinstance(token, dict) else None
        return float(value) if isinstance(value, (int, float)) else None

    def stored_token_url(self) -> str | None:
        entry = self.entry()
        value = entry.get("tokenUrl") if entry else None
        return value if isinstance(value, str) and value else None

    async def set_tokens(self, tokens: Any) -> None:
        previous = self.file.get(self.name) or {}
        old = previous.get("token") if isinstance(previous.get("token"), dict) else {}
        token: dict[str, Any] = {"accessToken": tokens.access_token, "tokenType": tokens.token_type or "Bearer"}
        refresh = tokens.refresh_token or (old.get("refreshToken") if not self.fresh else None)
        if refresh:
            token["refreshToken"] = refresh
        if tokens.scope:
            token["scope"] = tokens.scope
        if tokens.expires_in is not None:
            token["expiresAt"] = int(time.time() * 1000 + int(tokens.expires_in) * 1000)
        entry: dict[str, Any] = {"serverName": self.name, "token": token}
        client_id = self._configured_id() or self.client_id or previous.get("clientId")
        if client_id:
            entry["clientId"] = client_id
        token_url = self.token_endpoint or previous.get("tokenUrl")
        if token_url:
            entry["tokenUrl"] = token_url
        entry["mcpServerUrl"] = self.url
        entry["updatedAt"] = int(time.time() * 1000)
        await trio.to_thread.run_sync(self.file.put, entry)
        self.fresh = False  # what was just stored is this session's

    def _configured_id(self) -> str | None:
        oauth = self.config.oauth
        return oauth.client_id if oauth is not None and oauth.client_id else None

    async def get_client_info(self) -> Any:
        from mcp.shared.auth import OAuthClientInformationFull

        oauth = self.config.oauth
        client_id = self._configured_id()
        secret = oauth.client_secret if oauth is not None and client_id else None
        if client_id is None and self.client_id is not None:
            client_id, secret = self.client_id, self.client_secret
        if client_id is None:
            entry = self.entry()
            stored = entry.get("clientId") if entry else None
            client_id = stored if isinstance(stored, str) and stored else None
        if client_id is None:
            return None
        return OAuthClientInformationFull(client_id=client_id, client_secret=secret,
                                          token_endpoint_auth_method="client_secret_post" if secret else "none")

    async def set_client_info(self, client_info: Any) -> None:
        self.client_id = client_info.client_id
        self.client_secret = client_info.client_secret


def _provider_class() -> type:
    """The SDK's provider with gemini-cli's token rules (built on first use:
    the SDK is imported only when a remote server is configured)."""
    global _Provider
    if _Provider is not None:
        return _Provider
    import httpx2
    from mcp.client.auth import OAuthClientProvider

    class Provider(OAuthClientProvider):
        """``OAuthClientProvider`` + stored expiry, the stored token URL for a
        refresh, one refresh on a 401 and, when not ``interactive``, an
        :class:`AuthorizationRequired` instead of a sign-in."""

        def __init__(self, *args: Any, name: str, storage: _Storage, interactive: bool, **kwargs: Any):
            super().__init__(*args, storage=storage, **kwargs)
            self.name = name
            self.store = storage
            self.interactive = interactive
            #: The last refusal raised (the connection it broke reports it).
            self.refused: AuthorizationRequired | None = None

        async def _initialize(self) -> None:
            await super()._initialize()
            expires = self.store.expires_at_ms()
            if expires is not None:
                self.context.token_expiry_time = (expires - EXPIRY_MARGIN_MS) / 1000

        async def _handle_oauth_metadata_response(self, response: httpx2.Response) -> None:
            await super()._handle_oauth_metadata_response(response)
            self._note_token_endpoint()

        def _note_token_endpoint(self) -> None:
            metadata = self.context.oauth_metadata
            if metadata is not None and metadata.token_endpoint:
                self.store.token_endpoint = str(metadata.token_endpoint)

        async def _handle_token_response(self, response: httpx2.Response) -> None:
            self._note_token_endpoint()
            if response.status_code not in (200, 201):
                # The SDK's error would quote the endpoint's body; say only the status.
                raise SignInFailed(f"the token endpoint refused the code (HTTP {response.status_code})")
            await super()._handle_token_response(response)

        async def _refresh_token(self) -> httpx2.Request:
            request = await super()._refresh_token()
            stored = self.store.stored_token_url()
            if self.context.oauth_metadata is None and stored:
                headers = {k: v for k, v in request.headers.items() if k.lower() not in ("host", "content-length")}
                request = httpx2.Request("POST", stored, headers=headers, content=request.content)
            return request

        async def _auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
            # The SDK's flow holds the provider's lock while it runs: closed
            # here, by the task that drives it, however this one ends (httpx
            # closes this one when a request fails or is cancelled). Left to
            # the garbage collector, it would release the lock from another
            # task (an error), leaving it held for every later request.
            async with contextlib.aclosing(super()._auth_flow(request)) as flow:
                outgoing = await flow.__anext__()
                retried = False
                while True:
                    response = yield outgoing
                    if outgoing is request and not retried and _refused(response):
                        retried = True
                        if self.context.can_refresh_token():
                            refreshed = yield await self._refresh_token()
                            if await self._handle_refresh_response(refreshed):
                                self._add_auth_header(request)
                                response = yield request
                        if _refused(response) and not self.interactive:
                            await flow.aclose()
                            self.refused = AuthorizationRequired(self.name, rejected=self.store.had_token)
                            raise self.refused
                    try:
                        outgoing = await flow.asend(response)
                    except StopAsyncIteration:
                        return

    _Provider = Provider
    return Provider


_Provider: type | None = None


def _refused(response: httpx2.Response) -> bool:
    if response.status_code == 401:
        return True
    return response.status_code == 403 and "insufficient_scope" in response.headers.get("www-authenticate", "")


def _client_metadata(config: MCPServerSettings, redirect_uri: str) -> Any:
    from mcp.shared.auth import OAuthClientMetadata

    oauth = config.oauth
    scopes = " ".join(oauth.scopes) if oauth is not None and oauth.scopes else None
    return OAuthClientMetadata(client_name=CLIENT_NAME, redirect_uris=[redirect_uri],  # type: ignore[list-item]
                               grant_types=["authorization_code", "refresh_token"], response_types=["code"],
                               token_endpoint_auth_method="none", scope=scopes)


async def _no_sign_in(url: str) -> None:  # never reached: _auth_flow raises first
    raise RuntimeError("no sign-in outside /mcp auth")


def auth_for(name: str, config: MCPServerSettings, *, file: Path | None = None) -> Any:
    """The ``httpx2.Auth`` a connection to ``config`` uses (see the module's
    docstring), or None when the server does not use OAuth here."""
    if not uses_oauth(config):
        return None
    url = server_url(config) or ""
    storage = _Storage(TokenFile(file or tokens_file()), name, config, fresh=False)
    return _provider_class()(url, _client_metadata(config, f"http://127.0.0.1{CALLBACK_PATH}"),
                             name=name, storage=storage, interactive=False,
                             redirect_handler=_no_sign_in, callback_handler=None)


# --- the interactive sign-in ----------------------------------------------------


def can_open_browser(environ: Mapping[str, str] | None = None) -> bool:
    """gemini-cli's ``shouldAttemptBrowserLaunch``."""
    environ = os.environ if environ is None else environ
    if environ.get("BROWSER") == "www-browser" or environ.get("CI") or \
            environ.get("DEBIAN_FRONTEND") == "noninteractive":
        return False
    if sys.platform.startswith("linux"):
        return any(environ.get(v) for v in ("DISPLAY", "WAYLAND_DISPLAY", "MIR_SOCKET"))
    return not environ.get("SSH_CONNECTION")


def _open_browser(url: str) -> None:
    try:
        webbrowser.open(url)
    except Exception as exc:  # noqa: BLE001 — the URL is printed anyway
        log.info("could not open a browser: %s", type(exc).__name__)


async def authenticate(name: str, config: MCPServerSettings, *, say: Callable[[str], None],
                       file: Path | None = None, open_browser: bool | None = None,
                       timeout: float = SIGN_IN_TIMEOUT) -> None:
    """Sign in to the remote MCP server ``name`` (gemini-cli's ``/mcp auth
    NAME``): discovery, registration, the browser step through a loopback
    listener, the token stored. ``say`` gets gemini-cli's progress lines
    (the authorization URL among them). Returns once the server accepts the
    new token (its tools listed once).

    Error handling: :class:`SignInFailed` with a message for the user, for
    anything from a server that is not remote to a refused code."""
    url = server_url(config)
    if url is None:
        raise SignInFailed(f"MCP server '{name}' is not a remote (httpUrl or url) server")
    if not uses_oauth(config):
        raise SignInFailed(f"MCP server '{name}' sends its own Authorization header or another authProviderType")
    redirect = config.oauth.redirect_uri if config.oauth is not None and config.oauth.redirect_uri else None
    port = urllib.parse.urlsplit(redirect).port or 0 if redirect else 0
    try:
        listeners = await trio.open_tcp_listeners(port, host="127.0.0.1")
    except OSError as exc:
        raise SignInFailed(f"cannot listen for the browser's redirect on port {port}: {exc.strerror or exc}") \
            from None
    listener = listeners[0]
    port = listener.socket.getsockname()[1]
    redirect = redirect or f"http://127.0.0.1:{port}{CALLBACK_PATH}"
    storage = _Storage(TokenFile(file or tokens_file()), name, config, fresh=True)
    send_code, receive_code = trio.open_memory_channel[Any](1)
    show_browser = can_open_browser() if open_browser is None else open_browser

    async def redirect_handler(authorization_url: str) -> None:
        say("→ Opening your browser for OAuth sign-in...\n\n"
            "If the browser does not open, copy and paste this URL into your browser:\n"
            f"{authorization_url}")
        if show_browser:
            await trio.to_thread.run_sync(_open_browser, authorization_url)

    async def callback_handler() -> Any:
        with trio.move_on_after(timeout):
            answer = await receive_code.receive()
            if isinstance(answer, Exception):
                raise answer
            return answer
        raise SignInFailed(f"no answer from the browser within {timeout:g} s")

    provider = _provider_class()(url, _client_metadata(config, redirect), name=name, storage=storage,
                                 interactive=True, redirect_handler=redirect_handler,
                                 callback_handler=callback_handler)
    from mcp import Client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = dict(config.headers) or None
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_serve_callback, listener, send_code)
            if config.url and not config.http_url and config.type != "http":
                from mcp.client.sse import sse_client

                transport = sse_client(url, headers=headers, auth=provider)
            else:
                from mcp.client.streamable_http import streamable_http_client

                transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers,
                                                                                             auth=provider))
            async with Client(transport) as client:
                await client.list_tools()
            nursery.cancel_scope.cancel()
    except BaseException as exc:  # noqa: BLE001 — sorted into one message below
        failure = _first_failure(exc)
        if failure is None:
            raise
        if isinstance(failure, (SignInFailed, AuthorizationRequired)):
            raise SignInFailed(str(failure)) from None
        raise SignInFailed(_describe(failure)) from None
    finally:
        await listener.aclose()


def _first_failure(exc: BaseException) -> Exception | None:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _first_failure(inner)
            if found is not None:
                return found
        return None
    return exc if isinstance(exc, Exception) else None


def _describe(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text[:300]


_PAGE = ("<html><body><h1>{title}</h1>{body}<p>You can close this window{back}.</p>{script}</body></html>")


async def _serve_callback(listener: trio.SocketListener, send_code: trio.MemorySendChannel[Any]) -> None:
    """Answer the browser's redirects to :data:`CALLBACK_PATH` until one
    carries a code (or an ``error``), and hand it to the flow."""
    from mcp.shared.auth import AuthorizationCodeResult

    while True:
        stream = await listener.accept()
        async with stream:
            with trio.move_on_after(30):
                request = await _read_request(stream)
                if request is None:
                    continue
                target, http = request
                parts = urllib.parse.urlsplit(target)
                query = dict(urllib.parse.parse_qsl(parts.query))
                if parts.path != CALLBACK_PATH:
                    await _respond(stream, http, 404, "Not found", "text/plain")
                    continue
                if "error" in query:
                    detail = html.escape(query["error"]) + (
                        f"</p><p>{html.escape(query['error_description'])}" if query.get("error_description") else "")
                    await _respond(stream, http, 200, _PAGE.format(title="Authentication Failed", body=f"<p>Error: {detail}</p>",
                                                             back="", script=""))
                    await send_code.send(SignInFailed(f"OAuth error: {query['error']}"))
                    return
                if not query.get("code") or not query.get("state"):
                    await _respond(stream, http, 400, "Missing code or state parameter", "text/plain")
                    continue
                await _respond(stream, http, 200, _PAGE.format(
                    title="Authentication Successful!", body="",
                    back=" and return to gemini-split", script="<script>window.close();</script>"))
                await send_code.send(AuthorizationCodeResult(code=query["code"], state=query["state"],
                                                             iss=query.get("iss")))
                return


async def _read_request(stream: trio.SocketStream) -> tuple[str, Any] | None:
    """The target of one HTTP request and its ``h11.Connection`` (for the
    answer), or None."""
    connection = h11.Connection(h11.SERVER)
    while True:
        try:
            event = connection.next_event()
        except h11.RemoteProtocolError:
            return None
        if event is h11.NEED_DATA:
            data = await stream.receive_some(8192)
            if not data:
                return None
            connection.receive_data(data)
            continue
        if isinstance(event, h11.Request):
            return event.target.decode("latin-1"), connection
        return None


async def _respond(stream: trio.SocketStream, connection: Any, status: int, body: str,
                   content_type: str = "text/html") -> None:
    data = body.encode()
    out = connection.send(h11.Response(status_code=status, headers=[
        ("Content-Type", f"{content_type}; charset=utf-8"), ("Content-Length", str(len(data))),
        ("Connection", "close"), ("Cache-Control", "no-store")]))
    out += connection.send(h11.Data(data=data)) or b""
    out += connection.send(h11.EndOfMessage()) or b""
    await stream.send_all(out)


__all__ = ["AuthorizationRequired", "SignInFailed", "TokenFile", "auth_for", "authenticate", "can_open_browser",
           "server_url", "tokens_file", "uses_oauth"]
