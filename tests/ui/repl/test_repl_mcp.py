"""MCP servers in the REPL, through a pseudo-terminal: the prompt does not
wait for them, /mcp shows each server's state, the first prompt brings their
tools and reports a broken server by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 - fixtures

ODDBALL = str(Path(__file__).resolve().parents[2] / "client" / "mcp" / "oddball_server.py")
pytestmark = pytest.mark.timeout(60)


def test_mcp_servers_show_in_the_repl_and_join_at_the_first_prompt(start_repl, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"mcpServers": {
        "odd": {"command": sys.executable, "args": [ODDBALL]},
        "broken": {"command": str(tmp_path / "no-such-server")},
    }}))
    repl = start_repl([{"text": "first answer"}])
    ask(repl, "hello")
    repl.expect(r"MCP server 'broken' failed: command not found", timeout=30)
    repl.expect(r"first answer", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/mcp tools")
    repl.expect(r"Configured MCP servers:")
    repl.expect(r"odd - Ready \(7 tools\)")
    repl.expect(r"skipped bad schema!: its input schema is invalid")
    repl.expect(r"- mcp_odd_add")
    repl.expect(r"broken - Disconnected")
    repl.expect(r"Error: command not found")
    ask(repl, "/tools")
    repl.expect(r"mcp_odd_add\s+execute\s+asks first")


def test_mcp_shows_live_status_when_the_tools_came_from_the_cache(start_repl, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"mcpServers": {
        "odd": {"command": sys.executable, "args": [ODDBALL]}}}))
    first = start_repl([{"text": "first answer"}])
    ask(first, "hello")
    first.expect(r"first answer", timeout=30)
    first.expect(PROMPT)
    first.send("\x04")
    assert first.wait(timeout=20) == 0
    assert len(list((home / "mcp-cache").glob("*.json"))) == 1  # its tools are cached now

    repl = start_repl([{"text": "second answer"}])
    ask(repl, "hello again")
    repl.expect(r"second answer", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/mcp")
    repl.expect(r"odd - Ready \(7 tools\)", timeout=30)  # started for /mcp
    repl.expect(r"skipped bad schema!: its input schema is invalid")


def test_mcp_lists_a_sub_agents_own_servers_marked_with_their_sub_agent(start_repl, tmp_path):
    home = tmp_path / "home"
    (home / "agents").mkdir(parents=True)
    (home / "settings.json").write_text(json.dumps({"mcpServers": {
        "odd": {"command": sys.executable, "args": [ODDBALL]}}}))
    (home / "agents" / "x.md").write_text(
        f"---\nname: x\ndescription: Has its own servers.\nmcpServers:\n"
        f"  mine:\n    command: {json.dumps(sys.executable)}\n    args: [{json.dumps(ODDBALL)}]\n"
        f"  gone:\n    command: {json.dumps(str(tmp_path / 'no-such-server'))}\n---\nYou are X.\n")
    repl = start_repl([{"text": "first answer"}])
    ask(repl, "hello")
    repl.expect(r"first answer", timeout=30)
    repl.expect(PROMPT)
    ask(repl, "/mcp desc")
    repl.expect(r"odd - Ready \(7 tools\)", timeout=30)  # the session's own first
    repl.expect(r"mine \(sub-agent x\) - Ready \(7 tools\)", timeout=30)
    repl.expect(r"skipped bad schema!: its input schema is invalid")
    repl.expect(r"- mcp_mine_add\s+adds a and b")
    repl.expect(r"gone \(sub-agent x\) - Disconnected")
    repl.expect(r"Error: command not found")
    repl.expect(PROMPT)
