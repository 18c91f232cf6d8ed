"""Messages to JSON text and back, with validation, on msgspec.

``decode`` is the only way text from a peer becomes a message: it checks the
size, the JSON, the ``type`` and every field's type in one pass (msgspec), and
raises :class:`RemoteProtocolError` naming what is wrong with a stable code
and the field's path. Unknown *fields* are ignored (a newer minor version may
add them); unknown *types* are an error the receiver answers with an
``error`` message, then carries on. ``encode`` refuses a message its sender
did not stamp (no ``id`` or ``timestamp``).

Error messages never quote more than a short prefix of what the peer sent.
"""

from __future__ import annotations

import re
from typing import Any, Union

import msgspec

from .error_codes import ErrorCode, LocalProtocolError, RemoteProtocolError, quote
from .messages import MESSAGE_TYPES, PROTOCOL_VERSION, Message, is_stamped

DEFAULT_MAX_MESSAGE_SIZE = 16 * 1024 * 1024
"""Bytes of JSON text in one message. Tool results are capped well below."""

AnyMessage = Union[tuple(MESSAGE_TYPES.values())]  # type: ignore[valid-type]  # noqa: UP007
"""The tagged union of every message type (derived from the classes)."""

_encoder = msgspec.json.Encoder()
_decoder = msgspec.json.Decoder(AnyMessage)


class _Envelope(msgspec.Struct):
    """Only the ``type``: read again on the error path to name the message."""

    type: Any = None


_envelope_decoder = msgspec.json.Decoder(_Envelope)


def encode(message: Message) -> str:
    """One message as compact JSON text (no newline).

    A lone UTF-16 surrogate in a string (a model's ``"\\ud800"`` escape, a
    ``surrogateescape``d byte) cannot be UTF-8: it is sent as U+FFFD rather
    than failing the connection. Raises :class:`LocalProtocolError` for an
    unstamped message (``missing_field``) or a value JSON cannot carry
    (``invalid_field``)."""
    if not is_stamped(message):
        missing = "id" if message.id is msgspec.UNSET else "timestamp"
        raise LocalProtocolError(
            ErrorCode.MISSING_FIELD,
            f"{message.TYPE or type(message).__name__} has no {missing}: "
            "stamp it (gemini_split.stamping) before sending",
            field=missing,
        )
    try:
        return _encoder.encode(message).decode("utf-8")
    except UnicodeEncodeError:
        return _with_surrogates_replaced(message)
    except (TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise LocalProtocolError(
            ErrorCode.INVALID_FIELD, f"cannot encode {message.TYPE}: {exc}"
        ) from None


# Patterns here are compiled on first use (re's own cache), not at import:
# a one-shot run that never needs them does not pay ~0.1-0.4 ms each.
_SURROGATE = "[\ud800-\udfff]"


def _with_surrogates_replaced(message: Message) -> str:
    # The slow path, taken only for a string msgspec cannot make UTF-8.
    import json  # here: -p never needs the json module (~1.5 ms to import)

    text = json.dumps(msgspec.to_builtins(message), ensure_ascii=False, separators=(",", ":"))
    return re.sub(_SURROGATE, "\ufffd", text)


def to_json_object(message: Message) -> dict[str, Any]:
    """The JSON object of a message, ``type`` first, defaults left out."""
    return msgspec.to_builtins(message)  # type: ignore[no-any-return]


def decode(
    data: str | bytes, *, max_size: int = DEFAULT_MAX_MESSAGE_SIZE
) -> Message:
    """Parse and validate one message from a peer.

    Raises :class:`RemoteProtocolError` with code ``message_too_large``,
    ``invalid_json``, ``invalid_message``, ``unknown_type``,
    ``missing_field`` or ``invalid_field``; ``field`` names the field.
    """
    if len(data) > max_size:
        raise RemoteProtocolError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"message of {len(data)} bytes is over the limit of {max_size} bytes",
        )
    try:
        message = _decoder.decode(data)
    except msgspec.ValidationError as exc:
        raise _invalid(str(exc), lambda: _kind_of_text(data)) from None
    except msgspec.DecodeError as exc:
        raise RemoteProtocolError(ErrorCode.INVALID_JSON, _not_json(str(exc), data)) from None
    except RecursionError:
        raise RemoteProtocolError(
            ErrorCode.INVALID_JSON, "message is not valid JSON here: it is nested too deeply"
        ) from None
    except UnicodeError:
        raise RemoteProtocolError(
            ErrorCode.INVALID_JSON, "message is not valid JSON: it is not valid UTF-8 text"
        ) from None
    return _check_envelope(message)


def from_json_object(obj: Any) -> Message:
    """Validate a parsed JSON value as a message (see :func:`decode`)."""
    try:
        message = msgspec.convert(obj, AnyMessage)
    except msgspec.ValidationError as exc:
        kind = obj.get("type") if isinstance(obj, dict) else None
        raise _invalid(str(exc), lambda: kind) from None
    except RecursionError:
        raise RemoteProtocolError(ErrorCode.INVALID_MESSAGE, "message is nested too deeply") from None
    return _check_envelope(message)


def check_version(version: str) -> None:
    """Raise ``unsupported_version`` unless ``version`` shares our major."""
    ours = PROTOCOL_VERSION.split(".")[0]
    theirs = version.split(".")[0] if isinstance(version, str) else None
    if theirs != ours:
        raise RemoteProtocolError(
            ErrorCode.UNSUPPORTED_VERSION,
            f"protocol version {quote(version)} is not supported; "
            f"this peer speaks {PROTOCOL_VERSION} (major {ours})",
            field="protocol_version",
        )


# --- errors ------------------------------------------------------------------


def _check_envelope(message: Message) -> Message:
    # On the wire every message carries these; Python code builds messages
    # without them and stamps them when sending.
    if message.id is msgspec.UNSET or message.timestamp is msgspec.UNSET:
        name = "id" if message.id is msgspec.UNSET else "timestamp"
        raise RemoteProtocolError(
            ErrorCode.MISSING_FIELD,
            f"{message.TYPE} is missing required field '{name}'",
            field=name,
        )
    return message


_AT = " - at `"
_MISSING = r"Object missing required field `(?P<name>[^`]*)`"
_EXPECTED = r"Expected `(?P<expected>[^`]*)`(?:, got `(?P<got>[^`]*)`)?"
_WORDS = {
    "str": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
    "array": "an array", "object": "an object", "null": "null",
}
_GOT_WORDS = {**_WORDS, "int": "a number", "float": "a number", "bool": "a boolean"}


def _invalid(text: str, kind_of: Any) -> RemoteProtocolError:
    """Map a msgspec validation error onto our codes, paths and words.

    msgspec says e.g. ``Expected `str`, got `int` - at `$.tools[0].name```;
    ``kind_of()`` reads the message's ``type`` (only called when needed)."""
    what, sep, path = text.rpartition(_AT)
    if not sep:
        what, path = text, "$"
    path = path.rstrip("`")
    where = path.removeprefix("$").removeprefix(".")  # "tools[0].name", "" at the top
    name = where.rsplit(".", 1)[-1].split("[")[0] if where else None

    missing = re.fullmatch(_MISSING, what)
    if where == "" and (what.startswith("Expected `object`") or missing and missing["name"] == "type"):
        if missing:
            return RemoteProtocolError(ErrorCode.INVALID_MESSAGE, "message has no 'type' string", field="type")
        return RemoteProtocolError(
            ErrorCode.INVALID_MESSAGE,
            f"message must be a JSON object, not {_GOT_WORDS.get(_got(what), 'that')}",
        )
    if where == "type":
        if what.startswith("Invalid value "):
            return RemoteProtocolError(
                ErrorCode.UNKNOWN_TYPE,
                f"unknown message type {_quoted_value(what.removeprefix('Invalid value '))}",
                field="type",
            )
        return RemoteProtocolError(ErrorCode.INVALID_MESSAGE, "message has no 'type' string", field="type")

    kind = kind_of()
    subject = (kind if isinstance(kind, str) and kind in MESSAGE_TYPES else "message") + (
        "." + where if where else ""
    )
    if missing:
        return RemoteProtocolError(
            ErrorCode.MISSING_FIELD,
            f"{subject} is missing required field '{missing['name']}'",
            field=missing["name"],
        )
    expected = re.match(_EXPECTED, what)
    if expected:
        wanted = " or ".join(_WORDS.get(t.strip(), t.strip()) for t in expected["expected"].split("|"))
        got = expected["got"]
        tail = f", not {_GOT_WORDS.get(got, got)}" if got else ""
        return RemoteProtocolError(ErrorCode.INVALID_FIELD, f"{subject} must be {wanted}{tail}", field=name)
    # Anything else msgspec reports (a number out of range…), in its words.
    return RemoteProtocolError(ErrorCode.INVALID_FIELD, f"{subject}: {_cut(what)}", field=name)


def _quoted_value(shown: str) -> str:
    # msgspec shows the value in single quotes; quote it our way (a prefix).
    if len(shown) >= 2 and shown[0] == shown[-1] == "'":
        return quote(shown[1:-1])
    return _cut(shown)


def _got(what: str) -> str:
    match = re.match(_EXPECTED, what)
    return (match["got"] or "") if match else ""


def _cut(text: str, limit: int = 64) -> str:
    return text if len(text) <= limit else text[:limit] + f"… ({len(text)} characters)"


def _kind_of_text(data: str | bytes) -> Any:
    try:
        return _envelope_decoder.decode(data).type
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError, UnicodeError):
        return None


_LONE_SURROGATE_ESCAPE = r"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F])"


def _not_json(reason: str, data: str | bytes) -> str:
    if reason == "Input data was truncated" and isinstance(data, str) and re.search(_LONE_SURROGATE_ESCAPE, data):
        # msgspec reports a lone high surrogate escape as truncated input.
        reason = "a \\uD800-\\uDBFF escape without the low surrogate that must follow it"
    return f"message is not valid JSON: {reason}"
