"""A sub-agent call as gemini-cli 0.61 shows it to policy rules and hooks.

gemini-split offers the main model one tool per sub-agent, named after it,
with the agent's own inputs (``reviewer(query)``,
``codebase_investigator(objective)``). gemini-cli 0.61 offers one tool for
all of them, ``invoke_agent(agent_name, prompt)``, and its policy engine
also matches such a call by the agent's name (its "virtual alias"). Policy
files and hooks written for gemini-cli name either. So that each still
matches here, a sub-agent call is shown to both as gemini-cli makes it —
tool ``invoke_agent``, arguments :func:`invocation` — and matched by either
name (:func:`names`): a rule ``toolName = "invoke_agent"`` with
``argsPattern = '"agent_name":"reviewer"'``, a rule ``toolName =
"reviewer"``, a hook ``matcher = "invoke_agent"`` and a hook ``matcher =
"reviewer"`` all match a call of ``reviewer``.

The one owner of this mapping: the client's policy (which sub-agents the
main agent may call, a remote agent's call), the server's delegation (the
user's BeforeTool/AfterTool hooks around it) and the hooks' matching use it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

#: gemini-cli 0.61's tool for delegating to a sub-agent.
AGENT_TOOL = "invoke_agent"


def invocation(agent: str, args: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments gemini-cli's ``invoke_agent`` carries for a call of
    ``agent`` with its own ``args``: ``{"agent_name", "prompt"}``. The
    prompt is the agent's one input, as gemini-cli maps its prompt onto an
    agent of one input (a string as it is, another value as JSON); for an
    agent of several inputs, all of them as a JSON object."""
    values = list(args.values())
    value: Any = values[0] if len(values) == 1 else dict(args) if values else ""
    if not isinstance(value, str):
        import json  # lazy_imports.EDGES: only for an input that is not text

        value = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return {"agent_name": agent, "prompt": value}


def names(tool_name: str, args: Any) -> tuple[str, ...]:
    """The names a policy rule's ``toolName`` or a hook's ``matcher`` may
    match a call by: the tool's, and for ``invoke_agent`` also its
    ``agent_name`` (gemini-cli's policy engine does the same)."""
    agent = args.get("agent_name") if tool_name == AGENT_TOOL and isinstance(args, Mapping) else None
    return (tool_name, agent) if isinstance(agent, str) and agent and agent != tool_name else (tool_name,)


def with_prompt(args: Mapping[str, Any], prompt: Any, inputs: Sequence[str]) -> dict[str, Any]:
    """The agent's own ``args`` after a BeforeTool hook rewrote the
    invocation's ``prompt``: for an agent of one input (``inputs``, the
    names its schema declares), that input becomes the new prompt; for one
    of several, a prompt that is a JSON object of them replaces them. A
    rewrite that fits neither leaves ``args`` as they were."""
    if not isinstance(prompt, str):
        return dict(args)
    if len(inputs) == 1:
        return {**args, inputs[0]: prompt}
    import json  # lazy_imports.EDGES: only for a rewrite of an agent of several inputs

    try:
        value = json.loads(prompt)
    except ValueError:
        return dict(args)
    return {**args, **value} if isinstance(value, dict) else dict(args)
