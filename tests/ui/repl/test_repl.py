"""The real REPL, driven through a pseudo-terminal as a person would drive it.

Each test starts ``python -m gemini_split -m scripted:SCRIPT`` under a pty
(prompt-toolkit sees a terminal, Ctrl-C is a real SIGINT), types, and reads
what appears. The scripted model makes the answers predictable; when its
script runs out it answers ``Echo: <prompt>``.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .pty_driver import ALT_ENTER, CTRL_C, CTRL_D, ENTER, ESC, TAB, UP, PtyProcess, plain

PROMPT = "› "


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("the notes\n")
    return work


def _environ(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GEMINI", "GOOGLE")) and k not in ("NO_COLOR", "COLUMNS", "LINES")}
    env.update(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home"), TERM="xterm-256color")
    env.update(extra)
    return env


@pytest.fixture
def start_repl(tmp_path: Path, workdir: Path):
    """``start_repl(script, *args, rows=, cols=, **environ)``: a REPL under a pty, killed at
    the end of the test if still running."""
    started: list[PtyProcess] = []

    def start(script: list[dict], *args: str, rows: int = 40, cols: int = 110, **environ: str) -> PtyProcess:
        path = tmp_path / f"script{len(started)}.json"
        path.write_text(json.dumps(script))
        argv = [sys.executable, "-m", "gemini_split", "-m", f"scripted:{path}", *args]
        proc = PtyProcess(argv, env=_environ(tmp_path, **{"NO_COLOR": "1", **environ}), cwd=str(workdir),
                          rows=rows, cols=cols)
        started.append(proc)
        proc.expect(r"/help for commands", timeout=15)
        proc.expect(PROMPT)
        return proc

    yield start
    for proc in started:
        proc.close()


def ask(repl: PtyProcess, text: str) -> None:
    repl.type(text)
    repl.send(ENTER)


def test_a_prompt_streams_markdown_thinking_and_usage_then_ctrl_d_exits(start_repl, tmp_path):
    repl = start_repl([
        {"thought": "Consider the greeting.", "text": "# Greeting\n\nHello **there**, friend.\n\n- one\n- two\n",
         "chunks": 12, "chunk_delay": 0.03},
    ])
    ask(repl, "say hello")
    repl.expect(r"Thought \(3 words\): Consider the greeting\.")
    repl.expect(r"Greeting")
    repl.expect(r"Hello there, friend\.")  # rendered markdown: no ** left
    repl.expect(r"• two")
    repl.expect(r"tokens: 10 in · \d+ out · \d+ total · [\d.]+ s")
    repl.expect(PROMPT)
    # Multi-line input: Alt+Enter inserts a newline, Enter sends both lines.
    repl.type("line one")
    repl.send(ALT_ENTER)
    repl.type("line two")
    repl.send(ENTER)
    repl.expect(r"Echo: line one\s+line two")
    repl.expect(PROMPT)
    repl.send(CTRL_D)
    assert repl.wait() == 0
    history = (tmp_path / "home" / "repl_history").read_text()
    assert "+say hello" in history and "+line one\n+line two" in history


def test_the_toolbar_shows_server_session_model_and_approval_mode(start_repl):
    repl = start_repl([], "--approval-mode", "auto_edit")
    match = repl.expect(r"server embedded · session (\S+) · model scripted:\S+ · approval auto_edit")
    assert match.group(1).startswith("s-")


def test_ctrl_c_clears_the_line_and_cancels_a_running_turn(start_repl):
    repl = start_repl([{"text": "word " * 200, "chunks": 200, "chunk_delay": 0.05}])
    repl.type("garbage")
    repl.send(CTRL_C)
    ask(repl, "tell a long story")
    repl.expect(r"word word word")
    repl.send(CTRL_C)
    repl.expect(r"Cancelled\.", timeout=5)
    repl.expect(PROMPT)
    ask(repl, "still there?")
    repl.expect(r"Echo: still there\?")  # not "garbagestill there?"
    assert "Echo: garbage" not in repl.text
    repl.expect(PROMPT)
    ask(repl, "/quit")
    assert repl.wait() == 0


@pytest.mark.timeout(60)
def test_approvals_are_asked_with_a_menu_that_starts_on_no(start_repl, workdir):
    def write(name: str) -> dict:
        return {"function_calls": [{"name": "write_file", "args": {"file_path": name, "content": f"{name}\n"}}]}

    repl = start_repl([write("no.txt"), {"text": "ok"}, write("yes.txt"), {"text": "ok"},
                       write("always1.txt"), {"text": "ok"}, write("always2.txt"), {"text": "ok"},
                       write("again.txt"), {"text": "ok"}])
    ask(repl, "write no.txt")
    repl.expect(r"write_file wants to run \(edit\)")
    repl.expect(r"Create no\.txt")
    repl.expect(r"Allow write_file: no\.txt\?")
    repl.expect(r"1\. Yes, allow once")
    repl.expect(r"2\. Yes, and allow every write_file call for the rest of this session")
    repl.expect(r"❯ 3\. No")
    repl.type("yyyaaa")  # letters do nothing
    repl.send(ENTER)  # the default: no
    repl.expect(r"✗ refused")
    repl.expect(r"write_file\(file_path='no\.txt'.*refused: the user declined")
    repl.expect(PROMPT)
    assert not (workdir / "no.txt").exists()

    ask(repl, "write yes.txt")
    repl.expect(r"❯ 3\. No")
    repl.send(UP + UP)
    repl.expect(r"❯ 1\. Yes, allow once")
    repl.send(ENTER)
    repl.expect(r"✓ write_file\(file_path='yes\.txt'.*done")
    repl.expect(PROMPT)
    assert (workdir / "yes.txt").read_text() == "yes.txt\n"

    ask(repl, "write always1.txt")
    repl.expect(r"❯ 3\. No")
    repl.send("2")
    repl.expect(r"every write_file call will not ask again this session")
    repl.expect(PROMPT)
    ask(repl, "write always2.txt")
    repl.expect(r"✓ write_file\(file_path='always2\.txt'.*done")
    repl.expect(PROMPT)
    assert "Allow write_file: always2.txt?" not in repl.text
    assert (workdir / "always2.txt").exists()

    ask(repl, "/permissions")
    repl.expect(r"1\. every write_file call run without asking")
    repl.expect(PROMPT)
    ask(repl, "/permissions revoke 1")
    repl.expect(r"Revoked: every write_file call will ask again")
    repl.expect(PROMPT)
    ask(repl, "write always2.txt again")
    repl.expect(r"❯ 3\. No")
    repl.send(ESC)
    repl.expect(r"✗ refused")
    repl.expect(PROMPT)


@pytest.mark.timeout(60)
def test_always_for_a_command_names_the_command_and_no_can_say_what_to_do(start_repl, workdir):
    repl = start_repl([
        {"function_calls": [{"name": "run_shell_command", "args": {"command": "echo hi && echo there"}}]},
        {"text": "ok"},
        {"function_calls": [{"name": "run_shell_command", "args": {"command": "rm -rf build"}}]},
        {"text": "understood"},
    ])
    ask(repl, "greet")
    repl.expect(r"Allow run_shell_command: echo hi && echo there\?")
    repl.expect(r"2\. Yes, and allow `echo …` shell commands for the rest of this session")
    repl.send("2")
    repl.expect(r"│ there")
    repl.expect(PROMPT)
    ask(repl, "clean")
    repl.expect(r"4\. No, and tell the model what to do instead")
    repl.send("4")
    repl.expect(r"Tell the model what to do instead: ")
    ask(repl, "use make clean")
    repl.expect(r"refused: the user declined to run run_shell_command and said:\s+use\s+make\s+clean")
    repl.expect(PROMPT)


@pytest.mark.timeout(60)
def test_keys_typed_ahead_never_answer_an_approval(start_repl, workdir):
    """Issue 14 §1: "you should…" typed while the model streams, then an
    approval: nothing is approved, and the text is back in the next prompt."""
    repl = start_repl([
        {"text": "thinking about it " * 20, "chunks": 20, "chunk_delay": 0.05,
         "function_calls": [{"name": "run_shell_command", "args": {"command": "touch APPROVED"}}]},
        {"text": "ok"},
    ])
    ask(repl, "clean up")
    repl.expect(r"thinking about it")
    repl.type("1 yes 2 always", delay=0.01)  # number keys too: the menu's shortcuts
    repl.send(ENTER)
    repl.type("y")
    repl.expect(r"Allow run_shell_command: touch APPROVED\?")
    repl.expect(r"❯ 3\. No")
    repl.drain(0.5)
    assert not (workdir / "APPROVED").exists()
    repl.send(ESC)
    repl.expect(r"✗ refused")
    repl.expect(r"ok")
    # The line ended by Enter is sent when the turn ends; the rest waits in the prompt.
    repl.expect(r"sending what you typed during the answer: 1 yes 2 always")
    repl.expect(r"Echo: 1 yes 2 always")
    repl.expect(PROMPT + "y")
    assert not (workdir / "APPROVED").exists()


@pytest.mark.timeout(60)
def test_enter_while_an_answer_streams_queues_the_message(start_repl):
    repl = start_repl([{"text": "word " * 60, "chunks": 30, "chunk_delay": 0.05}])
    ask(repl, "first")
    repl.expect(r"word word")
    repl.type("second question", delay=0.005)
    repl.send(ENTER)
    repl.expect(r"tokens: ")
    repl.expect(r"sending what you typed during the answer: second question")
    repl.expect(r"Echo: second question")
    repl.expect(PROMPT)


def test_ctrl_c_at_an_approval_question_refuses_and_cancels(start_repl, workdir):
    repl = start_repl([{"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x"}}]},
                       {"text": "should not be reached " * 50, "chunks": 50, "chunk_delay": 0.1}])
    ask(repl, "write x")
    repl.expect(r"Allow (run_shell_command|write_file)")
    repl.send(CTRL_C)
    repl.expect(r"refused; cancelling the turn")
    repl.expect(r"Cancelled\.", timeout=5)
    repl.expect(PROMPT)
    assert not (workdir / "x.txt").exists()


def test_shell_output_streams_under_the_tool_call(start_repl):
    command = "echo first-line; sleep 0.3; echo second-line"
    repl = start_repl([{"function_calls": [{"name": "run_shell_command", "args": {"command": command}}]},
                       {"text": "ran it"}], "--yolo")
    ask(repl, "run it")
    repl.expect(r"run_shell_command\(command=.*")
    repl.expect(r"│ first-line")
    repl.expect(r"│ second-line")
    repl.expect(r"ran it")
    assert re.search(r"✓ run_shell_command\(.*\)\s+done", repl.text)


def _trust(tmp_path: Path, workdir: Path) -> None:
    """Trust the REPL's folder (gemini-cli refuses yolo in an untrusted one)."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "trustedFolders.json").write_text(json.dumps({str(workdir): "TRUST_FOLDER"}))


def test_slash_commands(start_repl, tmp_path, workdir):
    _trust(tmp_path, workdir)
    repl = start_repl([])
    session = re.search(r"session (s-\w+)", repl.text).group(1)
    steps = [
        ("/help", r"/server ACTION.*\n(.*\n)*.*Alt\+Enter"),
        ("/tools", r"write_file\s+edit\s+asks first"),
        ("/approval-mode", r"approval mode: default"),
        ("/approval-mode yolo", r"approval mode: yolo"),
        ("/approval-mode sometimes", r"usage: /approval-mode \[default \| auto_edit \| yolo \| plan\]"),
        ("/model", r"model: scripted:"),
        ("/model gemini-2.5-pro", r"model: gemini-2.5-pro"),
        ("/model a b", r"usage: /model \[NAME\]"),
        ("/frobnicate", r"unknown command /frobnicate; /help lists the commands"),
        ("/server", r"usage: /server list \| add NAME URL"),
        ("/server add", r"usage: /server add NAME URL \[--token T \| --token-env VAR\]"),
        ("/server add bad http://x", r"is not a server address"),
        ("/server add dev ws://127.0.0.1:9 --token-env DEV_TOKEN", r"Added profile dev: ws://127\.0\.0\.1:9"),
        ("/server list", r"dev\s+ws://127\.0\.0\.1:9\s+auth: token from \$DEV_TOKEN"),
        ("/server status", r"latency\s+[\d.]+ ms \(get_state round trip\)"),
        ("/server remove dev", r"Removed profile dev"),
        ("/server remove dev", r"no profile named 'dev'"),
        ("/server connect nowhere", r"no profile named 'nowhere'"),
        ("/clear", r"New conversation: embedded · session (s-\w+)"),
    ]
    for command, pattern in steps:
        ask(repl, command)
        repl.expect(pattern)
        repl.expect(PROMPT)
    assert session not in re.findall(r"New conversation: embedded · session (s-\w+)", repl.text)[-1]
    assert "Traceback" not in repl.text
    # The model set with /model goes with the next prompt; the toolbar shows it.
    ask(repl, "which model?")
    repl.expect(r"Echo: which model\?")
    repl.expect(r"model gemini-2\.5-pro · approval yolo")
    # Tab completes commands.
    repl.type("/too")
    time.sleep(0.3)
    repl.send(TAB)
    time.sleep(0.3)
    repl.send(ENTER)
    repl.expect(r"write_file\s+edit\s+runs")  # yolo: nothing asks
    repl.expect(PROMPT)
    ask(repl, "/quit")
    assert repl.wait() == 0


def test_server_add_connect_list_against_a_stdio_daemon(start_repl, tmp_path):
    daemon_script = tmp_path / "daemon.json"
    daemon_script.write_text(json.dumps([{"text": "answer from the daemon"}]))
    command = shlex.join([sys.executable, "-m", "gemini_split", "serve", "--stdio", "-m", f"scripted:{daemon_script}"])
    repl = start_repl([])
    ask(repl, f"/server add box 'stdio:{command}'")
    repl.expect(r"Added profile box: stdio:")
    repl.expect(PROMPT)
    repl.type("/server connect b")
    time.sleep(0.3)
    repl.send(TAB)
    time.sleep(0.3)
    repl.send(ENTER)
    repl.expect(r"Connected: box · session (s-\w+)", timeout=20)
    repl.expect(PROMPT)
    ask(repl, "hello daemon")
    repl.expect(r"answer from the daemon")
    repl.expect(PROMPT)
    ask(repl, "/server status")
    repl.expect(r"server\s+box: stdio:")
    repl.expect(r"version\s+gemini-split/\S+ · protocol 1\.\d")
    repl.expect(r"auth\s+ok")
    ask(repl, "/server list")
    repl.expect(r"\* box\s+stdio:")
    repl.expect(r"server box · session")  # the toolbar
    ask(repl, "/server connect embedded")
    repl.expect(r"Connected: embedded")
    repl.expect(PROMPT)
    ask(repl, "/quit")
    assert repl.wait() == 0
    data = json.loads((tmp_path / "home" / "servers.json").read_text())
    assert data == {"profiles": [{"name": "box", "transport": "stdio", "command": command,
                                  "authentication": {"method": "none"}}]}


def test_no_color_means_no_colours_and_colours_otherwise(start_repl):
    color = re.compile(r"\x1b\[[0-9;]*(3[0-7]|38;[25];[0-9;]+|9[0-7])m")
    repl = start_repl([{"text": "**bold** and `code`"}])
    ask(repl, "hi")
    repl.expect("tokens:")
    assert not color.search(repl.raw)
    colored = start_repl([{"text": "**bold** and `code`"}], NO_COLOR="")
    ask(colored, "hi")
    colored.expect("tokens:")
    assert color.search(colored.raw)


def test_output_that_is_not_a_terminal_gets_plain_text(tmp_path, workdir):
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"text": "**plain** answer", "chunks": 3}]))
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "gemini_split", "-m", f"scripted:{script}"],
                            stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_environ(tmp_path), cwd=workdir)
    os.close(slave)
    try:
        os.write(master, b"hi\n/tools\n")
        time.sleep(1.5)
        os.write(master, b"\x04")
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
        os.close(master)
    text = out.decode()
    assert "**plain** answer" in text  # written as it came, not re-rendered
    assert "write_file" in text
    assert "\x1b" not in text
    assert proc.returncode == 0, err.decode()


def test_a_server_that_cannot_be_reached_is_reported_and_exits(tmp_path, workdir):
    proc = PtyProcess([sys.executable, "-m", "gemini_split", "--server", "ws://127.0.0.1:9"],
                      env=_environ(tmp_path, NO_COLOR="1"), cwd=str(workdir))
    try:
        proc.expect(r"Cannot connect", timeout=15)
        proc.expect(r"ws://127\.0\.0\.1:9: cannot connect")
        assert proc.wait() == 1
        assert "Traceback" not in plain(proc.raw)
    finally:
        proc.close()


@pytest.mark.timeout(60)
def test_stats_copy_and_the_last_thought(start_repl):
    import base64

    repl = start_repl([
        {"thought": "A long chain of reasoning about the greeting " * 3, "text": "Hello, **copy** me.",
         "function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]},
        {"text": "Done reading."},
    ])
    ask(repl, "/copy")
    repl.expect(r"nothing to copy yet")
    ask(repl, "hi")
    repl.expect(r"Ctrl-T at the prompt shows it all")
    repl.expect(r"Done reading\.")
    repl.expect(PROMPT)
    ask(repl, "/stats")
    repl.expect(r"session\s+\d+ min \d+ s · 1 turn · 1 tool call")
    repl.expect(r"tokens\s+20 in · \d+ out")
    repl.expect(r"context\s+at most 20 tokens, 0\.0% of the model's 1,048,576")
    repl.expect(PROMPT)
    ask(repl, "/copy")
    repl.expect(r"Copied the last answer \(\d+ characters\) through the terminal")
    payload = base64.b64encode("Hello, **copy** me.\n\nDone reading.".encode()).decode()
    assert f"\x1b]52;c;{payload}\x07" in repl.raw
    repl.expect(PROMPT)
    repl.send("\x14")  # Ctrl-T
    repl.expect(r"✻ Thought:")
    repl.expect(r"about the greeting A long chain of reasoning about the greeting A long chain")


@pytest.mark.timeout(60)
def test_long_tool_output_is_capped_and_output_shows_all_of_it(start_repl):
    repl = start_repl([{"function_calls": [{"name": "run_shell_command", "args": {"command": "seq 1 30 | sed s/^/row-/"}}]},
                       {"text": "counted"}], "--yolo")
    ask(repl, "count")
    repl.expect(r"… 22 earlier lines \(/output shows all\)")
    repl.expect(r"counted")
    repl.expect(PROMPT)
    ask(repl, "/output")
    repl.expect(r"run_shell_command\(command='seq 1 30.*output")
    repl.expect(r"row-1\s+row-2\s+row-3\s")
    repl.expect(r"row-30")
    repl.expect(PROMPT)


@pytest.mark.timeout(60)
def test_compress_has_the_server_replace_the_older_turns_with_the_models_summary(start_repl, tmp_path):
    long_answer = "The capital is Paris. " + "It has a long history. " * 80
    repl = start_repl([
        {"text": long_answer},
        {"text": "And Spain's is Madrid."},
        {"text": "<state_snapshot>- the user asked about France: Paris</state_snapshot>"},
    ])
    ask(repl, "/compress")  # nothing older than the last exchange yet
    repl.expect(r"nothing to compress yet")
    repl.expect(PROMPT)
    ask(repl, "capital of France?")
    repl.expect(r"Paris")
    repl.expect(PROMPT)
    ask(repl, "and Spain?")
    repl.expect(r"Madrid")
    repl.expect(PROMPT)
    ask(repl, "/compress")
    repl.expect(r"Compressing chat history")  # gemini-cli's words while it runs, and after:
    repl.expect(r"✦ Chat history compressed from \d+ to \d+ tokens\.")
    repl.expect(PROMPT)
    ask(repl, "/chat save after")
    repl.expect(r"Saved chat after \(4 messages\)")  # summary, acknowledgement, the last exchange
    repl.expect(PROMPT)
    messages = json.loads((tmp_path / "home" / "chats" / "after.json").read_text())["messages"]
    assert messages[0]["parts"][-1]["text"] == "<state_snapshot>- the user asked about France: Paris</state_snapshot>"
    assert messages[1] == {"role": "model", "parts": [{"text": "Got it. Thanks for the additional context!"}]}
    assert messages[2]["parts"][-1]["text"] == "and Spain?" and "Madrid" in messages[3]["parts"][-1]["text"]
    assert "It has a long history" not in json.dumps(messages)


@pytest.mark.timeout(60)
def test_chat_save_resume(start_repl, tmp_path):
    repl = start_repl([{"text": "The capital is Paris."}])
    ask(repl, "capital of France?")
    repl.expect(r"Paris")
    repl.expect(PROMPT)
    ask(repl, "/chat save geo")
    repl.expect(r"Saved chat geo \(2 messages\)")
    repl.expect(PROMPT)
    ask(repl, "/chat list")
    repl.expect(r"geo\s+saved \S+ · 2 messages")
    repl.expect(PROMPT)
    ask(repl, "/chat resume geo")
    repl.expect(r"Resuming geo: new session")
    # Redrawn as /resume redraws a session.
    repl.expect(r"Resumed chat geo \(2 messages\):\s+» capital of France\?\s+The capital is Paris\.")
    repl.expect(PROMPT)
    ask(repl, "go on")
    repl.expect(r"Echo: geo: capital of France\?")
    repl.expect(PROMPT)
    ask(repl, "/chat save resumed")
    repl.expect(r"Saved chat resumed")
    repl.expect(PROMPT)
    sent = json.loads((tmp_path / "home" / "chats" / "resumed.json").read_text())["messages"][0]["parts"][-1]["text"]
    assert sent.startswith("geo: capital of France?\n\nThis conversation resumes one saved as 'geo'")
    assert "User: capital of France?\n\nModel: The capital is Paris." in sent
    # Its title is the chat it continues, not the preamble.
    ask(repl, "/sessions")
    repl.expect(r"\(this one\)\s+\S+ \S+\s+1\s+1\s+geo: capital of France\?")  # 1 turn, 1 attached
    repl.expect(PROMPT)
    ask(repl, "/chat delete geo")
    repl.expect(r"Deleted chat geo")
    assert not (tmp_path / "home" / "chats" / "geo.json").exists()


@pytest.mark.timeout(60)
def test_a_long_diff_is_capped_coloured_without_colour_and_shown_whole_on_request(start_repl, workdir):
    (workdir / "big.txt").write_text("".join(f"old line {i}\n" for i in range(1, 41)))
    repl = start_repl([{"function_calls": [{"name": "write_file", "args": {
        "file_path": "big.txt", "content": "new line\n"}}]}, {"text": "ok"}])
    ask(repl, "rewrite big.txt")
    repl.expect(r"Overwrite big\.txt")
    repl.expect(r"-old line 15")
    repl.expect(r"… 25 more lines …")
    repl.expect(r"\+new line")
    repl.expect(r"5\. Show all of it, then ask again")
    shown = repl.text
    assert "old line 16" not in shown and "old line 40" not in shown
    # NO_COLOR: no colour, but added lines are bold and removed ones dim.
    assert re.search(r"\x1b\[1m\+new line", repl.raw)
    assert re.search(r"\x1b\[2m-old line 1\b", repl.raw)
    assert not re.search(r"\x1b\[(3[1-7]|9[1-7])m", repl.raw)
    repl.send("5")
    repl.expect(r"-old line 40")
    repl.expect(r"❯ 3\. No")
    repl.send(ENTER)
    repl.expect(r"✗ refused")
    assert (workdir / "big.txt").read_text().startswith("old line 1\n")


@pytest.mark.timeout(60)
def test_shift_tab_cycles_approval_modes_but_never_into_yolo(start_repl, tmp_path, workdir):
    import pyte

    _trust(tmp_path, workdir)

    def toolbar_shows(text: str) -> bool:
        """Whether the screen's toolbar line (redrawn in place, cell by
        cell) comes to show ``text`` within a few seconds."""
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline:
            repl.drain(0.1)
            screen = pyte.Screen(110, 40)
            pyte.Stream(screen).feed(repl.raw)
            if any(" · approval " in row and text in row for row in screen.display):
                return True
        return False

    repl = start_repl([])
    assert toolbar_shows("approval default ")
    for mode in ("auto_edit", "plan", "default", "auto_edit"):
        repl.send("\x1b[Z")  # Shift+Tab
        assert toolbar_shows(f"approval {mode} "), mode
    ask(repl, "/approval-mode yolo")
    repl.expect(r"approval mode: yolo")
    repl.expect(PROMPT)
    repl.send("\x1b[Z")
    assert toolbar_shows("approval default ")


@pytest.mark.timeout(60)
def test_settings_ui_section_hides_the_banner_and_names_unknown_themes(start_repl, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"ui": {"hideBanner": True, "theme": "Solarized Neon"}}))
    repl = start_repl([])
    assert "gemini-split 0." not in repl.text
    assert re.search(r"unknown ui\.theme 'Solarized Neon'; using the default\s+\(known: [^)]*Dracula", repl.text)
    (home / "settings.json").write_text(json.dumps({"ui": {"theme": "NoColor"}}))
    colourless = start_repl([{"text": "**bold** and `code`"}], NO_COLOR="")
    ask(colourless, "hi")
    colourless.expect("tokens:")
    assert not re.search(r"\x1b\[[0-9;]*(3[0-7]|38;[25];[0-9;]+|9[0-7])m", colourless.raw)


@pytest.mark.timeout(60)
def test_init_has_the_model_write_a_gemini_md_and_never_overwrites_one(start_repl, workdir):
    repl = start_repl([
        {"function_calls": [{"name": "write_file", "args": {"file_path": "GEMINI.md",
                                                             "content": "# Notes project\n\nRead notes.txt.\n"}}]},
        {"text": "GEMINI.md written."},
    ], "--approval-mode", "auto_edit")
    ask(repl, "/init")
    repl.expect(r"Empty GEMINI\.md created\. Now analyzing the project to populate it\.")
    repl.expect(r"GEMINI\.md written\.")
    repl.expect(PROMPT)
    assert (workdir / "GEMINI.md").read_text() == "# Notes project\n\nRead notes.txt.\n"
    ask(repl, "/init")
    repl.expect(r"A GEMINI\.md file already exists in this directory\. No changes were made\.")
    repl.expect(PROMPT)
    assert (workdir / "GEMINI.md").read_text() == "# Notes project\n\nRead notes.txt.\n"


@pytest.mark.timeout(60)
def test_the_command_shapes_gemini_cli_users_type(start_repl, workdir, tmp_path):
    repl = start_repl([{"function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]},
                       {"text": "The notes say so."}], "--approval-mode", "auto_edit",
                      cols=400)  # /chat share's path on one line, however deep the test's directory
    ask(repl, "/tools nodesc")
    repl.expect(r"read_file\s+read\s+runs")
    repl.expect(PROMPT)
    assert "Reads and returns" not in repl.text.split("/tools nodesc")[-1]
    ask(repl, "/tools desc")
    repl.expect(r"read_file")
    repl.expect(PROMPT)
    ask(repl, "what do the notes say?")
    repl.expect(r"The notes say so\.")
    repl.expect(PROMPT)
    ask(repl, "/chat share talk.md")
    repl.expect(r"Conversation shared to \S+talk\.md")
    repl.expect(PROMPT)
    ask(repl, "/chat share talk.json")
    repl.expect(r"Conversation shared to \S+talk\.json")
    repl.expect(PROMPT)
    ask(repl, "/chat share talk.txt")
    repl.expect(r"Only \.md and \.json are supported")
    repl.expect(PROMPT)
    markdown = (workdir / "talk.md").read_text()
    assert markdown.startswith("## USER 🧑\u200d💻\n\n") and "\n\n---\n\n## MODEL ✨\n\n**Tool Command**:" in markdown
    contents = json.loads((workdir / "talk.json").read_text())
    assert contents[1]["parts"][0]["functionCall"]["name"] == "read_file"  # the API's names
    assert contents[2]["parts"][0]["functionResponse"]["name"] == "read_file"
    ask(repl, "/quit --delete")
    repl.expect(r"Deleted session \S+\.")
    assert repl.wait(timeout=15) == 0
    listed = subprocess.run([sys.executable, "-m", "gemini_split", "-m", f"scripted:{tmp_path / 'script0.json'}",
                             "--list-sessions"], cwd=workdir, env=_environ(tmp_path), capture_output=True,
                            text=True, timeout=30)
    assert listed.returncode == 0, listed.stderr
    assert "notes" not in listed.stdout, listed.stdout


@pytest.mark.timeout(60)
def test_a_choice_longer_than_the_terminal_is_wrapped_not_cut(start_repl, workdir):
    repl = start_repl([{"function_calls": [{"name": "write_file", "args": {"file_path": "w.txt", "content": "w\n"}}]},
                       {"text": "ok"}], cols=50)
    ask(repl, "write w.txt")
    repl.expect(r"❯ 3\. No")
    # "2. Yes, and allow every write_file call for the rest of this session"
    # is 70 columns: its end is on the next line, not cut off.
    assert re.search(r"rest\W*of\W*this\W*session", repl.text), repl.text[-1500:]
    repl.send(ESC)
    repl.expect(r"✗ refused")
    repl.expect(PROMPT)
