"""Gemini through google-genai, on Trio.

google-genai's async client only runs under Trio when it is handed an
``httpx.AsyncClient`` that we created (``HttpOptions(httpx_async_client=…)``);
otherwise it reaches for asyncio and fails. This module is imported only when
a server really talks to Gemini: ``import google.genai`` alone costs about
0.45 s, which a thin client must never pay.
"""

from __future__ import annotations

import logging
import os
import re
import ssl
from collections.abc import AsyncIterator
from typing import Any

import certifi
import httpx
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from gemini_split.protocol import Usage

from .model import (
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
from .model_names import is_valid_model_name

log = logging.getLogger(__name__)

RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


class GeminiModel(Model):
    """``api_key`` is required; ``base_url`` defaults to google-genai's own
    (which honours ``GOOGLE_GEMINI_BASE_URL``)."""

    def __init__(self, api_key: str, *, base_url: str | None = None, timeout: float = 300.0):
        # One TLS context for everything google-genai would otherwise build
        # three of (sync client, async client, websockets): each load of the
        # CA bundle costs ~20 ms of start-up. Same trust as google-genai's own.
        tls = ssl.create_default_context(
            cafile=os.environ.get("SSL_CERT_FILE", certifi.where()),
            capath=os.environ.get("SSL_CERT_DIR"),
        )
        http_timeout = httpx.Timeout(timeout, connect=10.0)
        # No cap on connections: each session streams at most one request, so
        # sessions already bound them, and a capped pool makes waiting
        # requests queue in httpcore, whose assignment loop is quadratic
        # (measured: 1,000 sessions took 32 s instead of seconds).
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=100)
        # One HTTP client for every session: connections are pooled, and
        # httpx under Trio needs no asyncio.
        self._http = httpx.AsyncClient(timeout=http_timeout, verify=tls, limits=limits)
        # Never used for requests (we only call client.aio), but google-genai
        # builds one unless given one.
        self._sync_http = httpx.Client(timeout=http_timeout, verify=tls)
        options = types.HttpOptions(
            httpx_async_client=self._http,
            httpx_client=self._sync_http,
            async_client_args={"ssl": tls},
        )
        if base_url:
            options.base_url = base_url
        self._client = genai.Client(api_key=api_key, http_options=options)

    async def stream(self, request: ModelRequest) -> AsyncIterator[Chunk]:
        # The name becomes part of the request's URL path: never let one
        # through that is not a model name (sessions check first; this is
        # the last line before google-genai, which only refuses a literal "..").
        if not is_valid_model_name(request.model):
            raise ModelError(f"{request.model[:60]!r} is not a Gemini model name", retryable=False)
        config = types.GenerateContentConfig(
            system_instruction=request.system_instruction,
            tools=_tools(request),
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True),
            thinking_config=types.ThinkingConfig(include_thoughts=True),
        )
        try:
            response_stream = await self._client.aio.models.generate_content_stream(
                model=request.model, contents=request.contents, config=config
            )
            async for response in response_stream:
                for chunk in _chunks_of(response):
                    yield chunk
        except genai_errors.APIError as exc:
            raise _translate_api_error(exc) from None
        except httpx.ConnectError as exc:
            raise ModelError(
                f"cannot reach the Gemini API at {_base_url(self)}: {exc or 'connection failed'}. "
                "Check the network, or GOOGLE_GEMINI_BASE_URL if you set it.",
                retryable=False,
            ) from None
        except httpx.TimeoutException as exc:
            raise ModelError(f"the Gemini API timed out ({type(exc).__name__})", retryable=True) from None
        except httpx.TransportError as exc:
            raise ModelError(
                f"the connection to the Gemini API broke: {type(exc).__name__}: {exc}", retryable=True
            ) from None

    async def aclose(self) -> None:
        await self._http.aclose()
        self._sync_http.close()


def _base_url(model: GeminiModel) -> str:
    try:
        return model._client._api_client._http_options.base_url or "the Gemini API"
    except AttributeError:
        return "the Gemini API"


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


def _chunks_of(response: types.GenerateContentResponse) -> list[Chunk]:
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


def _translate_api_error(exc: genai_errors.APIError) -> ModelError:
    status = exc.code
    message = exc.message or exc.status or "no message"
    text = f"Gemini API error {status} {exc.status or ''}: {message}".replace("  ", " ")
    if status in (401, 403) or (status == 400 and _KEY_INVALID.search(str(exc))):
        return ModelAuthError(
            f"the Gemini API refused the API key ({status}): {message}. "
            "Check GEMINI_API_KEY (or GOOGLE_API_KEY).",
            status=status,
        )
    return ModelError(
        text,
        status=status,
        retryable=status in RETRYABLE_STATUSES,
        retry_after=_retry_delay(getattr(exc, "details", None)),
    )


def _retry_delay(details: Any) -> float | None:
    """Google puts ``RetryInfo.retryDelay`` ("20s") in a 429's details."""
    try:
        for item in details["error"]["details"]:
            delay = item.get("retryDelay")
            if isinstance(delay, str) and delay.endswith("s"):
                return float(delay[:-1])
    except (KeyError, TypeError, ValueError):
        pass
    return None
