"""The ACP agent in this process (fast): a scripted model, the real service
and loopback transport, raw JSON-RPC text from the test as the client."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager

import trio

from gemini_split.acp.agent import AcpAgent
from gemini_split.acp.bridge import BRIDGE_TOOLS
from gemini_split.acp.peer import RpcPeer
from gemini_split.client.connect import ClientSettings, Endpoint, ToolSettings
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service
from gemini_split.transport import ConnectOptions, ServeOptions, get_transport



class RawClient:
    def __init__(self, stream):
        self.stream = stream
        self.ids = 0

    async def call(self, method: str, params: dict) -> dict:
        self.ids += 1
        await self.stream.send(json.dumps({"jsonrpc": "2.0", "id": self.ids, "method": method, "params": params}))
        while True:
            message = json.loads(await self.stream.receive())
            if message.get("id") == self.ids:
                return message


@asynccontextmanager
async def bridge_agent(tmp_path, model, **attributes):
    loopback = get_transport("loopback:")
    async with open_test_service(model) as (_service, address), trio.open_nursery() as nursery:
        settings = ClientSettings(endpoint=Endpoint(server=address, reconnect_timeout=0),
                                  tools=ToolSettings(workspace=tmp_path, core_tools=BRIDGE_TOOLS))
        agent = AcpAgent(settings, shared=True, local_tools=False)
        for name, value in attributes.items():
            setattr(agent, name, value)
        await nursery.start(agent.run)

        async def handler(stream):
            await agent.serve_peer(RpcPeer(stream, agent.handle))

        acp_address = await nursery.start(loopback.serve, "loopback:", handler, ServeOptions())

        async def connect() -> RawClient:
            return RawClient(await loopback.open_connection(acp_address, ConnectOptions()))

        yield agent, connect
        nursery.cancel_scope.cancel()


async def test_a_user_may_hold_only_so_many_bridge_sessions(tmp_path):
    async with bridge_agent(tmp_path, ScriptedModel([]), max_sessions_per_owner=2) as (_agent, connect):
        client = await connect()
        first = await client.call("session/new", {"cwd": "/a", "mcpServers": []})
        second = await client.call("session/new", {"cwd": "/b", "mcpServers": []})
        third = await client.call("session/new", {"cwd": "/c", "mcpServers": []})
    assert first["result"]["sessionId"] != second["result"]["sessionId"]
    assert third["error"]["code"] == -32600 and "too many open sessions" in third["error"]["message"]


async def test_the_bridge_refuses_to_start_mcp_servers_for_a_client(tmp_path):
    async with bridge_agent(tmp_path, ScriptedModel([])) as (_agent, connect):
        client = await connect()
        reply = await client.call("session/new", {"cwd": "/a", "mcpServers": [
            {"name": "evil", "command": "sh", "args": ["-c", "touch /tmp/pwned"], "env": []}]})
    assert reply["error"]["code"] == -32602 and "MCP" in reply["error"]["message"]


async def test_a_shared_session_nobody_watches_is_closed_after_the_idle_time(tmp_path):
    # The real clock: the service's store works in a thread, which an
    # autojumping clock would skip past (it made this test flaky under load).
    async with bridge_agent(tmp_path, ScriptedModel([{"text": "hi"}]), idle_close=2.0) as (agent, connect):
        client = await connect()
        session = (await client.call("session/new", {"cwd": "/a", "mcpServers": []}))["result"]["sessionId"]
        await client.stream.aclose()
        await trio.sleep(0.2)
        assert [s.id for s in agent.sessions.values()] == [session]  # a page reload comes back in time
        again = await connect()
        reply = await again.call("session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "x"}]})
        assert reply["result"] == {"stopReason": "end_turn"}
        await again.stream.aclose()
        left = trio.current_time()
        with trio.fail_after(20):
            while agent.sessions:
                await trio.sleep(0.05)
        assert trio.current_time() - left >= 1.0  # not at once: after the idle time (counted from the last activity)
