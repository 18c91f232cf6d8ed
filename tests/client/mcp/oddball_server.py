"""A real MCP server (the SDK's lowlevel Server over stdio) whose tools
answer the awkward ways MCP servers answer: media, embedded resources, a
50 MB result, an error result, a call that never returns. It writes its pid
to ``$ODDBALL_PID_FILE`` when that is set, so a test can check it is gone."""

import base64
import os
import sys

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

_PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 92).decode()
_TOOLS = {
    "media": "an image and a line of text",
    "resources": "an embedded text resource, a blob and a link",
    "huge": "50 MB of text",
    "big": "1 MB of text",
    "fails": "an error result",
    "hang": "never answers",
    "add": "adds a and b",
}


async def list_tools(ctx, params):
    tools = [types.Tool(name=name, description=desc, input_schema={"type": "object", "properties": {}})
             for name, desc in _TOOLS.items() if name != "add"]
    tools.append(types.Tool(name="add", description=_TOOLS["add"], input_schema={
        "$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "minimum": 0}},
        "required": ["a", "b"], "additionalProperties": False}))
    tools.append(types.Tool(name="bad schema!", description="its schema is broken",
                            input_schema={"type": "object", "properties": {"x": {"type": 12}}}))
    return types.ListToolsResult(tools=tools)


async def call_tool(ctx, params):
    name, args = params.name, params.arguments or {}
    text = lambda t: types.TextContent(type="text", text=t)  # noqa: E731
    if name == "media":
        return types.CallToolResult(content=[text("a picture:"), types.ImageContent(type="image", data=_PNG, mime_type="image/png")])
    if name == "resources":
        return types.CallToolResult(content=[
            types.EmbeddedResource(type="resource", resource=types.TextResourceContents(uri="file:///notes.txt", text="RESOURCE-TEXT")),
            types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(uri="file:///b.bin", blob=_PNG, mime_type="application/x-thing")),
            types.ResourceLink(type="resource_link", uri="https://example.invalid/doc", name="doc"),
        ])
    if name == "huge":
        return types.CallToolResult(content=[text("x" * (50 * 1024 * 1024))])
    if name == "big":
        return types.CallToolResult(content=[text("y" * (1024 * 1024))])
    if name == "fails":
        return types.CallToolResult(content=[text("the widget is broken")], is_error=True)
    if name == "hang":
        await anyio.sleep_forever()
    if name == "add":
        return types.CallToolResult(content=[text(str(args["a"] + args["b"]))])
    raise ValueError(f"no tool {name}")


async def main():
    if os.environ.get("ODDBALL_PID_FILE"):
        with open(os.environ["ODDBALL_PID_FILE"], "w") as f:
            f.write(str(os.getpid()))
    print("oddball server starting", file=sys.stderr)
    server = Server("oddball", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
