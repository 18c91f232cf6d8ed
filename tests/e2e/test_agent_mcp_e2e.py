"""Issue 32, (1.5): a sub-agent definition's own ``mcpServers`` end to end.
``gemini-split -p`` (embedded server) against the fake Gemini server; the
MCP server is a real one from PyPI (``mcp-server-time``, over stdio),
declared in the project's ``.gemini/agents/x.md``. What each model request
offered is read from the fake's recorded request bodies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from tests.e2e.test_subagents_e2e import API_KEY, MAIN, model_requests, run, system_of, tool_names, write_agent

pytestmark = pytest.mark.timeout(120)

TIME_TOOL = "mcp_time_get_current_time"
#: What mcp-server-time lists, as gemini-cli names an MCP server's tools.
TIME_TOOLS = [TIME_TOOL, "mcp_time_convert_time"]


def time_server(name: str = "time") -> str:
    """The ``mcpServers`` YAML of a real ``mcp-server-time`` named ``name``."""
    return (f"mcpServers:\n  {name}:\n    command: {json.dumps(sys.executable)}\n"
            "    args: ['-m', 'mcp_server_time', '--local-timezone', 'UTC']")


def spy_server(marker: Path) -> str:
    """The ``mcpServers`` YAML of a server whose start leaves ``marker``."""
    code = f"import pathlib; pathlib.Path({str(marker)!r}).touch()"
    return f"mcpServers:\n  spy:\n    command: {json.dumps(sys.executable)}\n    args: ['-c', {json.dumps(code)}]"


def project_agents(tmp_path: Path) -> Path:
    return tmp_path / "proj" / ".gemini" / "agents"


def test_only_the_owning_sub_agent_is_offered_its_mcp_tool_and_its_call_runs_on_the_real_server(tmp_path):
    path = write_agent(project_agents(tmp_path), "x", "name: x\ndescription: Tells the time.\ntools: [read_file]\n"
                       + time_server(), "You are X.")
    write_agent(tmp_path / "home" / "agents", "y", "name: y\ndescription: Does anything.", "You are Y.")
    script = [
        {"system_contains": MAIN, "function_calls": [{"name": "x", "args": {"query": "what time is it?"}},
                                                     {"name": "y", "args": {"query": "anything"}}]},
        {"system_contains": "You are X.", "function_calls": [{"name": TIME_TOOL, "args": {"timezone": "UTC"}}]},
        {"system_contains": "You are X.", "function_calls": [{"name": "complete_task",
                                                              "args": {"result": "x has the time"}}]},
        {"system_contains": "You are Y.", "function_calls": [{"name": "complete_task", "args": {"result": "y"}}]},
        {"system_contains": MAIN, "text": "Both reported."},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "go", "--yolo", trusted=True)
        requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Both reported.\n"
    x = [r for r in requests if "You are X." in system_of(r)]
    y = [r for r in requests if "You are Y." in system_of(r)]
    main = [r for r in requests if "You are X." not in system_of(r) and "You are Y." not in system_of(r)]
    # x gets its own server's tool beside what its `tools` grant; nobody else ever sees it.
    assert tool_names(x[0]) == ["read_file", *TIME_TOOLS, "complete_task"]
    assert all(not set(TIME_TOOLS) & set(tool_names(r)) for r in main + y) and len(main) == 2 and y
    assert "read_file" in tool_names(y[0])  # y was offered the session's tools, just not x's own
    # The real server answered x's call: its result is in x's next request.
    answered = json.dumps(x[1]["body"]["contents"])
    assert '\\"timezone\\": \\"UTC\\"' in answered and '\\"datetime\\"' in answered
    assert "x has the time" in json.dumps(main[-1]["body"]["contents"])
    # The server's configuration stayed on the client: the definition's command is nowhere the model saw.
    assert "mcp_server_time" not in json.dumps([r["body"] for r in requests])
    assert str(path) not in done.stderr  # it started: nothing to report


def test_the_main_agent_calling_a_sub_agents_own_mcp_tool_is_refused(tmp_path):
    write_agent(project_agents(tmp_path), "x", "name: x\ndescription: Tells the time.\n" + time_server(),
                "You are X.")
    script = [
        {"system_contains": MAIN, "function_calls": [{"name": TIME_TOOL, "args": {"timezone": "UTC"}}]},
        {"system_contains": MAIN, "text": "Could not."},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "go", "--yolo", "-o", "json", trusted=True)
        requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    answered = json.dumps(requests[-1]["body"]["contents"])
    assert f"{TIME_TOOL} is a tool of sub-agent x's own MCP servers: the main agent may not call it" in answered
    assert "datetime" not in answered  # the server was never called


def test_an_untrusted_folders_project_agent_starts_no_process(tmp_path):
    marker = tmp_path / "started"
    starts = spy_server(marker)
    write_agent(project_agents(tmp_path), "x", "name: x\ndescription: Spies.\n" + starts, "You are X.")
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "hi")
        (request,) = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert not marker.exists() and "x" not in tool_names(request)
    # The control: trusted, the same definition does start its server.
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "hi", trusted=True)
        (request,) = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert marker.exists() and "x" in tool_names(request)


def test_a_server_that_cannot_start_is_reported_with_path_and_name_and_the_sub_agent_runs_without_it(tmp_path):
    missing = tmp_path / "no-such-server"
    path = write_agent(project_agents(tmp_path), "x",
                       f"name: x\ndescription: Tells the time.\ntools: [read_file]\n{time_server()}\n"
                       f"  broken:\n    command: {json.dumps(str(missing))}", "You are X.")
    script = [
        {"system_contains": MAIN, "function_calls": [{"name": "x", "args": {"query": "time?"}}]},
        {"system_contains": "You are X.", "function_calls": [{"name": "complete_task", "args": {"result": "ok"}}]},
        {"system_contains": MAIN, "text": "Done."},
    ]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        done = run(tmp_path, fake, "-p", "go", "--yolo", trusted=True)
        requests = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Done.\n"
    assert (f"agents: {path}: MCP server 'broken' of sub-agent x failed: command not found: {missing}"
            in done.stderr)
    x = next(r for r in requests if "You are X." in system_of(r))
    assert tool_names(x) == ["read_file", *TIME_TOOLS, "complete_task"]  # its other server still serves it


def test_with_tools_on_the_server_the_sub_agents_own_servers_are_not_started_and_that_is_said(tmp_path):
    from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY, daemon
    from tests.server.server_tools.helpers import unix_listener

    marker, project = tmp_path / "started", tmp_path / "project"
    project.mkdir()
    write_agent(tmp_path / "home" / "agents", "x", "name: x\ndescription: Spies.\n" + spy_server(marker), "X.")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(GEMINI_SPLIT_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    with FakeGemini(script=[{"text": "ok"}], api_key=SERVE_KEY) as fake, unix_listener() as listen, \
            daemon(tmp_path, fake, "--server-tools", "--sandbox", "none", "--workspace-root",
                   str(tmp_path / "workspaces"), "--project", f"proj={project}", *listen) as (_proc, address):
        done = subprocess.run(
            [sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server",
             "--project", "proj", "-p", "hi"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=90)
        (request,) = model_requests(fake)
    assert done.returncode == 0, done.stderr
    assert not marker.exists()
    assert "the sub-agents' own MCP servers (x: spy) are not used: the session's tools run on the server" \
        in done.stderr
    assert "x" in tool_names(request)  # it is still offered, with the server's tools


def test_with_tools_on_the_server_the_sessions_and_an_extensions_mcp_servers_are_not_started_and_that_is_said(
        tmp_path):
    """Issue 42: an extension's MCP server (and settings.json's) under
    ``--tools server`` were silently not offered; now not started, and said."""
    from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY, daemon
    from tests.server.server_tools.helpers import unix_listener

    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    settings_marker, ext_marker = tmp_path / "settings-started", tmp_path / "ext-started"
    ext = home / "extensions" / "spyext"
    ext.mkdir(parents=True)
    spy = "import pathlib, sys; pathlib.Path(sys.argv[1]).touch()"
    (ext / "gemini-extension.json").write_text(json.dumps({"name": "spyext", "version": "1.0.0", "mcpServers": {
        "extspy": {"command": sys.executable, "args": ["-c", spy, str(ext_marker)]}}}))
    (home / "settings.json").write_text(json.dumps({"mcpServers": {
        "mine": {"command": sys.executable, "args": ["-c", spy, str(settings_marker)]}}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI", "GOOGLE"))}
    env.update(GEMINI_SPLIT_HOME=str(home), HOME=str(tmp_path))
    with FakeGemini(script=[{"text": "ok"}], api_key=SERVE_KEY) as fake, unix_listener() as listen, \
            daemon(tmp_path, fake, "--server-tools", "--sandbox", "none", "--workspace-root",
                   str(tmp_path / "workspaces"), "--project", f"proj={project}", *listen) as (_proc, address):
        done = subprocess.run(
            [sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server",
             "--project", "proj", "-p", "hi"], cwd=tmp_path, env=env, stdin=subprocess.DEVNULL,
            capture_output=True, text=True, timeout=90)
    assert done.returncode == 0, done.stderr
    assert not settings_marker.exists() and not ext_marker.exists()
    assert "MCP servers configured here, in settings.json or by an extension (extspy, mine), are not used: the " \
           "session's tools run on the server (--tools server)" in done.stderr
