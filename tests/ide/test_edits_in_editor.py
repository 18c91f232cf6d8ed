"""Edits that need approval are reviewed as diffs in the IDE's editor
(gemini-cli's openDiff): what the user accepts there — perhaps edited — is
written; a rejected edit is not; with no companion the terminal asks."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import trio

from gemini_split.tools import ide
from gemini_split.tools.approval import Answer, ApprovalMode, ApprovalPolicy
from gemini_split.tools.executor import ToolExecutor
from gemini_split.tools.registry import default_tools
from gemini_split.tools.workspace import Workspace
from tests.ide_companion import serve_companion


class TerminalAsker:
    """The REPL's question, answered no (so a test sees whether it was asked)."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def ask(self, request: Any) -> Answer:
        self.asked.append(request.tool.name)
        return Answer.NO


@pytest.fixture
def work(tmp_path, monkeypatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


async def _run(work: Path, companion: Any, nursery: trio.Nursery, tool: str, args: dict[str, Any]):
    asker = TerminalAsker()
    executor = ToolExecutor(default_tools(), Workspace(work), ApprovalPolicy(ApprovalMode.DEFAULT), asker)
    if companion is not None:
        executor.ide = ide.IdeCompanion(work, {})
        await executor.ide.connect(nursery)

    async def emit(event: Any) -> None:
        pass

    result, failure = await executor.execute("call-1", tool, args, emit)
    return result, failure, asker


async def test_write_file_accepted_in_the_editor_writes_the_editors_content(work):
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(work, task_status=task_status))
        companion.answer = ("accept", "print('edited by the user')\n")
        result, failure, asker = await _run(work, companion, nursery, "write_file",
                                            {"file_path": "a.py", "content": "print('model')\n"})
        assert failure is None, failure
        assert (work / "a.py").read_text() == "print('edited by the user')\n"
        # the model is told, in gemini-cli's words
        assert result.endswith("User modified the `content` to be: print('edited by the user')\n")
        assert companion.diffs == [(str(work / "a.py"), "print('model')\n")]
        assert asker.asked == []  # the editor answered, not the terminal
        nursery.cancel_scope.cancel()


async def test_replace_accepted_writes_the_whole_accepted_text(work):
    (work / "b.txt").write_text("one\ntwo\nthree\n")
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(work, task_status=task_status))
        companion.answer = ("accept", "one\nTWO (mine)\nthree\n")
        _, failure, _ = await _run(work, companion, nursery, "replace", {
            "file_path": "b.txt", "old_string": "two", "new_string": "2", "instruction": "number"})
        assert failure is None, failure
        assert companion.diffs == [(str(work / "b.txt"), "one\n2\nthree\n")]
        assert (work / "b.txt").read_text() == "one\nTWO (mine)\nthree\n"
        nursery.cancel_scope.cancel()


async def test_rejected_in_the_editor_is_not_written(work):
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(work, task_status=task_status))
        companion.answer = ("reject", None)
        _, failure, asker = await _run(work, companion, nursery, "write_file",
                                       {"file_path": "a.py", "content": "x\n"})
        assert failure is not None and failure.code == "refused"
        assert "rejected the edit of a.py in the IDE" in failure.message
        assert not (work / "a.py").exists()
        assert asker.asked == []
        nursery.cancel_scope.cancel()


async def test_without_a_companion_the_terminal_asks(work):
    async with trio.open_nursery() as nursery:
        _, failure, asker = await _run(work, None, nursery, "write_file", {"file_path": "a.py", "content": "x\n"})
        assert asker.asked == ["write_file"] and failure.code == "refused"
        assert not (work / "a.py").exists()
