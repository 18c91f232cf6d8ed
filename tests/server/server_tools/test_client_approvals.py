"""The real ProtocolClient with ``--tools server``: it announces no tools,
says it can answer approvals, asks its person the same question it asks
for a local call (ApprovalRequest → the UI's asker), and sends the decision
bound to the question's arguments. A question another client decided is
withdrawn."""

from __future__ import annotations

from contextlib import asynccontextmanager

import trio

from gemini_split.tools.approval import Answer, ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.client.protocol_client import ProtocolClient, ServerToolChoice
from gemini_split.tools.base import ToolFailed, ToolKind
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace
from gemini_split.protocol import ToolCompleted, ToolDecided, ToolDecision, ToolError
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.transport import ConnectOptions, get_transport

from .helpers import make_server_tools, serving


class ScriptedAsker:
    """Answers each question with the next of ``answers`` (an Answer, or a
    string: "No, and tell the model…" with those words), keeping what it
    was asked; ``hold`` makes it wait until cancelled."""

    def __init__(self, *answers, hold: bool = False):
        self.answers = list(answers)
        self.hold = hold
        self.asked = []
        self.withdrawn = trio.Event()

    async def ask(self, request):
        self.asked.append(request)
        if self.hold:
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.withdrawn.set()
                raise
        answer = self.answers.pop(0)
        if isinstance(answer, str):
            raise ToolFailed("refused", f"the user declined to run {request.tool.name} and said: {answer}")
        return answer


@asynccontextmanager
async def server_tools_client(address, tmp_path, asker, events):
    async def on_event(event):
        events.append(event)

    stream = await get_transport(address).open_connection(address, ConnectOptions())
    here = tmp_path / "client"
    here.mkdir(exist_ok=True)
    executor = ToolExecutor(default_tools(), Workspace(here), ApprovalPolicy(), asker)
    client = ProtocolClient(stream, executor, on_event=on_event, tool_choice=ServerToolChoice())
    await client.handshake()
    async with trio.open_nursery() as nursery:
        await nursery.start(client.run)
        yield client
        await client.aclose()
        nursery.cancel_scope.cancel()


def _shell(command):
    return {"function_calls": [{"name": "run_shell_command", "args": {"command": command}}]}


async def test_the_client_asks_its_person_and_the_approval_runs_on_the_server(tmp_path):
    model = ScriptedModel([_shell("echo hi > a.txt"), _shell("rm a.txt"), {"text": "done"}])
    asker, events = ScriptedAsker(Answer.YES, "keep the file"), []
    async with serving(model, make_server_tools(tmp_path / "ws")) as (service, address):
        async with server_tools_client(address, tmp_path, asker, events) as client:
            outcome = await client.run_turn("go")
            session_id = client.connected.session_id
    assert outcome.finished is not None
    first, second = asker.asked
    assert first.tool.name == "run_shell_command" and first.tool.kind is ToolKind.EXECUTE
    assert "echo hi > a.txt" in first.description and first.reason
    # Where it runs is the session's server workspace, not the user's ".".
    workspace = (tmp_path / "ws" / session_id).resolve()
    assert first.description.startswith(f"Run in the server workspace {workspace}:\n")
    assert (tmp_path / "ws" / session_id / "a.txt").read_text() == "hi\n"  # approved; the second was denied
    assert not (tmp_path / "client" / "a.txt").exists()
    assert [type(e) for e in events if isinstance(e, ToolCompleted | ToolError)] == [ToolCompleted, ToolError]
    refusal = model.requests[2].contents[-1]["parts"][0]["function_response"]["response"]["error"]
    assert "keep the file" in refusal["message"]
    assert model.requests[0].tools and {t.name for t in model.requests[0].tools} >= {"run_shell_command"}


async def test_a_question_decided_by_another_client_is_withdrawn(tmp_path):
    model = ScriptedModel([_shell("echo hi > a.txt"), {"text": "done"}])
    asker, events = ScriptedAsker(hold=True), []
    async with serving(model, make_server_tools(tmp_path / "ws")) as (service, address):
        async with server_tools_client(address, tmp_path, asker, events) as client:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(client.run_turn, "go")
                while not asker.asked:
                    await trio.sleep(0.01)
                session = service.sessions[client.connected.session_id]
                question = session.approvals.pending()[0]
                # another client of the owner decides first (what an attached view sends)
                session.approvals.decide(ToolDecision(call_id=question.call_id, decision="approve",
                                                      parameters_hash=question.parameters_hash), by="phone")
                with trio.fail_after(5):
                    await asker.withdrawn.wait()
    decided = [e for e in events if isinstance(e, ToolDecided)]
    assert [(d.decision, d.by) for d in decided] == [("approve", "phone")]
    assert any(isinstance(e, ToolCompleted) for e in events)


def test_the_repl_says_who_settled_a_question_asked_elsewhere():
    import io

    from rich.console import Console

    from gemini_split.ui.render import TurnView

    out = io.StringIO()
    view = TurnView(Console(file=out, width=80, color_system=None))
    for decision, by in [("approve", "phone\x1b[31m"), ("deny", "laptop"), ("expired", ""), ("cancelled", "")]:
        view.on_event(ToolDecided(call_id="t-1", decision=decision, by=by, request_id="r"))
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("✓ approved by phone") and "\x1b" not in out.getvalue()
    assert lines[1:] == ["✗ refused by laptop", "✗ nobody approved it in time"]
