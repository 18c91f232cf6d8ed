"""A local fake of the Gemini REST API that speaks the real wire format.

The real ``google-genai`` client (sync or ``client.aio``) can be pointed at it
with ``GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:PORT`` or
``types.HttpOptions(base_url=fake.url)`` plus any API key. Standard library
only; it runs an ``http.server.ThreadingHTTPServer`` on a background thread,
so it works the same from Trio tests, plain tests and subprocess tests.

Endpoints (``{v}`` is any API version such as ``v1beta``, ``{m}`` a model name)
------------------------------------------------------------------------------
``POST /{v}/models/{m}:streamGenerateContent?alt=sse``
    ``200``, ``Content-Type: text/event-stream``, chunked transfer encoding.
    Each chunk is ``data: <GenerateContentResponse JSON>`` followed by a blank
    line (``\\r\\n\\r\\n``), in an HTTP chunk of its own; with a
    ``chunk_delay`` each is written and flushed alone, without one several
    go out in one write (a long answer streams at well over 100k chunks/s).
``POST /{v}/models/{m}:generateContent``
    ``200``, one ``application/json`` GenerateContentResponse: all the chunks
    the turn would stream, merged (adjacent text parts with the same
    ``thought`` flag are concatenated; finishReason and usage of the last).
``POST /{v}/models/{m}:countTokens``
    ``{"totalTokens": N}`` (rough estimate, 4 characters a token). Does not
    consume a turn.
``GET /_requests``
    The recorded requests as a JSON list (see "Recording"). Never needs a key.
``DELETE /_requests``
    Forget the recorded requests.
``GET /_script`` / ``POST /_script``
    Read the remaining turns / append turns (body: a turn list or
    ``{"turns": [...]}``). Never needs a key.
Anything else answers ``404`` with Google's error body (status NOT_FOUND).

Every chunk has the shape Google sends (camelCase)::

    {"candidates": [{"content": {"role": "model", "parts": [...]},
                     "index": 0, "finishReason": "STOP"}],      # last chunk only
     "usageMetadata": {"promptTokenCount": P, "candidatesTokenCount": C,
                       "thoughtsTokenCount": T, "totalTokenCount": P+C+T},  # last only
     "modelVersion": "<model>", "responseId": "fake-<n>"}

Parts are ``{"text": ...}``, thought parts ``{"text": ..., "thought": true}``
and ``{"functionCall": {"name": ..., "args": {...}, "id": ...}}`` (``id``
only when the script gives one; the Gemini API normally sends none).
Token counts default to estimates (ceil(characters / 4)); ``thoughtsTokenCount``
is always present (0 without a thought).

API key
-------
google-genai sends the key in the ``x-goog-api-key`` header (a ``?key=``
query parameter is accepted too). When the server was given ``api_key``,
a model request whose key is

* missing answers ``403`` ``{"error": {"code": 403, "message": "Method doesn't
  allow unregistered callers ...", "status": "PERMISSION_DENIED"}}``;
* different answers ``400`` ``{"error": {"code": 400, "message": "API key not
  valid. Please pass a valid API key.", "status": "INVALID_ARGUMENT",
  "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",
  "reason": "API_KEY_INVALID", ...}]}}``;

which is what generativelanguage.googleapis.com answers.

Vertex AI
---------
The same model actions answer under Vertex AI's paths,
``/{v}/projects/{p}/locations/{l}/publishers/google/models/{m}:…`` (and
express mode's ``/{v}/publishers/google/models/{m}:…``), recorded with
``project`` and ``location``; point google-genai here with
``GOOGLE_VERTEX_BASE_URL`` (:attr:`FakeGemini.vertex_env`). Given
``access_token`` (a predicate, e.g. ``FakeGoogleAuth.valid``), a model
request must carry ``Authorization: Bearer <valid token>``; otherwise it
answers ``401`` ``UNAUTHENTICATED`` as Vertex AI does for an expired or
missing token. google-genai raises
``google.genai.errors.ClientError`` (``.code`` 400 or 403, ``.status``
"INVALID_ARGUMENT" or "PERMISSION_DENIED") for these, ``ServerError`` for 5xx.
Rejected requests are recorded but consume no turn. A request body that is
not JSON, or lacks ``contents``, answers 400 INVALID_ARGUMENT (no turn used).

Script
------
The server holds a list of turns; each ``generateContent`` or
``streamGenerateContent`` request that passes the checks above consumes the
next one, in order. A turn is a JSON object with these keys (all optional):

``"text": str``
    Answer text, split into ``"chunks"`` (int >= 1, default 1) pieces of
    nearly equal length, one SSE chunk each (a piece may be empty when the
    text is shorter than the chunk count).
``"thought": str``
    A thought part ``{"text": ..., "thought": true}``, sent in its own chunk
    before any text.
``"function_calls": [{"name": str, "args": {...}, "id": str?}, ...]``
    functionCall parts, all in one chunk: the same chunk as the last text
    piece when there is text (after it), else a chunk of their own.
``"error": {"status": 503, "message": str, "details": [...]?}``
    Answer HTTP ``status`` with ``{"error": {"code": 503, "message": ...,
    "status": "UNAVAILABLE"}}``. The Google status name is derived from the
    code (400 INVALID_ARGUMENT, 401 UNAUTHENTICATED, 403 PERMISSION_DENIED,
    404 NOT_FOUND, 429 RESOURCE_EXHAUSTED, 500 INTERNAL, 503 UNAVAILABLE,
    504 DEADLINE_EXCEEDED, ...). Google's own spelling
    ``{"code": 429, "status": "RESOURCE_EXHAUSTED"}`` is accepted too.
``"raw": [ {GenerateContentResponse JSON}, ... ]``
    Chunks sent verbatim (nothing added), for edge cases such as a SAFETY
    finish or empty candidates.
``"finish_reason": str``
    finishReason of the last chunk instead of ``"STOP"``.
``"usage": {...}``
    Overrides for usageMetadata (camelCase or snake_case keys);
    ``totalTokenCount`` is recomputed unless given.
``"delay": seconds``
    Wait before the response (headers included) starts.
``"chunk_delay": seconds``
    Wait between chunks.
``"grounding": {"sources": [...], "supports": [...], "queries": [...]}``
    Google Search grounding of the answer (needs ``text``): ``sources`` are
    ``{"title", "uri"}``, ``supports`` ``{"end_index": byte offset in the
    text, "sources": [source indexes]}``, ``queries`` the search queries.
    Sent as the last candidate's ``groundingMetadata`` (``groundingChunks``
    ``[{"web": {...}}]``, ``groundingSupports`` with UTF-8 byte segments,
    ``webSearchQueries``) — only when the request enabled the
    ``googleSearch`` tool, as the real API does.
``"system_contains": str``
    The turn is only for a request whose system instruction contains this
    text (a sub-agent's, told apart from the main agent's): each request
    takes the first remaining turn without this key or whose text its
    system instruction contains, so turns for agents running at once can
    be scripted whatever order their requests come in.
``"abort_after": int``
    Streaming: close the connection after that many chunks without ending
    the chunked body (the client sees a protocol error). Non-streaming: close
    without any response.

A turn with none of text, thought, function_calls, error, raw is answered in
echo mode (so ``{"delay": 2}`` is a slow echo and ``{"chunks": 3}`` an echo
in 3 chunks); the other keys still apply. Unknown keys, wrong types and
contradictory turns (``error`` or ``raw`` with text) raise ``ValueError``
when the script is loaded.

Echo mode
---------
When the script is exhausted (or none was given) every model request is
answered with one chunk holding one text part, computed from the request's
``contents``:

* if the LAST element of ``contents`` has any ``functionResponse`` parts:
  ``"Tool results: "`` followed by ``json.dumps(fr["response"],
  separators=(",", ":"), ensure_ascii=False)`` for each functionResponse part
  in order, joined by a single space;
* otherwise ``"Echo: "`` followed by the text of the last content whose
  ``role`` is ``"user"`` (or absent) and that has text parts: its non-thought
  text parts joined by ``"\\n"`` (``"Echo: "`` alone if there is none); a
  part that starts with ``<session_context>`` (the first turn's context) is
  left out.

Recording
---------
Every request to a ``/{v}/...`` path is recorded as a dict:
``index``, ``method``, ``path`` (no query), ``query`` (dict, ``key``
removed), ``api_version``, ``model`` (e.g. ``"gemini-2.5-flash"``),
``action`` (``"streamGenerateContent"``, ``"generateContent"``, ...),
``stream`` (bool), ``headers`` (lower-case names, ``x-goog-api-key``
removed), ``body`` (parsed JSON, or None), ``auth`` (``"ok"``,
``"missing"``, ``"invalid"`` or ``"unchecked"``), ``status`` (HTTP status
answered), ``turn`` (the script turn used, or None), ``echo`` (bool),
``chunks_sent`` (SSE chunks written so far), ``completed`` (bool),
``time`` (``time.time()`` at arrival).

Usage
-----
::

    with FakeGemini(script=[{"text": "hi", "chunks": 2}], api_key="k") as fake:
        client = genai.Client(api_key="k",
                              http_options=types.HttpOptions(base_url=fake.url))
        ...
        assert fake.requests[0]["body"]["contents"][-1]["parts"][0]["text"] == "..."

    python -m gemini_split.testing.fake_gemini --script turns.json [--port N] [--api-key K]

prints ``http://127.0.0.1:PORT`` as its first stdout line and serves until
SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import collections
import copy
import functools
import itertools
import json
import re
import signal
import socket
import socketserver
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Iterator
from urllib.parse import parse_qs, urlsplit

# The script format is the scripted model's too; it lives with the server so
# runtime code never imports this testing package.
from gemini_split.server.model.script_format import (
    _CONTENT_KEYS,
    STATUS_NAMES,
    grounding_metadata,
    turn_matches,
    _error_status,
    load_script,
    validate_turn,
)

__all__ = ["FakeGemini", "STATUS_NAMES", "load_script", "validate_turn", "main"]

#: HTTP status -> google.rpc status name, as the Gemini API spells them.
_USAGE_KEYS = {
    "prompt_token_count": "promptTokenCount",
    "candidates_token_count": "candidatesTokenCount",
    "thoughts_token_count": "thoughtsTokenCount",
    "total_token_count": "totalTokenCount",
    "cached_content_token_count": "cachedContentTokenCount",
    "tool_use_prompt_token_count": "toolUsePromptTokenCount",
}
_API_PATH = re.compile(r"^/(?P<version>v[0-9][0-9a-z]*)/(?P<rest>.*)$")
_MODEL_PATH = re.compile(
    r"^(?:projects/(?P<project>[^/]+)/locations/(?P<location>[^/]+)/)?"
    r"(?P<collection>models|tunedModels|publishers/google/models)/(?P<model>[^/:]+):(?P<action>[A-Za-z]+)$"
)
_MODEL_ACTIONS = ("generateContent", "streamGenerateContent")

_MISSING_KEY_MESSAGE = (
    "Method doesn't allow unregistered callers (callers without established "
    "identity). Please use API Key or other form of API consumer identity to "
    "call this API."
)
_INVALID_KEY_MESSAGE = "API key not valid. Please pass a valid API key."
_BAD_TOKEN_MESSAGE = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other "
    "valid authentication credential."
)


# --------------------------------------------------------------------------
# Building responses


def _estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _part_text(part: Any) -> str:
    """Text that a part contributes to token estimates."""
    if not isinstance(part, dict):
        return ""
    if isinstance(part.get("text"), str):
        return part["text"]
    for key in ("functionCall", "functionResponse", "inlineData", "fileData"):
        if key in part:
            return _compact(part[key])
    return ""


def _prompt_tokens(body: dict) -> int:
    total = 0
    for content in body.get("contents") or []:
        if isinstance(content, dict):
            for part in content.get("parts") or []:
                total += _estimate_tokens(_part_text(part))
    system = body.get("systemInstruction")
    if isinstance(system, dict):
        for part in system.get("parts") or []:
            total += _estimate_tokens(_part_text(part))
    return total


def _system_text(body: dict) -> str:
    """The text of a request's system instruction ("" without one)."""
    system = body.get("systemInstruction") if isinstance(body, dict) else None
    if not isinstance(system, dict):
        return ""
    return "".join(_part_text(p) for p in system.get("parts") or [])


def echo_text(body: dict) -> str:
    """The echo-mode answer for a request body (see the module docstring)."""
    contents = [c for c in (body.get("contents") or []) if isinstance(c, dict)]
    if contents:
        last_parts = contents[-1].get("parts") or []
        responses = [
            p["functionResponse"]
            for p in last_parts
            if isinstance(p, dict) and isinstance(p.get("functionResponse"), dict)
        ]
        if responses:
            return "Tool results: " + " ".join(
                _compact(r.get("response", {})) for r in responses
            )
    for content in reversed(contents):
        if content.get("role", "user") != "user":
            continue
        # A first turn's session context (gemini-cli's <session_context>
        # part, which gemini-split sends too) is not echoed.
        texts = [
            p["text"]
            for p in content.get("parts") or []
            if isinstance(p, dict) and isinstance(p.get("text"), str) and not p.get("thought")
            and not p["text"].startswith("<session_context>")
        ]
        if texts:
            return "Echo: " + "\n".join(texts)
    return "Echo: "


def _split(text: str, n: int) -> list[str]:
    size = len(text)
    return [text[size * i // n : size * (i + 1) // n] for i in range(n)]


def build_chunks(turn: dict | None, body: dict, model: str, response_id: str) -> list[dict]:
    """The GenerateContentResponse chunks answering ``body`` with ``turn``.

    ``turn`` None (or a turn without content keys) means echo mode.
    """
    turn = turn or {}
    if "raw" in turn:
        return copy.deepcopy(turn["raw"])
    chunk_parts, last = _plan(turn, body)
    chunks = []
    for i, parts in enumerate(chunk_parts):
        chunk = _chunk(parts, model, response_id)
        if i == len(chunk_parts) - 1:
            chunk["candidates"][0].update(last["candidate"])
            chunk = {"candidates": chunk["candidates"], **last["chunk"],
                     "modelVersion": model, "responseId": response_id}
        chunks.append(chunk)
    return chunks


def _chunk(parts: list[dict], model: str, response_id: str) -> dict:
    return {"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}],
            "modelVersion": model, "responseId": response_id}


def _plan(turn: dict, body: dict) -> tuple[list[list[dict]], dict]:
    """The parts of each chunk, and what the last chunk adds: ``{"candidate":
    {finishReason, groundingMetadata?}, "chunk": {usageMetadata}}``."""
    if not any(k in turn for k in _CONTENT_KEYS):
        turn = {**turn, "text": echo_text(body)}

    chunk_parts: list[list[dict]] = []
    thought = turn.get("thought")
    if thought is not None:
        chunk_parts.append([{"text": thought, "thought": True}])
    text = turn.get("text")
    if text is not None:
        chunk_parts.extend([{"text": piece}] for piece in _split(text, turn.get("chunks", 1)))
    calls = []
    for call in turn.get("function_calls") or []:
        fc: dict[str, Any] = {"name": call["name"], "args": copy.deepcopy(call.get("args", {}))}
        if "id" in call:
            fc["id"] = call["id"]
        calls.append({"functionCall": fc})
    if calls:
        if text is not None:
            chunk_parts[-1].extend(calls)
        else:
            chunk_parts.append(calls)
    if not chunk_parts:  # unreachable for validated turns; stay well-formed
        chunk_parts.append([{"text": ""}])

    candidates_text = (text or "") + "".join(_compact(c["functionCall"]) for c in calls)
    usage = {
        "promptTokenCount": _prompt_tokens(body),
        "candidatesTokenCount": _estimate_tokens(candidates_text),
        "thoughtsTokenCount": _estimate_tokens(thought or ""),
    }
    overrides = {_USAGE_KEYS.get(k, k): v for k, v in (turn.get("usage") or {}).items()}
    usage.update(overrides)
    if "totalTokenCount" not in overrides:
        usage["totalTokenCount"] = (
            usage["promptTokenCount"]
            + usage["candidatesTokenCount"]
            + usage["thoughtsTokenCount"]
        )
    candidate: dict[str, Any] = {"finishReason": turn.get("finish_reason", "STOP")}
    grounding = grounding_metadata(turn) if _searches(body) else None
    if grounding is not None:
        candidate["groundingMetadata"] = grounding
    return chunk_parts, {"candidate": candidate, "chunk": {"usageMetadata": usage}}


def _event(chunk: dict) -> bytes:
    """One SSE event: ``data: <JSON>`` and a blank line."""
    return b"data: " + json.dumps(chunk, ensure_ascii=False).encode("utf-8") + b"\r\n\r\n"


def sse_events(turn: dict | None, body: dict, model: str, response_id: str) -> Iterator[bytes]:
    """``_event(chunk)`` for each of :func:`build_chunks`' chunks, made as
    they are sent (a long answer starts at once).

    The same bytes, cheaper: a chunk holding one plain text piece (most of a
    long answer) is written from a template, its JSON split around the text,
    instead of by ``json.dumps`` of the whole chunk (about 6× less CPU), and
    the text is encoded by the JSON string encoder ``json.dumps`` itself
    ends in (``json.dumps(text, ensure_ascii=False)`` builds an encoder per
    call: most of the fake's CPU when 1,000 requests arrive at once).
    tests/server/gemini checks the bytes equal the plain encoding."""
    turn = turn or {}
    if "raw" in turn:
        yield from map(_event, build_chunks(turn, body, model, response_id))
        return
    chunk_parts, last = _plan(turn, body)
    head, tail = _text_template(model, response_id)
    final = len(chunk_parts) - 1
    for i, parts in enumerate(chunk_parts):
        if i < final and len(parts) == 1 and parts[0].keys() == {"text"}:
            yield b"%s%s%s" % (head, _json_string(parts[0]["text"]).encode("utf-8"), tail)
            continue
        chunk = _chunk(parts, model, response_id)
        if i == final:
            chunk["candidates"][0].update(last["candidate"])
            chunk = {"candidates": chunk["candidates"], **last["chunk"],
                     "modelVersion": model, "responseId": response_id}
        yield _event(chunk)


#: ``json.dumps(text, ensure_ascii=False)`` for a str, without building an
#: encoder (the function that call ends in).
_json_string = json.encoder.encode_basestring


def _frame(event: bytes) -> bytes:
    """One event in one HTTP chunk."""
    return b"%x\r\n%s\r\n" % (len(event), event)


def sse_body(turn: dict | None, body: dict, model: str, response_id: str) -> tuple[bytes, int]:
    """Every event of :func:`sse_events`, each in its HTTP chunk, at once
    (a turn with no ``chunk_delay``), and how many: the same bytes, and the run of
    one-text-part chunks (most of a long answer) from a cache kept per
    content, the response id put in. 1,000 requests at once cost the
    fake ~0.4 ms each in writing events one by one: most of its CPU.
    tests/server/gemini checks the bytes."""
    turn = turn or {}
    if "raw" in turn:
        events = [_frame(e) for e in sse_events(turn, body, model, response_id)]
        return b"".join(events), len(events)
    chunk_parts, last = _plan(turn, body)
    final = len(chunk_parts) - 1
    plain = 0
    while plain < final and len(chunk_parts[plain]) == 1 and chunk_parts[plain][0].keys() == {"text"}:
        plain += 1
    rid = _json_string(response_id)[1:-1].encode("utf-8")
    run = _text_run(model, tuple(p[0]["text"] for p in chunk_parts[:plain]), len(rid)) if plain else b""
    if run is None:
        events = [_frame(e) for e in sse_events(turn, body, model, response_id)]
        return b"".join(events), len(events)
    out = [run.replace(_ID_MARK * len(rid), rid) if rid else run]
    for i in range(plain, final + 1):
        chunk = _chunk(chunk_parts[i], model, response_id)
        if i == final:
            chunk["candidates"][0].update(last["candidate"])
            chunk = {"candidates": chunk["candidates"], **last["chunk"],
                     "modelVersion": model, "responseId": response_id}
        out.append(_frame(_event(chunk)))
    return b"".join(out), final + 1


#: Stands for the response id in :func:`_text_run`'s cached bytes: a byte
#: JSON writes as is, never in a model name, and a cached text holding it
#: is not cached.
_ID_MARK = b"\x7f"


@functools.lru_cache(maxsize=64)
def _text_run(model: str, pieces: tuple[str, ...], id_length: int) -> bytes | None:
    """The framed events of one-text-part chunks of ``pieces`` for a
    response id ``id_length`` bytes long, that id written as
    :data:`_ID_MARK` bytes (None when a piece or the model holds one)."""
    mark = _ID_MARK.decode()
    if mark in model or any(mark in piece for piece in pieces):
        return None
    head, tail = _text_template(model, mark * id_length)
    return b"".join(_frame(b"%s%s%s" % (head, _json_string(p).encode("utf-8"), tail)) for p in pieces)


def _text_template(model: str, response_id: str) -> tuple[bytes, bytes]:
    """The event of a one-text-part chunk, split around its text's JSON
    string: ``head + json.dumps(text) + tail`` is ``_event`` of that chunk."""
    marker = "\x00text\x00"
    event = _event(_chunk([{"text": marker}], model, response_id))
    head, tail = event.split(json.dumps(marker).encode("ascii"))
    return head, tail


def _searches(body: dict) -> bool:
    """Whether the request enabled Google Search (``tools: [{"googleSearch":
    {}}]``): only then does a real answer carry grounding metadata."""
    tools = body.get("tools") if isinstance(body, dict) else None
    return isinstance(tools, list) and any(
        isinstance(t, dict) and ("googleSearch" in t or "google_search" in t) for t in tools
    )


def merge_chunks(chunks: list[dict]) -> dict:
    """Merge streamed chunks into one GenerateContentResponse."""
    merged = copy.deepcopy(chunks[-1])
    parts: list[dict] = []
    for chunk in chunks:
        candidates = chunk.get("candidates") or []
        if not candidates:
            continue
        for part in (candidates[0].get("content") or {}).get("parts") or []:
            part = copy.deepcopy(part)
            plain = set(part) <= {"text", "thought"} and isinstance(part.get("text"), str)
            prev = parts[-1] if parts else None
            if (
                plain
                and prev is not None
                and set(prev) <= {"text", "thought"}
                and isinstance(prev.get("text"), str)
                and bool(prev.get("thought")) == bool(part.get("thought"))
            ):
                prev["text"] += part["text"]
            else:
                parts.append(part)
    if merged.get("candidates"):
        candidate = merged["candidates"][0]
        candidate.setdefault("content", {"role": "model"})
        candidate["content"]["parts"] = parts
    elif parts:
        merged["candidates"] = [{"content": {"role": "model", "parts": parts}, "index": 0}]
    for chunk in reversed(chunks):  # usage from the last chunk that has it
        if "usageMetadata" in chunk:
            merged["usageMetadata"] = copy.deepcopy(chunk["usageMetadata"])
            break
    return merged


def google_error(code: int, message: str, status: str | None = None, details: Any = None) -> dict:
    """Google's JSON error body."""
    error: dict[str, Any] = {
        "code": code,
        "message": message,
        "status": status or STATUS_NAMES.get(code, "UNKNOWN"),
    }
    if details is not None:
        error["details"] = details
    return {"error": error}


# --------------------------------------------------------------------------
# HTTP


class _Aborted(Exception):
    """The server is stopping or the client went away."""


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Room for a thousand clients connecting at once (bench/serve.py (c)):
    # with a short accept queue the kernel drops or resets their connections.
    request_queue_size = 2048

    def __init__(self, address, handler, fake: "FakeGemini"):
        self.fake = fake
        self.connections: set[Any] = set()
        self.connections_lock = threading.Lock()
        super().__init__(address, handler)

    def close_connections(self) -> None:
        """Shut down the open client connections (idle keep-alives included)."""
        with self.connections_lock:
            conns = list(self.connections)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        tls = self.fake.ssl_context
        if tls is not None:  # the handshake happens in the connection's thread (see _Handler.setup)
            sock = tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def server_bind(self) -> None:
        # HTTPServer.server_bind calls socket.getfqdn(), which may do a slow
        # reverse DNS lookup; skip it.
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = host
        self.server_port = port


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeGemini/1"
    disable_nagle_algorithm = True
    server: _Server

    # -- plumbing ----------------------------------------------------------

    def setup(self) -> None:
        super().setup()
        if isinstance(self.connection, ssl.SSLSocket):
            self.connection.do_handshake()
        with self.server.connections_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.connections_lock:
            self.server.connections.discard(self.connection)
        try:
            super().finish()
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        if self.server.fake.verbose:
            sys.stderr.write("fake-gemini: " + (format % args) + "\n")

    def _read_body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, payload: Any) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _sleep(self, seconds: float) -> None:
        if seconds and self.server.fake._stopping.wait(seconds):
            raise _Aborted

    # -- dispatch ----------------------------------------------------------

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        fake = self.server.fake
        url = urlsplit(self.path)
        raw_body = self._read_body()
        try:
            if url.path == "/_requests":
                if method == "GET":
                    return self._send_json(200, fake.requests)
                if method == "DELETE":
                    fake.clear_requests()
                    return self._send_json(200, {})
            elif url.path == "/_script":
                if method == "GET":
                    return self._send_json(200, fake.remaining_turns)
                if method == "POST":
                    try:
                        turns = load_script(json.loads(raw_body or b"[]"))
                    except ValueError as e:  # JSONDecodeError is a ValueError
                        return self._send_json(400, google_error(400, str(e)))
                    fake.add_turns(turns)
                    return self._send_json(200, {"remaining": fake.turns_remaining})
            elif _API_PATH.match(url.path):
                return self._api(method, url, raw_body)
            self._send_json(404, google_error(404, f"Not found: {method} {url.path}"))
        except (_Aborted, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _api(self, method: str, url: Any, raw_body: bytes) -> None:
        fake = self.server.fake
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        key = self.headers.get("x-goog-api-key") or query.pop("key", None)
        query.pop("key", None)
        headers = {
            k.lower(): v for k, v in self.headers.items() if k.lower() != "x-goog-api-key"
        }
        api = _API_PATH.match(url.path)
        assert api is not None
        target = _MODEL_PATH.match(api["rest"])
        action = target["action"] if target else None
        try:
            body = json.loads(raw_body) if raw_body else None
        except ValueError:
            body = None
            bad_json = True
        else:
            bad_json = False
        bearer = self.headers.get("authorization") or ""
        if fake.access_token is not None:
            # Vertex AI with credentials: an OAuth access token, no key.
            token = bearer[len("Bearer "):] if bearer.startswith("Bearer ") else ""
            auth = "ok" if token and fake.access_token(token) else ("no-token" if not token else "bad-token")
        elif fake.api_key is None:
            auth = "unchecked"
        elif not key:
            auth = "missing"
        elif key != fake.api_key:
            auth = "invalid"
        else:
            auth = "ok"
        record = fake._record(
            {
                "method": method,
                "path": url.path,
                "query": query,
                "api_version": api["version"],
                "model": target["model"] if target else None,
                "project": target["project"] if target else None,
                "location": target["location"] if target else None,
                "action": action,
                "stream": action == "streamGenerateContent",
                "headers": headers,
                "body": body,
                "auth": auth,
                "status": None,
                "turn": None,
                "echo": False,
                "chunks_sent": 0,
                "completed": False,
                "time": time.time(),
            }
        )

        def fail(status: int, message: str, name: str | None = None, details: Any = None) -> None:
            fake._update(record, status=status, completed=True)
            self._send_json(status, google_error(status, message, name, details))

        if auth in ("no-token", "bad-token"):
            return fail(401, _BAD_TOKEN_MESSAGE, "UNAUTHENTICATED")
        if auth == "missing":
            return fail(403, _MISSING_KEY_MESSAGE)
        if auth == "invalid":
            return fail(
                400,
                _INVALID_KEY_MESSAGE,
                details=[
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "API_KEY_INVALID",
                        "domain": "googleapis.com",
                        "metadata": {"service": "generativelanguage.googleapis.com"},
                    }
                ],
            )
        if target is None or method != "POST":
            return fail(404, f"Method not found: {method} {url.path}")
        if bad_json or not isinstance(body, dict):
            return fail(400, "Invalid JSON payload received.")
        if action == "countTokens":
            fake._update(record, status=200, completed=True)
            return self._send_json(200, {"totalTokens": _prompt_tokens(body)})
        if action not in _MODEL_ACTIONS:
            return fail(404, f"Method not found: {action}")
        if not body.get("contents"):
            return fail(400, "* GenerateContentRequest.contents: contents is not specified\n")

        turn = fake._next_turn(_system_text(body))
        is_echo = turn is None or not any(k in turn for k in _CONTENT_KEYS)
        fake._update(record, turn=copy.deepcopy(turn), echo=is_echo)
        turn = turn or {}
        try:
            self._sleep(turn.get("delay", 0))
            if "error" in turn:
                status, name = _error_status(turn["error"])
                return fail(
                    status,
                    str(turn["error"].get("message", name)),
                    name,
                    turn["error"].get("details"),
                )
            model, response_id = target["model"], fake._response_id()
            abort_after = turn.get("abort_after")
            if action == "generateContent":
                if abort_after is not None:
                    fake._update(record, status=0)
                    self.close_connection = True
                    return
                fake._update(record, status=200)
                self._send_json(200, merge_chunks(build_chunks(turn, body, model, response_id)))
                fake._update(record, completed=True)
                return
            self._stream(record, sse_events(turn, body, model, response_id), turn.get("chunk_delay", 0),
                         lambda: sse_body(turn, body, model, response_id),
                         abort_after)
        except (_Aborted, BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _stream(self, record: dict, events: Iterator[bytes], chunk_delay: float,
                whole: Callable[[], tuple[bytes, int]], abort_after: int | None) -> None:
        """Each event in one HTTP chunk. With a ``chunk_delay`` each is
        written and flushed alone; without one, the whole body (``whole``:
        :func:`sse_body`) goes out in one write, or, to cut it short after
        ``abort_after`` events, writes of up to ``_BATCH_BYTES`` (the same
        bytes on the wire, fewer system calls: a long answer streams
        several times faster)."""
        fake = self.server.fake
        fake._update(record, status=200)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if abort_after is None and not chunk_delay:
            data, chunks = whole()
            self.wfile.write(data)
            fake._update(record, chunks_sent=chunks)
            self.wfile.write(b"0\r\n\r\n")
            fake._update(record, completed=True)
            return
        if abort_after is not None:
            events = itertools.islice(events, abort_after)
        batch: list[bytes] = []
        size = sent = 0
        for data in events:
            if sent and chunk_delay:
                self._sleep(chunk_delay)
            batch.append(b"%x\r\n%s\r\n" % (len(data), data))
            size += len(batch[-1])
            sent += 1
            if chunk_delay or size >= _BATCH_BYTES:
                self.wfile.write(b"".join(batch))
                fake._update(record, chunks_sent=sent)
                batch.clear()
                size = 0
        if batch:
            self.wfile.write(b"".join(batch))
            fake._update(record, chunks_sent=sent)
        if abort_after is not None:  # no end of body (all chunks sent, or cut short)
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")
        fake._update(record, completed=True)


#: Bytes of events written at once when a turn has no ``chunk_delay``.
_BATCH_BYTES = 64 * 1024


# --------------------------------------------------------------------------
# Public API


class FakeGemini:
    """A scripted fake Gemini REST server on a background thread.

    ``FakeGemini(script=None, *, api_key=None, host="127.0.0.1", port=0,
    verbose=False, ssl_context=None)``; ``script`` is anything
    :func:`load_script` accepts; with ``ssl_context`` (a server context) it
    speaks HTTPS.
    Use as a context manager (or call :meth:`start` / :meth:`close`).

    Attributes: ``url`` (``"http://127.0.0.1:PORT"``), ``host``, ``port``,
    ``api_key``, ``requests`` (a snapshot list of the recorded request dicts),
    ``turns_remaining``, ``remaining_turns``, ``env`` (environment variables
    pointing google-genai here).
    """

    def __init__(
        self,
        script: Any = None,
        *,
        api_key: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        verbose: bool = False,
        access_token: Callable[[str], bool] | None = None,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self.api_key = api_key
        self.ssl_context = ssl_context
        #: Vertex AI: whether a bearer token is valid (e.g.
        #: :meth:`FakeGoogleAuth.valid <gemini_split.testing.fake_google_auth.FakeGoogleAuth.valid>`);
        #: None checks no ``Authorization`` header.
        self.access_token = access_token
        self.host = host
        self.verbose = verbose
        self._requested_port = port
        self._lock = threading.Lock()
        #: Notified whenever a request is recorded or updated.
        self._changed = threading.Condition(self._lock)
        self._turns: collections.deque[dict] = collections.deque(
            load_script(script) if script is not None else []
        )
        self._requests: list[dict] = []
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    # -- lifecycle ---------------------------------------------------------

    def start(self) -> "FakeGemini":
        if self._server is not None:
            return self
        self._stopping.clear()
        self._server = _Server((self.host, self._requested_port), _Handler, self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"fake-gemini:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()  # wakes handlers sleeping in delay/chunk_delay
        server.shutdown()
        server.close_connections()
        server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    stop = close

    def __enter__(self) -> "FakeGemini":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    # -- inspection --------------------------------------------------------

    @property
    def url(self) -> str:
        if self.port is None:
            raise RuntimeError("FakeGemini is not started")
        return f"{'https' if self.ssl_context else 'http'}://{self.host}:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        """``GOOGLE_GEMINI_BASE_URL`` and ``GEMINI_API_KEY`` for a subprocess."""
        return {
            "GOOGLE_GEMINI_BASE_URL": self.url,
            "GEMINI_API_KEY": self.api_key if self.api_key is not None else "fake-key",
        }

    def vertex_env(self, project: str = "fake-project", location: str = "us-central1") -> dict[str, str]:
        """The environment that sends a Vertex AI client here (credentials
        are the caller's: ``GOOGLE_APPLICATION_CREDENTIALS`` or a metadata
        server)."""
        return {
            "GOOGLE_GENAI_USE_VERTEXAI": "true",
            "GOOGLE_VERTEX_BASE_URL": self.url,
            "GOOGLE_CLOUD_PROJECT": project,
            "GOOGLE_CLOUD_LOCATION": location,
        }

    @property
    def open_connections(self) -> int:
        """Client connections open now (kept-alive idle ones included)."""
        server = self._server
        if server is None:
            return 0
        with server.connections_lock:
            return len(server.connections)

    @property
    def requests(self) -> list[dict]:
        """Snapshot of the recorded requests (deep copies), oldest first."""
        with self._lock:
            return copy.deepcopy(self._requests)

    @property
    def turns_remaining(self) -> int:
        with self._lock:
            return len(self._turns)

    @property
    def remaining_turns(self) -> list[dict]:
        with self._lock:
            return copy.deepcopy(list(self._turns))

    def add_turns(self, turns: Iterable[dict]) -> None:
        """Append turns to the script (validated)."""
        new = load_script(list(turns))
        with self._lock:
            self._turns.extend(new)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def wait_for_requests(self, predicate: Callable[[list[dict]], bool], timeout: float = 10.0) -> list[dict]:
        """Block until ``predicate(requests)`` holds, then return that
        snapshot; raise :class:`TimeoutError` after ``timeout`` seconds.

        Woken by every recorded request and every update to one (such as
        ``completed``), so a test waits for an event, never polls."""
        with self._changed:
            if not self._changed.wait_for(lambda: predicate(self._requests), timeout):
                raise TimeoutError(f"the fake Gemini server's requests never matched within {timeout} s: "
                                   f"{_compact(self._requests)[:500]}")
            return copy.deepcopy(self._requests)

    # -- used by the handler -----------------------------------------------

    def _record(self, entry: dict) -> dict:
        with self._lock:
            entry["index"] = len(self._requests)
            self._requests.append(entry)
            self._changed.notify_all()
        return entry

    def _update(self, record: dict, **fields: Any) -> None:
        with self._lock:
            record.update(fields)
            self._changed.notify_all()

    def _next_turn(self, system: str = "") -> dict | None:
        """The first turn this request may take: one without
        ``system_contains``, or whose ``system_contains`` is in the
        request's system instruction."""
        with self._lock:
            for i, turn in enumerate(self._turns):
                if turn_matches(turn, system):
                    del self._turns[i]
                    return turn
            return None

    def _response_id(self) -> str:
        return f"fake-{next(self._ids)}"


# --------------------------------------------------------------------------
# Command line

_HELP_EPILOG = """\
script format (a JSON list of turns, or {"turns": [...]}); each model request
(generateContent or streamGenerateContent) consumes the next turn:

  {"text": "Hello there", "chunks": 3}            text in 3 SSE chunks
  {"thought": "Let me think", "text": "Done"}     a thought part, then text
  {"function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]}
                                                  functionCall parts (optional
                                                  "text" goes before them)
  {"error": {"status": 503, "message": "overloaded"}}
                                                  HTTP 503 with Google's error
                                                  JSON (status UNAVAILABLE)
  {"raw": [{...GenerateContentResponse...}]}      chunks sent verbatim

  any turn: "delay": s (before the response), "chunk_delay": s (between
  chunks), "usage": {"promptTokenCount": ...} overrides, "finish_reason":
  "MAX_TOKENS", "abort_after": k (drop the connection after k chunks).

When the script is exhausted the server echoes: "Tool results: <compact JSON
of each functionResponse.response>" if the last content carries
functionResponse parts, else "Echo: <last user text>".

GET /_requests returns the recorded requests as JSON; POST /_script appends
turns. The first stdout line is the base URL; SIGTERM/SIGINT stop it.
"""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m gemini_split.testing.fake_gemini",
        description="A local fake Gemini REST API speaking the real wire format.",
        epilog=_HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--script", metavar="FILE.json", help="turns to play ('-' = stdin); default: echo only")
    parser.add_argument("--port", type=int, default=0, help="port (default: any free port)")
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--api-key", default=None, help="require this x-goog-api-key")
    parser.add_argument("--verbose", action="store_true", help="log requests to stderr")
    args = parser.parse_args(argv)
    try:
        script = load_script(args.script) if args.script else None
    except (OSError, ValueError) as e:
        parser.error(f"--script: {e}")

    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    with FakeGemini(script, api_key=args.api_key, host=args.host, port=args.port, verbose=args.verbose) as fake:
        sys.stdout.write(fake.url + "\n")
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
