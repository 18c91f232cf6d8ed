"""Which MCP servers are switched off, where gemini-cli keeps it.

``gemini mcp disable NAME`` and ``/mcp disable NAME`` write
``~/.gemini/mcp-server-enablement.json`` (here: the state directory,
``$GEMINI_SPLIT_HOME`` or ``~/.gemini``): an object of lower-cased server
names to ``{"enabled": false}``; enabling a server removes its entry (a
server not named is enabled). ``--session`` disables or re-enables a server
for the running session only: that lives in the session's memory and is
never written. Names are compared in lower case, trimmed, as
gemini-cli's ``normalizeServerId`` does.

A file that cannot be read or decoded disables nothing (gemini-cli's rule:
it says so and goes on).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import msgspec

from gemini_split.files import read_bounded, replace_atomically

log = logging.getLogger(__name__)

FILENAME = "mcp-server-enablement.json"
_LIMIT = 1024 * 1024


def normalize(name: str) -> str:
    """gemini-cli's ``normalizeServerId``: lower case, trimmed."""
    return name.strip().lower()


def _read(config_dir: Path) -> dict:
    try:
        data = msgspec.json.decode(read_bounded(config_dir / FILENAME, _LIMIT))
    except FileNotFoundError:
        return {}
    except (OSError, msgspec.DecodeError) as exc:
        log.warning("Failed to read MCP server enablement config (%s): %s", config_dir / FILENAME, exc)
        return {}
    return data if isinstance(data, dict) else {}


def disabled_in_file(config_dir: Path) -> set[str]:
    """The (lower-cased) names the file disables."""
    return {normalize(name) for name, state in _read(config_dir).items()
            if isinstance(state, dict) and state.get("enabled") is False}


def disable(config_dir: Path, name: str) -> None:
    """Record ``name`` as disabled (``{"enabled": false}``)."""
    config = _read(config_dir)
    config[normalize(name)] = {"enabled": False}
    _write(config_dir, config)


def enable(config_dir: Path, name: str) -> None:
    """Remove ``name``'s entry (a server not named is enabled)."""
    config = _read(config_dir)
    if normalize(name) in config:
        del config[normalize(name)]
        _write(config_dir, config)


def _write(config_dir: Path, config: dict) -> None:
    config_dir.mkdir(parents=True, exist_ok=True)
    replace_atomically(config_dir / FILENAME, msgspec.json.format(msgspec.json.encode(config), indent=2))


def disabled_states(config_dir: Path, session: set[str] = frozenset()) -> dict[str, str]:  # type: ignore[assignment]
    """Lower-cased name → "session" or "file" for each disabled server, a
    session's own switch first (gemini-cli shows "Disabled (session)")."""
    states = {name: "file" for name in disabled_in_file(config_dir)}
    states.update({name: "session" for name in session})
    return states


def blocked_by_settings(name: str, allowed: Any, excluded: Any) -> str | None:
    """gemini-cli's reason when ``mcp.allowed`` / ``mcp.excluded`` keep a
    server out (enabling it would change nothing), or None."""
    if allowed is not None and normalize(name) not in {normalize(n) for n in allowed}:
        return (f"Server '{name}' is not in mcp.allowed list. Add it to settings.json mcp.allowed array "
                "to enable.")
    if normalize(name) in {normalize(n) for n in excluded or ()}:
        return (f"Server '{name}' is blocked by mcp.excluded. Remove it from settings.json mcp.excluded array "
                "to enable.")
    return None
