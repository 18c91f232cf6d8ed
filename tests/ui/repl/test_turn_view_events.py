"""The REPL's TurnView fed a whole turn of events, off a terminal (plain
text): what it prints and what it keeps for /copy, /output and /stats."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from gemini_split.protocol import (
    Finished,
    RequestStarted,
    TextDelta,
    ToolCompleted,
    ToolDelta,
    ToolError,
    ToolFailure,
    ToolStarted,
)
from gemini_split.ui.render import TurnView

pytestmark = pytest.mark.timeout(30)

R = "r-1"


def _turn(view: TurnView) -> None:
    for event in [
        RequestStarted(request_id=R, prompt="go", client="me"),
        TextDelta(request_id=R, content="Let me look.\n"),
        ToolStarted(request_id=R, call_id="c1", tool="run_shell_command", parameters={"command": "ls"}),
        ToolDelta(request_id=R, call_id="c1", content="a.txt\nb"),
        ToolDelta(request_id=R, call_id="c1", content=".txt"),
        ToolCompleted(request_id=R, call_id="c1", tool="run_shell_command", result={"exit_code": 0}),
        ToolStarted(request_id=R, call_id="c2", tool="read_file", parameters={"file_path": "a.txt"}),
        ToolCompleted(request_id=R, call_id="c2", tool="read_file", result="one\ntwo\n"),
        ToolStarted(request_id=R, call_id="c3", tool="write_file", parameters={"file_path": "x"}),
        ToolError(request_id=R, call_id="c3", tool="write_file",
                  error=ToolFailure(code="refused", message="not \x1b[31mallowed")),
        ToolDelta(request_id=R, call_id="zz", content="from a call never started"),
        TextDelta(request_id=R, content="Two files."),
        ToolStarted(request_id=R, call_id="c4", tool="glob", parameters={"pattern": "*"}),
        Finished(request_id=R),
    ]:
        view.on_event(event)


def test_a_turn_with_streamed_summarised_refused_and_unfinished_calls_prints_each_once():
    out = io.StringIO()
    view = TurnView(Console(file=out, width=100, color_system=None))
    view.start()
    _turn(view)
    view.close()
    assert out.getvalue() == (
        "Let me look.\n"
        "⏺ run_shell_command(command='ls')  running\n"
        "a.txt\nb.txt\n"
        "✓ run_shell_command(command='ls')  done\n"
        "⏺ read_file(file_path='a.txt')  running\n"
        "\n"
        "✓ read_file(file_path='a.txt')  done\n"
        "  │ one  (+1 more line)\n"
        "⏺ write_file(file_path='x')  running\n"
        "⊘ write_file(file_path='x')  refused: not ␛[31mallowed\n"
        "Two files.⏺ glob(pattern='*')  running\n"
        "✗ glob(pattern='*')  cancelled\n"
    )
    assert view.answer == "Let me look.\n\nTwo files.\n\n"
    assert view.tool_calls == 4
    assert [(c.name, c.all_lines()) for c in view.finished_tools] == [
        ("run_shell_command", ["a.txt", "b.txt"]), ("read_file", ["one  (+1 more line)"]),
        ("write_file", []), ("glob", [])]
