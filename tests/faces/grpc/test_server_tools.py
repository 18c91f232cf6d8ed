"""gRPC sessions with server-side tools: the tools run on the server in the
session's workspace, ToolStarted / ToolEnded around each call, and
REJECT_DANGEROUS_TOOLS refusing a write while AUTO_APPROVE runs it."""

from __future__ import annotations

import grpc

from gemini_split.tools.tool_host import open_tool_host
from gemini_split.server.session.features.server_tools import ServerTools
from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import chat, grpc_server, start


def _tools(tmp_path) -> ServerTools:
    tools = ServerTools(factory=open_tool_host, workspace_root=tmp_path / "workspaces")
    tools.prepare()
    return tools


def _write(path="notes.txt", content="hello\n"):
    return {"function_calls": [{"name": "write_file", "args": {"file_path": path, "content": content}}]}


async def test_a_read_only_tool_runs_on_the_server_between_tool_started_and_tool_ended(third_party, tmp_path):
    tp = third_party
    tools = _tools(tmp_path)
    script = [{"function_calls": [{"name": "list_directory", "args": {"dir_path": "."}}]}, {"text": "Empty."}]
    with FakeGemini(script) as fake:
        async with grpc_server(fake, server_tools=tools, extra={"server_tools": True}) as (_, address):
            outcome = await chat(tp, address, [start(tp, "what is here?")])
    assert outcome.code == grpc.StatusCode.OK, outcome.details
    assert outcome.kinds() == ["session_info", "tool_started", "tool_ended", "text_response", "session_info"]
    started, ended = outcome.responses[1].tool_started, outcome.responses[2].tool_ended
    assert started.name == ended.name == "list_directory"
    assert dict(started.args) == {"dir_path": "."}
    assert ended.result_summary and "\n" not in ended.result_summary[:0]


async def test_reject_dangerous_tools_refuses_a_write_and_auto_approve_runs_it(third_party, tmp_path):
    tp = third_party
    tools = _tools(tmp_path)
    with FakeGemini([_write(), {"text": "Could not."}, _write(), {"text": "Written."}]) as fake:
        async with grpc_server(fake, server_tools=tools, extra={"server_tools": True}) as (_, address):
            refused = await chat(tp, address, [start(tp, "write it")])  # unspecified: REJECT_DANGEROUS_TOOLS
            refused_id = refused.responses[0].session_info.session_id
            approved = await chat(tp, address, [start(tp, "write it", approval_mode=tp.pb2.AUTO_APPROVE)])
            approved_id = approved.responses[0].session_info.session_id
    assert refused.code == approved.code == grpc.StatusCode.OK
    refused_end = next(r.tool_ended for r in refused.responses if r.WhichOneof("response") == "tool_ended")
    assert refused_end.name == "write_file" and refused_end.result_summary.startswith("error: ")
    assert not (tools.workspace_of(refused_id) / "notes.txt").exists()
    assert refused.text() == "Could not."
    assert (tools.workspace_of(approved_id) / "notes.txt").read_text() == "hello\n"
    assert approved.text() == "Written."


async def test_a_shell_command_is_summed_up_by_its_exit_status_and_first_lines(third_party, tmp_path):
    tp = third_party
    tools = _tools(tmp_path)
    command = "for i in $(seq 1 50); do echo line $i; done; exit 3"
    script = [{"function_calls": [{"name": "run_shell_command", "args": {"command": command}}]}, {"text": "Done."}]
    with FakeGemini(script) as fake:
        async with grpc_server(fake, server_tools=tools, extra={"server_tools": True}) as (_, address):
            outcome = await chat(tp, address, [start(tp, "count", approval_mode=tp.pb2.AUTO_APPROVE)])
    assert outcome.code == grpc.StatusCode.OK, outcome.details
    ended = next(r.tool_ended for r in outcome.responses if r.WhichOneof("response") == "tool_ended")
    summary = ended.result_summary
    assert summary.startswith("exit status 3\nline 1\n"), outcome.responses
    assert "line 1" in summary and "line 50" not in summary
    assert len(summary) < 700


async def test_exclude_tools_takes_a_tool_away_from_the_model(third_party, tmp_path):
    tp = third_party
    tools = _tools(tmp_path)
    with FakeGemini([{"text": "ok"}, {"text": "ok"}]) as fake:
        async with grpc_server(fake, server_tools=tools, extra={"server_tools": True}) as (_, address):
            everything = await chat(tp, address, [start(tp, "hi")])
            outcome = await chat(tp, address, [start(tp, "hi", exclude_tools=["run_shell_command"])])
        before, after = ({f["name"] for t in r["body"]["tools"] for f in t.get("functionDeclarations", ())}
                         for r in fake.requests)
    assert everything.code == outcome.code == grpc.StatusCode.OK
    assert "run_shell_command" in before
    assert after == before - {"run_shell_command"}


async def test_auto_approve_above_the_servers_cap_is_permission_denied(third_party, tmp_path):
    tp = third_party
    tools = ServerTools(factory=open_tool_host, workspace_root=tmp_path / "w", max_approval_mode="auto_edit")
    tools.prepare()
    with FakeGemini() as fake:
        async with grpc_server(fake, server_tools=tools, extra={"server_tools": True}) as (service, address):
            outcome = await chat(tp, address, [start(tp, "hi", approval_mode=tp.pb2.AUTO_APPROVE)])
            assert service.sessions == {}
    assert outcome.code == grpc.StatusCode.PERMISSION_DENIED
    assert outcome.errors()[0].message.startswith("approval_mode_refused: ")


async def test_a_refusal_under_reject_dangerous_tools_names_that_mode_and_auto_approve(third_party, tmp_path):
    tp = third_party
    tools = _tools(tmp_path)
    shell = {"function_calls": [{"name": "run_shell_command", "args": {"command": "echo hi"}}]}
    with FakeGemini([_write(), shell, {"text": "Could not."}]) as fake:
        async with grpc_server(fake, server_tools=tools, extra={"server_tools": True}) as (_, address):
            refused = await chat(tp, address, [start(tp, "write it", approval_mode=tp.pb2.REJECT_DANGEROUS_TOOLS)])
    summaries = [r.tool_ended.result_summary for r in refused.responses if r.WhichOneof("response") == "tool_ended"]
    told = [p["functionResponse"]["response"]["error"] for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]
    assert len(summaries) == len(told) == 2
    for text in summaries + [f"{e['message']} {e.get('hint', '')}" for e in told]:
        assert "REJECT_DANGEROUS_TOOLS" in text, text  # the mode the client chose, by the name it knows
        assert "default approval mode" not in text and "non-interactive" not in text, text
    assert all("AUTO_APPROVE" in e.get("hint", "") for e in told)  # how the user can allow it
