"""What ``gemini-split attach`` shows, as a terminal shows it (pty + pyte):
the banner first and the replayed turn under it, in order; text the model
wrote before a tool call before the tool's line, apart from what follows;
``--watch`` output written as it came (never hard-wrapped by rich), and
``-o stream-json`` one whole JSON object per line."""

from __future__ import annotations

import json
import subprocess
import sys

import pyte
import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.ui.repl.pty_driver import PtyProcess
from tests.ui.repl.test_repl import PROMPT, _environ
from tests.e2e.test_serve_e2e import API_KEY, client, daemon

pytestmark = pytest.mark.timeout(90)

ROWS = 40


def screen_of(proc: PtyProcess, cols: int) -> list[str]:
    """The emulated terminal's lines, those scrolled off its top first."""
    screen = pyte.HistoryScreen(cols, ROWS, history=10_000)
    pyte.Stream(screen).feed(proc.raw)
    above = ["".join(line[x].data for x in range(cols)) for line in screen.history.top]
    return [line.rstrip() for line in [*above, *screen.display]]


def _index(screen: list[str], text: str) -> int:
    return next(i for i, line in enumerate(screen) if text in line)


TOOL_TURN = [{"text": "I am calling a tool", "function_calls": [{"name": "read_file", "args": {"file_path": "n.txt"}}]},
             {"text": "TOOL-RESULT says hi."}]


def test_attach_prints_the_banner_first_then_the_replayed_turn_in_order(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with FakeGemini(script=[{"text": "First answer."}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        first = client(["--server", address, "-p", "first question"], cwd=work, in_process=False)
        assert first.returncode == 0, first.stderr
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--server", address],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=ROWS, cols=110)
        try:
            repl.expect(r"First answer\.", timeout=30)
            repl.expect(PROMPT)
            repl.drain(0.5)
            screen = screen_of(repl, 110)
        finally:
            repl.close()
    banner = _index(screen, "gemini-split ")
    asked = _index(screen, "first question")
    answered = _index(screen, "First answer.")
    assert banner < asked < answered, "\n".join(screen)


def test_an_attached_repl_shows_text_before_another_clients_tool_call_before_its_line(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "n.txt").write_text("hi\n")
    with FakeGemini(script=[{"text": "Hello."}, *TOOL_TURN], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        assert client(["--server", address, "-p", "hello"], cwd=work, in_process=False).returncode == 0
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--server", address],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=ROWS, cols=110)
        try:
            repl.expect(r"Hello\.", timeout=30)
            repl.expect(PROMPT)
            other = client(["--server", address, "--resume", "latest", "-p", "use a tool"], cwd=work,
                           in_process=False)
            assert other.returncode == 0, other.stderr
            repl.expect(r"TOOL-RESULT says hi\.", timeout=30)
            repl.drain(0.5)
            screen = screen_of(repl, 110)
        finally:
            repl.close()
    said = _index(screen, "I am calling a tool")
    tool = _index(screen, "⚙ read_file")
    after = _index(screen, "TOOL-RESULT")
    assert said < tool < after, "\n".join(screen)
    assert "TOOL-RESULT" not in screen[said], "\n".join(screen)


@pytest.mark.parametrize("output", ["text", "stream-json"])
def test_watch_output_is_never_hard_wrapped(tmp_path, output):
    work = tmp_path / "work"
    work.mkdir()
    (work / "n.txt").write_text("hi\n")
    answer = json.dumps({"items": [f"value-number-{i}" for i in range(12)]})  # ~220 characters, one line
    cols = 60
    script = [{"text": "Hello."}, TOOL_TURN[0], {"text": answer, "chunks": 7}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        assert client(["--server", address, "-p", "hello"], cwd=work, in_process=False).returncode == 0
        watcher = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--watch", "--limit", "0",
                              "--server", address, "-o", output],
                             env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=ROWS, cols=cols)
        try:
            if output == "text":
                watcher.expect(r"Ctrl-C leaves", timeout=30)
            else:
                watcher.drain(4)  # stream-json prints nothing until an event: give it time to attach
            other = client(["--server", address, "--resume", "latest", "-p", "give json"], cwd=work,
                           in_process=False)
            assert other.returncode == 0, other.stderr
            watcher.expect(r'"type":"finished"' if output == "stream-json" else r"value-number-11", timeout=30)
            watcher.drain(0.5)
        finally:
            watcher.close()
    lines = watcher.raw.replace("\r\n", "\n").split("\n")
    if output == "text":
        assert any(line == answer for line in lines), watcher.raw  # whole: the terminal wraps it, nobody else
        said = _index(lines, "I am calling a tool")
        assert lines[said] == "I am calling a tool" and "read_file" in lines[said + 1], watcher.raw
    else:
        objects = [json.loads(line) for line in lines if line.strip()]
        assert {"text_delta", "finished"} <= {o["type"] for o in objects}


@pytest.mark.parametrize("live", [False, True])
def test_a_server_side_tool_of_another_client_splits_its_text_too(live):
    """In a session whose tools run on the server, the others see the tool
    as ``tool_started`` (no ``tool_execution_request``)."""
    import io

    from rich.console import Console

    from gemini_split.protocol import Finished, RequestStarted, TextDelta, ToolCompleted, ToolStarted
    from gemini_split.ui.follow import Follower

    out = io.StringIO()
    follower = Follower(Console(file=out, width=40, force_terminal=False, color_system=None), live=live)
    for event in (RequestStarted(request_id="r1", prompt="go", client="phone"),
                  TextDelta(request_id="r1", content="I am calling a tool"),
                  ToolStarted(request_id="r1", call_id="c1", tool="run_shell_command", parameters={}),
                  ToolCompleted(request_id="r1", call_id="c1", tool="run_shell_command", result="ok"),
                  TextDelta(request_id="r1", content="TOOL-RESULT is ok."),
                  Finished(request_id="r1")):
        follower.on_event(event)
    lines = out.getvalue().splitlines()
    assert lines == ["» phone: go", "I am calling a tool", "  ⚙ run_shell_command", "TOOL-RESULT is ok."], lines


def test_a_watchers_banner_says_who_it_is_apart_from_who_else_is_attached(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with FakeGemini(script=[{"text": "Hello."}], api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        assert client(["--server", address, "-p", "hello"], cwd=work, in_process=False).returncode == 0
        first = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--watch", "--label", "laptop",
                            "--server", address], env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work),
                           rows=ROWS, cols=160)
        try:
            first.expect(r"Ctrl-C leaves", timeout=30)
            second = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--watch",
                                 "--label", "phone", "--server", address],
                                env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work), rows=ROWS, cols=160)
            try:
                second.expect(r"Ctrl-C leaves", timeout=30)
            finally:
                second.close()
        finally:
            first.close()
    alone = " ".join(screen_of(first, 160))
    assert "as laptop (watching); nobody else is attached." in alone, alone
    banner = " ".join(screen_of(second, 160))
    assert "as phone (watching); also attached: laptop (watching)." in banner, banner


def _write_reviewer(home) -> None:
    agents = home / "agents"
    agents.mkdir(parents=True, exist_ok=True)
    (agents / "reviewer.md").write_text("---\nname: reviewer\ndescription: Reviews.\ntools: [read_file]\n---\n"
                                        "You are REVIEWER.\n")


def _review_lines(screen: list[str]) -> list[str]:
    return [line for line in screen if "review line " in line]


def test_a_watcher_sees_a_running_sub_agents_latest_text_bounded_until_it_ends(tmp_path):
    """``attach --watch`` draws another client's running sub-agent as the
    REPL draws its own: the latest lines of its text while it writes (before
    it finishes), never more than a few of them however long the text, then
    its one-line summary."""
    from gemini_split.ui.render import AGENT_TAIL

    work = tmp_path / "work"
    work.mkdir()
    home = tmp_path / "home"
    _write_reviewer(home)
    review = "".join(f"review line {i:02d}\n" for i in range(40))
    script = [{"text": "Hello."},
              {"system_contains": "You are gemini-split",
               "function_calls": [{"name": "reviewer", "args": {"query": "review it"}}]},
              {"system_contains": "REVIEWER", "text": review, "chunks": 40, "chunk_delay": 0.1,
               "function_calls": [{"name": "complete_task", "args": {"result": "looks fine"}}]},
              {"system_contains": "You are gemini-split", "text": "Reviewed."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) as (_, address):
        assert client(["--server", address, "-p", "hello"], cwd=work, in_process=False).returncode == 0
        watcher = PtyProcess([sys.executable, "-m", "gemini_split", "attach", "latest", "--watch", "--limit", "0",
                              "--server", address], env=_environ(tmp_path, NO_COLOR="1"), cwd=str(work),
                             rows=ROWS, cols=110)
        other = None
        try:
            watcher.expect(r"Ctrl-C leaves", timeout=30)
            other = subprocess.Popen(
                [sys.executable, "-m", "gemini_split", "--server", address, "--resume", "latest", "-p", "review",
                 "--yolo"], cwd=work, env=_environ(tmp_path), stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            watcher.expect(r"review line 05", timeout=30)
            assert "reviewer completed" not in watcher.text  # seen while it runs
            early = screen_of(watcher, 110)
            watcher.expect(r"review line 30", timeout=30)
            later = screen_of(watcher, 110)
            watcher.expect(r"reviewer completed .*: looks fine", timeout=30)
            watcher.expect(r"Reviewed\.", timeout=30)
            watcher.drain(0.5)
            end = screen_of(watcher, 110)
            _, err = other.communicate(timeout=30)
            assert other.returncode == 0, err
        finally:
            watcher.close()
            if other is not None and other.poll() is None:
                other.kill()
                other.wait()
    for screen in (early, later):
        shown = _review_lines(screen)
        assert 0 < len(shown) <= AGENT_TAIL, "\n".join(screen)
        assert any("└ reviewer thinking…" in line for line in screen), "\n".join(screen)
    assert "review line 00" not in "\n".join(later)  # the text's start has left the view, not piled up above
    assert _review_lines(end) == [], "\n".join(end)  # the block went with the sub-agent
    assert any("✓ reviewer completed" in line and "looks fine" in line for line in end), "\n".join(end)
