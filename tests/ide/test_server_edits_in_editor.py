"""(1.6) A server-side session's edits (``--tools server``) reviewed in the
editor of the attached client that has an IDE companion: the real
ProtocolClient, a real server running the tools in its own workspace, and
the companion built from gemini-cli's spec. The diff opens with the
server's proposed text at the file's path under the client's directory;
accepting writes it on the server, an edit made in the editor is written
instead (and the model told), a rejection writes nothing (and the model is
told), and another attached client reads the decision. With the text over
the server's budget the terminal asks, with a note."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from gemini_split.protocol import ToolAwaitingApproval, ToolDecided, ToolDecision
from gemini_split.server.model.scripted import ScriptedModel
from gemini_split.tools import ide
from gemini_split.tools.approval import Answer
from tests.ide_companion import serve_companion
from tests.server.server_tools.helpers import APPROVER, hello, make_server_tools, serving, until
from tests.server.server_tools.test_client_approvals import ScriptedAsker, server_tools_client


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "client").mkdir()
    return tmp_path / "client"


def _write(path: str, content: str) -> dict[str, Any]:
    return {"function_calls": [{"name": "write_file", "args": {"file_path": path, "content": content}}]}


def _told(model: ScriptedModel, turn: int) -> str:
    return json.dumps(model.requests[turn].contents[-1]["parts"][0]["function_response"]["response"])


async def _turn(tmp_path: Path, here: Path, model: ScriptedModel, answer: tuple[str, str | None], *,
                watcher: bool = False, asker: ScriptedAsker | None = None, **config: Any):
    """One prompt from a client with a companion (answering ``answer``) on a
    server-tools session; returns (companion, server workspace, client
    events, asker, what a second attached client saw decided)."""
    asker = asker or ScriptedAsker(Answer.NO)
    events: list[Any] = []
    seen: list[ToolDecided] = []
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(here, task_status=task_status))
        companion.answer = answer
        async with serving(model, make_server_tools(tmp_path / "ws"), **config) as (_, address):
            async with server_tools_client(address, tmp_path, asker, events) as client:
                client.executor.ide = ide.IdeCompanion(here, {})
                await client.executor.ide.connect(nursery)
                assert client.executor.ide.can_diff
                session_id = client.connected.session_id
                async with trio.open_nursery() as watching:
                    if watcher:
                        async def watch(task_status=trio.TASK_STATUS_IGNORED):
                            async with hello(address, session_id=session_id, capabilities=APPROVER,
                                             label="phone", role="observer") as (raw, _):
                                task_status.started()
                                _, decided = await until(raw, ToolDecided)
                                seen.append(decided)
                        await watching.start(watch)
                    with trio.fail_after(30):
                        outcome = await client.run_turn("go")
                assert outcome.finished is not None
                await client.executor.ide.disconnect()
        nursery.cancel_scope.cancel()
    return companion, tmp_path / "ws" / session_id, events, asker, seen


async def test_the_diff_opens_with_the_servers_text_and_accepting_writes_it_on_the_server(tmp_path, here):
    model = ScriptedModel([_write("src/app.py", "print('model')\n"), {"text": "done"}])
    companion, workspace, events, asker, seen = await _turn(tmp_path, here, model, ("accept", None), watcher=True)
    assert companion.diffs == [(str(here / "src" / "app.py"), "print('model')\n")]
    assert (workspace / "src" / "app.py").read_text() == "print('model')\n"
    assert not (here / "src").exists()  # the server's tool wrote it, on the server
    assert asker.asked == []  # the editor answered, not the terminal
    assert [(d.decision, d.modified) for d in seen] == [("approve", False)]


async def test_an_edit_made_in_the_editor_is_what_the_server_writes_and_the_model_is_told(tmp_path, here):
    model = ScriptedModel([_write("app.py", "print('model')\n"), {"text": "done"}])
    companion, workspace, events, _, seen = await _turn(tmp_path, here, model,
                                                        ("accept", "print('edited by the user')\n"), watcher=True)
    assert (workspace / "app.py").read_text() == "print('edited by the user')\n"
    assert "User modified the `content` to be: print('edited by the user')" in _told(model, 1)
    # another attached client reads who decided, and that the user's text runs
    assert [(d.decision, d.by, d.modified) for d in seen] == [("approve", "client 1", True)]


async def test_rejected_in_the_editor_nothing_is_written_and_the_model_is_told(tmp_path, here):
    model = ScriptedModel([_write("app.py", "print('model')\n"), {"text": "done"}])
    companion, workspace, events, asker, seen = await _turn(tmp_path, here, model, ("reject", None), watcher=True)
    assert companion.diffs and not (workspace / "app.py").exists()
    assert "declined to run write_file" in _told(model, 1)
    assert asker.asked == []
    assert [d.decision for d in seen] == ["deny"]


async def test_a_file_over_the_servers_budget_is_asked_in_the_terminal_with_a_note(tmp_path, here):
    big = "z" * 3000 + "\n"
    model = ScriptedModel([_write("big.txt", big), {"text": "done"}])
    companion, workspace, _, asker, _ = await _turn(tmp_path, here, model, ("accept", None),
                                                    asker=ScriptedAsker(Answer.YES), max_message_size=8192)
    assert companion.diffs == []
    (request,) = asker.asked
    assert request.note == ("Not shown in your editor: the new text of big.txt is 3,001 bytes, over the 2,048 "
                            "bytes the server sends for review.")
    assert (workspace / "big.txt").read_text() == big


def test_the_repl_says_a_decision_made_elsewhere_approved_the_users_own_text():
    import io

    from rich.console import Console

    from gemini_split.ui.render import TurnView

    out = io.StringIO()
    view = TurnView(Console(file=out, width=100, color_system=None))
    view.on_event(ToolDecided(call_id="t-1", decision="approve", by="laptop", request_id="r", modified=True))
    view.on_event(ToolDecided(call_id="t-2", decision="approve", by="laptop", request_id="r"))
    assert out.getvalue().splitlines() == ["✓ approved by laptop, with their changes to the edit",
                                           "✓ approved by laptop"]


async def test_decided_by_another_client_the_diff_is_closed_in_the_editor(tmp_path, here):
    model = ScriptedModel([_write("app.py", "print('model')\n"), {"text": "done"}])
    events: list[Any] = []
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(here, task_status=task_status))
        companion.answer = ("hold", None)  # the user has not answered in the editor
        async with serving(model, make_server_tools(tmp_path / "ws")) as (_, address):
            async with server_tools_client(address, tmp_path, ScriptedAsker(), events) as client:
                client.executor.ide = ide.IdeCompanion(here, {})
                await client.executor.ide.connect(nursery)
                session_id = client.connected.session_id
                async with hello(address, session_id=session_id, capabilities=APPROVER, label="phone") as (raw, _):
                    async with trio.open_nursery() as turn:
                        turn.start_soon(client.run_turn, "go")
                        _, question = await until(raw, ToolAwaitingApproval)
                        with trio.fail_after(10):
                            while not companion.diffs:
                                await trio.sleep(0.02)
                        await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                                    parameters_hash=question.parameters_hash))
                with trio.fail_after(10):
                    while not companion.closed:
                        await trio.sleep(0.02)
                await client.executor.ide.disconnect()
        nursery.cancel_scope.cancel()
    assert companion.closed[0] == str(here / "app.py")  # the diff does not stay open in the editor
    assert (tmp_path / "ws" / session_id / "app.py").read_text() == "print('model')\n"
    assert [(d.decision, d.by) for d in events if isinstance(d, ToolDecided)] == [("approve", "phone")]
