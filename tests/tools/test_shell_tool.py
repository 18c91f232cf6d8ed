"""run_shell_command: real processes, streamed, bounded, and cleaned up."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import trio

from gemini_split.tools.approval import ApprovalMode
from gemini_split.tools.registry import ToolRegistry
from gemini_split.tools.builtin.shell import RunShellCommandTool
from gemini_split.tools.workspace import Workspace
from gemini_split.protocol import ToolDelta, ToolError

from .conftest import Env


def gone(pid: int) -> bool:
    """Dead: no such process, or a zombie nobody has reaped yet."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat[stat.rfind(")") + 2] in "ZX"


def shell(env: Env, **kw):
    return env.executor(ApprovalMode.YOLO, registry=ToolRegistry([RunShellCommandTool(**kw)]))


async def test_exit_code_stdout_stderr(env: Env):
    out = await env.run("run_shell_command", {"command": "echo out; echo err >&2; exit 3", "description": "demo"})
    assert out.failure is None
    r = out.result
    assert (r["command"], r["directory"], r["exit_code"], r["stdout"], r["stderr"]) == (
        "echo out; echo err >&2; exit 3", ".", 3, "out\n", "err\n")
    streams = {(d.stream, d.content) for d in out.deltas}
    assert ("stdout", "out\n") in streams and ("stderr", "err\n") in streams
    out = await env.run("run_shell_command", {"command": "kill -TERM $$"})
    assert out.result["exit_code"] is None and out.result["signal"] == "SIGTERM"


async def test_runs_in_dir_path_inside_the_workspace(env: Env):
    (env.root / "sub").mkdir()
    out = await env.run("run_shell_command", {"command": "pwd", "dir_path": "sub"})
    assert out.result["stdout"] == f"{env.root / 'sub'}\n" and out.result["directory"] == "sub"
    out = await env.run("run_shell_command", {"command": "pwd"})
    assert out.result["stdout"] == f"{env.root}\n"
    for bad, code in [("..", "outside_workspace"), (str(env.outside), "outside_workspace"), ("nope", "not_found")]:
        out = await env.run("run_shell_command", {"command": "touch x", "dir_path": bad})
        assert out.failure.code == code
    assert env.canaries_intact()


async def test_output_streams_while_the_command_runs(env: Env):
    """The command waits for a file that the test only creates once the
    first line has arrived as a delta: without live streaming it would hang."""
    go = env.root / "GO"
    events = []

    async def emit(event):
        events.append(event)
        if isinstance(event, ToolDelta) and "first" in event.content:
            go.write_text("")

    command = "echo first; while [ ! -f GO ]; do sleep 0.02; done; echo second"
    with trio.fail_after(10):
        result, failure = await shell(env, timeout=10).execute("c", "run_shell_command", {"command": command}, emit)
    assert failure is None and result["stdout"] == "first\nsecond\n"
    assert [e.content for e in events if isinstance(e, ToolDelta)] == ["first\n", "second\n"]


async def test_timeout_kills_the_whole_group(env: Env):
    command = "sh -c 'sleep 30 & echo $!; wait' & echo $!; wait"  # a grandchild sleep, and its parent
    start = time.monotonic()
    out = await env.run("run_shell_command", {"command": command}, executor=shell(env, timeout=1.0, kill_grace=0.5))
    assert time.monotonic() - start < 5
    assert out.failure is not None and out.failure.code == "timeout"
    assert "timed out after 1 s" in out.failure.message and "stdout so far" in out.failure.message
    pids = [int(p) for p in re.findall(r"\d+", "".join(d.content for d in out.deltas))]
    assert len(pids) == 2
    for pid in pids:
        assert gone(pid), pid


async def test_term_is_followed_by_kill(env: Env):
    command = "trap '' TERM; echo ready; while true; do sleep 0.05; done"
    start = time.monotonic()
    out = await env.run("run_shell_command", {"command": command}, executor=shell(env, timeout=0.5, kill_grace=0.3))
    assert out.failure.code == "timeout" and time.monotonic() - start < 4


async def test_cancel_kills_the_group(env: Env):
    events = []
    pid_seen = trio.Event()

    async def emit(event):
        events.append(event)
        if isinstance(event, ToolDelta):
            pid_seen.set()

    executor = shell(env, timeout=60, kill_grace=0.5)
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            async def call():
                await executor.execute("c", "run_shell_command", {"command": "sleep 30 & echo $!; wait"}, emit)

            nursery.start_soon(call)
            await pid_seen.wait()
            nursery.cancel_scope.cancel()
    pid = int("".join(e.content for e in events if isinstance(e, ToolDelta)).strip())
    assert gone(pid)
    assert isinstance(events[-1], ToolError) and events[-1].error.code == "cancelled"


async def test_background_leftovers_are_stopped(env: Env):
    start = time.monotonic()
    out = await env.run("run_shell_command", {"command": "sleep 30 & echo $!"}, executor=shell(env, kill_grace=0.5))
    assert time.monotonic() - start < 5
    assert out.failure is None and out.result["exit_code"] == 0
    assert "background" in out.result["note"]
    assert gone(int(out.result["stdout"]))


async def test_output_cap(env: Env):
    out = await env.run("run_shell_command", {"command": "seq 1 20000"}, executor=shell(env, max_output=1000))
    r = out.result
    assert r["exit_code"] == 0 and "characters omitted" in r["stdout"]
    assert r["stdout"].startswith("1\n2\n") and r["stdout"].endswith("19999\n20000\n")
    assert len(r["stdout"]) < 1200 and "stdout was truncated" in r["note"]
    shown = "".join(d.content for d in out.deltas)
    assert len(shown) < 1200 and "not shown live" in shown


async def test_runaway_output_is_stopped(env: Env):
    start = time.monotonic()
    out = await env.run("run_shell_command", {"command": "yes"}, executor=shell(env, max_output=100, kill_grace=0.5))
    assert time.monotonic() - start < 5
    assert out.failure is None and "output exceeded" in out.result["note"] and out.result["signal"]


async def test_environment_and_stdin(env: Env):
    out = await env.run("run_shell_command", {"command": "echo $GEMINI_CLI; cat"})
    assert out.result["stdout"] == "1\n"  # stdin is empty: cat does not wait


async def test_refuses_empty_and_nul(env: Env):
    for command in ["", "   ", "echo a\x00b"]:
        out = await env.run("run_shell_command", {"command": command})
        assert out.failure.code == "invalid_arguments"


async def test_describe_shows_the_full_command(env: Env):
    (env.root / "sub").mkdir()
    tool = RunShellCommandTool()
    command = "git log --oneline | head -n 5 && rm -rf 'build dir'"
    text = tool.describe({"command": command, "dir_path": "sub", "description": "tidy"}, env.workspace)
    assert text == f"Run in sub:\n{command}\n(tidy)"


def test_describe_names_a_workspace_the_approver_is_not_in(tmp_path):
    (tmp_path / "sub").mkdir()
    workspace = Workspace(tmp_path, place="the server workspace /srv/ws/s-1")
    tool = RunShellCommandTool()
    assert tool.describe({"command": "make"}, workspace) == "Run in the server workspace /srv/ws/s-1:\nmake"
    assert tool.describe({"command": "make", "dir_path": "sub"}, workspace) == \
        "Run in sub in the server workspace /srv/ws/s-1:\nmake"
    assert tool.describe({"command": "make", "dir_path": "gone"}, workspace) == \
        "Run in gone in the server workspace /srv/ws/s-1:\nmake"


async def test_utf8_split_across_reads(env: Env):
    out = await env.run("run_shell_command", {"command": "printf '\\xc3'; sleep 0.05; printf '\\xa9\\n'"})
    assert out.result["stdout"] == "é\n"
    assert os.path.exists(env.root)


async def test_relative_path_entries_are_dropped(env: Env, monkeypatch):
    """With '.' or an empty entry in PATH, a script the model wrote could
    stand in for an allowed command; the shell never sees such entries."""
    script = env.root / "mycmd"
    script.write_text("#!/bin/sh\necho hijacked\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", ".::" + os.environ["PATH"] + ":bin")
    out = await env.run("run_shell_command", {"command": "mycmd; echo $PATH"})
    assert out.result["exit_code"] == 0 and "hijacked" not in out.result["stdout"]
    assert out.result["stdout"].strip() == os.environ["PATH"].removeprefix(".::").removesuffix(":bin")
