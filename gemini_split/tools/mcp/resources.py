"""MCP resources: gemini-cli's ``list_mcp_resources`` and
``read_mcp_resource`` tools, and the text an ``@server:uri`` reference adds
to a prompt.

Both tools are read-only (kind ``read``: they run without asking, plan mode
included) and see the resources the session's servers listed
(``resources/list``, at start or from the cache). Their outputs are
gemini-cli's: "Available MCP Resources:" then ``- server:uri | name |
description`` lines; a resource's text contents, a blob as
``[Binary Data (mime)]``.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any, ClassVar

from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind

if TYPE_CHECKING:
    from .sources import McpServers

LIST_MCP_RESOURCES = "list_mcp_resources"
READ_MCP_RESOURCE = "read_mcp_resource"


class ListMcpResources(Tool):
    name: ClassVar[str] = LIST_MCP_RESOURCES
    description: ClassVar[str] = "Lists all available resources exposed by connected MCP servers."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"serverName": {
        "description": "Optional filter to list resources from a specific server.", "type": "string"}},
        "required": []}
    kind = ToolKind.READ

    def __init__(self, servers: McpServers):
        self.servers = servers

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        wanted = args.get("serverName")
        rows = [(s.name, r) for s in self.servers.servers if s.disabled is None for r in s.resources
                if not wanted or s.name == wanted]
        if not rows:
            return f"No resources found for server: {wanted}" if wanted else "No MCP resources found."
        lines = ["Available MCP Resources:"]
        for server, resource in rows:
            line = f"- {server}:{resource.uri}"
            if resource.name:
                line += f" | {resource.name}"
            if resource.description:
                line += f" | {resource.description}"
            lines.append(line)
        return "\n".join(lines) + "\n"


class ReadMcpResource(Tool):
    name: ClassVar[str] = READ_MCP_RESOURCE
    description: ClassVar[str] = "Reads the content of a specified Model Context Protocol (MCP) resource."
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {"uri": {
        "description": "The URI of the MCP resource to read.", "type": "string"}}, "required": ["uri"]}
    kind = ToolKind.READ

    def __init__(self, servers: McpServers):
        self.servers = servers

    def describe(self, args: dict[str, Any], workspace: Any) -> str:
        found = self.servers.resource(str(args.get("uri", "")))
        if found is not None:
            return f'Read MCP resource "{found[1].name}" from server "{found[0].name}"'
        return f"Read MCP resource: {args.get('uri', '')}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        uri = args["uri"]
        found = self.servers.resource(uri)
        if found is None:
            raise ToolFailed("mcp_resource_not_found", f"Resource not found for URI: {uri}",
                             "list_mcp_resources lists them")
        server, resource = found
        try:
            contents = await server.read_resource(resource.uri)
        except ToolFailed as exc:
            raise ToolFailed("mcp_tool_error", f"Failed to read resource: {exc}") from None
        text = ""
        for content in contents:
            if getattr(content, "text", None):
                text += content.text + "\n"
            elif getattr(content, "blob", None):
                text += f"[Binary Data ({getattr(content, 'mime_type', None)})]\n"
        return text or "No content returned from resource."


def resource_tools(servers: McpServers) -> list[Tool]:
    """The two tools, when some server lists a resource (else none)."""
    if not any(s.resources for s in servers.servers if s.disabled is None):
        return []
    return [ListMcpResources(servers), ReadMcpResource(servers)]


def contents_as_text(contents: list[Any]) -> str:
    """A resource's contents as gemini-cli adds them to a prompt: the text,
    a blob as ``[Binary resource content MIME, N bytes]``."""
    parts = []
    for content in contents:
        if getattr(content, "text", None):
            parts.append(content.text)
        elif getattr(content, "blob", None):
            try:
                size = len(base64.b64decode(content.blob, validate=False))
            except (binascii.Error, ValueError):
                size = 0
            mime = getattr(content, "mime_type", None) or "application/octet-stream"
            parts.append(f"[Binary resource content {mime}, {size} bytes]")
    return "\n".join(parts)
