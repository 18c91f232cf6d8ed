"""(1.5) A sub-agent's own MCP tools in the client's executor
(``ToolExecutor.agent_tools``, ``tools/agent_mcp.py``): run for a call
from their agent only, under the same approval mode as every MCP tool.
Against a real ``mcp-server-time`` over stdio."""

from __future__ import annotations

import sys
from typing import Any

import pytest
import trio

from gemini_split.tools.approval import ApprovalMode, ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.mcp.sources import open_mcp_servers
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.userfiles.settings import MCPServerSettings

pytestmark = pytest.mark.timeout(60)

TIME = MCPServerSettings(command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"])


async def _call(executor: ToolExecutor, agent: str) -> tuple[Any, Any]:
    async def emit(event: Any) -> None:
        pass

    return await executor.execute("c-1", "mcp_time_get_current_time", {"timezone": "UTC"}, emit, agent=agent)


async def test_an_agents_own_tool_runs_for_that_agent_only_and_asks_as_any_mcp_tool(tmp_path):
    with trio.fail_after(40):
        async with open_mcp_servers({"time": TIME}, cwd=tmp_path) as servers:
            own = {t.name: t for t in servers.tools()}
            executor = ToolExecutor(default_tools(), Workspace(tmp_path), ApprovalPolicy(ApprovalMode.YOLO))
            executor.agent_tools = {"x": own}
            result, failure = await _call(executor, "x")
            assert failure is None and '"timezone": "UTC"' in result
            for caller, who in (("", "the main agent"), ("y", "sub-agent y")):
                result, failure = await _call(executor, caller)
                assert result is None and failure.code == "refused"
                assert failure.message == ("mcp_time_get_current_time is a tool of sub-agent x's own MCP servers: "
                                           f"{who} may not call it")
            assert "mcp_time_get_current_time" not in executor.registry.names()  # never offered as the session's
            # Default mode with nobody to ask: refused as any MCP tool is, not run.
            asking = ToolExecutor(default_tools(), Workspace(tmp_path), ApprovalPolicy(ApprovalMode.DEFAULT))
            asking.agent_tools = {"x": own}
            result, failure = await _call(asking, "x")
            assert result is None and "mcp_time_get_current_time needs the user's approval" in failure.message
