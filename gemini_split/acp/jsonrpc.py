"""JSON-RPC 2.0 messages, sans-IO: text in, a checked message or the error
reply out; a message out, text.

:func:`decode` is the only way text from an ACP peer becomes a message. It
never raises for the peer's mistakes: what cannot be handled comes back as
an :class:`Invalid` carrying the JSON-RPC error to answer with (``-32700``
for text that is not JSON or is nested too deeply to decode, ``-32600``
for JSON that is not one request — an array (batches are not part of
ACP), no ``"jsonrpc": "2.0"``, an ``id``
that is neither a string nor an integer, a ``method`` that is not a string,
``params`` that are not an object — and for a message over the size limit).
Method dispatch adds ``-32601`` (no such method) and ``-32602`` (wrong
params) above it.

No trio, no clock, no I/O: the peer (:mod:`gemini_split.acp.peer`) moves
the text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: ACP's "authentication required" and "resource not found" (its schema's codes).
AUTH_REQUIRED = -32000
RESOURCE_NOT_FOUND = -32002

#: Bytes of one JSON-RPC message, at most (prompts may embed files).
DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024

Id = str | int


class RpcError(Exception):
    """A JSON-RPC error to answer a request with (or that a request got)."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


@dataclass(frozen=True)
class Request:
    """A call that wants an answer (``id`` set) or a notification (``id`` None)."""

    method: str
    params: dict[str, Any]
    id: Id | None = None

    @property
    def is_notification(self) -> bool:
        return self.id is None


@dataclass(frozen=True)
class Response:
    """The answer to one of our requests: ``result`` or ``error``."""

    id: Id
    result: Any = None
    error: RpcError | None = None


@dataclass(frozen=True)
class Invalid:
    """Text that is not a usable message: answer ``error`` to ``id`` (None:
    the id could not be read; JSON-RPC says to answer with ``"id": null``).
    ``reply`` is False for a broken response, which gets no answer."""

    error: RpcError
    id: Id | None = None
    reply: bool = True


_decoder = msgspec.json.Decoder()
_encoder = msgspec.json.Encoder()


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def decode(text: str | bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Request | Response | Invalid:
    """One message from the peer, checked (see the module docstring)."""
    if len(text) > max_size:
        return Invalid(RpcError(INVALID_REQUEST, f"message too large: over {max_size} bytes"))
    try:
        data = _decoder.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:
        return Invalid(RpcError(PARSE_ERROR, f"parse error: {exc}"))
    except RecursionError:
        # msgspec decodes nested values recursively and stops at the
        # interpreter's limit (about 1,000 levels), as the native codec does.
        return Invalid(RpcError(PARSE_ERROR, "parse error: the message is nested too deeply"))
    if isinstance(data, list):
        return Invalid(RpcError(INVALID_REQUEST, "batch requests are not supported: send one object per message"))
    if not isinstance(data, dict):
        return Invalid(RpcError(INVALID_REQUEST, "a JSON-RPC message must be an object"))
    has_id = "id" in data
    raw_id = data.get("id")
    if has_id and raw_id is not None and not _valid_id(raw_id):
        return Invalid(RpcError(INVALID_REQUEST, "id must be a string or an integer"))
    msg_id: Id | None = raw_id
    if data.get("jsonrpc") != "2.0":
        return Invalid(RpcError(INVALID_REQUEST, 'missing "jsonrpc": "2.0"'), msg_id)
    if "method" in data:
        method = data["method"]
        if not isinstance(method, str) or not method:
            return Invalid(RpcError(INVALID_REQUEST, "method must be a non-empty string"), msg_id)
        params = data.get("params", {})
        if params is None:
            params = {}
        if not isinstance(params, dict):
            return Invalid(RpcError(INVALID_PARAMS, f"params of {method} must be an object"), msg_id)
        if has_id and raw_id is None:
            return Invalid(RpcError(INVALID_REQUEST, "id must not be null"), None)
        return Request(method, params, msg_id)
    if "result" in data or "error" in data:
        if msg_id is None:
            return Invalid(RpcError(INVALID_REQUEST, "a response without an id"), reply=False)
        error = data.get("error")
        if error is not None:
            if not isinstance(error, dict) or not isinstance(error.get("code"), int) or isinstance(error.get("code"), bool):
                return Invalid(RpcError(INVALID_REQUEST, "error must be an object with an integer code"), reply=False)
            return Response(msg_id, error=RpcError(error["code"], str(error.get("message", "")), error.get("data")))
        return Response(msg_id, result=data.get("result"))
    return Invalid(RpcError(INVALID_REQUEST, "neither a request (method) nor a response (result or error)"), msg_id)


def encode_request(method: str, params: dict[str, Any], id: Id | None = None) -> str:
    """A request (with ``id``) or a notification (without)."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    if id is not None:
        message["id"] = id
    return _encoder.encode(message).decode()


def encode_result(id: Id, result: Any) -> str:
    return _encoder.encode({"jsonrpc": "2.0", "id": id, "result": result}).decode()


def encode_error(id: Id | None, error: RpcError) -> str:
    return _encoder.encode({"jsonrpc": "2.0", "id": id, "error": error.to_json()}).decode()
