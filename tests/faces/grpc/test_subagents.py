"""Sub-agents (issue 32) on the gRPC face: a stream sees each sub-agent the
main model delegates to framed by ``AgentStarted`` / ``AgentFinished``, its
text and thoughts as ``AgentText`` / ``AgentThought`` and its tool calls
tagged with its ``agent_id``, and the main agent's own responses as before
— bytes a client generated from the seed's proto
(``seed/gemini/v1/gemini.proto``, the file before these additions) still
parses, skipping what it does not know, so its answer is the main agent's.

The server is real (AgentService, server tools, the gRPC listener) and the
model the fake Gemini server, scripted per agent by system instruction."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
import trio
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from grpc_tools import protoc

from gemini_split.tools.tool_host import open_tool_host
from gemini_split.protocol import AgentDefinition
from gemini_split.server.session.features.server_tools import ServerTools
from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import chat, grpc_server, open_channel, start

MAIN = "You are gemini-split"
SCOUT = AgentDefinition(name="scout", description="Looks around the workspace.", tools=("list_directory",),
                        system_prompt="You are SCOUT. List the workspace, then report.")
#: The main model delegates to the scout, which thinks, writes, lists the
#: workspace and reports; then the main model answers.
SCRIPT = [
    {"system_contains": MAIN, "text": "Let me ask the scout. ",
     "function_calls": [{"name": "scout", "args": {"query": "what is in the workspace?"}}]},
    {"system_contains": "SCOUT", "thought": "Where to look first.", "text": "Looking around.",
     "function_calls": [{"name": "list_directory", "args": {"dir_path": "."}}]},
    {"system_contains": "SCOUT",
     "function_calls": [{"name": "complete_task", "args": {"result": "The workspace is empty."}}]},
    {"system_contains": MAIN, "text": "The scout found nothing."},
]


def _tools(tmp_path) -> ServerTools:
    tools = ServerTools(factory=open_tool_host, workspace_root=tmp_path / "workspaces")
    tools.prepare()
    return tools


async def _delegate(tp, tmp_path, *, raw: bool = False):
    """Run :data:`SCRIPT` over one stream of a server that offers ``scout``:
    the responses (their bytes with ``raw``) and the fake's recorded requests."""
    with FakeGemini(SCRIPT) as fake:
        async with grpc_server(fake, server_tools=_tools(tmp_path),
                               extra={"server_tools": True, "agents": (SCOUT,)}) as (_, address):
            def run():
                with open_channel(address) as channel:
                    call = channel.stream_stream(
                        "/gemini.v1.GeminiService/Chat", request_serializer=tp.pb2.ClientRequest.SerializeToString,
                        response_deserializer=(lambda b: b) if raw else tp.pb2.ServerResponse.FromString)
                    responses = list(call(iter([start(tp, "what is here?")]), timeout=30))
                return responses
            responses = await trio.to_thread.run_sync(run)
        return responses, list(fake.requests)


def _of(responses, kind):
    return [getattr(r, kind) for r in responses if r.WhichOneof("response") == kind]


@pytest.mark.timeout(60)
async def test_a_stream_sees_a_sub_agent_start_work_with_its_agent_id_and_finish(third_party, tmp_path):
    tp = third_party
    responses, requests = await _delegate(tp, tmp_path)
    kinds = [r.WhichOneof("response") for r in responses]
    assert kinds[0] == "session_info" and kinds[-1] == "session_info"

    (delegation,) = [t for t in _of(responses, "tool_started") if t.name == "scout"]
    assert delegation.agent_id == 0 and delegation.call_id
    assert dict(delegation.args) == {"query": "what is in the workspace?"}
    (began,) = _of(responses, "agent_started")
    assert began.agent_id == 1 and began.name == "scout"
    assert began.parent_call_id == delegation.call_id
    assert began.model and "what is in the workspace?" in began.task
    assert "list_directory" in began.tools

    (listing,) = [t for t in _of(responses, "tool_started") if t.name == "list_directory"]
    assert listing.agent_id == 1 and dict(listing.args) == {"dir_path": "."}
    listed = next(t for t in _of(responses, "tool_ended") if t.name == "list_directory")
    assert listed.agent_id == 1 and listed.call_id == listing.call_id != delegation.call_id

    assert [t.content for t in _of(responses, "text_response")] == [
        "Let me ask the scout. ", "The scout found nothing."]
    assert [(t.agent_id, t.content) for t in _of(responses, "agent_text")] == [(1, "Looking around.")]
    assert _of(responses, "thought_response") == []
    assert [(t.agent_id, t.thought) for t in _of(responses, "agent_thought")] == [(1, "Where to look first.")]
    said = [i for i, r in enumerate(responses) if r.WhichOneof("response") in ("text_response", "agent_text")]
    assert [responses[i].WhichOneof("response") for i in said] == ["text_response", "agent_text", "text_response"]

    (finished,) = _of(responses, "agent_finished")
    assert (finished.agent_id, finished.name, finished.parent_call_id) == (1, "scout", delegation.call_id)
    assert finished.outcome == "completed" and finished.turns == 2 and finished.tool_calls == 1
    assert "The workspace is empty." in finished.summary
    assert finished.usage.total_tokens > 0
    reported = next(t for t in _of(responses, "tool_ended") if t.name == "scout")
    assert reported.agent_id == 0 and reported.call_id == delegation.call_id

    # In order: the start before the sub-agent's work, its end before the
    # delegation's result and the main agent's answer.
    at = {k: kinds.index(k) for k in ("agent_started", "agent_finished")}
    first_listing = next(i for i, r in enumerate(responses) if r.WhichOneof("response") == "tool_started"
                         and r.tool_started.agent_id == 1)
    answer = max(i for i, r in enumerate(responses) if r.WhichOneof("response") == "text_response")
    assert at["agent_started"] < first_listing < at["agent_finished"] < answer
    # The scout's model request carried its own prompt and only its tool.
    scout = [r for r in requests if r["action"] and "SCOUT" in json.dumps(r["body"].get("systemInstruction"))]
    assert len(scout) == 2


@pytest.mark.timeout(60)
async def test_exclude_tools_takes_a_sub_agent_out_of_a_streams_session(third_party, tmp_path):
    tp = third_party
    script = [{"system_contains": MAIN, "text": "Alone."}]
    with FakeGemini(script) as fake:
        async with grpc_server(fake, server_tools=_tools(tmp_path),
                               extra={"server_tools": True, "agents": (SCOUT,)}) as (_, address):
            offered = await chat(tp, address, [start(tp, "hi")])
            excluded = await chat(tp, address, [start(tp, "hi", exclude_tools=["scout"])])
        names = [[d["name"] for t in r["body"].get("tools", []) for d in t.get("functionDeclarations", [])]
                 for r in fake.requests if r["action"] and r["action"].endswith("GenerateContent")]
    assert offered.code == excluded.code == grpc.StatusCode.OK
    assert "scout" in names[0] and "scout" not in names[1]


def seed_descriptors(tmp_path):
    """The file descriptor of the seed's proto (the shipped file before
    issue 32's additions), in a pool of its own (the default pool holds
    today's file of the same name)."""
    seed = Path(__file__).parent / "seed"
    out = tmp_path / "seed.pb"
    include = Path(protoc.__file__).parent / "_proto"
    assert protoc.main(["protoc", f"-I{seed}", f"-I{include}", "--include_imports",
                        f"--descriptor_set_out={out}", "gemini/v1/gemini.proto"]) == 0
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for f in files.file:
        pool.Add(f)
    return pool.FindFileByName("gemini/v1/gemini.proto")


def _seed_messages(tmp_path) -> dict[str, type]:
    """The message classes a client generated from the seed's proto has."""
    pool = seed_descriptors(tmp_path).pool
    names = ("ServerResponse", "TextResponse", "ThoughtResponse", "ToolStartedResponse", "ToolEndedResponse")
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"gemini.v1.{n}")) for n in names}


@pytest.mark.timeout(60)
async def test_a_client_generated_from_the_seeds_proto_gets_exactly_the_main_agents_answer(third_party, tmp_path):
    """The old client's answer does not change with sub-agents: its
    ``TextResponse``s concatenated are the main agent's text, and its
    ``ThoughtResponse``s hold none of the sub-agent's thoughts."""
    tp = third_party
    raw, _ = await _delegate(tp, tmp_path, raw=True)
    seed = _seed_messages(tmp_path)
    parsed = [seed["ServerResponse"].FromString(b) for b in raw]
    assert "".join(r.text_response.content for r in parsed if r.WhichOneof("response") == "text_response") == (
        "Let me ask the scout. The scout found nothing.")
    assert [r.thought_response.thought for r in parsed if r.WhichOneof("response") == "thought_response"] == []
    assert [r.WhichOneof("response") for r in parsed].count("tool_started") == 2  # the delegation and the scout's


@pytest.mark.timeout(60)
async def test_a_client_generated_from_the_seeds_proto_parses_every_response_and_skips_the_agents(
        third_party, tmp_path):
    tp = third_party
    raw, _ = await _delegate(tp, tmp_path, raw=True)
    seed = _seed_messages(tmp_path)
    parsed = [seed["ServerResponse"].FromString(b) for b in raw]
    today = [tp.pb2.ServerResponse.FromString(b) for b in raw]
    for old, new in zip(parsed, today):
        kind = new.WhichOneof("response")
        if kind in ("agent_started", "agent_finished", "agent_text", "agent_thought"):
            assert old.WhichOneof("response") is None  # an unknown member: skipped
            continue
        assert old.WhichOneof("response") == kind
        if kind == "text_response":
            assert old.text_response.content == new.text_response.content
        if kind in ("tool_started", "tool_ended"):
            assert getattr(old, kind).name == getattr(new, kind).name
    # The main agent's text is byte for byte what the seed's own code makes.
    main_text = [b for b, new in zip(raw, today) if new.WhichOneof("response") == "text_response"]
    assert main_text == [
        seed["ServerResponse"](text_response=seed["TextResponse"](content=c)).SerializeToString()
        for c in ("Let me ask the scout. ", "The scout found nothing.")]


def _cli_over_grpc(tmp_path, *args: str):
    import os

    from tests.inprocess import cli

    from .helpers import ServerThread

    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    with FakeGemini(SCRIPT) as fake:
        with ServerThread(fake, server_tools=_tools(tmp_path),
                          extra={"server_tools": True, "agents": (SCOUT,)}) as server:
            return cli(["--server", server.address, "-p", "what is here?", *args], environ=env, cwd=tmp_path)


@pytest.mark.timeout(60)
def test_the_command_line_over_grpc_nests_a_sub_agents_work_and_keeps_it_out_of_the_answer(tmp_path):
    result = _cli_over_grpc(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Let me ask the scout. \nThe scout found nothing.\n"
    assert "→ scout(query='what is in the workspace?')" in result.stderr
    assert "  ↳ scout: list_directory(dir_path='.')" in result.stderr
    assert "  ✓ scout completed (2 turns, 1 tool calls): The workspace is empty." in result.stderr


@pytest.mark.timeout(60)
def test_stream_json_over_grpc_tags_a_sub_agents_events_as_over_the_native_protocol(tmp_path):
    result = _cli_over_grpc(tmp_path, "-o", "stream-json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    (delegation,) = [e for e in lines if e["type"] == "tool_use" and e["tool_name"] == "scout"]
    (began,) = [e for e in lines if e["type"] == "agent_start"]
    assert (began["agent_id"], began["agent_name"], began["parent_tool_id"]) == (1, "scout", delegation["tool_id"])
    assert began["tools"] == ["list_directory"]
    (listing,) = [e for e in lines if e["type"] == "tool_use" and e["tool_name"] == "list_directory"]
    assert listing["agent_id"] == 1
    (listed,) = [e for e in lines if e["type"] == "tool_result" and e["tool_id"] == listing["tool_id"]]
    assert listed["agent_id"] == 1 and listed["status"] == "success"
    said = [(e["content"], e.get("agent_id")) for e in lines if e["type"] == "message" and e["role"] == "assistant"]
    assert said == [("Let me ask the scout. ", None), ("Looking around.", 1), ("The scout found nothing.", None)]
    (finished,) = [e for e in lines if e["type"] == "agent_finish"]
    assert finished["outcome"] == "completed" and finished["turn_count"] == 2 and finished["tool_calls"] == 1
    assert finished["summary"] == "The workspace is empty." and finished["stats"]["total_tokens"] > 0


@pytest.mark.timeout(60)
def test_over_a_server_that_names_no_calls_overlapping_calls_pair_by_agent_and_name_and_a_bad_agent_is_dropped(
        third_party, tmp_path):
    """A seed-style server: no call_id. Two sub-agents each run ``grep`` at
    once; each end pairs with its own agent's start. An ``AgentStarted``,
    ``AgentText`` or ``AgentThought`` with agent_id 0 (no sub-agent is 0)
    is not passed on: such text is not taken for the answer."""
    import os
    from concurrent import futures

    from tests.inprocess import cli

    pb = third_party.pb2

    class Seedish(third_party.grpc.GeminiServiceServicer):
        def Chat(self, requests, context):
            for request in requests:
                if request.WhichOneof("request") == "start_request":
                    yield pb.ServerResponse(session_info=pb.SessionInfo(session_id="s-seedish"))
                if not (request.prompt or request.start_request.prompt):
                    continue
                for agent in (1, 2):
                    yield pb.ServerResponse(agent_started=pb.AgentStartedResponse(agent_id=agent, name=f"a{agent}"))
                yield pb.ServerResponse(agent_started=pb.AgentStartedResponse(agent_id=0, name="nobody"))
                yield pb.ServerResponse(agent_text=pb.AgentTextResponse(agent_id=2, content="a2 looks."))
                yield pb.ServerResponse(agent_thought=pb.AgentThoughtResponse(agent_id=1, thought="a1 thinks."))
                yield pb.ServerResponse(agent_text=pb.AgentTextResponse(agent_id=0, content="nobody's text"))
                yield pb.ServerResponse(agent_thought=pb.AgentThoughtResponse(agent_id=0, thought="nobody's"))
                for agent in (1, 2):
                    yield pb.ServerResponse(tool_started=pb.ToolStartedResponse(name="grep", agent_id=agent))
                for agent in (2, 1):
                    yield pb.ServerResponse(tool_ended=pb.ToolEndedResponse(
                        name="grep", agent_id=agent, result_summary=f"found by {agent}"))
                for agent in (1, 2):
                    yield pb.ServerResponse(agent_finished=pb.AgentFinishedResponse(
                        agent_id=agent, name=f"a{agent}", outcome="no-such-outcome"))
                yield pb.ServerResponse(text_response=pb.TextResponse(content="Done."))
                yield pb.ServerResponse(session_info=pb.SessionInfo(session_id="s-seedish"))

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    third_party.grpc.add_GeminiServiceServicer_to_server(Seedish(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        result = cli(["--server", f"grpc://127.0.0.1:{port}", "-p", "go", "-o", "stream-json"],
                     environ=env, cwd=tmp_path)
    finally:
        server.stop(None)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(e["agent_id"], e["agent_name"]) for e in lines if e["type"] == "agent_start"] == [(1, "a1"), (2, "a2")]
    started = {e["agent_id"]: e["tool_id"] for e in lines if e["type"] == "tool_use"}
    ended = {e["agent_id"]: (e["tool_id"], e["output"]) for e in lines if e["type"] == "tool_result"}
    assert started[1] != started[2]
    assert ended == {1: (started[1], "found by 1"), 2: (started[2], "found by 2")}
    assert [e["outcome"] for e in lines if e["type"] == "agent_finish"] == ["error", "error"]
    said = [(e["content"], e.get("agent_id")) for e in lines if e["type"] == "message" and e["role"] == "assistant"]
    assert said == [("a2 looks.", 2), ("Done.", None)]
    assert "nobody" not in result.stdout


@pytest.mark.timeout(60)
async def test_a_huge_task_is_cut_in_agent_started(third_party, tmp_path):
    tp = third_party
    task = "x" * 20_000
    script = [{"system_contains": MAIN, "function_calls": [{"name": "scout", "args": {"query": task}}]},
              {"system_contains": "SCOUT", "function_calls": [{"name": "complete_task", "args": {"result": "ok"}}]},
              {"system_contains": MAIN, "text": "Done."}]
    with FakeGemini(script) as fake:
        async with grpc_server(fake, server_tools=_tools(tmp_path),
                               extra={"server_tools": True, "agents": (SCOUT,)}) as (_, address):
            outcome = await chat(tp, address, [start(tp, "go")])
    assert outcome.code == grpc.StatusCode.OK, outcome.details
    (began,) = [r.agent_started for r in outcome.responses if r.WhichOneof("response") == "agent_started"]
    assert len(began.task) == 500 and began.task.endswith("…") and began.task.startswith("x" * 400)
