"""What an MCP tool's result becomes for the model.

MCP results are lists of content blocks. The model receives one string, as
gemini-cli builds its parts: text as it is, images and audio as a line
naming their type and size (a function response carries no media here),
embedded resources by their text (or a line for a blob), resource links as a
line with their URI. The whole is capped at ``limit`` characters with a note
saying how much was cut, so a 50 MB answer never reaches the model whole.
"""

from __future__ import annotations

import base64
from typing import Any

DEFAULT_LIMIT = 200_000


def content_to_text(blocks: list[Any], tool: str, *, limit: int = DEFAULT_LIMIT) -> str:
    """Join ``blocks`` (mcp content models or dicts) into the model's text."""
    parts = [_block_text(_as_dict(b), tool) for b in blocks]
    text = "\n".join(p for p in parts if p)
    if len(text) > limit:
        cut = len(text) - limit
        text = text[:limit] + f"\n[… {cut} more characters of {tool}'s result were cut]"
    return text


def _as_dict(block: Any) -> dict[str, Any]:
    if isinstance(block, dict):
        return block
    dump = getattr(block, "model_dump", None)
    return dump(by_alias=True, exclude_none=True) if dump else {"type": "unknown"}


def _block_text(block: dict[str, Any], tool: str) -> str:
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        mime = block.get("mimeType") or block.get("mime_type") or "application/octet-stream"
        return f"[Tool '{tool}' provided {kind} data with mime-type {mime}, {_decoded_size(block.get('data'))} bytes]"
    if kind == "resource":
        resource = block.get("resource") or {}
        if isinstance(resource.get("text"), str):
            return resource["text"]
        mime = resource.get("mimeType") or resource.get("mime_type") or "application/octet-stream"
        return (f"[Tool '{tool}' provided an embedded resource {resource.get('uri', '')} with mime-type "
                f"{mime}, {_decoded_size(resource.get('blob'))} bytes]")
    if kind == "resource_link":
        return f"Resource Link: {block.get('title') or block.get('name', '')} at {block.get('uri', '')}"
    return f"[Tool '{tool}' returned content of unknown type {kind!r}]"


def _decoded_size(data: Any) -> int:
    if not isinstance(data, str):
        return 0
    try:
        return len(base64.b64decode(data, validate=False))
    except ValueError:
        return len(data)
