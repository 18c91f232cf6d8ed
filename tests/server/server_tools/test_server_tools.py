"""Server-side tools (issue 12 §1 §2 §3 §6): a session asks for them in
``hello``, the server runs the real tool registry in the session's own
workspace, and approvals are promoted to the attached clients over a real
WebSocket."""

from __future__ import annotations

import os
import stat

import trio

from gemini_split.protocol import (
    DeleteSession,
    Error,
    Finished,
    GenerateContentRequest,
    GetState,
    Sessions,
    State,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecided,
    ToolDecision,
    ToolDelta,
    ToolError,
    ToolStarted,
)
from gemini_split.server.model.scripted import ScriptedModel

from .helpers import APPROVER, finish, hello, make_server_tools, serving, until


def _write(path="hello.txt", content="hi\n"):
    return {"function_calls": [{"name": "write_file", "args": {"file_path": path, "content": content}}]}


def _shell(command, **args):
    return {"function_calls": [{"name": "run_shell_command", "args": {"command": command, **args}}]}


def _responses(model: ScriptedModel, index: int = -1) -> list[dict]:
    """The function responses the model was sent in its request ``index``."""
    parts = model.requests[index].contents[-1]["parts"]
    return [p["function_response"]["response"] for p in parts if "function_response" in p]


async def test_a_client_asking_for_server_tools_on_a_server_without_them_gets_a_clear_fatal_error():
    async with serving(ScriptedModel([]), None) as (_, address):
        async with hello(address, tools="server") as (_, reply):
            assert isinstance(reply, Error) and reply.fatal
            assert reply.code == "server_tools_disabled" and "--server-tools" in reply.message


async def test_unknown_projects_and_modes_above_the_cap_are_refused(tmp_path):
    project = tmp_path / "webapp"
    project.mkdir()
    tools = make_server_tools(tmp_path / "ws", projects={"webapp": project}, max_approval_mode="auto_edit")
    async with serving(ScriptedModel([]), tools) as (_, address):
        async with hello(address, tools="server", project="../etc") as (_, reply):
            assert isinstance(reply, Error) and reply.fatal and reply.code == "unknown_project"
            assert "webapp" in reply.message
        for mode in ("yolo", "auto_approve", "sudo"):
            async with hello(address, tools="server", approval_mode=mode) as (_, reply):
                assert isinstance(reply, Error) and reply.fatal and reply.code == "approval_mode_refused", mode
        async with hello(address, tools="server", approval_mode="auto_edit", project="webapp") as (_, reply):
            assert reply.TYPE == "connected" and "server_tools" in reply.capabilities
    assert not any((tmp_path / "ws").iterdir())  # refused sessions made no workspace


async def test_each_session_gets_its_own_0700_workspace_deleted_with_the_session(tmp_path):
    root = tmp_path / "ws"
    model = ScriptedModel([_write("a.txt", "one\n"), {"text": "done"}, _write("b.txt", "two\n"), {"text": "done"}])
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo") as (first, c1):
            await first.send(GenerateContentRequest(prompt="write a"))
            await finish(first)
            async with hello(address, tools="server", approval_mode="yolo") as (second, c2):
                await second.send(GenerateContentRequest(prompt="write b"))
                await finish(second)
                w1, w2 = root / c1.session_id, root / c2.session_id
                assert (w1 / "a.txt").read_text() == "one\n" and not (w1 / "b.txt").exists()
                assert (w2 / "b.txt").read_text() == "two\n" and not (w2 / "a.txt").exists()
                for w in (root, w1, w2):
                    assert stat.S_IMODE(os.stat(w).st_mode) == 0o700
                await second.send(DeleteSession(session_id=c1.session_id))
                _, listed = await until(second, Sessions)
        assert c1.session_id not in [s.id for s in listed.sessions]
        assert not w1.exists() and w2.exists()


async def test_an_edit_asks_every_client_with_its_diff_and_an_approval_runs_it_once(tmp_path):
    root = tmp_path / "ws"
    model = ScriptedModel([_write("hello.txt", "hi there\n"), {"text": "written"}])
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER, label="laptop") as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="write it"))
            before, question = await until(raw, ToolAwaitingApproval)
            assert question.tool == "write_file" and question.kind == "edit"
            assert "+hi there" in question.description and "hello.txt" in question.description
            assert question.parameters == {"file_path": "hello.txt", "content": "hi there\n"}
            assert len(question.parameters_hash) == 64 and question.expires_at > 0
            assert not [e for e in before if isinstance(e, ToolStarted)]  # not running while it waits (issue 34)
            workspace = root / connected.session_id
            assert not (workspace / "hello.txt").exists()  # nothing runs before the decision
            await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                        parameters_hash=question.parameters_hash))
            rest = await finish(raw)
    decided = [e for e in rest if isinstance(e, ToolDecided)]
    assert [(d.call_id, d.decision, d.by) for d in decided] == [(question.call_id, "approve", "laptop")]
    started = [i for i, e in enumerate(rest) if isinstance(e, ToolStarted)]
    assert [rest[i].call_id for i in started] == [question.call_id] and started[0] > rest.index(decided[0])
    completed = [e for e in rest if isinstance(e, ToolCompleted)]
    assert [(c.call_id, c.agent_id) for c in completed] == [(question.call_id, 0)]
    assert (workspace / "hello.txt").read_text() == "hi there\n"
    assert "error" not in _responses(model)[0]


async def test_a_denial_with_a_message_tells_the_model_and_nothing_runs(tmp_path):
    model = ScriptedModel([_shell("rm -rf build"), {"text": "ok"}])
    async with serving(model, make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER) as (raw, connected):
            (tmp_path / "ws" / connected.session_id / "build").mkdir()
            await raw.send(GenerateContentRequest(prompt="clean"))
            _, question = await until(raw, ToolAwaitingApproval)
            assert question.command == "rm -rf build"
            assert question.cwd == str((tmp_path / "ws" / connected.session_id).resolve())
            await raw.send(ToolDecision(call_id=question.call_id, decision="deny", message="use make clean"))
            rest = await finish(raw)
    errors = [e for e in rest if isinstance(e, ToolError)]
    assert errors and errors[0].error.code == "refused"
    response = _responses(model)[0]["error"]
    assert response["code"] == "refused" and "use make clean" in response["message"]
    assert (tmp_path / "ws" / connected.session_id / "build").is_dir()


async def test_without_a_client_that_can_answer_dangerous_calls_are_refused_at_once(tmp_path):
    """reject_dangerous: a one-shot or program client (no tool_approvals
    capability) is never asked; the model is told why; nothing hangs."""
    model = ScriptedModel([_shell("touch made"), _write(), {"text": "ok"}])
    async with serving(model, make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server") as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            with trio.fail_after(5):
                events = await finish(raw)
    assert not [e for e in events if isinstance(e, ToolAwaitingApproval)]
    for response in (_responses(model, 1)[0], _responses(model, 2)[0]):
        assert response["error"]["code"] == "refused" and "no one to ask" in response["error"]["message"]
    workspace = tmp_path / "ws" / connected.session_id
    assert not (workspace / "made").exists() and not (workspace / "hello.txt").exists()


async def test_shell_output_streams_as_tool_deltas_with_the_call_id(tmp_path):
    model = ScriptedModel([_shell("echo out; echo err >&2"), {"text": "ok"}])
    async with serving(model, make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo") as (raw, _):
            await raw.send(GenerateContentRequest(prompt="go"))
            events = await finish(raw)
    started = next(e for e in events if isinstance(e, ToolStarted))
    deltas = [e for e in events if isinstance(e, ToolDelta)]
    assert {(d.call_id, d.stream) for d in deltas} == {(started.call_id, "stdout"), (started.call_id, "stderr")}
    assert "".join(d.content for d in deltas if d.stream == "stdout") == "out\n"
    done = next(e for e in events if isinstance(e, ToolCompleted))
    assert done.call_id == started.call_id and done.tool == "run_shell_command"


async def test_the_model_sees_the_servers_tools_not_the_clients(tmp_path):
    model = ScriptedModel([{"text": "hi"}])
    tools = make_server_tools(tmp_path / "ws", exclude_tools=("web_fetch",))
    async with serving(model, tools) as (_, address):
        async with hello(address, tools="server", approval_mode="plan") as (raw, _):
            await raw.send(GenerateContentRequest(prompt="hi"))
            await finish(raw)
            await raw.send(GetState())
            _, state = await until(raw, State)
    names = {t.name for t in model.requests[0].tools}
    assert "read_file" in names and "grep_search" in names
    assert not names & {"run_shell_command", "web_fetch", "save_memory"}  # plan: read-only, and plan files
    assert "exit_plan_mode" in names
    assert state.tools == "server"


async def test_a_session_dropped_for_idleness_takes_its_workspace_along(tmp_path):
    """serve --session-ttl: the expiry loop deletes the workspaces of the
    sessions it drops, and only those."""
    import time

    from gemini_split.commands.run_serve import _expire_sessions
    from gemini_split.server.store import SessionRecord
    from gemini_split.server.store.memory import MemoryStore
    from gemini_split.server.session.features.server_tools import ToolChoice

    tools = make_server_tools(tmp_path / "ws")
    store = MemoryStore()
    now = time.time()
    for sid, updated in (("s-0000000000000001", now - 7200), ("s-0000000000000002", now)):
        await store.create(SessionRecord(id=sid, owner="local", token_hash="x", created=updated, updated=updated,
                                         model="scripted"))
        tools.open_host(sid, ToolChoice()).close()
        (tools.workspace_of(sid) / "notes.txt").write_text("kept until the session goes\n")
    with trio.move_on_after(1):  # the first sweep runs at once, then it sleeps
        await _expire_sessions(store, 3600, tools)
    assert not tools.workspace_of("s-0000000000000001").exists()
    assert (tools.workspace_of("s-0000000000000002") / "notes.txt").exists()
