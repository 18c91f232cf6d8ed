"""Remote (Agent2Agent) sub-agents (issue 32): gemini-cli 0.61's
``kind: remote`` definitions, their agent cards and their credentials.

A definition (``~/.gemini/agents/*.md`` or ``<project>/.gemini/agents/*.md``)
names ``agent_card_url`` or ``agent_card_json`` (exactly one) and optionally
``auth``; a file may hold a YAML list of them (remote only, as gemini-cli).
:func:`load_remote` checks one and reads its agent card (the card's
description is what the main model is offered), naming the file and the
field for anything wrong.

The credentials (``$ENV_VAR``, ``!command``, a literal) are the user's:
:func:`auth_headers` resolves them on this client, when a card is read or a
call is made (:mod:`.a2a`), and they never travel to the server — the
definition the server gets (``AgentDefinition`` with ``kind`` ``remote``)
carries the name, the card's description and the endpoint only.

**Bounds.** A card of at most :data:`MAX_CARD_BYTES`, read within
:data:`CARD_TIMEOUT`, :data:`CONNECT_TIMEOUT` to connect, at most
:data:`MAX_REDIRECTS` redirects (no credential — ``Authorization``, an
``apiKey`` header of any name — is ever sent to another origin than the
card URL's), ``http`` and ``https`` URLs only. ``general.proxy`` in
settings, else ``HTTP(S)_PROXY`` / ``NO_PROXY``, is the proxy, as in
gemini-cli.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

from gemini_split.errors import ToolFailed

#: An agent card larger than this is refused.
MAX_CARD_BYTES = 256 * 1024
#: Seconds to connect, and to read a card: all of it (redirects, a
#: retry with credentials, every byte), not each read.
CONNECT_TIMEOUT = 10.0
CARD_TIMEOUT = 10.0
#: Redirects followed when reading a card (none for a call).
MAX_REDIRECTS = 3
#: A ``!command`` credential's time limit (seconds) and output bound.
COMMAND_TIMEOUT = 30.0
#: gemini-cli's remote definition fields.
KEYS = frozenset({"kind", "name", "description", "display_name", "agent_card_url", "agent_card_json", "auth",
                  "timeout_mins"})
#: The auth types gemini-cli has; ``oauth`` is refused by name.
AUTH_TYPES = ("apiKey", "http", "google-credentials", "oauth")
#: ``google-credentials`` sends tokens to these hosts only (gemini-cli's rule).
GOOGLE_HOSTS = (".googleapis.com", ".run.app")
#: What a remote agent takes: one ``query``.
QUERY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "The task for the remote agent, in full: it sees "
                                                              "nothing else of this conversation."}},
    "required": ["query"],
}


class RemoteAgentError(Exception):
    """A remote definition that cannot be used; the text names the file and field."""


class RemoteConfig:
    """A remote agent as this client knows it: its endpoint and card
    (read at load), whether it streams, its auth block (resolved only when
    a call is made) and its time limit. Never sent anywhere."""

    def __init__(self, *, path: Path, name: str, url: str, card: dict[str, Any], streaming: bool,
                 auth: dict[str, Any] | None, timeout_mins: float | None, card_url: str = ""):
        self.path, self.name, self.url, self.card = path, name, url, card
        self.streaming, self.auth, self.timeout_mins, self.card_url = streaming, auth, timeout_mins, card_url

    def __repr__(self) -> str:  # never the auth block
        return f"RemoteConfig({self.name!r}, {self.url!r})"


# --------------------------------------------------------------------------
# Loading


def load_remote(path: Path, meta: dict[str, Any], *, proxy: str | None = None,
                environ: Mapping[str, str] | None = None) -> tuple[Any, RemoteConfig]:
    """``(AgentDefinition, RemoteConfig)`` for one remote entry of ``path``;
    its card is read now (``agent_card_url``) or parsed
    (``agent_card_json``). Raises :class:`RemoteAgentError`."""
    from gemini_split.protocol import AgentDefinition

    unknown = sorted(set(meta) - KEYS)
    if unknown:
        raise RemoteAgentError(f"{path}: unknown field {unknown[0]!r} for a remote agent "
                               f"(known: {', '.join(sorted(KEYS))})")
    name = meta.get("name")
    if not isinstance(name, str) or not re.match(r"^[a-z0-9_-]{1,64}$", name):
        raise RemoteAgentError(f"{path}: field 'name' must be a slug of lowercase letters, digits, '-' and '_' "
                               f"(at most 64), got {name!r}")
    card_url, card_json = meta.get("agent_card_url"), meta.get("agent_card_json")
    if card_url is None and card_json is None:
        raise RemoteAgentError(f"{path}: remote agent {name}: field 'agent_card_url' (or 'agent_card_json') "
                               "is required")
    if card_url is not None and card_json is not None:
        raise RemoteAgentError(f"{path}: remote agent {name}: give 'agent_card_url' or 'agent_card_json', "
                               "not both")
    auth = _check_auth(path, name, meta.get("auth"))
    timeout = meta.get("timeout_mins")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not 0 < timeout <= 1440):
        raise RemoteAgentError(f"{path}: field 'timeout_mins' must be a number of minutes above 0 and at most "
                               f"1440, got {timeout!r}")
    if card_url is not None:
        field = "agent_card_url"
        if not isinstance(card_url, str):
            raise RemoteAgentError(f"{path}: field 'agent_card_url' must be a URL, got {card_url!r}")
        _check_url(path, field, card_url)
        card = fetch_card(path, card_url, auth, proxy=proxy, environ=environ)
    else:
        field = "agent_card_json"
        if not isinstance(card_json, str):
            raise RemoteAgentError(f"{path}: field 'agent_card_json' must be a JSON string (quote it, or use "
                                   "a '|' block)")
        if len(card_json.encode()) > MAX_CARD_BYTES:
            raise RemoteAgentError(f"{path}: field 'agent_card_json' is larger than {MAX_CARD_BYTES} bytes")
        card = _card_object(path, field, card_json)
    url, streaming = _endpoint(path, field, card)
    description = meta.get("description")
    if description is not None and (not isinstance(description, str) or not description.strip()):
        raise RemoteAgentError(f"{path}: field 'description' must be text")
    from_card = card.get("description") if isinstance(card.get("description"), str) else ""
    card_name = card.get("name") if isinstance(card.get("name"), str) and card.get("name") else name
    description = (description or from_card).strip() or f"Remote agent {card_name[:100]} (Agent2Agent) at {url}."
    definition = AgentDefinition(name=name, description=description[:8192], kind="remote", url=url,
                                 input_schema=QUERY_SCHEMA, source=str(path),
                                 timeout_mins=float(timeout) if timeout is not None else None)
    return definition, RemoteConfig(path=path, name=name, url=url, card=card, streaming=streaming, auth=auth,
                                    timeout_mins=timeout, card_url=card_url or "")


def _check_url(path: Path, field: str, url: str) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteAgentError(f"{path}: field {field!r} must be an http:// or https:// URL, got {url[:200]!r}")


def _check_auth(path: Path, name: str, auth: Any) -> dict[str, Any] | None:
    if auth is None:
        return None
    if not isinstance(auth, dict):
        raise RemoteAgentError(f"{path}: field 'auth' must be a mapping with a 'type'")
    kind = auth.get("type")
    if kind == "oauth":
        raise RemoteAgentError(f"{path}: field 'auth.type': oauth is not supported by gemini-split yet "
                               "(use apiKey, http or google-credentials)")
    if kind not in AUTH_TYPES:
        raise RemoteAgentError(f"{path}: field 'auth.type' must be one of {', '.join(AUTH_TYPES)}, got {kind!r}")
    if kind == "apiKey":
        _secret_field(path, auth, "key")
        if "name" in auth and (not isinstance(auth["name"], str) or not auth["name"].strip()):
            raise RemoteAgentError(f"{path}: field 'auth.name' must be a header name")
    elif kind == "http":
        scheme = auth.get("scheme")
        if not isinstance(scheme, str) or not scheme.strip():
            raise RemoteAgentError(f"{path}: field 'auth.scheme' is required (Bearer, Basic, or another scheme)")
        if scheme.lower() == "bearer":
            _secret_field(path, auth, "token")
        elif scheme.lower() == "basic":
            _secret_field(path, auth, "username")
            _secret_field(path, auth, "password")
        else:
            _secret_field(path, auth, "value")
    elif kind == "google-credentials":
        scopes = auth.get("scopes")
        if scopes is not None and (not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes)):
            raise RemoteAgentError(f"{path}: field 'auth.scopes' must be a list of scope URLs")
    return dict(auth)


def _secret_field(path: Path, auth: dict[str, Any], key: str) -> None:
    if not isinstance(auth.get(key), str) or not auth[key]:
        raise RemoteAgentError(f"{path}: field 'auth.{key}' is required for auth type {auth.get('type')}"
                               + (f" {auth['scheme']}" if auth.get("scheme") else ""))


def _card_object(path: Path, field: str, text: str | bytes) -> dict[str, Any]:
    try:
        card = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RemoteAgentError(f"{path}: field {field!r}: the agent card is not valid JSON ({exc})") from None
    if not isinstance(card, dict):
        raise RemoteAgentError(f"{path}: field {field!r}: the agent card is not a JSON object")
    return card


def _endpoint(path: Path, field: str, card: dict[str, Any]) -> tuple[str, bool]:
    """The card's JSON-RPC URL (v0.3 ``url``, else a v1.0
    ``supportedInterfaces`` entry with binding JSONRPC) and whether it streams."""
    url = card.get("url")
    if not isinstance(url, str) or not url:
        interfaces = card.get("supportedInterfaces")
        url = next((i.get("url") for i in (interfaces if isinstance(interfaces, list) else ())
                    if isinstance(i, dict) and str(i.get("protocolBinding", "")).upper() == "JSONRPC"), None)
    if not isinstance(url, str) or not url:
        raise RemoteAgentError(f"{path}: field {field!r}: the agent card has no 'url' (where the agent answers)")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise RemoteAgentError(f"{path}: field {field!r}: the agent card's 'url' must be an http:// or https:// "
                               f"URL, got {url[:200]!r}")
    capabilities = card.get("capabilities")
    streaming = isinstance(capabilities, dict) and capabilities.get("streaming") is True
    return url, streaming


def httpx_proxy(proxy: str | None) -> dict[str, Any]:
    """httpx's proxy arguments for ``general.proxy`` (None: none given)."""
    # An explicit general.proxy wins; else httpx reads HTTP(S)_PROXY / NO_PROXY.
    return {"proxy": proxy} if proxy else {}


def fetch_card(path: Path, url: str, auth: dict[str, Any] | None, *, proxy: str | None = None,
               environ: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The card at ``url`` (read without credentials; on 401 or 403 once
    more with them, as gemini-cli), at most :data:`MAX_CARD_BYTES`, within
    about :data:`CARD_TIMEOUT` seconds in all (a read under way when they
    run out waits at most what was left when its request began)."""
    import httpx  # lazy_imports.EDGES

    field = "agent_card_url"
    deadline = time.monotonic() + CARD_TIMEOUT
    try:
        with httpx.Client(timeout=httpx.Timeout(CARD_TIMEOUT, connect=CONNECT_TIMEOUT),
                          **httpx_proxy(proxy)) as client:
            body, status = _get_bounded(path, client, url, {}, deadline)
            if status in (401, 403) and auth is not None:
                headers = auth_headers(auth, url, environ or os.environ)
                body, status = _get_bounded(path, client, url, headers, deadline)
    except httpx.TooManyRedirects:
        raise RemoteAgentError(f"{path}: field {field!r}: more than {MAX_REDIRECTS} redirects from {url}") from None
    except (httpx.TimeoutException, _TooSlow):
        raise RemoteAgentError(f"{path}: field {field!r}: the agent card at {url} was not read within "
                               f"{CARD_TIMEOUT:g} seconds") from None
    except httpx.HTTPError as exc:
        raise RemoteAgentError(f"{path}: field {field!r}: cannot read the agent card at {url}: "
                               f"{type(exc).__name__}: {exc}") from None
    except ToolFailed as exc:
        raise RemoteAgentError(f"{path}: field 'auth': {exc}") from None
    if body is None:
        raise RemoteAgentError(f"{path}: field {field!r}: the agent card at {url} is larger than "
                               f"{MAX_CARD_BYTES} bytes")
    if status != 200:
        raise RemoteAgentError(f"{path}: field {field!r}: the agent card at {url} answered HTTP {status}")
    return _card_object(path, field, body)


class _TooSlow(Exception):
    """The card's deadline passed while it was being read."""


def _get_bounded(path: Path, client: Any, url: str, headers: dict[str, str],
                 deadline: float) -> tuple[bytes | None, int]:
    """GET ``url``, following at most :data:`MAX_REDIRECTS` redirects
    itself: ``headers`` (the credentials) go only to ``url``'s own origin,
    never to a place a redirect leads elsewhere (httpx drops only
    ``Authorization`` there, not an ``X-API-Key``)."""
    import httpx  # lazy_imports.EDGES

    origin = _origin(url)
    for _ in range(MAX_REDIRECTS + 1):
        left = deadline - time.monotonic()
        if left <= 0:
            raise _TooSlow
        timeout = httpx.Timeout(left, connect=min(CONNECT_TIMEOUT, left))
        sent = headers if _origin(url) == origin else {}
        with client.stream("GET", url, headers=sent, timeout=timeout, follow_redirects=False) as response:
            if response.is_redirect:
                url = urljoin(url, response.headers.get("location", ""))
                if urlsplit(url).scheme not in ("http", "https"):
                    raise RemoteAgentError(f"{path}: field 'agent_card_url': redirected to a non-http(s) URL "
                                           f"{url[:200]!r}")
                continue
            data = bytearray()
            for chunk in response.iter_bytes():
                data += chunk
                if len(data) > MAX_CARD_BYTES:
                    return None, response.status_code
                if time.monotonic() > deadline:  # a peer that trickles its card
                    raise _TooSlow
            return bytes(data), response.status_code
    raise httpx.TooManyRedirects(f"more than {MAX_REDIRECTS} redirects")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)


# --------------------------------------------------------------------------
# Credentials: resolved on this client, when a card is read or a call is made


def resolve_value(value: str, environ: Mapping[str, str]) -> str:
    """gemini-cli's dynamic values: ``$ENV_VAR`` (its value), ``!command``
    (its trimmed output; run by the user's shell here, at most
    :data:`COMMAND_TIMEOUT` seconds), ``$$…`` / ``!!…`` (the literal
    without the first character), anything else literally. Raises
    :class:`ToolFailed` (``auth_failed``) naming what was missing — never
    the value. Blocking (a command may run): call it in a thread."""
    if value.startswith("$$") or value.startswith("!!"):
        return value[1:]
    if value.startswith("$") and len(value) > 1:
        name = value[1:]
        got = environ.get(name)
        if got is None or got == "":
            raise ToolFailed("auth_failed", f"the environment variable {name} the agent's auth names is not set",
                             "tell the user to set it before starting gemini-split")
        return got
    if value.startswith("!") and len(value) > 1:
        command = value[1:]
        shell = environ.get("SHELL") or "/bin/sh"
        try:
            done = subprocess.run([shell, "-c", command], capture_output=True, env=dict(environ),
                                  stdin=subprocess.DEVNULL, timeout=COMMAND_TIMEOUT, check=False)
        except subprocess.TimeoutExpired:
            raise ToolFailed("auth_failed", f"the agent's auth command ({_first_word(command)}) took longer than "
                                            f"{COMMAND_TIMEOUT:g} seconds") from None
        except OSError as exc:
            raise ToolFailed("auth_failed", f"the agent's auth command could not start: {exc}") from None
        out = done.stdout.decode("utf-8", "replace").strip()
        if done.returncode != 0 or not out:
            raise ToolFailed("auth_failed", f"the agent's auth command ({_first_word(command)}) "
                                            + (f"exited with status {done.returncode}" if done.returncode
                                               else "printed nothing"))
        return out
    return value


def _first_word(command: str) -> str:
    try:
        return shlex.split(command)[0]
    except (ValueError, IndexError):
        return "?"


def auth_headers(auth: dict[str, Any] | None, url: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The headers the auth block gives for a request to ``url``
    (blocking: see :func:`resolve_value`)."""
    if auth is None:
        return {}
    kind = auth["type"]
    if kind == "apiKey":
        return {auth.get("name") or "X-API-Key": resolve_value(auth["key"], environ)}
    if kind == "http":
        scheme = auth["scheme"]
        if scheme.lower() == "bearer":
            return {"Authorization": f"Bearer {resolve_value(auth['token'], environ)}"}
        if scheme.lower() == "basic":
            pair = f"{resolve_value(auth['username'], environ)}:{resolve_value(auth['password'], environ)}"
            return {"Authorization": "Basic " + base64.b64encode(pair.encode()).decode()}
        return {"Authorization": f"{scheme} {resolve_value(auth['value'], environ)}"}
    return {"Authorization": f"Bearer {_google_token(auth, url)}"}


def _google_token(auth: dict[str, Any], url: str) -> str:
    """An access token (``*.googleapis.com``) or identity token
    (``*.run.app``, audience the host) from Application Default
    Credentials; any other host is refused, as in gemini-cli."""
    host = urlsplit(url).hostname or ""
    if not host.endswith(GOOGLE_HOSTS):
        raise ToolFailed("auth_failed", f"google-credentials sends tokens only to *.googleapis.com and *.run.app, "
                                        f"not {host}", "use auth type apiKey or http for this agent")
    try:
        import google.auth
        import google.auth.transport.requests
        import google.oauth2.id_token
    except ImportError:
        raise ToolFailed("auth_failed", "google-credentials needs the google-auth package") from None
    try:
        request = google.auth.transport.requests.Request()
        if host.endswith(".run.app"):
            return google.oauth2.id_token.fetch_id_token(request, f"https://{host}")
        scopes = auth.get("scopes") or ["https://www.googleapis.com/auth/cloud-platform"]
        credentials, _ = google.auth.default(scopes=scopes)
        credentials.refresh(request)
        return credentials.token
    except Exception as exc:  # google-auth's errors are many; the model needs the words
        raise ToolFailed("auth_failed", f"no Google credentials: {type(exc).__name__}: {exc}",
                         "tell the user to run 'gcloud auth application-default login'") from None


# --------------------------------------------------------------------------
# The call


__all__ = ["RemoteAgentError", "RemoteConfig", "auth_headers", "fetch_card", "httpx_proxy", "load_remote",
           "resolve_value"]
