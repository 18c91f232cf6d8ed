"""A real OAuth 2.1 authorization server and an MCP server protected by it,
both built on the MCP SDK's own auth pieces, for the OAuth tests.

- The authorization server (:class:`AuthServer`) is the SDK's
  ``create_auth_routes`` (metadata, ``/authorize``, ``/token``,
  ``/register``, ``/revoke``) over an in-memory
  ``OAuthAuthorizationServerProvider``: dynamic registration, PKCE checked by
  the SDK's token handler, codes and refresh tokens single-use, access tokens
  that expire (``expires_in``) and can be revoked. Its ``/authorize`` consents
  at once (the "browser step" is an HTTP client following the redirect).
- The MCP server is the SDK's ``MCPServer`` with ``AuthSettings`` and a token
  verifier that asks the authorization server's store: a token it did not
  issue, an expired one or a revoked one gets 401 with ``WWW-Authenticate``'s
  ``resource_metadata``. Its tool ``whoami`` answers with the token's client.

Each runs under hypercorn on its own loopback port (as a separate origin).
Also runnable as a process: ``python -m tests.mcp_oauth_servers`` prints the
MCP server's URL, then serves until killed.
"""

from __future__ import annotations

import secrets
import socket
import sys
import time
from typing import Any

import trio
from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    AuthorizeError,
    RefreshToken,
    TokenError,
    construct_redirect_uri,
)
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

SCOPE = "mcp:tools"


class AuthServer:
    """The in-memory provider (the SDK's ``OAuthAuthorizationServerProvider``)."""

    def __init__(self, issuer: str, *, expires_in: int = 3600):
        self.issuer = issuer
        self.expires_in = expires_in
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.registrations = 0
        self.refreshes = 0
        self.authorizations = 0
        self.seen_tokens: list[str] = []  # every bearer the MCP server was shown
        #: Set: /authorize answers with this OAuth error (the user said no).
        self.deny: str | None = None

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.registrations += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        self.authorizations += 1
        if self.deny:
            raise AuthorizeError(self.deny, "the user declined")  # type: ignore[arg-type]
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code, scopes=params.scopes or [SCOPE], expires_at=time.time() + 300, client_id=client.client_id,
            code_challenge=params.code_challenge, redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly, resource=params.resource)
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state, iss=self.issuer)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> Any:
        found = self.codes.get(code)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_authorization_code(self, client: OAuthClientInformationFull, code: AuthorizationCode) -> Any:
        del self.codes[code.code]
        return self._issue(client.client_id, code.scopes, code.resource)

    async def load_refresh_token(self, client: OAuthClientInformationFull, refresh_token: str) -> Any:
        found = self.refresh.get(refresh_token)
        return found if found is not None and found.client_id == client.client_id else None

    async def exchange_refresh_token(self, client: OAuthClientInformationFull, refresh_token: RefreshToken,
                                     scopes: list[str]) -> Any:
        if refresh_token.token not in self.refresh:
            raise TokenError("invalid_grant", "refresh token revoked")
        del self.refresh[refresh_token.token]
        self.refreshes += 1
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str) -> AccessToken | None:
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token: Any) -> None:
        self.access.pop(token.token, None)
        self.refresh.pop(token.token, None)

    def preregister(self, client_id: str, secret: str, redirect_uri: str) -> None:
        """A confidential client known in advance (``oauth.clientId``/``clientSecret``)."""
        self.clients[client_id] = OAuthClientInformationFull(
            client_id=client_id, client_secret=secret, redirect_uris=[redirect_uri],  # type: ignore[list-item]
            token_endpoint_auth_method="client_secret_post", grant_types=["authorization_code", "refresh_token"],
            response_types=["code"], scope=SCOPE)

    def revoke_all(self) -> None:
        """Every token and refresh token this server issued stops working."""
        self.access.clear()
        self.refresh.clear()

    def expire_all(self) -> None:
        """Every access token is expired now (refresh tokens still work)."""
        for token in self.access.values():
            token.expires_at = int(time.time()) - 1

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = "at-" + secrets.token_urlsafe(24)
        refresh = "rt-" + secrets.token_urlsafe(24)
        self.access[access] = AccessToken(token=access, client_id=client_id, scopes=scopes,
                                          expires_at=int(time.time()) + self.expires_in, resource=resource)
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        return OAuthToken(access_token=access, token_type="Bearer", expires_in=self.expires_in,
                          scope=" ".join(scopes), refresh_token=refresh)


class _Verifier:
    """The MCP server's ``TokenVerifier``: asks the authorization server's store."""

    def __init__(self, auth: AuthServer):
        self.auth = auth

    async def verify_token(self, token: str) -> AccessToken | None:
        self.auth.seen_tokens.append(token)
        return await self.auth.load_access_token(token)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def serve_oauth_servers(*, expires_in: int = 3600, sse: bool = False,
                              task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """Serve the authorization server and the protected MCP server (streamable
    HTTP at ``/mcp``, or with ``sse`` SSE at ``/sse``) until cancelled;
    ``task_status.started((auth, mcp_url))``."""
    from hypercorn.config import Config
    from hypercorn.trio import serve
    from mcp.server.auth.routes import create_auth_routes
    from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions, RevocationOptions
    from mcp.server.mcpserver import MCPServer
    from starlette.applications import Starlette

    as_port, rs_port = _free_port(), _free_port()
    issuer = f"http://127.0.0.1:{as_port}"
    mcp_url = f"http://127.0.0.1:{rs_port}/{'sse' if sse else 'mcp'}"
    auth = AuthServer(issuer, expires_in=expires_in)
    settings = AuthSettings(issuer_url=issuer, resource_server_url=mcp_url, required_scopes=[SCOPE],  # type: ignore[arg-type]
                            validate_token_resource=False)
    as_app = Starlette(routes=create_auth_routes(
        auth, issuer_url=settings.issuer_url,  # the same URL object: issuers compare as strings
        client_registration_options=ClientRegistrationOptions(enabled=True, valid_scopes=[SCOPE],
                                                              default_scopes=[SCOPE]),
        revocation_options=RevocationOptions(enabled=True)))
    server = MCPServer("protected", token_verifier=_Verifier(auth), auth=settings)

    @server.tool()
    def whoami() -> str:
        """Who the server thinks is calling."""
        from mcp.server.auth.middleware.auth_context import get_access_token

        token = get_access_token()
        return f"signed in as {token.client_id if token else 'nobody'}"

    async with trio.open_nursery() as nursery:
        for app, port in ((as_app, as_port), (server.sse_app() if sse else server.streamable_http_app(), rs_port)):
            config = Config()
            config.bind = [f"127.0.0.1:{port}"]
            config.loglevel = "WARNING"
            config.accesslog = None
            await nursery.start(serve, app, config)
        task_status.started((auth, mcp_url))


async def _main() -> None:
    async with trio.open_nursery() as nursery:
        _, url = await nursery.start(serve_oauth_servers)
        print(url, flush=True)


if __name__ == "__main__":
    trio.run(_main)
    sys.exit(0)
