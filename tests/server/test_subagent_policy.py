"""Issue 32: policy rules and sub-agents (gemini-cli's ``policy-engine.md``).

A rule with ``subagent = "name"`` applies only to the calls that sub-agent
makes; rules without it apply to every agent. The real AgentService, the
real ProtocolClient and executor (or the server's tool host), a policy
file read as the CLI reads it, a scripted model told apart per agent by
its system instruction."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
import trio

from gemini_split.tools.approval import Answer, ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.client.protocol_client import ProtocolClient, ServerToolChoice
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.policy import Policy
from gemini_split.policy.rules import USER_TIER
from gemini_split.policy.toml_files import PolicyError, read_policy_file
from gemini_split.protocol import SessionContext
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.transport import ConnectOptions, get_transport

from tests.server.server_tools.helpers import make_server_tools, serving
from tests.server.server_tools.test_client_approvals import ScriptedAsker
from tests.server.test_subagents import agent, calls, done, main_turn, sub_turn

pytestmark = pytest.mark.timeout(60)

PUSHER_MAY_RUN_ECHO = """
[[rule]]
subagent = "pusher"
toolName = "run_shell_command"
commandPrefix = "echo"
decision = "allow"
priority = 100
"""


def policy_from(tmp_path, text: str) -> Policy:
    path = tmp_path / "policies" / "rules.toml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    policy = Policy()
    policy.add(*read_policy_file(path, USER_TIER))
    return policy


@asynccontextmanager
async def client_with(address, tmp_path, asker, policy, *, server_tools: bool = False):
    stream = await get_transport(address).open_connection(address, ConnectOptions())
    here = tmp_path / "client"
    here.mkdir(exist_ok=True)
    executor = ToolExecutor(default_tools(), Workspace(here), ApprovalPolicy(policy=policy), asker)
    client = ProtocolClient(stream, executor, tool_choice=ServerToolChoice() if server_tools else None)
    await client.handshake()
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        yield client
        await client.aclose()
        nursery.cancel_scope.cancel()


def _script() -> ScriptedModel:
    return ScriptedModel([
        main_turn(**calls(("run_shell_command", {"command": "echo from-main"}))),
        main_turn(**calls(("pusher", {"query": "say hi"}))),
        sub_turn("PUSHER", **calls(("run_shell_command", {"command": "echo from-pusher"}))),
        sub_turn("PUSHER", **done("said hi")),
        main_turn(text="done"),
    ])


def _outputs(model: ScriptedModel) -> list[str]:
    """The function responses the model was sent, as text."""
    return [str(p["function_response"]["response"]) for r in model.requests for c in r.contents[-1:]
            for p in c["parts"] if "function_response" in p]


async def test_a_subagent_scoped_allow_lets_that_sub_agent_run_the_command_while_the_main_agent_is_asked(
        tmp_path):
    model = _script()
    asker = ScriptedAsker(Answer.YES)
    context = SessionContext(agents=(agent("pusher", "You are PUSHER.", tools=("run_shell_command",)),),
                             approval_mode="default")
    async with serving(model, None) as (_service, address):
        async with client_with(address, tmp_path, asker, policy_from(tmp_path, PUSHER_MAY_RUN_ECHO)) as client:
            outcome = await client.run_turn("go", context=context)
    assert outcome.finished is not None
    (question,) = asker.asked  # only the main agent's call was asked about
    assert question.agent == "" and question.args["command"] == "echo from-main"
    outputs = _outputs(model)
    assert any("from-main" in o for o in outputs) and any("from-pusher" in o for o in outputs)


async def test_with_server_tools_a_subagent_scoped_allow_applies_to_that_sub_agent_only(tmp_path):
    model = _script()
    asker = ScriptedAsker(Answer.YES)
    context = SessionContext(agents=(agent("pusher", "You are PUSHER.", tools=("run_shell_command",)),))
    tools = make_server_tools(tmp_path / "ws", policy=policy_from(tmp_path, PUSHER_MAY_RUN_ECHO))
    async with serving(model, tools) as (_service, address):
        async with client_with(address, tmp_path, asker, Policy(), server_tools=True) as client:
            outcome = await client.run_turn("go", context=context)
    assert outcome.finished is not None
    (question,) = asker.asked
    assert "from-main" in question.description and question.agent == ""
    assert any("from-pusher" in o for o in _outputs(model))


async def test_a_rule_for_another_sub_agent_does_not_apply_and_the_sub_agent_is_asked(tmp_path):
    model = ScriptedModel([
        main_turn(**calls(("other", {"query": "say hi"}))),
        sub_turn("OTHER", **calls(("run_shell_command", {"command": "echo from-other"}))),
        sub_turn("OTHER", **done("said hi")),
        main_turn(text="done"),
    ])
    asker = ScriptedAsker(Answer.NO)
    context = SessionContext(agents=(agent("other", "You are OTHER.", tools=("run_shell_command",)),),
                             approval_mode="default")
    async with serving(model, None) as (_service, address):
        async with client_with(address, tmp_path, asker, policy_from(tmp_path, PUSHER_MAY_RUN_ECHO)) as client:
            await client.run_turn("go", context=context)
    (question,) = asker.asked
    assert question.agent == "other"


@pytest.mark.parametrize("value", ['"Pusher Agent"', '""', '"../x"', "7"])
def test_a_malformed_subagent_value_is_refused_naming_the_file_the_rule_and_the_field(tmp_path, value):
    path = tmp_path / "bad.toml"
    path.write_text('[[rule]]\ntoolName = "read_file"\ndecision = "allow"\npriority = 1\n\n'
                    f'[[rule]]\nsubagent = {value}\ntoolName = "glob"\ndecision = "allow"\npriority = 1\n')
    with pytest.raises(PolicyError) as refused:
        read_policy_file(path, USER_TIER)
    message = str(refused.value)
    assert str(path) in message and "rule #2" in message and "field subagent" in message


NO_INVESTIGATOR = """
[[rule]]
toolName = "codebase_investigator"
decision = "deny"
priority = 500
deny_message = "Deep codebase analysis is restricted for this session."
"""


async def test_a_rule_denying_a_sub_agent_by_name_refuses_the_delegation_with_its_deny_message(tmp_path):
    from gemini_split.userfiles.agents import builtins

    model = ScriptedModel([
        main_turn(**calls(("codebase_investigator", {"objective": "map it"}))),
        sub_turn("Codebase Investigator", **done("should never run")),
        main_turn(text="I will look myself"),
    ])
    context = SessionContext(agents=tuple(builtins()), approval_mode="default")
    async with serving(model, None) as (_service, address):
        async with client_with(address, tmp_path, ScriptedAsker(),
                               policy_from(tmp_path, NO_INVESTIGATOR)) as client:
            outcome = await client.run_turn("go", context=context)
    assert outcome.finished is not None
    assert not any("Codebase Investigator" in (r.system_instruction or "") for r in model.requests)
    refusal = model.requests[-1].contents[-1]["parts"][0]["function_response"]["response"]["error"]
    assert refusal["code"] == "refused"
    assert "Deep codebase analysis is restricted for this session." in refusal["message"]
    assert {"codebase_investigator", "generalist"} <= {t.name for t in model.requests[0].tools}
