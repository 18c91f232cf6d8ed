"""A server's prompts and resources beside its tools, against a real SDK
server (prompt_server.py): listed, cached with the tools (known without a
start), got and read on demand (the server started then), and a server
stopped, restarted and disabled one by one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gemini_split.tools.base import ToolContext, ToolFailed
from gemini_split.tools.mcp.prompts import prompt_text
from gemini_split.tools.mcp.resources import ListMcpResources, ReadMcpResource
from gemini_split.tools.mcp.sources import open_mcp_servers
from gemini_split.tools.registry import ToolRegistry
from gemini_split.tools.workspace import Workspace
from gemini_split.userfiles.settings import MCPServerSettings

PROMPT_SERVER = str(Path(__file__).with_name("prompt_server.py"))
pytestmark = pytest.mark.timeout(90)


def _starts(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


async def test_prompts_and_resources_come_from_the_cache_and_start_the_server_when_used(tmp_path):
    starts = tmp_path / "starts.txt"
    configs = {"notes": MCPServerSettings(command=sys.executable, args=[PROMPT_SERVER],
                                          env={"PROMPT_SERVER_STARTS": str(starts)})}
    cache_dir = tmp_path / "cache"
    async with open_mcp_servers(configs, cwd=tmp_path, cache_dir=cache_dir) as servers:
        (server,) = servers.servers
        assert server.status.state == "ready"
        assert [p.name for p in server.prompts] == ["poem-writer", "review", "standup"]
        assert server.status.resources == ["notes://today", "notes://data.bin"]
    assert _starts(starts) == 1

    async with open_mcp_servers(configs, cwd=tmp_path, cache_dir=cache_dir) as servers:
        (server,) = servers.servers
        assert server.status.state == "cached" and _starts(starts) == 1  # known, not started
        assert server.prompts[0].arguments == [{"name": "title", "description": "", "required": True},
                                               {"name": "mood", "description": "", "required": False}]
        result = await server.get_prompt("poem-writer", {"title": "T", "mood": "calm"})
        assert prompt_text(result).startswith("Write a haiku with the mood calm called T.")
        assert _starts(starts) == 2
        registry = ToolRegistry()
        servers.sync_registry(registry)
        assert {"mcp_notes_echo", "list_mcp_resources", "read_mcp_resource"} <= set(registry.names())
        ctx = ToolContext(workspace=Workspace(tmp_path))
        listed = await ListMcpResources(servers).run({"serverName": "notes"}, ctx)
        assert listed == ("Available MCP Resources:\n- notes:notes://today | today | Today's notes\n"
                          "- notes:notes://data.bin | data\n")
        assert await ListMcpResources(servers).run({"serverName": "other"}, ctx) == "No resources found for server: other"
        read = await ReadMcpResource(servers).run({"uri": "notes://today"}, ctx)
        assert read == "NOTES-OF-TODAY: buy milk, fix the build\n"
        with pytest.raises(ToolFailed, match="Resource not found for URI: notes://nope"):
            await ReadMcpResource(servers).run({"uri": "notes://nope"}, ctx)

        await server.restart()  # /mcp reload
        assert server.status.state == "ready" and _starts(starts) == 3
        await server.set_disabled("session")  # /mcp disable --session
        assert server.status.state == "disabled" and server.tools == [] and server.prompts == []
        servers.sync_registry(registry)
        assert not {"mcp_notes_echo", "list_mcp_resources"} & set(registry.names())
        await server.set_disabled(None)
        assert server.status.state == "ready" and _starts(starts) == 4


async def test_a_disabled_server_is_listed_but_never_started(tmp_path):
    starts = tmp_path / "starts.txt"
    configs = {"Notes": MCPServerSettings(command=sys.executable, args=[PROMPT_SERVER],
                                          env={"PROMPT_SERVER_STARTS": str(starts)})}
    async with open_mcp_servers(configs, cwd=tmp_path, disabled={"notes": "file"}) as servers:
        await servers.start_all()
        (server,) = servers.servers
        assert server.status.state == "disabled" and server.status.summary() == "disabled"
        assert servers.offered_tools() == [] and servers.resource("Notes:notes://today") is None
    assert not starts.exists()
