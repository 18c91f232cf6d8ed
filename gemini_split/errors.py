"""The root of every exception gemini-split raises on purpose.

Each subclass means one thing. Layers translate foreign exceptions into these
at their boundary (``raise TransportError(...) from exc``), so a caller never
has to know which library sits underneath.
"""

from __future__ import annotations


class GeminiSplitError(Exception):
    """Base class of all gemini-split errors."""


class ConfigurationError(GeminiSplitError):
    """The user's configuration (flags, environment, files) cannot work.

    The message says what is wrong and how to fix it; it is shown as is.
    """


class ProfileError(ConfigurationError):
    """A server profile file or entry is unusable."""
