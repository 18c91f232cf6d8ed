"""MCP prompts, resources and /mcp's sub-commands in the REPL, through a
pseudo-terminal, against a real MCP server built on the SDK's ``MCPServer``
(tests/client/mcp/prompt_server.py). The scripted model echoes what it is
sent, so each test sees the turn the user's command made."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 - fixtures

PROMPT_SERVER = str(Path(__file__).resolve().parents[2] / "client" / "mcp" / "prompt_server.py")
pytestmark = pytest.mark.timeout(90)


def _home(tmp_path: Path, **env: str) -> Path:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"mcpServers": {
        "notes": {"command": sys.executable, "args": [PROMPT_SERVER], "env": env}}}))
    return home


def test_a_servers_prompts_are_slash_commands_with_named_and_positional_arguments(start_repl, tmp_path):
    _home(tmp_path)
    repl = start_repl([])
    ask(repl, '/poem-writer --title="Gemini CLI" --mood=reverent')
    repl.expect(r"Echo: Write a haiku with the mood reverent called Gemini CLI\.", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/poem-writer Gemini CLI")  # one required argument takes every positional word
    repl.expect(r"Echo: Write a haiku called Gemini CLI\.", timeout=30)
    repl.expect(PROMPT)
    ask(repl, '/review "a b.py" c.py')
    repl.expect(r"Echo: Compare a b\.py with c\.py and say which is better\.", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/review a.py")  # a bad call: the error, then the prompt's usage; nothing is sent
    repl.expect(r"Missing required argument\(s\): --second")
    repl.expect(r'Arguments for "review":')
    repl.expect(r"--first\s+\(required: yes\)")
    repl.expect(PROMPT)
    ask(repl, "/standup help")
    repl.expect(r'Prompt "standup" has no arguments\.')
    repl.expect(PROMPT)
    ask(repl, "/help")
    repl.expect(r"/poem-writer \[ARGS\]\s+Write a nice haiku \(MCP server notes\)")
    repl.expect(PROMPT)
    repl.type("/poem")
    repl.send("\t")  # completion offers the prompt
    repl.expect(r"/poem-writer")


def test_mcp_desc_lists_tools_prompts_and_resources_and_at_server_uri_reads_one(start_repl, tmp_path):
    _home(tmp_path)
    repl = start_repl([])
    ask(repl, "/mcp desc")
    repl.expect(r"Configured MCP servers:", timeout=30)
    repl.expect(r"notes - Ready \(1 tool, 3 prompts, 2 resources\)", timeout=30)
    repl.expect(r"Tools:\s+- mcp_notes_echo\s+Echoes the text back\.")
    repl.expect(r"Prompts:\s+- poem-writer\s+Write a nice haiku")
    repl.expect(r"Resources:\s+- today \(notes://today\) \[text/plain\]\s+Today's notes")
    repl.expect(PROMPT)
    ask(repl, "/mcp schema")
    repl.expect(r"Parameters:")
    repl.expect(r'"required": \[\s+"text"')
    repl.expect(PROMPT)
    repl.type("what is in @notes:notes://t")
    repl.send("\t")  # the resource completes, as a path does
    repl.expect(r"@notes:notes://today")
    repl.send("\x15")  # Ctrl-U: clear the line
    ask(repl, "what is in @notes:notes://today")
    repl.expect(r"Content from @notes://today:\s+NOTES-OF-TODAY: buy milk, fix the build", timeout=30)
    repl.expect(PROMPT)


def test_the_model_lists_and_reads_resources_in_plan_mode_without_asking(start_repl, tmp_path):
    _home(tmp_path)
    repl = start_repl([{"function_calls": [{"name": "list_mcp_resources", "args": {}},
                                           {"name": "read_mcp_resource", "args": {"uri": "notes://today"}},
                                           {"name": "read_mcp_resource", "args": {"uri": "notes:notes://data.bin"}}]}],
                      "--approval-mode", "plan")
    ask(repl, "what notes are there?")
    repl.expect(r"Tool results:", timeout=30)
    repl.expect(r"Available MCP Resources:\\n- notes:notes://today \| today \| Today's notes")
    repl.expect(r"NOTES-OF-TODAY: buy milk")
    repl.expect(r"\[Binary\s+Data \(application/octet-stream\)\]")  # may wrap
    repl.expect(PROMPT)


def test_disable_and_enable_stop_and_start_a_server_and_its_prompts(start_repl, tmp_path):
    starts = tmp_path / "starts.txt"
    home = _home(tmp_path, PROMPT_SERVER_STARTS=str(starts))
    repl = start_repl([])
    ask(repl, "/mcp")
    repl.expect(r"notes - Ready", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/mcp reload")
    repl.expect(r"Reloading MCP servers\.\.\.")
    repl.expect(r"notes - Ready \(1 tool, 3 prompts, 2 resources\)", timeout=30)
    repl.expect(PROMPT)
    assert len(starts.read_text().splitlines()) == 2  # restarted
    ask(repl, "/mcp disable notes --session")
    repl.expect(r"MCP server 'notes' disabled for this session\.", timeout=30)
    repl.expect(PROMPT)
    assert not (home / "mcp-server-enablement.json").exists()  # a session's choice is not written
    ask(repl, "/mcp")
    repl.expect(r"notes - Disabled \(session\)")
    repl.expect(PROMPT)
    ask(repl, "/standup")
    repl.expect(r"unknown command /standup")
    repl.expect(PROMPT)
    ask(repl, "/mcp enable notes --session")
    repl.expect(r"MCP server 'notes' enabled for this session\.", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/mcp disable Notes")
    repl.expect(r"MCP server 'notes' disabled\.", timeout=30)
    repl.expect(PROMPT)
    assert json.loads((home / "mcp-server-enablement.json").read_text()) == {"notes": {"enabled": False}}
    ask(repl, "/mcp")
    repl.expect(r"notes - Disabled")
    repl.expect(PROMPT)
    ask(repl, "/mcp enable nobody")
    repl.expect(r"Server 'nobody' not found\. Use /mcp list to see available servers\.")
    repl.expect(PROMPT)
    ask(repl, "/mcp enable notes")
    repl.expect(r"MCP server 'notes' enabled\.", timeout=30)
    repl.expect(PROMPT)
    assert json.loads((home / "mcp-server-enablement.json").read_text()) == {}
    ask(repl, "/standup")
    repl.expect(r"Echo: Summarise what I did today in three bullet points\.", timeout=30)
    repl.expect(PROMPT)


def test_against_a_server_the_clients_mcp_prompts_and_resources_still_work(start_repl, tmp_path):
    """The MCP servers run with the client's tools: connected to a server
    (serve --stdio, its own scripted model echoing), the prompts and
    resources are the client's and the server sees only the text."""
    import shlex

    _home(tmp_path)
    daemon_script = tmp_path / "daemon.json"
    daemon_script.write_text("[]")
    command = shlex.join([sys.executable, "-m", "gemini_split", "serve", "--stdio", "-m", f"scripted:{daemon_script}"])
    repl = start_repl([])
    ask(repl, f"/server add box 'stdio:{command}'")
    repl.expect(r"Added profile box: stdio:")
    repl.expect(PROMPT)
    ask(repl, "/server connect box")
    repl.expect(r"Connected: box · session", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/review one.py two.py")
    repl.expect(r"Echo: Compare one\.py with two\.py and say which is better\.", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/mcp")
    repl.expect(r"notes - Ready \(1 tool, 3 prompts, 2 resources\)", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "read @notes:notes://today")
    repl.expect(r"Content from @notes://today:\s+NOTES-OF-TODAY", timeout=30)
    repl.expect(PROMPT)
