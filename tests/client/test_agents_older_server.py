"""(1.4) ``SessionContext.agents`` is not sent to a server older than 1.4:
a 1.3 server does not know the field. Checked on the bytes a stand-in
peer receives after answering the handshake as 1.3 (and, as the control,
as 1.4: the same client sends the agents there). (1.5) An agent the
client's policy denies by name is sent with ``denied`` to a 1.5 server,
and not at all to a 1.4 one, which would run it. (1.5) A sub-agent's own
MCP tools go in its definition's ``mcp_tools`` to a 1.5 server only."""

from __future__ import annotations

import json

import pytest
import trio

from gemini_split.tools.approval import ApprovalPolicy
from gemini_split.userfiles.agents import builtins
from gemini_split.tools.executor import ToolExecutor
from gemini_split.client.protocol_client import ProtocolClient
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.protocol import Connected, Finished, RequestStarted, SessionContext, encode
from gemini_split.transport.memory_pair import open_memory_pair

pytestmark = pytest.mark.timeout(30)


async def _request_sent_to(version: str, tmp_path, policy=None, agent_mcp_tools=None) -> dict:
    """The ``generate_content_request`` a client (with ``policy``) sends,
    with sub-agents in its context, to a server that says it speaks
    ``version``."""
    ours, theirs = open_memory_pair(buffer=64, client_peer="srv", server_peer="c", client_max=1 << 20,
                                    server_max=1 << 20)
    client = ProtocolClient(ours, ToolExecutor(default_tools(), Workspace(tmp_path), ApprovalPolicy(policy=policy)))
    client.agent_mcp_tools = agent_mcp_tools
    received: list[dict] = []
    async with trio.open_nursery() as nursery:
        async def server():
            await theirs.receive()  # hello
            await theirs.send(encode(Connected(id="c", timestamp=1, protocol_version=version, session_id="s-1")))
            while True:
                message = json.loads(await theirs.receive())
                if message["type"] == "generate_content_request":
                    received.append(message)
                    rid = message["id"]
                    await theirs.send(encode(RequestStarted(id="r", timestamp=2, request_id=rid, prompt="hello")))
                    await theirs.send(encode(Finished(id="f", timestamp=3, request_id=rid)))

        nursery.start_soon(server)
        await client.handshake()
        await nursery.start(client.run)
        context = SessionContext(environment="Today is Friday.", agents=tuple(builtins()))
        outcome = await client.run_turn("hello", context=context)
        assert outcome.finished is not None
        nursery.cancel_scope.cancel()
    [request] = received
    return request


async def test_a_13_server_receives_the_context_without_the_agents_field(tmp_path):
    request = await _request_sent_to("1.3", tmp_path)
    assert request["context"]["environment"] == "Today is Friday."  # the rest of the context still goes
    assert "agents" not in request["context"]


async def test_a_14_server_receives_the_agents_it_runs(tmp_path):
    request = await _request_sent_to("1.4", tmp_path)
    assert [a["name"] for a in request["context"]["agents"]] == ["codebase_investigator", "generalist"]


def _denying(tmp_path):
    from gemini_split.policy import Policy
    from gemini_split.policy.rules import USER_TIER
    from gemini_split.policy.toml_files import read_policy_file

    path = tmp_path / "deny.toml"
    path.write_text('[[rule]]\ntoolName = "codebase_investigator"\ndecision = "deny"\npriority = 500\n'
                    'deny_message = "No deep analysis here."\n')
    policy = Policy()
    policy.add(*read_policy_file(path, USER_TIER))
    return policy


async def test_a_15_server_is_told_which_agent_the_policy_denies_and_why(tmp_path):
    request = await _request_sent_to("1.5", tmp_path, _denying(tmp_path))
    agents = {a["name"]: a for a in request["context"]["agents"]}
    assert "No deep analysis here." in agents["codebase_investigator"]["denied"]
    assert "denied" not in agents["generalist"]


async def test_a_14_server_is_not_sent_an_agent_the_policy_denies(tmp_path):
    request = await _request_sent_to("1.4", tmp_path, _denying(tmp_path))
    assert [a["name"] for a in request["context"]["agents"]] == ["generalist"]


@pytest.mark.parametrize("version, sent", [("1.4", False), ("1.5", True)])
async def test_a_sub_agents_own_mcp_tools_go_in_its_definition_to_a_15_server_only(tmp_path, version, sent):
    from gemini_split.protocol import ToolSpec

    own = (ToolSpec(name="mcp_time_get_current_time", description="The time.",
                    parameters={"type": "object", "properties": {}}),)
    request = await _request_sent_to(version, tmp_path,
                                     agent_mcp_tools=lambda name: own if name == "generalist" else ())
    agents = {a["name"]: a for a in request["context"]["agents"]}
    assert "mcp_tools" not in agents["codebase_investigator"]  # not another agent's
    if sent:
        assert [t["name"] for t in agents["generalist"]["mcp_tools"]] == ["mcp_time_get_current_time"]
    else:  # a 1.4 server would not keep them to the agent: it gets the agent without them
        assert "mcp_tools" not in agents["generalist"]
