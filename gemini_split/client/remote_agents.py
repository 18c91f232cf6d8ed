"""Remote (Agent2Agent) sub-agents (issue 32): gemini-cli 0.61's
``kind: remote`` definitions, and the A2A call that runs on the client.

A definition (``~/.gemini/agents/*.md`` or ``<project>/.gemini/agents/*.md``)
names ``agent_card_url`` or ``agent_card_json`` (exactly one) and optionally
``auth``; a file may hold a YAML list of them (remote only, as gemini-cli).
:func:`load_remote` checks one and reads its agent card (the card's
description is what the main model is offered), naming the file and the
field for anything wrong.

**Where the call runs.** The credentials (``$ENV_VAR``, ``!command``, a
literal) are the user's: they are resolved here, when the call is made,
and never travel to the server — the definition the server gets
(``AgentDefinition`` with ``kind`` ``remote``) carries the name, the
card's description and the endpoint only. The server, asked by the main
model to delegate, sends this client a ``tool_execution_request`` of the
agent's name; :class:`RemoteAgentTool` (reached through
``ToolExecutor.delegates``) makes the A2A exchange — after the approval
that gemini-cli's default policy asks for agent delegation (kind
``network``: asked in default mode, allowed in yolo, ``--allowed-tools``
and policy rules apply by the agent's name). What the agent says is the
call's output as it comes (``ToolContext.emit_output``; ``client/calls.py``
sends it to a 1.5 server as ``tool_progress``, which the server sends on as
the sub-agent's text), and its answer is the sub-agent's report.

**Protocol.** A2A v0.3 JSON-RPC over HTTP, as gemini-cli speaks it:
``message/send``, or ``message/stream`` (server-sent events) when the card
says ``capabilities.streaming``. The answer's text is the task's artifacts
(else the agent's messages); a failed, rejected or cancelled task is an
error with its message. The ``contextId`` of an agent's last answer is sent
with the next call to it, so a conversation with it goes on. A call that
ends before its task did (cancelled, timed out, its answer too large) sends
``tasks/cancel`` for the task once the agent has named it (a stream's
first event; a ``message/send`` names it only in its answer), within
:data:`CANCEL_TIMEOUT`: the agent stops working on it. The official
``a2a-sdk`` client is asyncio-only (its transports and queues), so this is
a small client over httpx, which runs under Trio.

**Bounds.** A card of at most :data:`MAX_CARD_BYTES`, an answer of at most
:data:`MAX_RESPONSE_BYTES`, the definition's ``timeout_mins`` (default 10)
for the whole exchange, :data:`CONNECT_TIMEOUT` to connect, at most
:data:`MAX_REDIRECTS` redirects for a card and none for a call (no
credential — ``Authorization``, an ``apiKey`` header of any name — is ever
sent to another origin than the card URL's), ``http`` and ``https`` URLs
only. ``general.proxy`` in settings, else ``HTTP(S)_PROXY``
/ ``NO_PROXY``, is the proxy, as in gemini-cli.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shlex
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import trio

from .tools.base import Tool, ToolContext, ToolFailed, ToolKind

#: An agent card larger than this is refused.
MAX_CARD_BYTES = 256 * 1024
#: An answer (all of a stream's events together) larger than this ends the call.
MAX_RESPONSE_BYTES = 1 << 20
#: Seconds to connect, and to read a card: all of it (redirects, a
#: retry with credentials, every byte), not each read.
CONNECT_TIMEOUT = 10.0
CARD_TIMEOUT = 10.0
#: Seconds to tell the agent a task is cancelled (``tasks/cancel``), best effort.
CANCEL_TIMEOUT = 5.0
#: A task in one of these states is over: nothing to cancel.
TERMINAL_STATES = frozenset({"completed", "failed", "canceled", "rejected"})
#: Redirects followed when reading a card (none for a call).
MAX_REDIRECTS = 3
#: The whole exchange's limit when the definition names none (gemini-cli's).
DEFAULT_TIMEOUT_MINS = 10.0
#: A ``!command`` credential's time limit (seconds) and output bound.
COMMAND_TIMEOUT = 30.0
#: gemini-cli's remote definition fields.
KEYS = frozenset({"kind", "name", "description", "display_name", "agent_card_url", "agent_card_json", "auth",
                  "timeout_mins"})
#: The auth types gemini-cli has; ``oauth`` is refused by name.
AUTH_TYPES = ("apiKey", "http", "google-credentials", "oauth")
#: ``google-credentials`` sends tokens to these hosts only (gemini-cli's rule).
GOOGLE_HOSTS = (".googleapis.com", ".run.app")
_QUERY_SCHEMA: dict[str, Any] = {
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
                                 input_schema=_QUERY_SCHEMA, source=str(path),
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


def _proxy(proxy: str | None) -> dict[str, Any]:
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
                          **_proxy(proxy)) as client:
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
# Credentials: resolved here, when a call is made


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


class RemoteAgentTool(Tool):
    """One remote agent as a client tool (not offered in ``tool_discovery``:
    the server offers it to the model as a sub-agent and asks for it by
    name). Kind ``network``: asked before it runs in default mode."""

    kind = ToolKind.NETWORK

    def __init__(self, definition: Any, config: RemoteConfig, *, environ: Mapping[str, str] | None = None,
                 proxy: str | None = None):
        self.name = definition.name  # type: ignore[misc]
        self.description = definition.description  # type: ignore[misc]
        self.parameters = _QUERY_SCHEMA  # type: ignore[misc]
        self.config = config
        self.definition = definition
        #: ``timeout_mins`` as ``agents.overrides`` left it (``maxTimeMinutes``).
        self.timeout_mins = definition.timeout_mins
        self.environ = environ if environ is not None else os.environ
        self.proxy = proxy
        #: The conversation with the agent: its last answer's contextId.
        self.context_id: str | None = None

    def describe(self, args: dict[str, Any], workspace: Any) -> str:
        return (f"Delegate to the remote agent {self.name} (Agent2Agent) at {self.config.url}:\n"
                f"{args.get('query', '')}")

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        minutes = self.timeout_mins or DEFAULT_TIMEOUT_MINS
        with trio.move_on_after(minutes * 60) as deadline:
            return await self._exchange(str(args.get("query", "")), ctx)
        if deadline.cancelled_caught:
            raise ToolFailed("timeout", f"the remote agent {self.name} did not answer within "
                                        f"{_minutes(minutes * 60)}", "do not retry the same request now")

    async def _exchange(self, query: str, ctx: ToolContext) -> str:
        import httpx  # lazy_imports.EDGES

        message: dict[str, Any] = {"kind": "message", "role": "user", "messageId": str(uuid.uuid4()),
                                   "parts": [{"kind": "text", "text": query}]}
        if self.context_id:
            message["contextId"] = self.context_id
        method = "message/stream" if self.config.streaming else "message/send"
        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": {"message": message}}
        answer = _Answer(self.name)
        timeout = httpx.Timeout(None, connect=CONNECT_TIMEOUT)
        async with httpx.AsyncClient(timeout=timeout, follow_redirects=False, **_proxy(self.proxy)) as client:
            for attempt in range(3):  # 401/403: credentials fetched again, twice at most (gemini-cli)
                headers = {"Content-Type": "application/json",
                           "Accept": "text/event-stream" if self.config.streaming else "application/json",
                           **await trio.to_thread.run_sync(
                               auth_headers, self.config.auth, self.config.url, self.environ)}
                try:
                    status = await self._post(client, body, headers, answer, ctx)
                except httpx.HTTPError as exc:
                    raise ToolFailed("unreachable", f"the remote agent {self.name} at {self.config.url} could not "
                                                    f"be reached: {type(exc).__name__}: {exc or 'no answer'}",
                                     "do not retry now; tell the user the agent is down") from None
                except BaseException:  # cancelled, timed out, too large: the task goes on there
                    if answer.task_id and answer.state not in TERMINAL_STATES:
                        with trio.CancelScope(shield=True):
                            await self._cancel_task(client, answer.task_id, headers)
                    raise
                if status in (401, 403) and self.config.auth is not None and attempt < 2:
                    continue
                break
        if status in (301, 302, 303, 307, 308):
            raise ToolFailed("remote_error", f"the remote agent {self.name} redirected the call (HTTP {status}); "
                                             "a call is not followed elsewhere")
        if status != 200:
            raise ToolFailed("remote_error" if status not in (401, 403) else "auth_failed",
                             f"the remote agent {self.name} answered HTTP {status}"
                             + (f": {answer.error_text}" if answer.error_text else ""))
        if answer.contextId:
            self.context_id = answer.contextId
        return answer.report()

    async def _cancel_task(self, client: Any, task_id: str, headers: dict[str, str]) -> None:
        """``tasks/cancel`` for ``task_id``, within :data:`CANCEL_TIMEOUT`;
        whatever comes of it (the call is over either way)."""
        import httpx  # lazy_imports.EDGES

        body = {"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": "tasks/cancel", "params": {"id": task_id}}
        with trio.move_on_after(CANCEL_TIMEOUT):
            try:
                await client.post(self.config.url, json=body, headers={**headers, "Accept": "application/json"})
            except httpx.HTTPError:
                pass

    async def _post(self, client: Any, body: dict[str, Any], headers: dict[str, str], answer: _Answer,
                    ctx: ToolContext) -> int:
        async with client.stream("POST", self.config.url, json=body, headers=headers) as response:
            if response.status_code != 200:
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    data += chunk
                    if len(data) > 4096:
                        break
                answer.error_text = data[:300].decode("utf-8", "replace").strip()
                return response.status_code
            if "text/event-stream" in response.headers.get("content-type", ""):
                # Lines split here, after counting the bytes: a peer that
                # never sends a newline is stopped at the bound too.
                data_lines: list[str] = []
                pending = b""
                async for chunk in response.aiter_bytes():
                    answer.count(len(chunk))
                    pending += chunk
                    *lines, pending = pending.split(b"\n")
                    for raw in lines:
                        line = raw.rstrip(b"\r").decode("utf-8", "replace")
                        if line.startswith("data:"):
                            data_lines.append(line[5:].lstrip())
                        elif not line.strip() and data_lines:
                            answer.take(_rpc_result(self.name, "\n".join(data_lines)))
                            data_lines = []
                            for piece in answer.said():
                                await ctx.emit_output(piece, "stdout")
                if pending.startswith(b"data:"):
                    data_lines.append(pending[5:].decode("utf-8", "replace").strip())
                if data_lines:
                    answer.take(_rpc_result(self.name, "\n".join(data_lines)))
            else:
                data = bytearray()
                async for chunk in response.aiter_bytes():
                    answer.count(len(chunk))
                    data += chunk
                answer.take(_rpc_result(self.name, data.decode("utf-8", "replace")))
            for piece in answer.said():
                await ctx.emit_output(piece, "stdout")
            return 200


def _rpc_result(name: str, text: str) -> Any:
    try:
        reply = json.loads(text)
    except ValueError:
        raise ToolFailed("remote_error", f"the remote agent {name} answered something that is not JSON-RPC "
                                         f"({text[:80]!r})") from None
    if not isinstance(reply, dict):
        raise ToolFailed("remote_error", f"the remote agent {name} answered something that is not JSON-RPC")
    error = reply.get("error")
    if error is not None:
        words = error.get("message") if isinstance(error, dict) else str(error)
        raise ToolFailed("remote_error", f"the remote agent {name} refused the task: {str(words)[:500]}")
    return reply.get("result")


class _Answer:
    """What came back: the agent's messages, the task's artifacts, its
    state — folded from a ``message/send`` result or a stream's events."""

    def __init__(self, name: str):
        self.name = name
        self.size = 0
        self.messages: list[str] = []
        self.artifacts: dict[str, list[str]] = {}
        self.state = ""
        self.contextId: str | None = None
        #: The task's id, once the agent has named it (``tasks/cancel``).
        self.task_id: str | None = None
        self.error_text = ""
        #: Text not yet shown (``said``), and whether any was.
        self._new: list[str] = []
        self._shown = False

    def said(self) -> list[str]:
        """The text that came since the last call, to show as it arrives
        (the agent's messages, its artifacts' parts)."""
        out, self._new = self._new, []
        return out

    def _show(self, text: str, *, joined: bool = False) -> None:
        if text:
            self._new.append(text if joined or not self._shown else "\n\n" + text)
            self._shown = True

    def count(self, n: int) -> None:
        self.size += n
        if self.size > MAX_RESPONSE_BYTES:
            raise ToolFailed("too_large", f"the remote agent {self.name} answered more than "
                                          f"{MAX_RESPONSE_BYTES >> 20} MiB; the call was stopped",
                             "ask it for a shorter answer")

    def take(self, result: Any) -> None:
        if not isinstance(result, dict):
            return
        if isinstance(result.get("contextId"), str):
            self.contextId = result["contextId"]
        kind = result.get("kind")
        task_id = result.get("id") if kind == "task" else result.get("taskId")
        if isinstance(task_id, str) and task_id:
            self.task_id = task_id
        if kind == "message":
            self._message(result)
        elif kind == "task":
            status = result.get("status") or {}
            for item in result.get("history") or ():
                if isinstance(item, dict) and item.get("role") == "agent":
                    self._message(item)
            self._status(status)
            for artifact in result.get("artifacts") or ():
                self._artifact(artifact, append=False)
        elif kind == "status-update":
            self._status(result.get("status") or {})
        elif kind == "artifact-update":
            self._artifact(result.get("artifact") or {}, append=bool(result.get("append")))

    def _status(self, status: dict[str, Any]) -> None:
        self.state = str(status.get("state") or self.state)
        if isinstance(status.get("message"), dict):
            self._message(status["message"])

    def _message(self, message: dict[str, Any]) -> None:
        text = _text_of(message.get("parts"))
        if text and (not self.messages or self.messages[-1] != text):
            self.messages.append(text)
            self._show(text)

    def _artifact(self, artifact: dict[str, Any], *, append: bool) -> None:
        key = str(artifact.get("artifactId") or len(self.artifacts))
        text = _text_of(artifact.get("parts"))
        if append:
            self.artifacts.setdefault(key, []).append(text)
        else:
            self.artifacts[key] = [text]
        self._show(text, joined=append)

    def report(self) -> str:
        """The sub-agent's report; raises :class:`ToolFailed` for a task
        that failed, was rejected or cancelled."""
        artifacts = "\n\n".join("".join(parts) for parts in self.artifacts.values() if "".join(parts).strip())
        said = "\n\n".join(self.messages)
        if self.state in ("failed", "rejected", "canceled"):
            raise ToolFailed("remote_error", f"the remote agent {self.name}'s task {self.state}"
                                             + (f": {said[-500:]}" if said else ""))
        text = artifacts or said
        if self.state in ("input-required", "auth-required"):
            text += f"\n\n(The remote agent needs {self.state.split('-')[0]} to go on: call it again with it.)"
        if not text.strip():
            raise ToolFailed("remote_error", f"the remote agent {self.name} answered no text")
        return text


def _text_of(parts: Any) -> str:
    out = []
    for part in parts or ():
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            out.append(part["text"])
        elif "data" in part:
            out.append(json.dumps(part["data"], ensure_ascii=False))
    return "\n".join(out)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:g} minutes" if seconds >= 60 else f"{seconds:g} seconds"


class RemoteAgents:
    """The remote agents' client tools, by name, made from a discovery's
    agents (``client.agents.Discovery``) and kept while their definition
    stays the same (so a conversation's ``contextId`` survives
    ``/agents reload``)."""

    def __init__(self, environ: Mapping[str, str] | None = None, proxy: str | None = None):
        self.environ = environ
        self.proxy = proxy
        self._tools: dict[str, RemoteAgentTool] = {}

    def get(self, discovery: Any, name: str) -> RemoteAgentTool | None:
        agent = discovery.get(name) if discovery is not None else None
        remote = getattr(agent, "remote", None)
        if agent is None or remote is None or not agent.enabled:
            return None
        tool = self._tools.get(name)
        if tool is None or tool.config is not remote or tool.definition != agent.definition:
            context_id = tool.context_id if tool is not None and tool.config is remote else None
            tool = self._tools[name] = RemoteAgentTool(agent.definition, remote, environ=self.environ,
                                                       proxy=self.proxy)
            tool.context_id = context_id
        return tool


__all__ = ["RemoteAgentError", "RemoteConfig", "RemoteAgentTool", "RemoteAgents", "load_remote", "fetch_card",
           "resolve_value"]
