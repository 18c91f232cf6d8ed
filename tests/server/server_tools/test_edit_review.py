"""(1.6) A server-side edit's approval carries what an editor needs to show
it as a diff — the file's workspace-relative path and the whole proposed
text, within the operator's budget (a quarter of ``--max-message-size``) —
and an approval may bring back the text the user changed it to: exactly
that is written, the model is told in gemini-cli's words, and every
attached client reads ``tool_decided.modified``. Edited text for another
path, over the budget, with anything but ``approve``, or for a question
that offered none is refused (``edit_refused``) and nothing is written."""

from __future__ import annotations

import json

from gemini_split.protocol import (
    EditedFile,
    EditProposal,
    Error,
    GenerateContentRequest,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecided,
    ToolDecision,
)
from gemini_split.server.model.scripted import ScriptedModel

from .helpers import APPROVER, finish, hello, make_server_tools, serving, until

#: A server taking messages of at most this many bytes sends 1/4 of it for review.
MAX_MESSAGE = 8192


def _call(name, **args):
    return {"function_calls": [{"name": name, "args": args}]}


def _tool_result(model: ScriptedModel, turn: int) -> str:
    return json.dumps(model.requests[turn].contents[-1]["parts"][0]["function_response"]["response"])


async def _refused(raw, decision: ToolDecision) -> Error:
    await raw.send(decision)
    _, error = await until(raw, Error)
    return error


async def test_an_edited_approval_writes_exactly_the_users_text_and_everyone_reads_modified(tmp_path):
    model = ScriptedModel([_call("write_file", file_path="sub/a.py", content="x = 1\n"), {"text": "done"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root), max_message_size=MAX_MESSAGE) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER, label="laptop") as (raw, connected):
            workspace = root / connected.session_id
            (workspace / "sub").mkdir()
            async with hello(address, session_id=connected.session_id, capabilities=APPROVER,
                             label="phone") as (phone, _):
                await raw.send(GenerateContentRequest(prompt="go"))
                _, question = await until(raw, ToolAwaitingApproval)
                assert question.edit == EditProposal(path="sub/a.py", content="x = 1\n", size=6,
                                                     limit=MAX_MESSAGE // 4)
                _, seen = await until(phone, ToolAwaitingApproval)
                assert seen.edit == question.edit  # every attached client is asked the same

                def edited(path="sub/a.py", content="x = 2  # mine\n", decision="approve"):
                    return ToolDecision(call_id=question.call_id, decision=decision,
                                        parameters_hash=question.parameters_hash,
                                        edit=EditedFile(path=path, content=content))

                for wrong, why in [(edited(path="../../outside.txt"), "is for '../../outside.txt'"),
                                   (edited(path="/etc/passwd"), "is for '/etc/passwd'"),
                                   (edited(content="y" * (MAX_MESSAGE // 4 + 1)), "over this server's limit"),
                                   (edited(decision="approve_always"), "approve only"),
                                   (edited(decision="deny"), "approve only")]:
                    error = await _refused(raw, wrong)
                    assert error.code == "edit_refused" and why in error.message, (error.message, why)
                    assert "nothing was written" in error.message
                assert not (workspace / "sub" / "a.py").exists()
                assert not (tmp_path / "outside.txt").exists()
                # the call still waits: the user's text is written, exactly
                await raw.send(edited())
                events = await finish(raw)
                decided = [e for e in events if isinstance(e, ToolDecided)]
                assert [(d.decision, d.by, d.modified) for d in decided] == [("approve", "laptop", True)]
                _, other = await until(phone, ToolDecided)
                assert (other.decision, other.by, other.modified) == ("approve", "laptop", True)
    assert (workspace / "sub" / "a.py").read_text() == "x = 2  # mine\n"
    told = _tool_result(model, 1)
    assert "User modified the `content` to be: x = 2  # mine" in told


async def test_a_replace_is_proposed_as_the_whole_file_and_its_edited_text_replaces_it(tmp_path):
    model = ScriptedModel([_call("replace", file_path="b.txt", old_string="two", new_string="2",
                                 instruction="number"), {"text": "done"}])
    root = tmp_path / "ws"
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER) as (raw, connected):
            workspace = root / connected.session_id
            (workspace / "b.txt").write_text("one\ntwo\nthree\n")
            await raw.send(GenerateContentRequest(prompt="go"))
            _, question = await until(raw, ToolAwaitingApproval)
            assert (question.edit.path, question.edit.content) == ("b.txt", "one\n2\nthree\n")
            await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                        parameters_hash=question.parameters_hash,
                                        edit=EditedFile(path="b.txt", content="one\nTWO (mine)\nthree\n")))
            events = await finish(raw)
    assert any(isinstance(e, ToolCompleted) for e in events)
    assert (workspace / "b.txt").read_text() == "one\nTWO (mine)\nthree\n"
    assert "The confirmation step modified the `new_string` content to be: one\\nTWO (mine)" in _tool_result(model, 1)


async def test_the_proposal_unchanged_is_no_modification(tmp_path):
    model = ScriptedModel([_call("write_file", file_path="a.py", content="x = 1\n"), {"text": "done"}])
    async with serving(model, make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            _, question = await until(raw, ToolAwaitingApproval)
            await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                        parameters_hash=question.parameters_hash,
                                        edit=EditedFile(path="a.py", content="x = 1\n")))
            events = await finish(raw)
    assert [d.modified for d in events if isinstance(d, ToolDecided)] == [False]
    assert "User modified" not in _tool_result(model, 1)


async def test_a_file_over_the_budget_is_asked_about_without_its_text_and_cannot_be_edited(tmp_path):
    big = "z" * (MAX_MESSAGE // 4 + 10) + "\n"
    model = ScriptedModel([_call("write_file", file_path="big.txt", content=big), {"text": "done"}])
    root = tmp_path / "ws"
    # Room for the question's arguments and diff; not for a third copy.
    async with serving(model, make_server_tools(root), max_message_size=MAX_MESSAGE) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER) as (raw, connected):
            await raw.send(GenerateContentRequest(prompt="go"))
            _, question = await until(raw, ToolAwaitingApproval)
            assert question.edit == EditProposal(path="big.txt", content=None, size=len(big),
                                                 limit=MAX_MESSAGE // 4)
            error = await _refused(raw, ToolDecision(call_id=question.call_id, decision="approve",
                                                     parameters_hash=question.parameters_hash,
                                                     edit=EditedFile(path="big.txt", content="small\n")))
            assert error.code == "edit_refused" and "offered no content" in error.message
            await raw.send(ToolDecision(call_id=question.call_id, decision="approve",
                                        parameters_hash=question.parameters_hash))
            await finish(raw)
    assert (root / connected.session_id / "big.txt").read_text() == big


async def test_a_1_5_client_is_asked_without_the_text(tmp_path):
    model = ScriptedModel([_call("write_file", file_path="a.py", content="x = 1\n"), {"text": "done"}])
    async with serving(model, make_server_tools(tmp_path / "ws")) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER, protocol_version="1.5") as (raw, _):
            await raw.send(GenerateContentRequest(prompt="go"))
            _, question = await until(raw, ToolAwaitingApproval)
            assert question.edit is None and "x = 1" in question.description
            await raw.send(ToolDecision(call_id=question.call_id, decision="deny"))
            await finish(raw)
