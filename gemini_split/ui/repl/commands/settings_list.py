"""``/settings``: every setting gemini-split reads, its effective value and
the settings file it came from (or ``default``), in the order
``settings.json`` nests them. Read-only: change a value in the file named
(``/settings`` says which), as gemini-cli's settings dialog would.

Values that may hold secrets (an MCP server's ``env`` and ``headers``) are
never shown: ``mcpServers`` lists the server names only.
"""

from __future__ import annotations

import json
from typing import Any

import msgspec

from gemini_split.userfiles.settings import LoadedSettings

#: Characters of a value shown at most (the rest is "…").
VALUE_LIMIT = 80
#: Keys whose value is summarised instead of shown (may hold secrets, or is long).
_NAMES_ONLY = ("mcpServers",)


def effective_settings(loaded: LoadedSettings) -> list[tuple[str, str, str]]:
    """``(dotted key, value as JSON, source)`` for every known setting:
    source is the scope of the last settings file that set it
    (``system-defaults``, ``user``, ``project``, ``system``: the order they
    apply in; the project's only in a trusted folder) or ``default``."""
    applied = [f for f in loaded.files if f.exists and (f.scope != "project" or loaded.trusted)]
    rows: list[tuple[str, str, str]] = []

    def walk(section: msgspec.Struct, path: tuple[str, ...]) -> None:
        for field in msgspec.structs.fields(type(section)):
            key = (*path, field.encode_name)
            value = getattr(section, field.name)
            if isinstance(value, msgspec.Struct):
                walk(value, key)
                continue
            source = next((f.scope for f in reversed(applied) if _has(f.raw, key)), "default")
            rows.append((".".join(key), _shown(key, value), source))

    walk(loaded.merged, ())
    return rows


def _has(raw: dict[str, Any], key: tuple[str, ...]) -> bool:
    node: Any = raw
    for part in key:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _shown(key: tuple[str, ...], value: Any) -> str:
    if key[-1] in _NAMES_ONLY and isinstance(value, dict):
        return ", ".join(sorted(value)) if value else "(none)"
    text = json.dumps(msgspec.to_builtins(value), ensure_ascii=False)
    return text if len(text) <= VALUE_LIMIT else text[:VALUE_LIMIT - 1] + "…"


def settings_files(loaded: LoadedSettings) -> list[tuple[str, str]]:
    """``(scope, path and state)`` of each settings file, in the order they apply."""
    out = []
    for f in loaded.files:
        state = "read" if f.exists else "absent"
        if f.scope == "project" and f.exists and not loaded.trusted:
            state = "ignored: the folder is not trusted"
        out.append((f.scope, f"{f.path} ({state})"))
    return out
