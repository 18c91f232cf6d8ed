"""Issue 42: a prompt sent from a client that runs no tools (the browser)
into a session whose tools run on a terminal that has left: the call's
wait is said at once (``tools_away``, a non-fatal notice) instead of a
silent "running" for the tool timeout, and a cancel ends the request."""

from __future__ import annotations

import pytest

from gemini_split.protocol import Cancel, Error, Finished, GenerateContentRequest, ToolExecutionRequest
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service

from .helpers import raw_client

pytestmark = pytest.mark.timeout(30)

WRITE = {"function_calls": [{"name": "write_file", "args": {"file_path": "a.txt", "content": "x"}}]}


async def test_a_call_nobody_attached_can_run_is_said_at_once_and_a_cancel_ends_it():
    model = ScriptedModel([WRITE, {"text": "never reached"}])
    async with open_test_service(model) as (_service, address), raw_client(address) as browser:
        prompt = GenerateContentRequest(prompt="write a.txt")
        await browser.send(prompt)  # no tool_discovery: it runs no tool
        seen = await browser.receive_until(lambda m: isinstance(m, Error) and m.code == "tools_away")
        (call,) = [m for m in seen if isinstance(m, ToolExecutionRequest)]
        notice = seen[-1]
        assert not notice.fatal and notice.request_id is None
        assert "write_file waits for the client that runs this session's tools" in notice.message
        assert "cancel" in notice.message
        await browser.send(Cancel(request_id=call.request_id))
        ended = await browser.receive_until(lambda m: isinstance(m, Finished | Error) and m.request_id is not None)
    assert isinstance(ended[-1], Finished) and ended[-1].reason == "cancelled"
    assert sum(isinstance(m, Error) and m.code == "tools_away" for m in seen + ended) == 1  # once


async def test_no_notice_while_a_client_that_runs_the_tool_is_attached(tmp_path):
    from .helpers import connected_client

    (tmp_path / "a.txt").write_text("here\n")
    model = ScriptedModel([{"function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}]},
                           {"text": "read"}])
    events: list = []
    async with open_test_service(model) as (_service, address), \
            connected_client(address, tmp_path, events=events) as client:
        outcome = await client.run_turn("read a.txt")
    assert outcome.finished is not None
    assert not any(isinstance(e, Error) and e.code == "tools_away" for e in events)
    assert "here" in str(model.requests[-1].contents[-1])  # the client ran it
