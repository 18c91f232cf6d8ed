"""Issue 45 item 9: policy rules and hooks written for gemini-cli 0.61's one
delegation tool, ``invoke_agent(agent_name, prompt)``, still match here,
where the main model is offered one tool per sub-agent (README
"Differences from gemini-cli").

gemini-cli 0.61 (its bundle: ``AgentTool``, ``PolicyEngine.check``,
``HookEventHandler.fireBeforeToolEvent``) declares ``invoke_agent`` with
``agent_name`` and ``prompt``; a policy rule matches a call by
``invoke_agent`` (with ``argsPattern`` on the arguments, ``"agent_name":
"X"``) or by the agent's name; a BeforeTool/AfterTool hook gets
``tool_name: "invoke_agent"`` and ``tool_input: {agent_name, prompt}``.

Real ``gemini-split -p`` processes (embedded server) against the fake
Gemini server, the agents in the user's ``agents/``, the rules in a
``--policy`` file, the hooks in the user's settings.json; what the model
was sent is read from the fake's recorded requests (turns routed per agent
by their system instructions)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemini_split.policy import Decision, Policy
from gemini_split.policy.rules import USER_TIER
from gemini_split.policy.toml_files import read_policy_file
from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.tools.a2a import RemoteAgentTool
from gemini_split.tools.approval import ApprovalPolicy
from gemini_split.userfiles.remote_agents import load_remote

from tests.client.test_hooks import API_KEY, bodies, group, run, script, settings, setup  # noqa: F401

pytestmark = pytest.mark.timeout(90)

MAIN = "You are gemini-split"

#: The main model delegates to both agents in one turn; each that runs reports.
TURNS = [
    {"system_contains": MAIN, "function_calls": [
        {"name": "reviewer", "args": {"query": "review the diff"}},
        {"name": "scout", "args": {"query": "map the tree"}}]},
    {"system_contains": "You are REVIEWER.", "function_calls": [
        {"name": "complete_task", "args": {"result": "REVIEWED-4711"}}]},
    {"system_contains": "You are SCOUT.", "function_calls": [
        {"name": "complete_task", "args": {"result": "SCOUTED-4711"}}]},
    {"system_contains": MAIN, "text": "all done"},
]


def _agents(setup: dict) -> None:
    for name in ("reviewer", "scout"):
        path = setup["home"] / "agents" / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"---\nname: {name}\ndescription: The {name}.\n---\nYou are {name.upper()}.\n")


def _ran(fake: FakeGemini, marker: str) -> bool:
    """Whether a model request was made with ``marker`` in its system instruction."""
    return any(marker in json.dumps(r["body"].get("systemInstruction") or {}) for r in fake.requests)


def _policy(setup: dict, text: str) -> str:
    path = setup["tmp"] / "rules.toml"
    path.write_text(text)
    return str(path)


DENY_REVIEWER = """
[[rule]]
toolName = "invoke_agent"
argsPattern = '"agent_name":"reviewer"'
decision = "deny"
priority = 500
deny_message = "Reviews are off today."
"""

ONLY_SCOUT = """
[[rule]]
toolName = "invoke_agent"
decision = "deny"
priority = 100
deny_message = "No delegation here."

[[rule]]
toolName = "invoke_agent"
argsPattern = '"agent_name":\\s*"scout"'
decision = "allow"
priority = 200
"""


@pytest.mark.parametrize(("rules", "message"), [(DENY_REVIEWER, "Reviews are off today."),
                                                (ONLY_SCOUT, "No delegation here.")],
                         ids=["deny-by-agent-name", "allow-one-over-deny-all"])
def test_a_policy_rule_on_invoke_agent_governs_the_sub_agent_its_agent_name_names(setup, rules, message):
    _agents(setup)
    with FakeGemini(TURNS, api_key=API_KEY) as fake:
        done = run(setup, fake, "--policy", _policy(setup, rules), "-p", "review and map")
        assert done.returncode == 0, done.stderr
        assert not _ran(fake, "You are REVIEWER.") and _ran(fake, "You are SCOUT.")
        last = bodies(fake)[-1]
    assert message in last and "SCOUTED-4711" in last and "REVIEWED-4711" not in last


#: Logs its input; denies a call of the reviewer, as gemini-cli 0.61 shows it.
GUARD = r'''#!/usr/bin/env python3
import json, sys
event = json.load(sys.stdin)
with open(__file__ + ".log", "a") as log:
    log.write(json.dumps(event) + "\n")
if event.get("tool_input", {}).get("agent_name") == "reviewer":
    print(json.dumps({"decision": "deny", "reason": "The reviewer is on leave (agent-guard hook)."}))
'''


def _log(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_a_before_tool_hook_matching_invoke_agent_sees_the_call_as_gemini_cli_makes_it_and_can_deny_it(setup):
    _agents(setup)
    guard = script(setup["home"] / "agent_guard.py", GUARD)
    by_name = script(setup["home"] / "scout_seen.py", GUARD.replace("reviewer", "nobody"))
    settings(setup["home"], {"BeforeTool": [*group(str(guard), "invoke_agent", name="agent-guard"),
                                            *group(str(by_name), "scout", name="scout-seen")]})
    with FakeGemini(TURNS, api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "review and map")
        assert done.returncode == 0, done.stderr
        assert not _ran(fake, "You are REVIEWER.") and _ran(fake, "You are SCOUT.")
        last = bodies(fake)[-1]
    assert "The reviewer is on leave (agent-guard hook)." in last and "SCOUTED-4711" in last
    seen = sorted((e["tool_name"], json.dumps(e["tool_input"], sort_keys=True)) for e in _log(guard.with_suffix(".py.log")))
    assert seen == [("invoke_agent", json.dumps({"agent_name": "reviewer", "prompt": "review the diff"})),
                    ("invoke_agent", json.dumps({"agent_name": "scout", "prompt": "map the tree"}))]
    # A matcher naming the agent itself (gemini-split's tool name) runs for its calls only.
    assert [e["tool_input"]["agent_name"] for e in _log(by_name.with_suffix(".py.log"))] == ["scout"]


def test_an_after_tool_hook_matching_invoke_agent_adds_context_to_the_sub_agents_report(setup):
    _agents(setup)
    out = json.dumps({"hookSpecificOutput": {"hookEventName": "AfterTool", "additionalContext": "AGENT-LINT-OK"}})
    settings(setup["home"], {"AfterTool": group(f"cat > /dev/null; echo '{out}'", "^invoke_agent$")})
    with FakeGemini(TURNS, api_key=API_KEY) as fake:
        done = run(setup, fake, "-p", "review and map")
        assert done.returncode == 0, done.stderr
        last = bodies(fake)[-1]
    assert last.count("AGENT-LINT-OK") == 2 and "REVIEWED-4711" in last and "SCOUTED-4711" in last


CARD = {"name": "Peer", "description": "A peer.", "url": "http://127.0.0.1:9/rpc", "version": "1"}


@pytest.mark.parametrize(("rule", "decision"), [
    ("", Decision.ASK_USER),
    ('toolName = "invoke_agent"\nargsPattern = \'"agent_name":"peer"\'\ndecision = "allow"', Decision.ALLOW),
    ('toolName = "invoke_agent"\nargsPattern = \'"prompt":"delete\'\ndecision = "deny"', Decision.DENY),
    ('toolName = "peer"\ndecision = "deny"', Decision.DENY),
    ('toolName = "invoke_agent"\nargsPattern = \'"agent_name":"other"\'\ndecision = "allow"', Decision.ASK_USER),
], ids=["default-asks", "allow-by-agent-name", "deny-by-prompt", "own-name", "another-agent"])
def test_a_remote_agents_call_is_judged_as_invoke_agent_with_its_prompt(tmp_path, rule, decision):
    definition, remote = load_remote(tmp_path / "a.md", {"kind": "remote", "name": "peer",
                                                        "agent_card_json": json.dumps(CARD)})
    path = tmp_path / "rules.toml"
    path.write_text(f"[[rule]]\n{rule}\npriority = 100\n" if rule else "")
    policy = Policy()
    policy.add(*read_policy_file(path, USER_TIER))
    verdict = ApprovalPolicy(policy=policy).check(RemoteAgentTool(definition, remote),
                                                  {"query": "delete the old branches"})
    assert verdict.decision is decision
