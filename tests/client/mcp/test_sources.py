"""MCP servers as tool sources, against real servers: mcp-server-time and
mcp-server-git from PyPI, and a real SDK server with awkward answers."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import trio

from gemini_split.tools.mcp.sources import open_mcp_servers
from gemini_split.tools.base import ToolFailed
from gemini_split.userfiles.settings import MCPServerSettings

ODDBALL = str(Path(__file__).with_name("oddball_server.py"))
pytestmark = pytest.mark.timeout(60)


def _stdio(*args: str, **kw) -> MCPServerSettings:
    return MCPServerSettings(command=sys.executable, args=list(args), **kw)


def _tools(servers) -> dict:
    return {t.name: t for t in servers.tools()}


async def test_real_servers_start_in_parallel_and_their_tools_answer(tmp_path):
    configs = {
        "time": _stdio("-m", "mcp_server_time", "--local-timezone", "UTC"),
        "git": _stdio("-m", "mcp_server_git", "--repository", str(Path.cwd())),
    }
    with trio.fail_after(40):
        async with open_mcp_servers(configs, cwd=tmp_path) as servers:
            statuses = {s.name: s for s in servers.statuses()}
            assert statuses["time"].state == "ready" and statuses["git"].state == "ready"
            tools = _tools(servers)
            assert "mcp_time_get_current_time" in tools and "mcp_git_git_status" in tools
            now = await tools["mcp_time_get_current_time"].run({"timezone": "UTC"}, None)
            assert '"timezone": "UTC"' in now
            with pytest.raises(ToolFailed) as failed:
                await tools["mcp_time_get_current_time"].run({"timezone": "Nowhere/Nope"}, None)
            assert failed.value.code == "tool_error" and "Nowhere/Nope" in str(failed.value)


async def test_a_broken_server_is_reported_by_name_and_the_others_go_on(tmp_path):
    configs = {
        "missing": MCPServerSettings(command=str(tmp_path / "no-such-server")),
        "exits": _stdio("-c", "import sys; print('cannot start: no config', file=sys.stderr); sys.exit(3)"),
        "garbage": _stdio("-c", "import time\nwhile True:\n print('garbage on stdout', flush=True); time.sleep(0.05)"),
        "odd": _stdio(ODDBALL),
    }
    with trio.fail_after(30):
        async with open_mcp_servers(configs, cwd=tmp_path, start_timeout=8) as servers:
            statuses = {s.name: s for s in servers.statuses()}
    assert statuses["missing"].state == "failed" and "not found" in statuses["missing"].error
    assert statuses["exits"].state == "failed" and "cannot start: no config" in statuses["exits"].error
    assert statuses["garbage"].state == "failed" and "did not start within 8 s" in statuses["garbage"].error
    assert statuses["odd"].state in ("ready", "stopped")
    assert "mcp_odd_add" in statuses["odd"].tools
    assert not any("bad" in name for name in statuses["odd"].tools)  # an invalid schema is skipped


async def test_results_are_mapped_capped_and_failures_are_structured(tmp_path):
    configs = {"odd": _stdio(ODDBALL), "quick": _stdio(ODDBALL, timeout=1000)}
    with trio.fail_after(40):
        async with open_mcp_servers(configs, cwd=tmp_path) as servers:
            tools = _tools(servers)
            media = await tools["mcp_odd_media"].run({}, None)
            assert media.startswith("a picture:") and "image data with mime-type image/png, 100 bytes" in media
            resources = await tools["mcp_odd_resources"].run({}, None)
            assert "RESOURCE-TEXT" in resources and "application/x-thing" in resources
            assert "Resource Link: doc at https://example.invalid/doc" in resources
            big = await tools["mcp_odd_big"].run({}, None)
            assert len(big) < 300_000 and "more characters of big's result were cut" in big
            with trio.fail_after(15):  # 50 MB: refused at the transport, not read into memory, no hang
                with pytest.raises(ToolFailed) as failed:
                    await tools["mcp_odd_huge"].run({}, None)
            assert failed.value.code == "mcp_error" and "larger than 16 MiB" in str(failed.value)
            assert await tools["mcp_odd_add"].run({"a": 1, "b": 1}, None) == "2"  # still usable
            with pytest.raises(ToolFailed) as failed:
                await tools["mcp_odd_fails"].run({}, None)
            assert failed.value.code == "tool_error" and "the widget is broken" in str(failed.value)
            with pytest.raises(ToolFailed) as failed:
                await tools["mcp_quick_hang"].run({}, None)
            assert failed.value.code == "timeout"
            assert await tools["mcp_odd_add"].run({"a": 2, "b": 3}, None) == "5"


def test_arguments_are_checked_against_the_servers_own_schema():
    from gemini_split.tools.mcp.tool import McpTool

    class _Server:
        name, trusted = "odd", False

    schema = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer", "minimum": 0}},
              "required": ["a", "b"], "additionalProperties": False, "$schema": "https://json-schema.org/draft/2020-12/schema"}
    tool = McpTool(_Server(), "add", "adds", schema)
    assert tool.name == "mcp_odd_add"
    assert "$schema" not in tool.parameters and "additionalProperties" not in tool.parameters
    assert tool.validate({"a": 1, "b": 2}) == {"a": 1, "b": 2}
    for bad, where in [({"a": 1}, "'b' is a required property"), ({"a": 1, "b": -1}, "b: -1 is less than"),
                       ({"a": "1", "b": 1}, "a: '1' is not of type 'integer'"), ({"a": 1, "b": 1, "c": 0}, "c")]:
        with pytest.raises(ToolFailed) as failed:
            tool.validate(bad)
        assert failed.value.code == "invalid_arguments" and where in str(failed.value)


async def test_a_stdio_server_gets_no_secrets_and_its_process_is_gone_after_exit(tmp_path):
    pid_file = tmp_path / "pid"
    env_dump = tmp_path / "env.txt"
    configs = {
        "odd": _stdio(ODDBALL, env={"ODDBALL_PID_FILE": str(pid_file)}),
        "env": _stdio("-c", f"import os; open({str(env_dump)!r}, 'w').write('\\n'.join(sorted(os.environ)))"),
    }
    os.environ["GEMINI_API_KEY_FOR_TEST_ONLY"] = "secret"
    try:
        with trio.fail_after(30):
            async with open_mcp_servers(configs, cwd=tmp_path, start_timeout=20) as servers:
                assert servers.statuses()[0].state == "ready"
                pid = int(pid_file.read_text())
                os.kill(pid, 0)  # alive while we hold it
    finally:
        del os.environ["GEMINI_API_KEY_FOR_TEST_ONLY"]
    with pytest.raises(ProcessLookupError):
        for _ in range(100):
            os.kill(pid, 0)
            await trio.sleep(0.05)
    assert "GEMINI_API_KEY_FOR_TEST_ONLY" not in env_dump.read_text().split()
    assert "PATH" in env_dump.read_text().split()


def test_names_follow_gemini_clis_rule():
    from gemini_split.tools.mcp.naming import qualified_tool_name

    assert qualified_tool_name("time", "get_current_time") == "mcp_time_get_current_time"
    assert qualified_tool_name("my server", "do/it!") == "mcp_my_server_do_it_"
    assert qualified_tool_name("mcp_x", "y") == "mcp_x_y"
    long = qualified_tool_name("s" * 40, "t" * 40)
    assert len(long) == 63 and long.startswith("mcp_" + "s" * 26) and long.endswith("t" * 30) and "..." in long


async def test_closing_does_not_wait_for_a_server_still_starting(tmp_path):
    configs = {"silent": _stdio("-c", "import time; time.sleep(60)")}
    t0 = trio.current_time()
    with trio.fail_after(10):
        async with open_mcp_servers(configs, cwd=tmp_path, wait=False) as servers:
            assert servers.statuses()[0].state == "connecting"
    assert trio.current_time() - t0 < 8  # not the 30 s start timeout
