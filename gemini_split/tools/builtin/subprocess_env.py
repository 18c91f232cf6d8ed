"""The environment tool processes get: the client's, minus its secrets.

A model that may run ``echo`` could otherwise read ``$GEMINI_API_KEY``. So
every tool subprocess (shell commands, ripgrep) gets :func:`tool_environment`:

- the program's own keys and tokens (:data:`ALWAYS_REMOVED`) are always
  removed, whatever is allowed;
- any variable whose name matches one of :data:`SECRET_PATTERNS`
  (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``*_PASSWORD``… — case-insensitive
  shell globs) is removed unless its name matches one of the ``allow``
  patterns the client was configured with (as codex's shell environment
  policy does), e.g. ``allow=("GITHUB_TOKEN",)`` for a ``gh`` workflow.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase

ALWAYS_REMOVED = frozenset({
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "GEMINI_SERVER_TOKEN",
    "GOOGLE_GENAI_API_KEY",
})
"""This program's own credentials: never handed to a tool."""

SECRET_PATTERNS = (
    "*_KEY", "*_KEYS", "*_TOKEN", "*_TOKENS", "*_SECRET", "*_SECRETS", "*_PASSWORD", "*_PASSWD",
    "*_PASS", "*_CREDENTIALS", "*_API_KEY_*", "*_SECRET_*", "*_TOKEN_*",
    "KEY", "TOKEN", "SECRET", "PASSWORD", "API_KEY",
)
"""Names that usually hold a secret, removed unless allowed."""


def is_secret_name(name: str, allow: Iterable[str] = ()) -> bool:
    """Whether ``name`` is removed from a tool's environment."""
    upper = name.upper()
    if upper in ALWAYS_REMOVED:
        return True
    if not any(fnmatchcase(upper, p) for p in SECRET_PATTERNS):
        return False
    return not any(fnmatchcase(upper, p.upper()) for p in allow)


def tool_environment(base: Mapping[str, str] | None = None, allow: Iterable[str] = (),
                     **extra: str) -> dict[str, str]:
    """``base`` (default: this process's environment) without secrets,
    plus ``extra``. ``allow``: glob patterns of secret-looking names to keep
    (never the program's own, :data:`ALWAYS_REMOVED`)."""
    allow = tuple(allow)
    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_secret_name(k, allow)}
    env.update(extra)
    return env
