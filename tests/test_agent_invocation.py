"""A sub-agent call shown as gemini-cli 0.61's ``invoke_agent(agent_name,
prompt)`` (``gemini_split/agent_invocation.py``), and mapped back."""

from __future__ import annotations

import json

from gemini_split.agent_invocation import AGENT_TOOL, invocation, names, with_prompt
from gemini_split.policy import Decision, Policy, Rule


def test_an_agent_of_one_input_gets_it_as_the_prompt_as_gemini_cli_maps_it():
    assert invocation("reviewer", {"query": "review it"}) == {"agent_name": "reviewer", "prompt": "review it"}
    assert invocation("investigator", {"objective": ["a", "b"]})["prompt"] == '["a", "b"]'
    assert invocation("reviewer", {}) == {"agent_name": "reviewer", "prompt": ""}


def test_an_agent_of_several_inputs_gets_them_as_a_json_object_and_a_rewrite_of_it_maps_back():
    shown = invocation("planner", {"goal": "ship", "budget": 3})
    assert json.loads(shown["prompt"]) == {"goal": "ship", "budget": 3}
    rewritten = json.dumps({"goal": "ship safely", "budget": 2})
    assert with_prompt({"goal": "ship", "budget": 3}, rewritten, ["goal", "budget"]) == {"goal": "ship safely",
                                                                                        "budget": 2}
    assert with_prompt({"goal": "ship", "budget": 3}, "not json", ["goal", "budget"]) == {"goal": "ship",
                                                                                         "budget": 3}


def test_a_rewritten_prompt_becomes_the_one_input():
    assert with_prompt({"query": "old"}, "new", ["query"]) == {"query": "new"}
    assert with_prompt({"query": "old"}, 7, ["query"]) == {"query": "old"}


def test_invoke_agent_is_matched_by_its_agent_name_too_and_nothing_else_is():
    assert names(AGENT_TOOL, {"agent_name": "reviewer", "prompt": "x"}) == (AGENT_TOOL, "reviewer")
    assert names(AGENT_TOOL, {"prompt": "x"}) == (AGENT_TOOL,)
    assert names("read_file", {"agent_name": "reviewer"}) == ("read_file",)


def test_the_policy_engine_matches_an_invoke_agent_call_by_either_name():
    policy = Policy([Rule(tool_names=("reviewer",), decision=Decision.DENY, priority=2.5, source="test")])
    call = {"agent_name": "reviewer", "prompt": "review it"}
    assert policy.decide(AGENT_TOOL, call).decision is Decision.DENY
    assert policy.decide(AGENT_TOOL, {**call, "agent_name": "scout"}).decision is not Decision.DENY
