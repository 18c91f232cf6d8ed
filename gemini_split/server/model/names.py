"""Which model names a client may ask for.

A client-chosen ``model`` becomes part of a URL path at the Gemini API
(``/v1beta/models/{model}:streamGenerateContent``), so it is checked before it
gets near one: ``%2e%2e/%2e%2e/x`` or ``../../v1/files`` must never reach the
API or the HTTP client.

The accepted shapes are the Gemini API's own resource names:

* a plain model id, e.g. ``gemini-2.5-flash``, ``gemini-1.5-flash-8b-001``,
  ``gemma-3-27b-it``: lower-case letters and digits in runs joined by single
  ``-``, ``.`` or ``_``, at most 128 characters;
* the same id after ``models/`` (``models/gemini-2.5-pro``);
* a tuned model, ``tunedModels/ID`` (ID as above).

Nothing else: no other ``/``, no ``%``, no ``..``, no upper case, no space.
The operator may narrow the set further with ``serve --allowed-models``
(names or shell-style patterns such as ``gemini-2.5-*``); the server's own
default model is always allowed.

Imports nothing heavy: the session checks names on every request.
"""

from __future__ import annotations

import fnmatch
import re

from gemini_split.protocol.error_codes import ErrorCode

MAX_MODEL_NAME_LENGTH = 128

_ID = r"[a-z0-9]+(?:[-._][a-z0-9]+)*"
_MODEL_NAME = re.compile(rf"(?:models/|tunedModels/)?{_ID}")


class ModelNameRefused(ValueError):
    """A client asked for a model it may not use. ``code`` is the protocol
    error code to answer with: ``invalid_field`` for a name that is not a
    model name at all, ``model_not_allowed`` for one the operator excluded."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


def is_valid_model_name(name: str) -> bool:
    """Whether ``name`` has the shape of a Gemini API model name (see the
    module docstring)."""
    return len(name) <= MAX_MODEL_NAME_LENGTH and _MODEL_NAME.fullmatch(name) is not None


def check_model_name(name: str, allowed: tuple[str, ...] = (), *, default: str | None = None) -> str:
    """``name`` if a client may use it; raises :class:`ModelNameRefused`.

    ``allowed`` are the operator's names or patterns (empty: every valid
    name); ``default`` (the server's own model) always passes. A leading
    ``models/`` is ignored when comparing, so ``models/gemini-2.5-pro``
    matches an allowance of ``gemini-2.5-pro``."""
    if default is not None and name == default:
        return name
    if not is_valid_model_name(name):
        shown = name[:60] + ("…" if len(name) > 60 else "")
        raise ModelNameRefused(
            ErrorCode.INVALID_FIELD,
            f"{shown!r} is not a model name: expected an id such as gemini-2.5-flash, "
            "models/ID or tunedModels/ID (lower-case letters, digits, '-', '.', '_')",
        )
    if allowed:
        bare = name.removeprefix("models/")
        if not any(fnmatch.fnmatchcase(bare, pattern.removeprefix("models/")) for pattern in allowed):
            raise ModelNameRefused(
                ErrorCode.MODEL_NOT_ALLOWED,
                f"model {name!r} is not allowed on this server (allowed: {', '.join(allowed)})",
            )
    return name


def parse_allowed_models(text: str) -> tuple[str, ...]:
    """``--allowed-models`` (comma-separated names or patterns) as a tuple.
    Raises ValueError for an entry that could never match a valid name."""
    entries = tuple(part.strip() for part in text.split(",") if part.strip())
    for entry in entries:
        probe = entry.replace("*", "x").replace("?", "x")
        if not is_valid_model_name(probe):
            raise ValueError(f"{entry!r} is not a model name or pattern (e.g. gemini-2.5-flash, gemini-2.5-*)")
    return entries
