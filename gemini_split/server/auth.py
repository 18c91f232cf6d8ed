"""Token authentication for servers: seed 000's auth config format.

``--auth-config FILE`` (or ``GEMINI_AUTH_CONFIG``) names a JSON file::

    {"tokens": {"<token>": {"userId": "alice", "permissions": ["chat"]}}}

Tokens are compared in constant time and never logged.
"""

from __future__ import annotations

import hmac
import json
from pathlib import Path

from gemini_split.errors import ConfigurationError
from gemini_split.transport import Authenticator, Principal


def load_auth_config(path: str | Path) -> Authenticator:
    """An authenticator for the tokens in ``path``.

    Raises :class:`ConfigurationError` naming the file and what is wrong."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"cannot read auth config {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigurationError(f"auth config {path} is not valid JSON: {exc}") from None
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(tokens, dict) or not tokens:
        raise ConfigurationError(
            f'auth config {path} must hold {{"tokens": {{"<token>": {{"userId": "...", "permissions": [...]}}}}}} '
            "with at least one token"
        )
    entries: list[tuple[bytes, Principal]] = []
    for token, info in tokens.items():
        if not isinstance(info, dict) or not isinstance(info.get("userId"), str) or len(token) < 8:
            raise ConfigurationError(
                f"auth config {path}: every token needs at least 8 characters and a userId string"
            )
        permissions = tuple(p for p in info.get("permissions", []) if isinstance(p, str))
        entries.append((token.encode(), Principal(info["userId"], permissions)))
    return token_authenticator(entries)


def token_authenticator(entries: list[tuple[bytes, Principal]]) -> Authenticator:
    def authenticate(presented: str | None) -> Principal | None:
        if not presented:
            return None
        given = presented.encode()
        found = None
        # Compare against every token, whatever matches, so timing reveals
        # neither which token nor how much of one was right.
        for token, principal in entries:
            if hmac.compare_digest(given, token):
                found = principal
        return found

    return authenticate
