"""``gemini-split mcp serve`` driven by the mcp SDK's own client, over stdio
(spawned, as an MCP host spawns it) and over streamable HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import trio

pytestmark = pytest.mark.timeout(90)
#: The program as an MCP host would spawn it (this interpreter, so no PATH is needed).
GS = [sys.executable, "-m", "gemini_split"]


def _text(result) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


@pytest.fixture
def workspace(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello from the workspace\n")
    (tmp_path / "secret.txt").write_text("CANARY-OUTSIDE")
    os.symlink(tmp_path / "secret.txt", ws / "link.txt")
    return ws


async def _exercise(client, workspace) -> None:
    names = {t.name for t in (await client.list_tools()).tools}
    assert {"read_file", "write_file", "replace", "list_directory", "glob", "grep_search",
            "run_shell_command", "web_fetch"} <= names
    read = await client.call_tool("read_file", {"file_path": "notes.txt"})
    assert not read.is_error and "hello from the workspace" in _text(read)
    for escape in ("../secret.txt", "link.txt", str(workspace.parent / "secret.txt")):
        refused = await client.call_tool("read_file", {"file_path": escape})
        assert refused.is_error and refused.structured_content["error"]["code"] == "outside_workspace"
        assert "CANARY" not in _text(refused)
    write = await client.call_tool("write_file", {"file_path": "new.txt", "content": "x"})
    assert write.is_error and write.structured_content["error"]["code"] == "refused"
    assert "approval" in _text(write) and not (workspace / "new.txt").exists()
    bad = await client.call_tool("read_file", {"path": "notes.txt"})
    assert bad.is_error and bad.structured_content["error"]["code"] == "invalid_arguments"


async def test_the_sdk_client_uses_mcp_serve_over_stdio(workspace):
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=GS[0], args=[*GS[1:], "mcp", "serve", "--workspace", str(workspace)],
                                   env={"PATH": os.environ["PATH"]})
    with trio.fail_after(60):
        async with Client(params) as client:
            await _exercise(client, workspace)


async def test_shell_chaining_is_refused_exactly_as_for_the_model(workspace):
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=GS[0], args=[
        *GS[1:], "mcp", "serve", "--workspace", str(workspace), "--allowed-tools", "run_shell_command(echo)"])
    with trio.fail_after(60):
        async with Client(params) as client:
            ok = await client.call_tool("run_shell_command", {"command": "echo fine"})
            assert not ok.is_error and "fine" in _text(ok)
            for attack in ["echo x && touch FLAG", "echo $(touch FLAG)", "echo x; touch FLAG",
                           "echo `touch FLAG`", "bash -c 'touch FLAG'", "echo x | sh -c 'touch FLAG'"]:
                refused = await client.call_tool("run_shell_command", {"command": attack})
                assert refused.is_error, attack
    assert not (workspace / "FLAG").exists()


def _start_http(workspace, *extra: str, env=None):
    proc = subprocess.Popen([*GS, "mcp", "serve", "--workspace", str(workspace), "--http", "127.0.0.1:0", *extra],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    line = proc.stderr.readline()
    assert "MCP on http://127.0.0.1:" in line, line + proc.stderr.read()
    return proc, line.split("MCP on ")[1].split()[0]


async def test_the_sdk_client_uses_mcp_serve_over_http_with_a_bearer_token(workspace, tmp_path):
    from mcp import Client
    from mcp.shared._httpx_utils import create_mcp_http_client
    from mcp.client.streamable_http import streamable_http_client

    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"tokens": {"s3cret-token-1": {"userId": "alice"}}}))
    proc, url = _start_http(workspace, "--auth-config", str(tokens))
    try:
        with trio.fail_after(60):
            transport = streamable_http_client(url, http_client=create_mcp_http_client(
                headers={"Authorization": "Bearer s3cret-token-1"}))
            async with Client(transport) as client:
                await _exercise(client, workspace)
            import httpx

            async with httpx.AsyncClient() as http:
                for headers in ({}, {"Authorization": "Bearer wrong-token"}):
                    response = await http.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                               headers=headers)
                    assert response.status_code == 401
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=10)
    assert "s3cret-token-1" not in err


def test_mcp_serve_refuses_a_non_loopback_address_without_tokens(workspace):
    result = subprocess.run([*GS, "mcp", "serve", "--http", "0.0.0.0:0", "--workspace", str(workspace)],
                            capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert result.returncode == 2
    assert "without --auth-config" in result.stderr


def _exposed_in_docs() -> list[str]:
    """The tools docs/mcp.md says ``mcp serve`` exposes (its list, in order)."""
    import re
    from pathlib import Path

    doc = (Path(__file__).parents[3] / "docs" / "mcp.md").read_text()
    listed = doc[doc.index("speaks MCP on stdio and exposes"):]
    return re.findall(r"`([a-z_]+)`", listed[:listed.index("with exactly")])


async def test_mcp_serve_lists_exactly_the_tools_docs_mcp_md_names_and_no_plan_mode(workspace):
    from mcp import Client, StdioServerParameters

    params = StdioServerParameters(command=GS[0], args=[*GS[1:], "mcp", "serve", "--workspace", str(workspace)],
                                   env={"PATH": os.environ["PATH"]})
    with trio.fail_after(60):
        async with Client(params) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            planned = await client.call_tool("enter_plan_mode", {})
    assert names == _exposed_in_docs()
    assert "enter_plan_mode" not in names and "exit_plan_mode" not in names  # meaningless to an MCP host
    assert planned.is_error


async def test_a_refusal_names_mcp_serves_real_approval_mode_and_how_to_allow_it(workspace):
    from mcp import Client, StdioServerParameters

    texts = {}
    for mode in ("default", "auto_edit"):
        params = StdioServerParameters(command=GS[0], args=[
            *GS[1:], "mcp", "serve", "--workspace", str(workspace), "--approval-mode", mode],
            env={"PATH": os.environ["PATH"]})
        with trio.fail_after(60):
            async with Client(params) as client:
                refused = await client.call_tool("run_shell_command", {"command": "echo hi"})
        assert refused.is_error and refused.structured_content["error"]["code"] == "refused"
        texts[mode] = _text(refused)
    for mode, text in texts.items():
        assert f"mcp serve --approval-mode {mode}" in text, text  # the mode it really runs in
        assert "asks before" not in text and "non-interactive" not in text, text  # nothing here asks anyone
        assert "--allowed-tools" in text and "yolo" in text, text  # how to allow it
