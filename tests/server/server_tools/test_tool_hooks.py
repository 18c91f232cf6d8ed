"""Issue 29 §4, protocol 1.4: the user's BeforeTool/AfterTool hooks for the
tools a server runs. The server asks the client driving the request
(``hook_request``) and applies the verdict its ``hook_response`` carries as
a client applies its own hooks'. Raw clients over a real WebSocket say
exactly what they want: a 1.3 hello, answers nobody asked for, a client
that leaves mid-hook, one that never answers, a flood."""

from __future__ import annotations

import json

import trio

from gemini_split.protocol import (
    Error,
    GenerateContentRequest,
    HookRequest,
    HookResponse,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecision,
    ToolError,
)
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.server.session.features.tool_hooks import HOOK_MARGIN, MAX_HOOK_OUTPUT

from .helpers import APPROVER, finish, hello, make_server_tools, serving, until

HOOKS = ("tool_deltas", "tool_hooks")


def _shell(command: str) -> dict:
    return {"function_calls": [{"name": "run_shell_command", "args": {"command": command}}]}


def _responses(model: ScriptedModel) -> list[dict]:
    """The function responses of the last model request."""
    return [p["function_response"]["response"] for p in model.requests[-1].contents[-1]["parts"]]


async def test_a_before_tool_deny_after_the_approval_stops_the_call_and_the_model_gets_the_reason(tmp_path):
    model = ScriptedModel([_shell("rm victim.txt"), {"text": "ok"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER + ("tool_hooks",),
                         tool_hooks_timeout=2.0) as (raw, connected):
            (root / connected.session_id / "victim.txt").write_text("precious\n")
            await raw.send(GenerateContentRequest(prompt="tidy up"))
            before, question = await until(raw, ToolAwaitingApproval)
            assert not [e for e in before if isinstance(e, HookRequest)]  # the approval comes first
            await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                        parameters_hash=question.parameters_hash))
            _, ask = await until(raw, HookRequest)
            assert ask.event == "BeforeTool" and ask.seq is None and ask.request_id
            assert ask.input == {"tool_name": "run_shell_command", "tool_input": {"command": "rm victim.txt"}}
            assert ask.timeout == 2.0 + HOOK_MARGIN
            await raw.send(HookResponse(hook_id=ask.hook_id, output={
                "decision": "deny", "reason": "Deleting files is not allowed by the rm-guard hook"}))
            events = await finish(raw)
    assert (root / connected.session_id / "victim.txt").read_text() == "precious\n"
    assert not [e for e in events if isinstance(e, HookRequest)]  # no AfterTool for a call that never ran
    [error] = [e for e in events if isinstance(e, ToolError)]
    assert error.error.code == "hook_denied"
    [response] = _responses(model)
    assert "Deleting files is not allowed by the rm-guard hook" in response["error"]["message"]


async def test_before_tool_rewrites_the_arguments_and_after_tool_context_reaches_the_model(tmp_path):
    model = ScriptedModel([_shell("echo model-chose"), {"text": "ok"}])
    async with serving(model, make_server_tools(tmp_path / "ws", max_approval_mode="yolo")) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo", capabilities=HOOKS) as (raw, _c):
            await raw.send(GenerateContentRequest(prompt="go"))
            _, ask = await until(raw, HookRequest, event="BeforeTool")
            await raw.send(HookResponse(hook_id=ask.hook_id, output={
                "hookSpecificOutput": {"tool_input": {"command": "echo hook-chose"}}}))
            _, after = await until(raw, HookRequest, event="AfterTool")
            assert after.input["tool_input"] == {"command": "echo hook-chose"}
            assert "hook-chose" in json.dumps(after.input["tool_response"]["llmContent"])
            await raw.send(HookResponse(hook_id=after.hook_id, output={
                "hookSpecificOutput": {"additionalContext": "LINT-OK-4711"}}))
            await finish(raw)
    [response] = _responses(model)
    text = json.dumps(response)
    assert "hook-chose" in text and "model-chose" not in text and "LINT-OK-4711" in text


async def test_a_1_3_client_never_gets_a_hook_request_and_the_tool_runs_without_hooks(tmp_path):
    model = ScriptedModel([_shell("touch made.txt"), {"text": "ok"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, protocol_version="1.3", tools="server", approval_mode="yolo",
                         capabilities=HOOKS) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            events = await finish(raw)
    assert not [e for e in events if isinstance(e, HookRequest)]
    assert [e.tool for e in events if isinstance(e, ToolCompleted)] == ["run_shell_command"]
    assert (root / connected.session_id / "made.txt").exists()


async def test_a_client_without_tool_hooks_is_never_asked_and_its_calls_make_no_round_trip(tmp_path):
    model = ScriptedModel([_shell("touch made.txt"), {"text": "ok"}])
    async with serving(model, make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo", capabilities=("tool_deltas",)) as (raw, _c):
            await raw.send(GenerateContentRequest(prompt="go"))
            events = await finish(raw)
    assert not [e for e in events if isinstance(e, HookRequest)]
    assert [e.tool for e in events if isinstance(e, ToolCompleted)] == ["run_shell_command"]


async def test_hook_responses_nobody_asked_for_are_refused_and_a_flood_of_them_changes_nothing(tmp_path):
    model = ScriptedModel([_shell("echo hi"), {"text": "ok"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo", capabilities=HOOKS) as (raw, connected):
            # nothing running: refused by the connection's rules
            await raw.send(HookResponse(hook_id="h-never", output={"decision": "deny"}))
            _, error = await until(raw, Error)
            assert error.code == "unexpected_message" and not error.fatal
            async with hello(address, session_id=connected.session_id, resume_token=connected.resume_token,
                             tools="server", capabilities=HOOKS, label="other") as (other, _):
                await raw.send(GenerateContentRequest(prompt="go"))
                _, ask = await until(raw, HookRequest, event="BeforeTool")
                # the other client was not asked: it cannot answer for the one asked
                await other.send(HookResponse(hook_id=ask.hook_id, output={"decision": "deny", "reason": "x"}))
                _, error = await until(other, Error)
                assert error.code == "unexpected_message" and ask.hook_id in error.message
                flood = 300
                for _ in range(flood):
                    await raw.send(HookResponse(hook_id="h-bogus", output={"decision": "deny"}))
                refusals = 0
                while refusals < flood:
                    _, error = await until(raw, Error)
                    assert error.code == "unexpected_message" and not error.fatal
                    refusals += 1
                await raw.send(HookResponse(hook_id=ask.hook_id, output={}))
                _, after = await until(raw, HookRequest, event="AfterTool")
                await raw.send(HookResponse(hook_id=after.hook_id, output={}))
                await raw.send(HookResponse(hook_id=after.hook_id, output={}))  # a second answer
                _, error = await until(raw, Error)
                assert error.code == "unexpected_message"
                await finish(raw)
    assert "hi" in json.dumps(_responses(model))


async def test_a_hooks_client_that_never_answers_does_not_wedge_the_session(tmp_path):
    model = ScriptedModel([_shell("touch made.txt"), {"text": "ok"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root), tool_timeout=0.2) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo", capabilities=HOOKS,
                         tool_hooks_timeout=3600.0) as (raw, connected):
            started = trio.current_time()
            await raw.send(GenerateContentRequest(prompt="go"))
            _, ask = await until(raw, HookRequest, event="BeforeTool")
            # a client asks for an hour: the server waits its tool timeout and the margin at most
            assert ask.timeout == 0.2 + HOOK_MARGIN
            _, after = await until(raw, HookRequest, event="AfterTool")
            await until(raw, ToolCompleted)
            await finish(raw)
            assert trio.current_time() - started < 2 * (0.2 + HOOK_MARGIN) + 3
            # too late: the call went on without it
            await raw.send(HookResponse(hook_id=ask.hook_id, output={"decision": "deny"}))
            _, error = await until(raw, Error)
            assert error.code == "unexpected_message"
    assert (root / connected.session_id / "made.txt").exists()


async def test_a_client_that_leaves_mid_hook_the_session_goes_on_and_nothing_runs_twice(tmp_path):
    model = ScriptedModel([_shell("echo run >> count.txt"), _shell("echo run >> count.txt"), {"text": "ok"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo", capabilities=HOOKS,
                         label="laptop") as (laptop, connected):
            session = dict(session_id=connected.session_id, resume_token=connected.resume_token)
            async with hello(address, **session, capabilities=HOOKS, label="phone") as (phone, _):
                await laptop.send(GenerateContentRequest(prompt="go"))
                _, ask = await until(laptop, HookRequest, event="BeforeTool")
                await laptop.stream.aclose()  # gone while its hook runs
                # the call goes on without its hooks, once; from now on the
                # hooks are the remaining driver's, which runs them
                seen, after = await until(phone, HookRequest)
                assert after.event == "AfterTool" and after.hook_id != ask.hook_id
                await phone.send(HookResponse(hook_id=after.hook_id, output={}))
                more, second = await until(phone, HookRequest)
                assert second.event == "BeforeTool"
                assert second.input["tool_input"] == {"command": "echo run >> count.txt"}
                await phone.send(HookResponse(hook_id=second.hook_id, output={
                    "decision": "deny", "reason": "once is enough"}))
                events = seen + more + await finish(phone)
    assert (root / connected.session_id / "count.txt").read_text() == "run\n"
    assert len([e for e in events if isinstance(e, ToolCompleted)]) == 1
    assert "once is enough" in json.dumps(_responses(model))


async def test_an_output_over_the_cap_is_ignored_and_said_and_the_call_goes_on(tmp_path):
    model = ScriptedModel([_shell("touch made.txt"), {"text": "ok"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo", capabilities=HOOKS) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            _, ask = await until(raw, HookRequest, event="BeforeTool")
            await raw.send(HookResponse(hook_id=ask.hook_id, output={
                "decision": "deny", "reason": "x" * (MAX_HOOK_OUTPUT + 1)}))
            _, error = await until(raw, Error)
            assert error.code == "message_too_large" and "ignored" in error.message
            _, after = await until(raw, HookRequest, event="AfterTool")
            await raw.send(HookResponse(hook_id=after.hook_id, output={}))
            await finish(raw)
    assert (root / connected.session_id / "made.txt").exists()


async def test_a_rewrite_is_decided_again_so_the_operators_deny_rule_still_holds(tmp_path):
    """A client's hooks may rewrite the arguments, never past the server's
    policy: the rewritten call is decided (and asked about) again."""
    from gemini_split.policy import Policy, read_policy_file

    rules = tmp_path / "operator.toml"
    rules.write_text('[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "touch"\ndecision = "deny"\n'
                     'priority = 900\n')
    policy = Policy().with_rules(read_policy_file(rules, 5))
    model = ScriptedModel([_shell("echo harmless"), {"text": "ok"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root, max_approval_mode="yolo", policy=policy)) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo", capabilities=HOOKS) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            _, ask = await until(raw, HookRequest, event="BeforeTool")
            await raw.send(HookResponse(hook_id=ask.hook_id, output={
                "hookSpecificOutput": {"tool_input": {"command": "touch pwned"}}}))
            events = await finish(raw)
    assert not (root / connected.session_id / "pwned").exists()
    [error] = [e for e in events if isinstance(e, ToolError)]
    assert error.error.code == "refused" and "not allowed by the approval policy" in error.error.message
