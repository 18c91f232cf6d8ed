"""The path and shell attack corpora of tests/tools, run through server-side
execution: a session whose tools run on the server, over a real WebSocket.
The canaries outside the session's workspace are never read or written."""

from __future__ import annotations

import os

import pytest

from gemini_split.protocol import (
    GenerateContentRequest,
    ToolAwaitingApproval,
    ToolCompleted,
    ToolDecision,
    ToolError,
)
from gemini_split.server.model.scripted import ScriptedModel

from tests.tools.conftest import CANARY_TEXT, Env
from tests.tools.test_path_corpus import REFUSAL_CODES, _calls, escapes
from tests.tools.test_shell_corpus import CORPUS
from .helpers import APPROVER, finish, hello, make_server_tools, serving, until

CANARY_MARK = CANARY_TEXT.strip()


def _lay_traps(env: Env) -> None:
    r = env.root
    (r / "sub").mkdir()
    (r / "notes.txt").write_text("inside\n")
    os.symlink(env.canary, r / "link_out")
    os.symlink(env.outside, r / "dir_link")
    os.symlink("..", r / "up")
    os.symlink(env.outside / "not-yet", r / "dangling")
    os.symlink("loop2", r / "loop1")
    os.symlink("loop1", r / "loop2")
    os.symlink(r / "sub" / ".." / ".." / "outside", r / "sub" / "deep_link")


def _env(tmp_path, session_dir) -> Env:
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary.txt"
    canary.write_text(CANARY_TEXT)
    sibling = session_dir.parent / (session_dir.name + "-sibling")
    sibling.mkdir()
    (sibling / "canary.txt").write_text(CANARY_TEXT)
    from gemini_split.tools.workspace import Workspace

    return Env(session_dir, outside, canary, sibling, Workspace(session_dir))


@pytest.mark.timeout(120)
async def test_every_file_tool_refuses_every_escape_on_the_server(tmp_path):
    """Even in yolo: approval is not what stops them, confinement is."""
    root = tmp_path / "ws"
    model = ScriptedModel([])
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo") as (raw, connected):
            env = _env(tmp_path, root / connected.session_id)
            _lay_traps(env)
            calls = [{"name": n, "args": a} for path in escapes(env) for n, a in _calls(path)]
            model.turns.extend([{"function_calls": calls}, {"text": "done"}])
            await raw.send(GenerateContentRequest(prompt="escape"))
            events = await finish(raw)
    outcomes = [e for e in events if isinstance(e, ToolCompleted | ToolError)]
    assert len(outcomes) == len(calls)
    for outcome in outcomes:
        assert isinstance(outcome, ToolError) and outcome.error.code in REFUSAL_CODES, outcome
    assert CANARY_MARK not in repr(events) and CANARY_MARK not in repr(model.requests[-1].contents)
    assert env.canaries_intact()
    assert not (env.outside / "not-yet").exists()


@pytest.mark.timeout(120)
async def test_every_shell_corpus_command_is_asked_about_exactly_and_none_runs_unapproved(tmp_path):
    root = tmp_path / "ws"
    model = ScriptedModel([])
    async with serving(model, make_server_tools(root)) as (_, address):
        async with hello(address, tools="server", capabilities=APPROVER) as (raw, connected):
            workspace = root / connected.session_id
            for name in ("cat", "echo"):
                script = workspace / name
                script.write_text("#!/bin/sh\ntouch FLAG\n")
                script.chmod(0o755)
            calls = [{"name": "run_shell_command", "args": {"command": c}} for c in CORPUS]
            model.turns.extend([{"function_calls": calls}, {"text": "done"}])
            await raw.send(GenerateContentRequest(prompt="go"))
            asked = []
            for _ in CORPUS:
                _, question = await until(raw, ToolAwaitingApproval)
                asked.append(question.command)
                assert not (workspace / "FLAG").exists(), question.command
                await raw.send(ToolDecision(call_id=question.call_id, decision="deny"))
            events = await finish(raw)
    assert sorted(asked) == sorted(CORPUS)  # each one asked about, word for word
    assert not [e for e in events if isinstance(e, ToolCompleted)]
    assert not (workspace / "FLAG").exists()
