"""Configured MCP servers cost a ``-p`` nothing until one of their tools is
called: their declarations come from a cache keyed by their configuration,
and the server starts when the model calls it. Real mcp-server-time from
PyPI, behind a wrapper that writes a line to a marker file each time it
starts (the proof that a run did or did not start it), and that refuses to
start while a flag file exists."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.cli.daemon.conftest import environ, fake, home, run  # noqa: F401 (fixtures)
from tests.cli.daemon.test_oneshot_imports import imported, offending
from tests.cli.test_oneshot_cli import API_KEY, run_cli

pytestmark = pytest.mark.timeout(120)

WRAPPER = """
import os, runpy, sys
with open(os.environ["MARK_FILE"], "a") as f:
    f.write(f"{os.getpid()}\\n")
if os.path.exists(os.environ["FAIL_FLAG"]):
    print("refusing to start: the flag file is there", file=sys.stderr)
    sys.exit(3)
sys.argv = ["mcp_server_time", "--local-timezone", "UTC"]
runpy.run_module("mcp_server_time", run_name="__main__")
"""
SECRET = "s3cret-token-value"


def _setup(tmp_path: Path, home: Path, **extra_env: str) -> tuple[Path, Path]:
    """settings.json in ``home`` with one server, ``time``, run through the
    wrapper; returns (marker file, fail flag)."""
    wrapper = tmp_path / "time_wrapper.py"
    if not wrapper.exists():
        wrapper.write_text(WRAPPER)
    marker, flag = tmp_path / "starts.txt", tmp_path / "fail.flag"
    env = {"MARK_FILE": str(marker), "FAIL_FLAG": str(flag), "API_TOKEN": SECRET, **extra_env}
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"mcpServers": {
        "time": {"command": sys.executable, "args": [str(wrapper)], "env": env, "trust": True}}}))
    return marker, flag


def _starts(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def _declared(request: dict) -> set[str]:
    return {d["name"] for tool in request["body"].get("tools", []) for d in tool.get("functionDeclarations", [])}


def _responses(fake) -> list[dict]:
    return [p["functionResponse"] for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]


def test_through_the_local_daemon_an_unused_server_is_started_once_then_only_when_called(
        environ, home, fake, tmp_path):  # noqa: F811 (fixtures)
    work = tmp_path / "work"
    work.mkdir()
    marker, _ = _setup(tmp_path, Path(home))

    first = run(["-p", "hi"], environ, work)
    assert first.returncode == 0, first.stderr
    assert _starts(marker) == 1  # nothing cached yet: started and listed
    assert "mcp_time_get_current_time" in _declared(fake.requests[-1])
    cache_dir = Path(home) / "mcp-cache"
    (entry,) = cache_dir.glob("*.json")
    assert stat.S_IMODE(cache_dir.stat().st_mode) == 0o700 and stat.S_IMODE(entry.stat().st_mode) == 0o600
    assert SECRET not in entry.read_text() and "get_current_time" in entry.read_text()

    # The second call finds the declarations: the server is not started, and
    # the thin client does not even import the MCP SDK.
    modules = imported(["-p", "hi again"], environ, work)
    assert _starts(marker) == 1
    assert "mcp_time_get_current_time" in _declared(fake.requests[-1])
    assert offending(modules, ("mcp",)) == []

    # The model calls the tool: the server starts then, and answers.
    fake.add_turns([{"function_calls": [{"name": "mcp_time_get_current_time", "args": {"timezone": "UTC"}}]},
                    {"text": "it is now"}])
    called = run(["-p", "what time is it?"], environ, work)
    assert called.returncode == 0, called.stderr
    assert called.stdout.strip().endswith("it is now")
    assert _starts(marker) == 2
    (response,) = _responses(fake)
    assert '\\"timezone\\": \\"UTC\\"' in json.dumps(response["response"]["output"])

    # A changed configuration is another server: started and listed again.
    _setup(tmp_path, Path(home), TZ_HINT="changed")
    changed = run(["-p", "hi"], environ, work)
    assert changed.returncode == 0, changed.stderr
    assert _starts(marker) == 3
    assert len(list(cache_dir.glob("*.json"))) == 2
    again = run(["-p", "hi"], environ, work)
    assert again.returncode == 0 and _starts(marker) == 3


def test_an_edited_server_script_is_listed_again(tmp_path):
    home = tmp_path / "home"
    marker, _ = _setup(tmp_path, home)
    env = {"GEMINI_SPLIT_HOME": str(home)}
    with FakeGemini(script=[{"text": "a"}, {"text": "b"}, {"text": "c"}], api_key=API_KEY) as fake:
        assert run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, env_extra=env).returncode == 0
        assert run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, env_extra=env).returncode == 0
        assert _starts(marker) == 1
        wrapper = tmp_path / "time_wrapper.py"
        wrapper.write_text(WRAPPER + "\n# edited\n")
        assert run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, env_extra=env).returncode == 0
    assert _starts(marker) == 2


def test_a_cached_server_that_fails_to_start_when_called_gives_the_model_a_clear_error(tmp_path):
    home = tmp_path / "home"
    marker, flag = _setup(tmp_path, home)
    env = {"GEMINI_SPLIT_HOME": str(home)}
    call = {"function_calls": [{"name": "mcp_time_get_current_time", "args": {"timezone": "UTC"}}]}
    with FakeGemini(script=[{"text": "listed"}, call, {"text": "sorry"}, {"text": "again"}], api_key=API_KEY) as fake:
        assert run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, env_extra=env).returncode == 0
        flag.write_text("")  # the server now refuses to start; its configuration is unchanged
        result = run_cli(["-p", "what time is it?"], cwd=tmp_path, fake=fake, env_extra=env)
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith("sorry")
        (response,) = _responses(fake)
        error = response["response"]["error"]
        assert error["code"] == "unavailable"
        assert "the MCP server 'time' could not be started" in error["message"]
        assert "refusing to start: the flag file is there" in error["message"]
        # The entry is gone: the next run starts the server and says it failed.
        assert list((home / "mcp-cache").glob("*.json")) == []
        later = run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, env_extra=env)
    assert later.returncode == 0
    assert "MCP server 'time' failed" in later.stderr
    assert _starts(marker) == 3


@pytest.mark.parametrize("content", [b"", b"{not json", b'{"format": 1, "written": 1e30, "tools": []}',
                                     b'{"format": 1, "written": 0, "tools": [{"name": 5}]}'])
def test_an_unreadable_or_hostile_cache_entry_is_a_miss(tmp_path, content):
    home = tmp_path / "home"
    marker, _ = _setup(tmp_path, home)
    env = {"GEMINI_SPLIT_HOME": str(home)}
    with FakeGemini(script=[{"text": "a"}, {"text": "b"}], api_key=API_KEY) as fake:
        assert run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, env_extra=env).returncode == 0
        (entry,) = (home / "mcp-cache").glob("*.json")
        entry.write_bytes(content)
        result = run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, env_extra=env)
        assert result.returncode == 0 and "Traceback" not in result.stderr
        assert "mcp_time_get_current_time" in _declared(fake.requests[-1])
    assert _starts(marker) == 2


def test_mcp_list_shows_live_status_even_when_the_tools_are_cached(tmp_path):
    home = tmp_path / "home"
    marker, flag = _setup(tmp_path, home)
    env = {"GEMINI_SPLIT_HOME": str(home)}
    with FakeGemini(script=[{"text": "a"}], api_key=API_KEY) as fake:
        assert run_cli(["-p", "hi"], cwd=tmp_path, fake=fake, env_extra=env).returncode == 0
    listed = run_cli(["mcp", "list"], cwd=tmp_path, env_extra=env)
    assert "✓ time:" in listed.stdout and "Connected (2 tools)" in listed.stdout
    assert _starts(marker) == 2
    flag.write_text("")
    broken = run_cli(["mcp", "list"], cwd=tmp_path, env_extra=env)
    assert "✗ time:" in broken.stdout and "refusing to start" in broken.stdout
    os.unlink(flag)
