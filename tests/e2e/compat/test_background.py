"""Background shell commands as gemini-cli runs them: run_shell_command with
is_background returns a pid and first output at once; the command keeps
running; read_background_output tails it; all die with the client."""

from __future__ import annotations

import os
import time

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, Sandbox

pytestmark = pytest.mark.timeout(60)


def _outputs(request):
    return [p["functionResponse"]["response"] for c in request["body"]["contents"]
            for p in c["parts"] if "functionResponse" in p]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (not yet reaped by anyone) counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def test_a_background_command_runs_on_and_stops_with_the_client(tmp_path):
    box = Sandbox(tmp_path).setup()
    start = {"function_calls": [{"name": "run_shell_command", "args": {
        "command": "echo started; sleep 60", "is_background": True, "delay_ms": 300}}]}
    began = time.monotonic()
    with FakeGemini(script=[start, {"text": "it runs"}], api_key=API_KEY) as fake:
        result = box.run(["-p", "start the server", "--approval-mode", "yolo"], fake=fake)
        first = _outputs(fake.requests[-1])[0]["output"]
    assert result.status == 0, result.stderr
    assert first["status"] == "running" and "started" in first["output"]
    assert time.monotonic() - began < 30  # did not wait for the command to end
    pid = first["pid"]
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)  # the one-shot client ended: its background command ended too


async def test_read_background_output_tails_the_log(tmp_path):
    import trio

    from gemini_split.tools.builtin.background import BackgroundProcesses, ReadBackgroundOutputTool
    from gemini_split.tools.base import ToolContext, ToolFailed
    from gemini_split.tools.workspace import Workspace

    processes = BackgroundProcesses()
    try:
        entry = await trio.to_thread.run_sync(
            processes.start, ["/bin/sh", "-c", "for i in 1 2 3 4 5; do echo line $i; done; sleep 30"],
            "for i in 1 2 3 4 5; do echo line $i; done; sleep 30", tmp_path, ".", dict(os.environ))
        tool = ReadBackgroundOutputTool(processes)
        ctx = ToolContext(workspace=Workspace(tmp_path))
        out = await tool.run({"pid": entry.pid, "lines": 2, "delay_ms": 500}, ctx)
        assert out["output"] == "line 4\nline 5" and out["status"] == "running"
        assert out["note"] == "earlier output not shown"
        with pytest.raises(ToolFailed):
            await tool.run({"pid": 1}, ctx)
    finally:
        processes.close()
    assert not _alive(entry.pid)


def test_read_background_output_and_list_in_one_session(tmp_path):
    box = Sandbox(tmp_path).setup()
    script = [
        {"function_calls": [{"name": "run_shell_command", "args": {
            "command": "for i in 1 2 3 4 5; do echo line $i; done; sleep 30", "is_background": True}}]},
        {"function_calls": [{"name": "list_background_processes", "args": {}}]},
        {"text": "done"},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        result = box.run(["-p", "go", "-y"], fake=fake)
        started, listing = _outputs(fake.requests[-1])
    assert result.status == 0, result.stderr
    pid = started["output"]["pid"]
    assert f"pid {pid}: running" in listing["output"] and "sleep 30" in listing["output"]
