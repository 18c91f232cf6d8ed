"""The IDE companion client (gemini_split.tools.ide) against a companion
built from gemini-cli's spec (tests/ide_companion.py): discovery through the
port file and the environment, the bearer token, the editor context, and
diffs accepted or rejected in the editor."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
import trio

from gemini_split.tools import ide
from tests.ide_companion import serve_companion

CONTEXT = {"workspaceState": {"openFiles": [
    {"path": "/w/src/other.py", "timestamp": 1},
    {"path": "/w/src/main.py", "timestamp": 5, "isActive": True, "cursor": {"line": 3, "character": 7},
     "selectedText": "def main():"},
], "isTrusted": True}}


@pytest.fixture(autouse=True)
def private_tmp(tmp_path, monkeypatch):
    """Port files go to this test's own temporary directory."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    work = tmp_path / "work"
    work.mkdir()
    return work


async def _wait_for(predicate) -> None:
    with trio.fail_after(5):
        while not predicate():
            await trio.sleep(0.02)


def test_nothing_found_says_so_without_a_port_file_or_variable(private_tmp):
    found = ide.discover(private_tmp, {})
    assert found.config is None
    assert found.problem == ide.NOT_SUPPORTED


async def test_discovered_by_port_file_connected_and_status_lists_open_files(private_tmp):
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(
            private_tmp, context=CONTEXT, task_status=task_status))
        assert companion.port_file.name == f"gemini-ide-server-{__import__('os').getpid()}-{companion.port}.json"
        client = ide.IdeCompanion(private_tmp, {})
        await client.connect(nursery)
        assert client.status == "connected", client.details
        assert client.can_diff
        await _wait_for(lambda: client.context is not None)
        error, text = client.status_text()
        assert not error
        assert text.startswith("\U0001F7E2 Connected to VS Code\n\nOpen files:\n  - main.py (active)\n  - other.py\n")
        await client.disconnect()
        assert client.status_text() == (True, "\U0001F534 Disconnected: " + ide.DISABLED_AGAIN)
        nursery.cancel_scope.cancel()


async def test_a_wrong_token_is_refused(private_tmp):
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(private_tmp, task_status=task_status))
        data = json.loads(companion.port_file.read_text())
        data["authToken"] = "not-the-token"
        companion.port_file.write_text(json.dumps(data))
        client = ide.IdeCompanion(private_tmp, {})
        await client.connect(nursery)
        assert client.status == "disconnected"
        assert companion.refused >= 1
        assert client.status_text()[1] == "\U0001F534 Disconnected: Failed to connect to IDE companion extension " \
            "in VS Code. Please ensure the extension is running. To install the extension, run /ide install."
        nursery.cancel_scope.cancel()


async def test_a_companion_for_another_workspace_is_not_used(private_tmp, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(elsewhere, task_status=task_status))
        client = ide.IdeCompanion(private_tmp, {})
        await client.connect(nursery)
        assert client.status == "disconnected"
        assert client.details.startswith("Directory mismatch. Gemini CLI is running in a different location")
        assert companion.diffs == [] and companion.clients == []
        nursery.cancel_scope.cancel()


async def test_the_variable_picks_the_window_among_several(private_tmp):
    async with trio.open_nursery() as nursery:
        first = await nursery.start(lambda task_status: serve_companion(
            private_tmp, ide_pid=100, display_name="First", task_status=task_status))
        second = await nursery.start(lambda task_status: serve_companion(
            private_tmp, ide_pid=200, display_name="Second", task_status=task_status))
        assert ide.discover(private_tmp, {}).config.display_name == "Second"  # the newest process
        client = ide.IdeCompanion(private_tmp, {ide.PORT_ENV: str(first.port)})
        await client.connect(nursery)
        assert client.status_text()[1] == "\U0001F7E2 Connected to First"
        assert len(first.clients) == 1 and second.clients == []
        nursery.cancel_scope.cancel()


async def test_context_block_is_gemini_clis_and_sent_once_per_change(private_tmp):
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(
            private_tmp, context=CONTEXT, task_status=task_status))
        client = ide.IdeCompanion(private_tmp, {})
        await client.connect(nursery)
        await _wait_for(lambda: client.context is not None)
        text = client.context_text()
        assert text.startswith("Here is the user's editor context as a JSON object. This is for your information "
                               "only.\n```json\n")
        body = json.loads(text.split("```json\n")[1].split("```")[0])
        assert body == {"activeFile": {"path": "/w/src/main.py", "cursor": {"line": 3, "character": 7},
                                       "selectedText": "def main():"},
                        "otherOpenFiles": ["/w/src/other.py"]}
        assert client.context_text() is None  # unchanged: not sent again
        moved = {"workspaceState": {"openFiles": [{"path": "/w/a.py", "timestamp": 9, "isActive": True}]}}
        await companion.update_context(moved)
        await _wait_for(lambda: client.context == moved)
        assert '"path": "/w/a.py"' in client.context_text()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("answer, expected", [(("accept", "edited\n"), "edited\n"), (("accept", None), "new\n"),
                                              (("reject", None), None)])
async def test_review_returns_what_the_editor_decided(private_tmp, answer, expected):
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(private_tmp, task_status=task_status))
        companion.answer = answer
        client = ide.IdeCompanion(private_tmp, {})
        await client.connect(nursery)
        target = private_tmp / "f.py"
        assert await client.review(target, "new\n") == expected
        assert companion.diffs == [(str(target), "new\n")]
        nursery.cancel_scope.cancel()


async def test_disabled_means_no_connection(private_tmp):
    async with trio.open_nursery() as nursery:
        companion = await nursery.start(lambda task_status: serve_companion(private_tmp, task_status=task_status))
        client = ide.IdeCompanion(private_tmp, {})
        assert client.status_text() == (True, "\U0001F534 Disconnected: " + ide.DISABLED)
        await trio.sleep(0.1)
        assert companion.clients == []
        nursery.cancel_scope.cancel()
