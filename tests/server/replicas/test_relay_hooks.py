"""The user's tool hooks through the relay (issue 29 §4, protocol 1.4): a
client attached on the other replica that prompts is the one whose hooks
the session asks (``hook_request`` reaches it through ``relay:<id>``), and
its ``hook_response`` decides, on the replica that runs the session. Two
replicas on a real redis-server, raw clients on the loopback transport."""

from __future__ import annotations

import pytest

from gemini_split.protocol import (
    Finished,
    GenerateContentRequest,
    HookRequest,
    HookResponse,
    ToolCompleted,
    ToolError,
)
from gemini_split.stamping import stamp
from gemini_split.testing import redis_server as rs

from tests.server.attach.test_attach_server import hello
from tests.server.server_tools.helpers import finish, make_server_tools, until
from .test_relay import _turn, two_replicas

pytestmark = [pytest.mark.skipif(not rs.available(), reason=rs.MISSING), pytest.mark.timeout(60)]


async def test_the_hooks_of_a_client_relayed_from_the_other_replica_decide_its_calls(redis_server, tmp_path):
    root = tmp_path / "ws"
    touch = {"function_calls": [{"name": "run_shell_command", "args": {"command": "touch made.txt"}}]}
    script = [{"text": "ready"}, touch, {"text": "denied"}, touch, {"text": "made"}]
    async with two_replicas(redis_server, script, server_tools=make_server_tools(root, max_approval_mode="yolo")) as (
            (_, service_b), (at_a, at_b)):
        async with hello(at_a, tools="server", approval_mode="yolo", label="laptop") as (laptop, first):
            *_, done = await _turn(laptop, "get ready")  # the session is in the store
            async with hello(at_b, session_id=first.session_id, capabilities=("tool_hooks",), label="phone",
                             tool_hooks_timeout=5.0, last_seq=done.seq) as (phone, _joined):
                assert service_b.relays == 1 and first.session_id not in service_b.sessions  # relayed
                await phone.send(GenerateContentRequest(prompt="make it"))
                _, ask = await until(phone, HookRequest, event="BeforeTool")
                assert ask.input["tool_input"] == {"command": "touch made.txt"} and ask.timeout == 10.0
                await phone.send(HookResponse(hook_id=ask.hook_id, output={
                    "decision": "deny", "reason": "not from the phone"}))
                rest = await finish(phone)
                [error] = [e for e in rest if isinstance(e, ToolError)]
                assert error.error.code == "hook_denied" and "not from the phone" in error.error.message
                assert not (root / first.session_id / "made.txt").exists()
                # the laptop's own prompt: it has no tool hooks, so none are asked (not the phone's).
                # Sent once the laptop saw the phone's request end, as a client does (one request at
                # a time): among replicas events reach each client once Redis has them, and the
                # relayed phone may hear the end before the laptop does.
                await until(laptop, Finished)
                second = stamp(GenerateContentRequest(prompt="make it"))
                await laptop.send(second)
                rest, _ = await until(laptop, Finished, request_id=second.id)
                assert [e.tool for e in rest if isinstance(e, ToolCompleted)] == ["run_shell_command"]
                phone_saw, _ = await until(phone, Finished, request_id=second.id)
    assert not [e for e in phone_saw if isinstance(e, HookRequest)]
    assert (root / first.session_id / "made.txt").exists()
