"""How an MCP server's tools are named and described to the model.

gemini-cli's rule, matched exactly so policies and scripts carry over: every
MCP tool gets the fully qualified name ``mcp_{server}_{tool}``; characters
the Gemini API does not allow in a function name (anything but letters,
digits, ``_ - . :``) become ``_``; a name longer than 63 characters keeps its
first and last 30 characters around ``...``. Two servers that produce the
same name: the one registered last wins, as in gemini-cli (and the status
line of the loser says so).
"""

from __future__ import annotations

import re
from typing import Any

PREFIX = "mcp_"
_INVALID = re.compile(r"[^a-zA-Z0-9_\-.:]")
_MAX_NAME = 63


def qualified_tool_name(server: str, tool: str) -> str:
    """The name the model calls ``tool`` of ``server`` by."""
    name = f"{server}_{tool}"
    if not name.startswith(PREFIX):
        name = PREFIX + name
    name = _INVALID.sub("_", name)
    if len(name) > _MAX_NAME:
        name = name[:30] + "..." + name[-30:]
    return name


def model_schema(schema: Any) -> dict[str, Any]:
    """``schema`` cleaned for the Gemini API as gemini-cli cleans it:
    ``$schema`` and ``additionalProperties`` dropped and ``default`` removed
    beside ``anyOf``, recursively. A schema that is not an object becomes an
    empty object schema."""
    if not isinstance(schema, dict):
        return {"type": "object", "properties": {}}
    cleaned = _clean(schema)
    cleaned.setdefault("type", "object")
    return cleaned


def _clean(value: Any) -> Any:
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _clean(v) for k, v in value.items() if k not in ("$schema", "additionalProperties")}
    if "anyOf" in out:
        out.pop("default", None)
    return out
