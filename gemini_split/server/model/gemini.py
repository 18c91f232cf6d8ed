"""Gemini through google-genai, on Trio.

google-genai's async client only runs under Trio when it is handed an
``httpx2.AsyncClient`` (or httpx's) that we created
(``HttpOptions(httpx_async_client=…)``); otherwise it reaches for asyncio and
fails. This module is imported only when a server really talks to Gemini:
``import google.genai`` alone costs about 0.45 s, which a thin client must
never pay.

google-genai builds each request (URL, API key, headers, the wire shape of
the config) and reads each error; the per-turn and per-chunk pydantic work
it would do for the common shapes is skipped (:mod:`.wire`, checked
against google-genai's types by tests/server/gemini): measured, it was most of a
busy server's CPU. The request goes out through :mod:`.http1` (h11 on
Trio's sockets: httpx's layers cost more CPU than the rest of a streamed
request), or through httpx when a proxy is configured. A streamed body is
read in blocks of many events, not an event at a time: h11 hands over
every whole HTTP chunk it holds at once
(:mod:`.h11_chunks`) and :class:`SseEvents` splits them as google-genai
would; a fast answer costs about 9 µs of CPU a chunk here (48 µs before).
"""

from __future__ import annotations

import json
import logging
import os
import re
import ssl
import urllib.request
from collections import OrderedDict
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import certifi
import httpx2 as httpx
import msgspec
from google import genai
from google.genai import _api_client as genai_api_client
from google.genai import _common as genai_common
from google.genai import _extra_utils as genai_extra
from google.genai import errors as genai_errors
from google.genai import models as genai_models
from google.genai import types

from gemini_split.protocol import ToolSpec, Usage

from .base import (
    Chunk,
    FunctionCallChunk,
    GroundingChunk,
    Model,
    ModelAuthError,
    ModelError,
    ModelRequest,
    PartChunk,
    TextChunk,
    ThoughtChunk,
    UsageChunk,
)
from . import h11_chunks
from .wire import fast_chunks, plain_text, wire_content
from .credentials import AccessTokens, ModelAuth
from .http1 import Http1Client
from .names import is_valid_model_name

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({429, 499, 500, 502, 503, 504})


class GeminiModel(Model):
    """``api_key`` is required; ``base_url`` defaults to google-genai's own
    (which honours ``GOOGLE_GEMINI_BASE_URL``).

    google-genai builds every request (URL, headers, API key, the shape of
    the config and of any unusual history entry) and reads every error and
    every unusual chunk. What it does slowly for the common case is done
    here instead, with the same result (:mod:`.wire`): the per-session
    config (system instruction, tools) is converted once and kept, history
    entries of the usual shapes are written directly, and streamed chunks
    of the usual shapes are read with msgspec instead of pydantic."""

    def __init__(self, api_key: str | None = None, *, base_url: str | None = None, timeout: float = 300.0,
                 auth: ModelAuth | None = None):
        if auth is None:
            if not api_key:
                raise ValueError("an API key is required for the Gemini API")
            auth = ModelAuth("api-key", api_key=api_key, key_source="the client that opened the session",
                             base_url=base_url)
        #: How this model reaches Gemini (:meth:`ModelAuth.describe` may be shown).
        self.auth = auth
        base_url = auth.base_url
        # One TLS context for everything google-genai would otherwise build
        # three of (sync client, async client, websockets): each load of the
        # CA bundle costs ~20 ms of start-up. Same trust as google-genai's own.
        tls = ssl.create_default_context(
            cafile=os.environ.get("SSL_CERT_FILE", certifi.where()),
            capath=os.environ.get("SSL_CERT_DIR"),
        )
        http_timeout = httpx.Timeout(timeout, connect=10.0)
        # A streamed answer is one HTTP chunk per response: read whole runs
        # of them at once (about 7x less CPU per chunk; see h11_chunks).
        h11_chunks.install()
        # The requests themselves: h11 over Trio's sockets (see .http1:
        # httpx's layers cost more CPU than the rest of a streamed request),
        # no cap on connections (each session streams at most one request,
        # so sessions bound them), idle ones kept alive. Through httpx (and
        # its proxy transport) instead when the environment names a proxy.
        self._http1 = Http1Client(tls, max_idle=100)
        self._timeout = http_timeout
        self._proxied = httpx.AsyncClient(timeout=http_timeout, verify=tls) if _proxy_configured() else None
        # google-genai's own clients, never used for our requests, but
        # google-genai builds them unless given them (and its async one
        # would need asyncio): no connection is ever opened on them.
        self._http = httpx.AsyncClient(timeout=http_timeout, verify=tls)
        self._sync_http = httpx.Client(timeout=http_timeout, verify=tls)
        self._closed = False
        options = types.HttpOptions(
            httpx_async_client=self._http,
            httpx_client=self._sync_http,
            async_client_args={"ssl": tls},
        )
        if base_url:
            options.base_url = base_url
        #: The shared bearer token (Vertex AI with credentials), else None.
        self._tokens: AccessTokens | None = None
        if not auth.vertex:
            self._client = genai.Client(api_key=auth.api_key, http_options=options)
        elif auth.api_key:  # Vertex AI express mode
            self._client = genai.Client(vertexai=True, api_key=auth.api_key, http_options=options)
        else:
            # Project and location passed explicitly: with a base URL and
            # without them google-genai takes its "API gateway" path (no
            # project in the path). The token is ours (see AccessTokens):
            # google-genai's own refresh would block the loop.
            self._client = genai.Client(vertexai=True, project=auth.project, location=auth.location,
                                        credentials=auth.credentials, http_options=options)
            self._tokens = AccessTokens(auth.credentials, auth.credential_source)
            quota = getattr(auth.credentials, "quota_project_id", None)
            self._extra_headers = [(b"x-goog-user-project", quota.encode("latin-1"))] if quota else []
        self._api = self._client._api_client
        self._vertex = auth.vertex
        #: (model, system instruction, grounding, tool specs' JSON) → the
        #: request's config fields in wire form and the URL path, and
        #: (model, grounding, tool specs' JSON) → the tool declarations;
        #: see :meth:`_prepared`.
        self._prepared_cache: OrderedDict[tuple, _Prepared] = OrderedDict()
        self._tools_cache: OrderedDict[tuple, Any] = OrderedDict()

    @property
    def auth_description(self) -> str:
        """How this model reaches Gemini, for people (never a secret)."""
        return self.auth.describe()

    async def check_credentials(self) -> bool | None:
        """Whether an access token can be had now (``/ready``); None
        without credentials to refresh (an API key)."""
        if self._tokens is None:
            return None
        try:
            await self._tokens.header()
        except ModelError:
            return False
        return True

    def warm_up(self, model: str) -> None:
        """google-genai builds its request types' validators on first use
        (tens of ms; more on a loaded machine): have it build them for a
        request with a tool and a system instruction, as sessions send."""
        if is_valid_model_name(model):
            self._prepared(ModelRequest(model=model, contents=[], system_instruction=".", tools=[ToolSpec(
                name="warm_up", description=".", parameters={"type": "object", "properties": {}})]))

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        # The name becomes part of the request's URL path: never let one
        # through that is not a model name (sessions check first; this is
        # the last line before google-genai, which only refuses a literal "..").
        if not is_valid_model_name(request.model):
            raise ModelError(f"{request.model[:60]!r} is not a Gemini model name", retryable=False)
        try:
            # One generator step per block received, not per chunk: a long
            # answer is tens of thousands of them.
            async for chunks in self._responses(request):
                for chunk in chunks:
                    yield chunk
        except genai_errors.APIError as exc:
            raise _translate_api_error(exc, self.auth) from None
        except httpx.ConnectError as exc:
            raise ModelError(
                f"cannot reach {'Vertex AI' if self._vertex else 'the Gemini API'} at {_base_url(self)}: "
                f"{exc or 'connection failed'}. Check the network, or "
                f"{'GOOGLE_VERTEX_BASE_URL' if self._vertex else 'GOOGLE_GEMINI_BASE_URL'} if you set it.",
                retryable=False,
            ) from None
        except httpx.TimeoutException as exc:
            raise ModelError(f"the Gemini API timed out ({type(exc).__name__})", retryable=True) from None
        except httpx.TransportError as exc:
            raise ModelError(
                f"the connection to the Gemini API broke: {type(exc).__name__}: {exc}", retryable=True
            ) from None

    async def _responses(self, request: ModelRequest) -> AsyncIterator[list[Chunk]]:
        """The chunks of the streamed responses, a list per block received: google-genai's
        ``generate_content_stream`` (automatic function calling off), hop by
        hop. A hop is one HTTP request, read as google-genai's
        ``_async_request_once`` and ``_aiter_response_stream`` read it, with
        our chunk reader. A stream the API ends with a continuation token
        is resumed from it, as google-genai's ``StreamContinuation`` does
        (usage summed over hops; a hop that fails before any chunk raises; a
        hop that breaks after a new checkpoint resumes from it)."""
        prepared = self._prepared(request)
        contents = [wire_content(c) or self._typed_content(request.model, c) for c in request.contents]
        state = _Continuation()
        while True:
            hop = state.start_hop()
            body = dict(prepared.config_body) if hop.start_token is None else self._continuation_config(
                request, hop.start_token)
            body["contents"] = contents
            error: Exception | None = None
            try:
                if self._closed:
                    raise ModelError("the model was closed (the server is shutting down)", retryable=False)
                headers = prepared.headers
                if self._tokens is not None:
                    headers = [*headers, *self._extra_headers,
                               (b"Authorization", (await self._tokens.header()).encode("latin-1"))]
                response = await self._post(prepared, headers, msgspec.json.encode(body))
                try:
                    if response.status_code != 200:
                        await genai_errors.APIError.raise_for_async_response(await response.as_httpx())
                    events = SseEvents()
                    async for block in response.blocks():
                        async for chunks in self._read_events(events.feed(block), response, state):
                            yield chunks
                    async for chunks in self._read_events(events.close(), response, state):
                        yield chunks
                finally:  # its connection idle (release_idle may close it) or closed
                    await response.aclose()
            except Exception as exc:  # as google-genai: end_hop decides what is raised
                error = exc
            if not state.end_hop(error):
                return

    async def _post(self, prepared: _Prepared, headers: list[tuple[bytes, bytes]], body: bytes) -> Any:
        """The response to one request, its head read (an
        :class:`.http1.Http1Response`, or httpx's read as one through a proxy)."""
        if self._proxied is None:
            return await self._http1.post(prepared.url, headers, body, prepared.timeout)
        http = self._proxied
        sent = http.build_request("POST", prepared.url, content=body, headers=headers, timeout=prepared.timeout)
        return _ProxiedResponse(await http.send(sent, stream=True))

    async def release_idle(self) -> None:
        """Close every kept-alive connection no request is using (a burst
        of sessions leaves hundreds, each holding buffers and parser state;
        an idle server needs none); the next request opens a new one. The
        request bodies prepared for each system instruction go too (one per
        session's workspace and context: up to 2,048 of a few KB); the tool
        declarations, shared by every session, stay."""
        self._prepared_cache = OrderedDict()  # a new one: an emptied dict keeps its largest table
        await self._http1.close_idle()

    async def aclose(self) -> None:
        """Close every connection (a request still running on one fails)
        and google-genai's clients. Idempotent."""
        self._closed = True
        await self._http1.aclose()
        if self._proxied is not None:
            await self._proxied.aclose()
        await self._http.aclose()
        self._sync_http.close()

    async def _read_events(self, events: list[bytes | str], response: Any,
                           state: _Continuation) -> AsyncIterator[list[Chunk]]:
        """The chunks of the streamed responses a block completed (usage
        counting earlier hops): the usual shapes read by
        :func:`.wire.fast_chunks`, together; anything else by
        google-genai's typed layer, which may raise (after what came before
        it was yielded).

        Responses that are one plain text (or thought) part each and came
        in the same block become one part and one text chunk: they arrived
        at the same instant, so nobody waits for the joined text; the
        history would join them anyway (``merge_text_parts``), and the
        agent loop handles one delta instead of hundreds. The request's
        first such text is yielded alone, before the rest of its block is
        read: that is the time to first delta."""
        hop = state.hop
        batch: list[Chunk] = []
        run: list[str] = []  # texts of the plain parts just read
        run_kind: type = TextChunk
        for event in events:
            text = plain_text(event)
            if text is not None:
                # What fast_chunks would give, [PartChunk, TextChunk], taken
                # straight into the run (most events of a long answer).
                hop.received_any_chunk = hop.has_yielded_content = True
                if run and run_kind is not TextChunk:
                    _close_run(batch, run, run_kind)
                run.append(text)
                run_kind = TextChunk
                if not state.answered:
                    state.answered = True  # the first text goes on alone (below)
                    _close_run(batch, run, run_kind)
                    yield batch
                    batch = []
                continue
            fast = fast_chunks(event)
            if fast is not None:
                chunks = fast.chunks
                hop.observe(content=any(type(c) is PartChunk for c in chunks),
                            finish_reason=fast.finish_reason, token=None, prompt_feedback=False)
                if len(chunks) == 2:
                    part, meaning = chunks
                    kind = type(meaning)
                    if (kind is TextChunk and len(part.part) == 1) or (
                            kind is ThoughtChunk and len(part.part) == 2 and part.part.get("thought") is True):
                        if run and kind is not run_kind:
                            _close_run(batch, run, run_kind)
                        run.append(meaning.text)
                        run_kind = kind
                        if not state.answered:
                            # The answer's first text goes on at once, alone:
                            # the rest of its block (maybe hundreds of events)
                            # is read after it (see server/session/priority.py).
                            state.answered = True
                            _close_run(batch, run, run_kind)
                            yield batch
                            batch = []
                        continue
            else:
                if run:
                    _close_run(batch, run, run_kind)
                if batch:
                    yield batch
                    batch = []
                if isinstance(event, bytes):
                    event = event.decode("utf-8", errors="replace")  # as google-genai decodes lines
                typed = await _typed_response(event, response, vertex=self._vertex)
                chunks = chunks_of(typed)
                candidate = typed.candidates[0] if typed.candidates else None
                hop.observe(
                    content=bool(candidate and candidate.content and candidate.content.parts),
                    finish_reason=candidate.finish_reason if candidate else None,
                    token=candidate.continuation_token if candidate else None,
                    prompt_feedback=typed.prompt_feedback is not None)
            if run:
                _close_run(batch, run, run_kind)
            if chunks and type(chunks[-1]) is UsageChunk:  # usage is always last
                chunks[-1] = state.with_usage(chunks[-1])
            batch += chunks
        if run:
            _close_run(batch, run, run_kind)
        if batch:
            yield batch

    # --- requests through google-genai's types, kept ---------------------------------

    def _prepared(self, request: ModelRequest) -> _Prepared:
        """The config fields of the request body (system instruction, tools,
        generation config) and the URL path, as google-genai writes them.

        Converting them is most of google-genai's cost of a request (about
        8 ms with a full tool set), and they rarely change: kept by content,
        so a session's later turns, and every session that announced the
        same tools, reuse them; the tool declarations (the heavy part) are
        kept apart from the system instruction (which names the session's
        workspace and context files)."""
        tools_key = msgspec.json.encode(request.tools)
        key = (request.model, request.system_instruction, request.google_search, request.temperature, tools_key)
        cached = _lru_get(self._prepared_cache, key)
        if cached is not None:
            return cached
        tools_key = (request.model, request.google_search, tools_key)
        tools_wire = _lru_get(self._tools_cache, tools_key)
        if tools_wire is None:
            tools_wire = self._to_wire(request.model, [_PLACEHOLDER], types.GenerateContentConfig(
                tools=_tools(request))).get("tools", ())
            _lru_put(self._tools_cache, tools_key, tools_wire)
        body = self._to_wire(request.model, [_PLACEHOLDER], _config(request, tools=False))
        path = "{model}:streamGenerateContent?alt=sse".format_map(body.pop("_url"))
        query = body.pop("_query", None)
        if query:
            raise ModelError(f"unexpected query parameters in a Gemini request: {query!r}", retryable=False)
        body.pop("contents", None)
        body.pop("config", None)
        if tools_wire:
            body["tools"] = tools_wire
        # URL, key and headers as google-genai builds them (the same for
        # every request to this path): built and parsed once.
        http_request = self._api._build_request("post", path, {}, None)
        # google-genai's timeout (in seconds, from its HttpOptions) bounds
        # each wait for the answer; ours (the model's) when it sets none.
        timeout = self._timeout if http_request.timeout is None else httpx.Timeout(
            http_request.timeout, connect=self._timeout.connect)
        prepared = _Prepared(config_body=body, path=path,
                             url=httpx.URL(self._api._httpx_url(http_request.url, is_async=True)),
                             headers=[*((name.encode("latin-1"), value.encode("latin-1"))
                                        for name, value in http_request.headers.items()), _IDENTITY],
                             timeout=timeout)
        _lru_put(self._prepared_cache, key, prepared)
        return prepared

    def _continuation_config(self, request: ModelRequest, token: bytes) -> dict[str, Any]:
        config = genai_extra.prepare_continuation_config(_config(request), token)
        body = self._to_wire(request.model, [_PLACEHOLDER], config)
        for key in ("_url", "_query", "contents", "config"):
            body.pop(key, None)
        return body

    def _typed_content(self, model: str, content: Any) -> dict[str, Any]:
        """One history entry through google-genai's own conversion."""
        return self._to_wire(model, [content], None)["contents"][0]

    def _to_wire(self, model: str, contents: list[Any], config: types.GenerateContentConfig | None) -> dict[str, Any]:
        """What google-genai's ``_generate_content_stream`` sends."""
        parameters = types._GenerateContentParameters(model=model, contents=contents, config=config)
        convert = (genai_models._GenerateContentParameters_to_vertex if self._vertex
                   else genai_models._GenerateContentParameters_to_mldev)
        body = convert(self._api, parameters, None, parameters)
        return genai_common.encode_unserializable_types(genai_common.convert_to_dict(body))


class SseEvents:
    """google-genai's ``_aiter_response_stream`` reading of a streamed
    response body, fed block by block: :meth:`feed` returns the events a
    block completes, :meth:`close` the rest at the end of the body.

    Blocks of one-line ``data: …`` events with CRLF line ends (how the API
    and the fake send them) take a fast path: the payloads, as bytes, with
    no line splitting or decoding (the JSON reader takes bytes; invalid
    UTF-8 falls back to google-genai's reading, decoded as google-genai
    decodes lines, replacing); a partial last line waits for the next
    block. Anything else goes through google-genai's own line decoder and
    raw-JSON buffer, line by line as it does. Either way the events are the
    ones google-genai would yield (tests/server/gemini checks it on split and
    unusual streams)."""

    def __init__(self) -> None:
        self._lines = genai_api_client._SseLineDecoder()
        self._raw = genai_api_client._RawJsonLineBuffer()
        self._raw_pending = False
        self._data: list[str] = []
        #: Nothing is held but ``_tail``: the fast path applies.
        self._clean = True
        #: The start of the next line (and maybe the start of its line
        #: break), kept by the fast path for the next block.
        self._tail = b""

    def feed(self, block: bytes) -> list[bytes | str]:
        out: list[bytes | str] = []
        if not self._clean:
            self._decode(block, out)
            return out
        data = self._tail + block if self._tail else block
        self._tail = b""
        cut = data.rfind(b"\r\n\r\n") + 4
        if cut >= 4:
            events = data[:cut - 4].split(b"\r\n\r\n")
            whole = data[:cut] if cut < len(data) else data
            n = 2 * len(events)  # a CR and LF pair ends each line: no other line break anywhere
            if whole.count(b"\n") == n and whole.count(b"\r") == n and all(e[:6] == b"data: " for e in events):
                out = [e[6:] for e in events]
                data = data[cut:]  # after whole events nothing is pending: clean
        if _partial_line(data):
            self._tail = data  # read with the next block
        else:
            self._decode(data, out)
        return out

    def close(self) -> list[bytes | str]:
        out: list[bytes | str] = []
        if self._tail:
            self._decode(self._tail, out)
            self._tail = b""
        for line in self._lines.flush():
            self._line(line, out)
        remaining = self._raw.flush()
        if remaining:
            out.append(remaining)
        if self._data:
            out.append("\n".join(self._data))
            self._data = []
        self._raw_pending = False
        self._clean = True
        return out

    def _decode(self, data: bytes, out: list[bytes | str]) -> None:
        """google-genai's way, line by line."""
        for line in self._lines.decode(data):
            self._line(line, out)
        self._clean = data[-1:] == b"\n" and not self._data and not self._raw_pending

    def _line(self, line: str, out: list[bytes | str]) -> None:
        """One line, as ``_aiter_response_stream``'s loop takes it."""
        if not line:
            if self._data:
                out.append("\n".join(self._data))
                self._data = []
            return
        if line.startswith("data: "):
            self._data.append(line[len("data: "):])
            return
        chunk = self._raw.add_line(line)
        self._raw_pending = chunk is None
        if chunk is not None:
            out.append(chunk)


def _close_run(batch: list[Chunk], run: list[str], kind: type) -> None:
    """Append the part and the text chunk of a run of plain parts' texts
    (emptied)."""
    text = "".join(run) if len(run) > 1 else run[0]
    run.clear()
    part = {"text": text} if kind is TextChunk else {"text": text, "thought": True}
    batch.append(PartChunk(part))
    batch.append(kind(text))


def _partial_line(data: bytes) -> bool:
    """Whether ``data`` is at most one line cut before the end of its event
    (before or inside the CR LF CR LF that ends it): holding it back
    delays no event."""
    line = data.rstrip(b"\r\n")
    return data[len(line):] in (b"", b"\r", b"\r\n", b"\r\n\r") and b"\n" not in line and b"\r" not in line


def _base_url(model: GeminiModel) -> str:
    try:
        return model._client._api_client._http_options.base_url or "the Gemini API"
    except AttributeError:
        return "the Gemini API"


#: The answer unencoded (said outright: a request without Accept-Encoding
#: accepts any encoding): what the stream reader reads, and no CPU spent
#: inflating it.
_IDENTITY = (b"Accept-Encoding", b"identity")
#: Configs (and tool sets) kept converted (each a few KB of tool schemas).
_PREPARED_CACHE_SIZE = 2048
#: Stands for the contents when only the config part of a body is wanted.
_PLACEHOLDER = {"role": "user", "parts": [{"text": "."}]}


@dataclass(frozen=True)
class _Prepared:
    config_body: dict[str, Any]
    path: str
    url: Any
    headers: list[tuple[bytes, bytes]]
    timeout: Any


class _ProxiedResponse:
    """httpx's streamed response (through a proxy), read as an
    :class:`.http1.Http1Response` is."""

    def __init__(self, response: Any):
        self._response = response
        self.status_code: int = response.status_code
        self.headers = response.headers

    def blocks(self) -> AsyncIterator[bytes]:
        return self._response.aiter_bytes()

    async def as_httpx(self) -> Any:
        await self._response.aread()
        return self._response

    async def aclose(self) -> None:
        await self._response.aclose()


def _proxy_configured() -> bool:
    """Whether the environment names a proxy (``HTTP(S)_PROXY``,
    ``ALL_PROXY``, in either case): then every request goes through httpx,
    which applies them (and ``NO_PROXY``) as it always has."""
    return any(key in ("http", "https", "all") for key in urllib.request.getproxies())


def _lru_get(cache: OrderedDict, key: Any) -> Any:
    value = cache.get(key)
    if value is not None:
        cache.move_to_end(key)
    return value


def _lru_put(cache: OrderedDict, key: Any, value: Any) -> None:
    cache[key] = value
    while len(cache) > _PREPARED_CACHE_SIZE:
        cache.popitem(last=False)


@dataclass
class _Hop:
    """What google-genai's ``_StreamHop`` records of one HTTP request."""

    start_token: bytes | None = None
    token: bytes | None = None
    finish_reason: Any = None
    received_any_chunk: bool = False
    has_yielded_content: bool = False
    has_prompt_feedback: bool = False
    usage: Usage | None = None

    def observe(self, *, content: bool, finish_reason: Any, token: bytes | None, prompt_feedback: bool) -> None:
        self.received_any_chunk = True
        if prompt_feedback:
            self.has_prompt_feedback = True
        if content:
            self.has_yielded_content = True
        if finish_reason:
            self.finish_reason = finish_reason
        if token:
            self.token = token
        elif finish_reason and not _resumable(finish_reason):
            self.token = None


def _resumable(finish_reason: Any) -> bool:
    return finish_reason is None or finish_reason == types.FinishReason.CONTINUATION


@dataclass
class _Continuation:
    """google-genai's ``StreamContinuation`` (automatic continuation is on by
    default there, and our config leaves it so), over our chunks."""

    hop: _Hop = field(default_factory=_Hop)
    #: Usage of the finished hops, summed.
    accumulated: Usage | None = None
    resume_token: bytes | None = None
    reconnects_without_progress: int = 0
    last_error: Exception | None = None
    #: Whether a text (or thought) of the answer was yielded yet.
    answered: bool = False

    def start_hop(self) -> _Hop:
        self.hop = _Hop(start_token=self.resume_token)
        return self.hop

    def with_usage(self, chunk: Chunk) -> Chunk:
        """A usage chunk counts the earlier hops too."""
        if isinstance(chunk, UsageChunk):
            if self.accumulated is not None:
                chunk = UsageChunk(self.accumulated + chunk.usage)
            self.hop.usage = chunk.usage
        return chunk

    def end_hop(self, error: Exception | None) -> bool:
        """Whether to start another hop; raises the hop's error otherwise."""
        hop = self.hop
        if hop.usage is not None:
            self.accumulated = hop.usage
        if isinstance(error, genai_errors.APIError) and not hop.received_any_chunk:
            raise error
        made_progress = hop.has_yielded_content or bool(hop.token and hop.token != hop.start_token)
        if error is not None:
            self.last_error = error
        elif made_progress:
            self.last_error = None
        self.resume_token, self.reconnects_without_progress = self._next_resume_token()
        if (self.resume_token and not hop.has_prompt_feedback and _resumable(hop.finish_reason)):
            return True
        if error is not None:
            raise error
        gave_up = hop.finish_reason is None and not hop.has_prompt_feedback
        if gave_up and self.last_error is not None:
            raise self.last_error
        return False

    def _next_resume_token(self) -> tuple[bytes | None, int]:
        hop = self.hop
        reconnects = self.reconnects_without_progress
        if hop.finish_reason is not None or hop.has_prompt_feedback:
            if (hop.finish_reason == types.FinishReason.CONTINUATION and not hop.has_prompt_feedback
                    and hop.token and hop.token != hop.start_token):
                return hop.token, 0
            return None, 0
        if hop.token and hop.token != hop.start_token:
            return hop.token, 0
        if hop.has_yielded_content or reconnects >= genai_extra.MAX_STREAM_RECONNECTS_WITHOUT_PROGRESS:
            return None, reconnects
        return hop.start_token, reconnects + 1


def _config(request: ModelRequest, *, tools: bool = True) -> types.GenerateContentConfig:
    return types.GenerateContentConfig(
        system_instruction=request.system_instruction,
        tools=_tools(request) if tools else None,
        automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
        thinking_config=types.ThinkingConfig(include_thoughts=True),
        temperature=request.temperature,
    )


async def _typed_response(event: str, response: Any, *, vertex: bool = False) -> types.GenerateContentResponse:
    """One streamed event read as google-genai reads it: an ``error`` object
    raises its APIError, anything else becomes a typed response."""
    data = genai_api_client.HttpResponse._load_json_from_response(event) if event else {}
    if isinstance(data, dict) and next(iter(data), None) == "error":
        error = data.get("error")
        await genai_errors.APIError.raise_error_async(
            error.get("code") if isinstance(error, dict) else None, data, response)
    convert = (genai_models._GenerateContentResponse_from_vertex if vertex
               else genai_models._GenerateContentResponse_from_mldev)
    converted = convert(data, None, None)
    return types.GenerateContentResponse._from_response(
        response=converted,
        kwargs={"config": {"response_schema": None, "response_json_schema": None, "include_all_fields": None}},
    )


def _tools(request: ModelRequest) -> list[types.Tool] | None:
    if request.google_search:
        return [types.Tool(google_search=types.GoogleSearch())]
    if not request.tools:
        return None
    return [
        types.Tool(
            function_declarations=[
                types.FunctionDeclaration(
                    name=spec.name,
                    description=spec.description,
                    parameters_json_schema=spec.parameters,
                )
                for spec in request.tools
            ]
        )
    ]


def chunks_of(response: types.GenerateContentResponse) -> list[Chunk]:
    """google-genai's typed response as our chunks (the reference
    :func:`.wire.fast_chunks` must agree with)."""
    out: list[Chunk] = []
    candidates = response.candidates or []
    content = candidates[0].content if candidates else None
    for part in (content.parts or []) if content else []:
        out.append(PartChunk(part.model_dump(mode="json", exclude_none=True)))
        if part.function_call is not None:
            call = part.function_call
            out.append(FunctionCallChunk(name=call.name or "", args=dict(call.args or {}), call_id=call.id))
        elif part.text:
            out.append(ThoughtChunk(part.text) if part.thought else TextChunk(part.text))
    grounding = candidates[0].grounding_metadata if candidates else None
    if grounding is not None:
        out.append(GroundingChunk(grounding.model_dump(mode="json", exclude_none=True)))
    meta = response.usage_metadata
    if meta is not None:
        out.append(UsageChunk(_usage(meta)))
    return out


def _usage(meta: types.GenerateContentResponseUsageMetadata) -> Usage:
    prompt = meta.prompt_token_count or 0
    output = meta.candidates_token_count or 0
    thinking = meta.thoughts_token_count or 0
    return Usage(
        prompt_tokens=prompt,
        output_tokens=output,
        thinking_tokens=thinking,
        cached_tokens=meta.cached_content_token_count or 0,
        total_tokens=meta.total_token_count or prompt + output + thinking,
        tool_tokens=meta.tool_use_prompt_token_count or 0,
    )


_KEY_INVALID = re.compile(r"API[_ ]KEY[_ ]INVALID|API key not valid|API key expired", re.IGNORECASE)


def _translate_api_error(exc: genai_errors.APIError, auth: ModelAuth | None = None) -> ModelError:
    status = exc.code
    message = exc.message or exc.status or "no message"
    text = f"Gemini API error {status} {exc.status or ''}: {message}".replace("  ", " ")
    if auth is not None and auth.vertex and not auth.api_key and status in (401, 403):
        return ModelAuthError(
            f"Vertex AI refused {auth.principal() or 'the account'} ({auth.credential_source}) "
            f"for project {auth.project} "
            f"({status}): {message}. Check that the account has the Vertex AI User role "
            "(roles/aiplatform.user) in that project and that the Vertex AI API is enabled there.",
            status=status,
        )
    if auth is not None and auth.vertex and status in (401, 403):
        return ModelAuthError(
            f"Vertex AI refused the express-mode API key from {auth.key_source} ({status}): {message}.",
            status=status,
        )
    if status in (401, 403) or (status == 400 and _KEY_INVALID.search(str(exc))):
        return ModelAuthError(
            f"the Gemini API refused the API key ({status}): {message}. "
            "Check GEMINI_API_KEY (or GOOGLE_API_KEY).",
            status=status,
        )
    if status not in QUOTA_STATUSES:
        return ModelError(text, status=status, retryable=status in RETRYABLE_STATUSES)
    details = _error_details(getattr(exc, "details", None))
    if _LIMIT_ZERO.search(message.lower()):
        return ModelError(f"{text} (this model has no quota for this project; waiting will not help)",
                          status=status)
    if any("PerDay" in quota or "Daily" in quota for quota in _quota_ids(details)):
        return ModelError(f"You have exhausted your daily quota on this model. {text}", status=status)
    delay = _retry_delay(details, message)
    if delay is not None and delay > MAX_RETRYABLE_DELAY:
        return ModelError(f"{text} (the API asks to wait {delay:.0f} s: too long to wait here)", status=status)
    return ModelError(text, status=status, retryable=True, retry_after=delay)


#: Statuses that are rate limits or overload, read as gemini-cli reads them.
QUOTA_STATUSES = frozenset({429, 499, 503})
#: A wait longer than this (gemini-cli's figure) is a quota, not a burst.
MAX_RETRYABLE_DELAY = 300.0
_LIMIT_ZERO = re.compile(r"limit:\s*0(?!\d|\.\d)")
_RETRY_IN = re.compile(r"Please retry in ([0-9.]+(?:ms|s))")


def _error_details(details: Any) -> list[dict[str, Any]]:
    """The ``details`` list of a Google API error body (``[]`` if none)."""
    try:
        found = details["error"]["details"]
    except (KeyError, TypeError):
        return []
    return [d for d in found if isinstance(d, dict)] if isinstance(found, list) else []


def _quota_ids(details: list[dict[str, Any]]) -> list[str]:
    """The ``quotaId`` of every ``QuotaFailure`` violation."""
    return [str(v.get("quotaId", "")) for d in details
            if d.get("@type") == "type.googleapis.com/google.rpc.QuotaFailure"
            for v in (d.get("violations") or []) if isinstance(v, dict)]


def _retry_delay(details: list[dict[str, Any]], message: str) -> float | None:
    """The wait the API asks for: ``RetryInfo.retryDelay`` ("20s") in the
    details, else "Please retry in 12.5s" in the message (as gemini-cli)."""
    for item in details:
        delay = _seconds(item.get("retryDelay"))
        if delay is not None:
            return delay
    found = _RETRY_IN.search(message)
    return _seconds(found.group(1)) if found else None


def _seconds(duration: Any) -> float | None:
    """``"7s"``, ``"1.5s"`` or ``"500ms"`` in seconds; None if not one."""
    if not isinstance(duration, str):
        return None
    number, scale = (duration[:-2], 0.001) if duration.endswith("ms") else (duration[:-1], 1.0)
    if not duration.endswith("s"):
        return None
    try:
        value = float(number) * scale
    except ValueError:
        return None
    return value if 0 <= value < float("inf") else None
