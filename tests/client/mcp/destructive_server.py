"""A real MCP server (the SDK's lowlevel Server over stdio) with one tool
declared destructive (``destructiveHint``), which deletes a file of the
directory it runs in, and one read-only tool."""

import os

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

_ARGS = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[
        types.Tool(name="wipe", description="deletes a file", input_schema=_ARGS,
                   annotations=types.ToolAnnotations(destructive_hint=True)),
        types.Tool(name="peek", description="reads a file", input_schema=_ARGS,
                   annotations=types.ToolAnnotations(read_only_hint=True)),
    ])


async def call_tool(ctx, params):
    name = params.arguments["name"]
    if params.name == "wipe":
        os.unlink(name)
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"deleted {name}")])
    with open(name) as f:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f.read())])


async def main():
    server = Server("destructive", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
