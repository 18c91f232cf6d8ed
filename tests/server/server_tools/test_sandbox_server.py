"""Server-side shell commands under bubblewrap (issue 12 §5, "How it is
checked"): in a yolo session, so nothing but the sandbox stops them, a
command that writes outside the workspace (``touch /etc/…``), into the
server user's home, reads ``~/.ssh``, or reaches the network is stopped,
and the canaries are neither read nor written. Each test also runs the
same commands unconfined to show they would have worked (the corpus is
live)."""

from __future__ import annotations

import os
import socket
import uuid

import pytest
import trio

from gemini_split.protocol import GenerateContentRequest, ToolCompleted, ToolError, ToolStarted
from gemini_split.sandbox import Sandbox
from gemini_split.server.model.scripted import ScriptedModel

from .helpers import finish, hello, make_server_tools, serving

SECRET = "SSH-KEY-CANARY-51c2"


@pytest.fixture
def bwrap():
    return Sandbox.resolve("bwrap")  # raises (the test fails) when bwrap does not work here


@pytest.fixture
def home(tmp_path_factory, monkeypatch):
    """The server user's home, outside /tmp (the sandbox's /tmp is private
    anyway: a home there would prove nothing), with a key in ~/.ssh."""
    base = os.path.realpath(os.environ.get("GEMINI_SPLIT_TEST_HOME_BASE", "/var/tmp"))
    home = os.path.join(base, f"gs-home-{uuid.uuid4().hex[:8]}")
    os.makedirs(os.path.join(home, ".ssh"))
    with open(os.path.join(home, ".ssh", "id_ed25519"), "w") as f:
        f.write(SECRET + "\n")
    monkeypatch.setenv("HOME", home)
    yield home
    import shutil

    shutil.rmtree(home, ignore_errors=True)


async def _run(tmp_path, sandbox, commands):
    """Each command in a yolo server-tools session; → [(exit code or None, output)]."""
    calls = [{"name": "run_shell_command", "args": {"command": c}} for c in commands]
    model = ScriptedModel([{"function_calls": calls}, {"text": "done"}])
    async with serving(model, make_server_tools(tmp_path / "ws", sandbox=sandbox)) as (_, address):
        async with hello(address, tools="server", approval_mode="yolo") as (raw, _):
            await raw.send(GenerateContentRequest(prompt="go"))
            events = await finish(raw)
    by_id = {}
    order = []
    for e in events:
        if isinstance(e, ToolCompleted):
            by_id[e.call_id] = (e.result.get("exit_code"), e.result.get("stdout", "") + e.result.get("stderr", ""))
        elif isinstance(e, ToolError):
            by_id[e.call_id] = (None, e.error.message)
    # The calls run side by side: match each result to its command.
    command_of = {e.call_id: e.parameters["command"] for e in events if isinstance(e, ToolStarted)}
    by_command = {command_of[c]: result for c, result in by_id.items()}
    return [by_command[c] for c in commands], events


async def test_writes_outside_the_workspace_and_home_and_reading_ssh_are_stopped(tmp_path, bwrap, home):
    etc_target = f"/etc/gemini-split-canary-{uuid.uuid4().hex[:8]}"
    commands = [f"touch {etc_target}", "touch ~/x", "cat ~/.ssh/id_ed25519", "echo ok > inside.txt && cat inside.txt"]
    try:
        results, events = await _run(tmp_path, bwrap, commands)
        touched_etc = os.path.exists(etc_target)
    finally:
        if os.path.exists(etc_target):
            os.unlink(etc_target)
    assert not touched_etc and not os.path.exists(os.path.join(home, "x"))
    # /etc is read-only and the key is not there to read; ``touch ~/x`` may
    # succeed inside the sandbox, in an empty home that vanishes with it.
    assert results[0][0] != 0 and "Read-only file system" in results[0][1]
    assert results[2][0] != 0
    assert SECRET not in repr(events)
    assert results[3] == (0, "ok\n")  # the workspace itself is writable


async def test_the_network_is_out_of_reach(tmp_path, bwrap):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    try:
        command = f"exec 3<>/dev/tcp/127.0.0.1/{port} && echo REACHED"
        results, _ = await _run(tmp_path, bwrap, [command])
        assert results[0][0] != 0 and "REACHED" not in results[0][1]
        unconfined, _ = await _run(tmp_path / "plain", None, [command])
        assert unconfined[0] == (0, "REACHED\n")  # the test is live: without the sandbox it connects
    finally:
        listener.close()


async def test_without_the_sandbox_the_same_escapes_work(tmp_path, home):
    """Why the sandbox matters (and that the corpus above is live): with
    ``--sandbox none`` a command reads the server user's key."""
    results, _ = await _run(tmp_path, None, ["cat ~/.ssh/id_ed25519", "touch ~/x"])
    assert results[0] == (0, SECRET + "\n") and results[1][0] == 0
    assert os.path.exists(os.path.join(home, "x"))
