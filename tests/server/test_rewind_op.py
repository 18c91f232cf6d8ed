"""Issue 30, rewind: the protocol operation (1.4) on a real service.

The real AgentService on the loopback transport, a scripted model (whose
recorded requests show what the model was sent), real ProtocolClients with
real tools in a temporary workspace.
"""

from __future__ import annotations

import json

import pytest
import trio

from gemini_split.tools.approval_mode import ApprovalMode
from gemini_split.client.failures import RequestFailed
from gemini_split.protocol import Rewound
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.testing.service import open_test_service

from .helpers import connected_client

pytestmark = pytest.mark.timeout(60)


def _said(request) -> str:
    return json.dumps(request.contents)


async def _three_turns(client) -> list:
    for prompt in ("first prompt", "second prompt", "third prompt"):
        outcome = await client.run_turn(prompt)
        assert outcome.finished is not None, outcome.error
    return list((await client.get_history()).points)


async def test_a_rewind_takes_the_history_back_to_before_that_prompt_and_the_next_request_lacks_the_rest(tmp_path):
    model = ScriptedModel([{"text": "one"}, {"text": "two"}, {"text": "three"}, {"text": "again"}])
    events: list = []
    async with open_test_service(model) as (_service, address):
        async with connected_client(address, tmp_path, events=events) as client:
            points = await _three_turns(client)
            assert [p.prompt for p in points] == ["first prompt", "second prompt", "third prompt"]
            rewound = await client.rewind(points[1].seq)
            history = await client.get_history()
            await client.run_turn("second, differently")
    assert isinstance(rewound, Rewound) and rewound.prompt == "second prompt" and rewound.points == 1
    assert [p.prompt for p in history.points] == ["first prompt"]
    assert [m["role"] for m in history.messages] == ["user", "model"]
    last = _said(model.requests[-1])
    assert "first prompt" in last and "one" in last
    assert "second prompt" not in last and "third prompt" not in last and "three" not in last
    assert any(isinstance(e, Rewound) for e in events)  # the asker's UI hears it too


async def test_a_rewind_to_a_seq_that_is_no_prompt_is_refused_and_changes_nothing(tmp_path):
    model = ScriptedModel([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    async with open_test_service(model) as (_service, address):
        async with connected_client(address, tmp_path) as client:
            points = await _three_turns(client)
            for bad in (points[0].seq + 1, 10_000):
                with pytest.raises(RequestFailed) as refused:
                    await client.rewind(bad)
                assert refused.value.code == "invalid_request"
                assert f"seq {bad} is not the start of a prompt" in str(refused.value)
            after = await client.get_history()
    assert len(after.points) == 3 and len(after.messages) == 6


async def test_a_rewind_while_a_request_runs_is_refused_as_busy(tmp_path):
    model = ScriptedModel([{"text": "one"}, {"text": "slow", "delay": 30}])
    async with open_test_service(model) as (_service, address):
        async with connected_client(address, tmp_path) as client:
            await client.run_turn("first")
            points = (await client.get_history()).points
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.run_turn, "second")
                with trio.fail_after(10):
                    while client.conn.request is None:
                        await trio.sleep(0.01)
                with pytest.raises(RequestFailed) as refused:
                    await client.rewind(points[0].seq)
                await client.cancel()
    assert refused.value.code == "busy"


def _write(path: str, content: str) -> dict:
    return {"text": f"Writing {path}. ", "function_calls": [{"name": "write_file",
                                                             "args": {"file_path": path, "content": content}}]}


async def test_restore_reproposes_exactly_that_call_through_the_client_and_the_turn_goes_on(tmp_path):
    """/restore's variant: the history is cut just after the model turn that
    proposed the call, the call is asked of the client again (run here,
    through its approval), and the model continues from its answer."""
    from gemini_split.protocol import RequestStarted, ToolStarted

    model = ScriptedModel([_write("a.txt", "A"), {"text": "wrote a"}, {"text": "later"},
                           {"text": "wrote a again"}])
    events: list = []
    async with open_test_service(model) as (_service, address):
        async with connected_client(address, tmp_path, events=events) as client:
            client.executor.policy.mode = ApprovalMode.YOLO
            await client.run_turn("make a")
            call = next(e for e in events if isinstance(e, ToolStarted))
            started = next(e for e in events if isinstance(e, RequestStarted) and e.request_id == call.request_id)
            await client.run_turn("something else")
            (tmp_path / "a.txt").write_text("changed by hand")
            events.clear()
            outcome = await client.restore_call(started.seq, call.call_id)
            history = await client.get_history()
    assert outcome.finished is not None, outcome.error
    again = [e for e in events if isinstance(e, ToolStarted)]
    assert [(e.tool, e.parameters) for e in again] == [("write_file", {"file_path": "a.txt", "content": "A"})]
    assert (tmp_path / "a.txt").read_text() == "A"
    sent = _said(model.requests[-1])
    assert "something else" not in sent and "later" not in sent
    assert [p.prompt for p in history.points] == ["make a"]
    assert history.messages[-1]["parts"][0]["text"] == "wrote a again"
    [rewound] = [e for e in events if isinstance(e, Rewound)]
    assert rewound.repropose_call_id == call.call_id and rewound.request_id == outcome.request_id


async def test_the_server_refuses_a_rewind_while_a_request_runs_whoever_sends_it(tmp_path):
    """A client that does not check (a raw one) gets the server's own
    ``busy``, and the running request goes on untouched."""
    from gemini_split.protocol import Error, Finished, GenerateContentRequest, Hello, Rewind

    from .helpers import RawClient
    from gemini_split.transport import ConnectOptions, get_transport

    model = ScriptedModel([{"text": "one"}, {"text": "slow", "delay": 1}])
    async with open_test_service(model) as (_service, address):
        stream = await get_transport(address).open_connection(address, ConnectOptions())
        raw = RawClient(stream)
        await raw.send(Hello(client="raw"))
        connected = await raw.receive()
        await raw.send(GenerateContentRequest(id="p-1", prompt="first"))
        first = await raw.receive_until(lambda m: isinstance(m, Finished))
        started = next(m for m in first if m.TYPE == "request_started")
        await raw.send(GenerateContentRequest(id="p-2", prompt="second"))
        await raw.send(Rewind(id="r-1", session_id=connected.session_id, before_seq=started.seq))
        seen = await raw.receive_until(lambda m: isinstance(m, Finished))
        await stream.aclose()
    [refused] = [m for m in seen if isinstance(m, Error) and m.in_reply_to == "r-1"]
    assert refused.code == "busy" and "cannot be rewound" in refused.message
    assert seen[-1].request_id == "p-2" and not any(m.TYPE == "rewound" for m in seen)


async def test_a_rewind_across_a_compression_rebuilds_what_the_summary_replaced_or_keeps_the_summary_after_it(
        tmp_path):
    long = "a long answer that the summary will replace. " * 40
    model = ScriptedModel([{"text": "one " + long}, {"text": "two " + long}, {"text": "three " + long},
                           {"text": "SUMMARY-OF-ONE-AND-TWO"}, {"text": "after"}, {"text": "after again"}])
    async with open_test_service(model) as (_service, address):
        async with connected_client(address, tmp_path) as client:
            points = await _three_turns(client)
            compressed = await client.compress()
            assert compressed.finished is not None, compressed.error
            summary_history = (await client.get_history()).messages
            await client.rewind(points[2].seq)  # after the compression point: the summary stays
            kept = await client.get_history()
            await client.run_turn("third, again")
            await client.rewind(points[1].seq)  # before it: rebuilt as it was said
            rebuilt = await client.get_history()
            await client.run_turn("second, again")
    assert "SUMMARY-OF-ONE-AND-TWO" in json.dumps(summary_history)
    assert "second prompt" not in json.dumps(summary_history)
    assert "SUMMARY-OF-ONE-AND-TWO" in json.dumps(kept.messages) and len(kept.messages) == 2
    assert [p.prompt for p in kept.points] == ["first prompt", "second prompt"]
    assert [m["role"] for m in rebuilt.messages] == ["user", "model"]
    assert "first prompt" in json.dumps(rebuilt.messages) and "one a long answer" in json.dumps(rebuilt.messages)
    assert "SUMMARY" not in json.dumps(rebuilt.messages)
    last = _said(model.requests[-1])
    assert "first prompt" in last and "SUMMARY" not in last and "second prompt" not in last


async def test_a_client_of_protocol_1_3_on_the_session_gets_a_notice_instead_of_rewound(tmp_path):
    """``rewound`` is new in 1.4: a 1.3 client attached to the session is
    told in words that what it shows is stale, never sent a type it would
    answer with unknown_type."""
    from gemini_split.protocol import Hello, encode
    from gemini_split.transport.memory_pair import open_memory_pair

    model = ScriptedModel([{"text": "one"}, {"text": "two"}])
    async with open_test_service(model) as (service, address):
        async with connected_client(address, tmp_path) as client:
            await client.run_turn("first prompt")
            await client.run_turn("second prompt")
            points = (await client.get_history()).points
            old, server_end = open_memory_pair(buffer=256, client_peer="s", server_peer="1.3",
                                               client_max=1 << 24, server_max=1 << 24)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(service.handle_connection, server_end)
                await old.send(encode(Hello(id="h", timestamp=1, protocol_version="1.3", label="old",
                                            session_id=client.connected.session_id,
                                            resume_token=client.connected.resume_token)))
                await client.rewind(points[1].seq)
                seen = []
                with trio.fail_after(10):
                    while not seen or seen[-1].get("code") != "session_rewound":
                        seen.append(json.loads(await old.receive()))
                await old.aclose()
                nursery.cancel_scope.cancel()
    types = [m["type"] for m in seen]
    assert "rewound" not in types
    notice = seen[-1]
    assert notice["type"] == "error" and not notice.get("fatal")
    assert "rewound this session" in notice["message"] and "(1 left)" in notice["message"]


async def test_a_client_says_an_older_server_does_not_support_rewinding(tmp_path):
    """A 1.3 server (here a stand-in that answers the handshake as one):
    the client does not send what it cannot read."""
    from gemini_split.tools.approval import ApprovalPolicy
    from gemini_split.tools.executor import ToolExecutor
    from gemini_split.client.protocol_client import ProtocolClient
    from gemini_split.tools.registry import default_tools
    from gemini_split.tools.workspace import Workspace
    from gemini_split.protocol import Connected, encode
    from gemini_split.transport.memory_pair import open_memory_pair

    ours, theirs = open_memory_pair(buffer=64, client_peer="old", server_peer="c", client_max=1 << 20,
                                    server_max=1 << 20)
    client = ProtocolClient(ours, ToolExecutor(default_tools(), Workspace(tmp_path), ApprovalPolicy()))
    async with trio.open_nursery() as nursery:
        async def old_server():
            await theirs.receive()  # hello
            await theirs.send(encode(Connected(id="c", timestamp=1, protocol_version="1.3", session_id="s-old")))
            while True:
                await theirs.receive()

        nursery.start_soon(old_server)
        await client.handshake()
        with pytest.raises(RequestFailed) as refused:
            await client.rewind(3)
        with pytest.raises(RequestFailed) as also:
            await client.restore_call(3, "s-9")
        nursery.cancel_scope.cancel()
    assert "this server does not support rewinding (protocol 1.3" in str(refused.value)
    assert refused.value.code == also.value.code == "unknown_type"


async def test_a_late_joiner_sees_the_conversation_as_it_is_after_a_rewind_not_the_rewound_turns(tmp_path):
    from gemini_split.protocol import Hello, Replay

    from .helpers import RawClient
    from gemini_split.transport import ConnectOptions, get_transport

    model = ScriptedModel([{"text": "one"}, {"text": "two"}, {"text": "three"}])
    async with open_test_service(model) as (_service, address):
        async with connected_client(address, tmp_path) as client:
            points = await _three_turns(client)
            await client.rewind(points[1].seq)
            stream = await get_transport(address).open_connection(address, ConnectOptions())
            raw = RawClient(stream)
            await raw.send(Hello(client="late", session_id=client.connected.session_id, replay=Replay(limit=5)))
            connected = await raw.receive()
            replayed = []
            with trio.move_on_after(1):
                while True:
                    replayed.append(await raw.receive())
            await stream.aclose()
    assert connected.TYPE == "connected"
    prompts = [m.prompt for m in replayed if m.TYPE == "request_started"]
    assert prompts == ["first prompt"]
    assert not any(m.TYPE == "rewound" for m in replayed)
    assert not any(m.TYPE == "text_delta" and m.content in ("two", "three") for m in replayed)


async def test_restore_of_a_server_run_call_proposes_it_again_through_the_servers_approval_and_revert_files_works_there(
        tmp_path):
    """``--tools server``: the call proposed again asks every attached client
    (``tool_awaiting_approval``) as any server-side call does; a plain
    rewind with ``revert_files`` puts the server's workspace back."""
    from gemini_split.tools.approval import ApprovalPolicy
    from gemini_split.tools.executor import ToolExecutor
    from gemini_split.client.protocol_client import ProtocolClient, ServerToolChoice
    from gemini_split.tools.registry import default_tools
    from gemini_split.tools.workspace import Workspace
    from gemini_split.protocol import RequestStarted, ToolAwaitingApproval, ToolStarted
    from gemini_split.transport import ConnectOptions

    from .server_tools.helpers import make_server_tools
    from .server_tools.helpers import serving as serving_tools

    root = tmp_path / "workspaces"
    tools = make_server_tools(root, max_approval_mode="yolo")
    model = ScriptedModel([_write("a.txt", "A"), {"text": "wrote a"}, _write("b.txt", "B"), {"text": "wrote b"},
                           {"text": "wrote a again"}])
    events: list = []

    async def on_event(event):
        events.append(event)

    class Yes:
        async def ask(self, request):
            from gemini_split.tools.approval import Answer
            return Answer.YES

    async with serving_tools(model, tools, address="loopback:") as (_service, address):
        from gemini_split.transport import get_transport

        stream = await get_transport(address).open_connection(address, ConnectOptions())
        client = ProtocolClient(stream, ToolExecutor(default_tools(), Workspace(tmp_path), ApprovalPolicy(), Yes()),
                                on_event=on_event, tool_choice=ServerToolChoice(approval_mode="default"))
        await client.handshake()
        async with trio.open_nursery() as nursery:
            await nursery.start(client.run)
            await client.run_turn("make a")
            await client.run_turn("make b")
            workspace = root / client.connected.session_id
            assert sorted(p.name for p in workspace.iterdir()) == ["a.txt", "b.txt"]
            points = (await client.get_history()).points
            assert [p.files for p in points] == [1, 1]
            rewound = await client.rewind(points[1].seq, revert_files=True)
            after_rewind = sorted(p.name for p in workspace.iterdir())
            call = next(e for e in events if isinstance(e, ToolStarted) and e.tool == "write_file")
            started = next(e for e in events if isinstance(e, RequestStarted) and e.request_id == call.request_id)
            (workspace / "a.txt").unlink()
            events.clear()
            outcome = await client.restore_call(started.seq, call.call_id)
            await client.aclose()
            nursery.cancel_scope.cancel()
    assert [(f.path, f.action) for f in rewound.files] == [("b.txt", "deleted")]
    assert after_rewind == ["a.txt"]
    assert outcome.finished is not None, outcome.error
    asked = [e for e in events if isinstance(e, ToolAwaitingApproval)]
    assert [(e.tool, e.parameters) for e in asked] == [("write_file", {"file_path": "a.txt", "content": "A"})]
    assert (workspace / "a.txt").read_text() == "A"
    assert "make b" not in _said(model.requests[-1])
