"""Messages to JSON text and back, with validation.

``decode`` is the only way text from a peer becomes a message: it checks the
size, the JSON, the ``type`` and every field's type, and raises
:class:`RemoteProtocolError` naming what is wrong. Unknown *fields* are
ignored (a newer minor version may add them); unknown *types* are an error the
receiver answers with an ``error`` message, then carries on.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from functools import cache
from typing import Any

from .errors import ErrorCode, LocalProtocolError, RemoteProtocolError
from .messages import MESSAGE_TYPES, PROTOCOL_VERSION, Message

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
"""Bytes of JSON text in one message. Tool results are capped well below."""

_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


def encode(message: Message) -> str:
    """One message as compact JSON text (no newline)."""
    obj = to_json_object(message)
    try:
        return _encoder.encode(obj)
    except (TypeError, ValueError) as exc:
        raise LocalProtocolError(
            ErrorCode.INVALID_FIELD, f"cannot encode {message.TYPE}: {exc}"
        ) from None


def to_json_object(message: Message) -> dict[str, Any]:
    """The JSON object of a message, ``type`` first, ``None`` fields left out."""
    obj: dict[str, Any] = {"type": message.TYPE}
    obj.update(_dump(message))
    return obj


def _dump(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            f.name: _dump(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
    if isinstance(value, list | tuple):
        return [_dump(v) for v in value]
    return value


def decode(
    data: str | bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE
) -> Message:
    """Parse and validate one message from a peer.

    Raises :class:`RemoteProtocolError` with code ``message_too_large``,
    ``invalid_json``, ``invalid_message``, ``unknown_type``,
    ``missing_field`` or ``invalid_field``.
    """
    if len(data) > max_size:
        raise RemoteProtocolError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"message of {len(data)} bytes is over the limit of {max_size} bytes",
        )
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RemoteProtocolError(
            ErrorCode.INVALID_JSON, f"message is not valid JSON: {exc}"
        ) from None
    return from_json_object(obj)


def from_json_object(obj: Any) -> Message:
    """Validate a parsed JSON value as a message (see :func:`decode`)."""
    if not isinstance(obj, dict):
        raise RemoteProtocolError(
            ErrorCode.INVALID_MESSAGE,
            f"message must be a JSON object, not {_json_kind(obj)}",
        )
    kind = obj.get("type")
    if not isinstance(kind, str):
        raise RemoteProtocolError(
            ErrorCode.INVALID_MESSAGE,
            "message has no 'type' string",
            field="type",
        )
    cls = MESSAGE_TYPES.get(kind)
    if cls is None:
        raise RemoteProtocolError(
            ErrorCode.UNKNOWN_TYPE, f"unknown message type {kind!r}", field="type"
        )
    for name in _ENVELOPE:
        if obj.get(name) is None:
            raise RemoteProtocolError(
                ErrorCode.MISSING_FIELD,
                f"{kind} is missing required field '{name}'",
                field=name,
            )
    return _load_dataclass(cls, obj, kind)


# Every message must carry these on the wire, though Python code constructing
# a message gets them filled in by default.
_ENVELOPE = ("id", "timestamp")


def check_version(version: str) -> None:
    """Raise ``unsupported_version`` unless ``version`` shares our major."""
    ours = PROTOCOL_VERSION.split(".")[0]
    theirs = version.split(".")[0] if isinstance(version, str) else None
    if theirs != ours:
        raise RemoteProtocolError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"protocol version {version!r} is not supported; "
            f"this peer speaks {PROTOCOL_VERSION} (major {ours})",
            field="protocol_version",
        )


# --- validation -------------------------------------------------------------


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


@cache
def _fields(cls: type) -> tuple[dataclasses.Field, ...]:
    return tuple(f for f in dataclasses.fields(cls) if f.init)


def _load_dataclass(cls: type, obj: dict, path: str) -> Any:
    hints = _hints(cls)
    kwargs = {}
    for f in _fields(cls):
        where = f"{path}.{f.name}"
        if f.name not in obj or obj[f.name] is None:
            required = (
                f.default is dataclasses.MISSING
                and f.default_factory is dataclasses.MISSING
            )
            if required:
                raise RemoteProtocolError(
                    ErrorCode.MISSING_FIELD,
                    f"{path} is missing required field '{f.name}'",
                    field=f.name,
                )
            continue
        kwargs[f.name] = _load_value(hints[f.name], obj[f.name], where)
    return cls(**kwargs)


def _load_value(hint: Any, value: Any, where: str) -> Any:
    if hint is Any:
        return value
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return None
        return _load_value(options[0], value, where)
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            raise _mistyped(where, "an object", value)
        return _load_dataclass(hint, value, where)
    if origin is list:
        if not isinstance(value, list):
            raise _mistyped(where, "an array", value)
        (item,) = typing.get_args(hint) or (Any,)
        return [_load_value(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if hint is dict or origin is dict:
        if not isinstance(value, dict):
            raise _mistyped(where, "an object", value)
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise _mistyped(where, "true or false", value)
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _mistyped(where, "an integer", value)
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _mistyped(where, "a number", value)
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise _mistyped(where, "a string", value)
        return value
    raise TypeError(f"codec cannot load type {hint!r} at {where}")  # a bug here


def _mistyped(where: str, expected: str, value: Any) -> RemoteProtocolError:
    name = where.rsplit(".", 1)[-1]
    return RemoteProtocolError(
        ErrorCode.INVALID_FIELD,
        f"{where} must be {expected}, not {_json_kind(value)}",
        field=name.split("[")[0],
    )


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__
