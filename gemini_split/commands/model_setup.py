"""Which model a process talks to, and with what key: one place for both
embedded mode and ``serve``.

The key is checked before anything else happens (and before google-genai is
imported), so a missing key is one clear line and exit status 41.
"""

from __future__ import annotations

from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError, MissingApiKey
from gemini_split.server.config import DEFAULT_MODEL
from gemini_split.server.model import Model


def open_model(flag: str | None, env: Environment, *, missing_key_hint: str = "") -> tuple[str, Model]:
    """The model name (``--model``, else ``$GEMINI_MODEL``, else the default)
    and the model behind it.

    Raises :class:`MissingApiKey` when a Gemini model has no key, and
    :class:`ConfigurationError` when the model cannot be set up (e.g. a
    ``scripted:`` file that is missing or malformed)."""
    e = env.environ
    name = flag or e.get("GEMINI_MODEL") or DEFAULT_MODEL
    api_key = None
    if not name.startswith("scripted:"):
        api_key = e.get("GEMINI_API_KEY") or e.get("GOOGLE_API_KEY")
        if not api_key:
            raise MissingApiKey(
                "no Gemini API key: set GEMINI_API_KEY (or GOOGLE_API_KEY). "
                "Get one at https://aistudio.google.com/apikey" + missing_key_hint
            )
    from gemini_split.server.service import create_model

    try:
        return name, create_model(name, api_key=api_key, base_url=e.get("GOOGLE_GEMINI_BASE_URL") or None)
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"cannot set up model {name!r}: {exc}") from None
