"""(1.5) A sub-agent definition's own ``mcpServers`` (issue 32), run here.

gemini-cli's inline MCP servers of an agent definition are that agent's
alone. gemini-split runs them where it runs the session's own MCP servers —
on the client that runs the session's tools — with the same code
(:func:`~.mcp.sources.open_mcp_servers`: started in the background when the
session opens, a server whose tools are in the MCP cache only when one of
its tools is first called; the same ``mcp.allowed`` / ``mcp.excluded``,
the same minimal environment for a stdio server, all stopped when the
connection ends). Their configurations, ``env`` and ``headers`` never leave
this client: only the tools' names, descriptions and schemas travel, in
``AgentDefinition.mcp_tools``, to a 1.5 server, which offers them to that
sub-agent alone.

Folder trust needs no gate of its own here: a project's definitions are not
read at all in an untrusted folder (``agents.agent_roots``), so nothing of
theirs is started.

The executor keeps the tools apart from the session's registry (they are
never announced in ``tool_discovery``) and runs one only for a call from
its agent (:attr:`AgentMcp.tools`, ``ToolExecutor.agent_tools``): a server
that asks anyway, for the main agent or another sub-agent, is refused.
Calls go through the same approval mode, policy and hooks as every MCP tool.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from gemini_split.protocol import ToolSpec


@dataclass
class AgentServers:
    """One sub-agent's own MCP servers: its name, its definition's path."""

    agent: str
    source: str
    servers: Any  # .mcp.sources.McpServers


@dataclass
class AgentMcp:
    """The own MCP servers of the session's sub-agents, once started."""

    agents: list[AgentServers]
    #: Names the session excludes (``tools.exclude``): not offered here either.
    exclude: tuple[str, ...] = ()
    #: agent name → tool name → tool, filled in by :meth:`join`.
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    joined: bool = False

    async def join(self) -> list[str]:
        """Wait until every server's tools are known (from the cache, or it
        is ready or has failed), fill :attr:`tools`, and return one line per
        server that failed, naming the definition's path and the server."""
        lines: list[str] = []
        for entry in self.agents:
            await entry.servers.wait_started()
            self.tools[entry.agent] = {t.name: t for t in entry.servers.tools() if t.name not in self.exclude}
            lines += [f"agents: {entry.source}: MCP server '{s.name}' of sub-agent {entry.agent} failed: "
                      f"{s.status.error}; {entry.agent} runs without its tools"
                      for s in entry.servers.servers if s.status.state == "failed"]
        self.joined = True
        return lines

    def specs(self, agent: str) -> tuple[ToolSpec, ...]:
        """What the server is told of ``agent``'s own tools."""
        return tuple(ToolSpec(name=t.name, description=t.description, parameters=t.parameters)
                     for t in self.tools.get(agent, {}).values())


@asynccontextmanager
async def open_agent_mcp(agents: Iterable[Any], settings: Any) -> AsyncIterator[AgentMcp | None]:
    """Start the own MCP servers of ``agents`` (``userfiles.agents.Agent``s:
    the ones the session offers) as ``settings`` (``ToolSettings``) starts
    the session's, without waiting for them; None when none has any (the
    MCP SDK is then never imported). All are stopped on exit."""
    with_servers = [a for a in agents if a.mcp_servers]
    if not with_servers:
        yield None
        return
    from .mcp.sources import open_mcp_servers

    async with AsyncExitStack() as stack:
        entries = []
        for agent in with_servers:
            servers = await stack.enter_async_context(open_mcp_servers(
                agent.mcp_servers, cwd=settings.workspace, allowed=settings.mcp_allowed,
                excluded=settings.mcp_excluded, wait=False, cache_dir=settings.mcp_cache))
            entries.append(AgentServers(agent.name, agent.definition.source, servers))
        yield AgentMcp(entries, exclude=tuple(settings.exclude_tools))


def not_used_notice(agents: Iterable[Any]) -> str | None:
    """The line said when the session's tools run on the server (``--tools
    server``): the sub-agents' own MCP servers, like the ones in
    settings.json, are not used (None when no offered agent has any)."""
    named = [f"{a.name}: {', '.join(sorted(a.mcp_servers))}" for a in agents if a.mcp_servers]
    if not named:
        return None
    return (f"the sub-agents' own MCP servers ({'; '.join(named)}) are not used: the session's tools run on "
            "the server, which takes none from this client; the sub-agents run without them")
