"""The SDK through the local daemon and against a ``serve`` with tokens:
real processes and sockets, the CLI's own connection code, the Python
tools and the questions still on this side."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio

from gemini_split.sdk import Approval, AuthenticationFailed, Client, TurnBegan, TurnEnded
from gemini_split.testing.fake_gemini import FakeGemini
from tests.cli.daemon.conftest import daemon_pids, wait_gone
from tests.inprocess import cli

from .conftest import API_KEY, clean_environ, function_responses

TOKEN = "sdk-user-token-0123456789"


def shout(word: str) -> str:
    """Say a word louder."""
    return word.upper()


@pytest.fixture
def daemon_home():
    """A short GEMINI_SPLIT_HOME (a Unix socket's path is short), and no
    daemon left running for it at the end."""
    path = tempfile.mkdtemp(prefix="gss-")
    yield path
    for pid in daemon_pids(path):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        wait_gone(pid, 5)
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.timeout(60)
async def test_through_the_local_daemon_tools_and_questions_stay_here(fake, daemon_home, tmp_path):
    environ = clean_environ(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url, GEMINI_SPLIT_HOME=daemon_home)
    fake.add_turns([{"function_calls": [{"name": "shout", "args": {"word": "daemon"}}]}, {"text": "heard"},
                    {"function_calls": [{"name": "write_file", "args": {"file_path": "d.txt", "content": "d"}}]},
                    {"text": "written"}])
    async with Client.connect("local", workspace=tmp_path, environ=environ, tools=[shout]) as client:
        session = await client.new_session()
        assert await session.prompt("shout").text() == "heard"
        async for event in session.prompt("write d.txt"):
            if isinstance(event, Approval):
                event.approve()
    assert daemon_pids(daemon_home), "the session ran in the local daemon"
    assert function_responses(fake.requests[1])[0]["response"]["output"] == "DAEMON"
    assert (tmp_path / "d.txt").read_text() == "d"


@contextmanager
def serving(tmp_path: Path, fake: FakeGemini):
    """A real ``gemini-split serve`` with one user's token; yields its address."""
    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": {TOKEN: {"userId": "alice", "permissions": ["chat"]}}}))
    server_dir = tmp_path / "server"
    server_dir.mkdir()
    environ = clean_environ(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url,
                            GEMINI_SPLIT_HOME=str(tmp_path / "server-home"))
    proc = subprocess.Popen([sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0",
                             "--auth-config", str(auth)], cwd=server_dir, env=environ, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        address = None
        deadline = time.monotonic() + 30
        while address is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            match = re.search(r"serving on (ws://\S+)", line)
            address = match.group(1) if match else None
        assert address, "serve did not start"
        yield address
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.timeout(90)
def test_serve_with_a_token_and_a_profile_blocking_and_asyncio_clients_one_attached_to_the_others_session(
        fake, tmp_path):
    environ = clean_environ()  # no key here: the server holds it
    workspace = tmp_path / "client"
    workspace.mkdir()
    fake.add_turns([{"function_calls": [{"name": "shout", "args": {"word": "serve"}}]}, {"text": "loud"}])
    with serving(tmp_path, fake) as address:
        with pytest.raises(AuthenticationFailed):
            with Client.connect(address, token="not-the-token", workspace=workspace, environ=environ) as client:
                client.new_session()
        with Client.connect(address, token=TOKEN, workspace=workspace, environ=environ, tools=[shout]) as client:
            session = client.new_session()
            assert session.prompt("shout it").text() == "loud"

            # The same user from another program, through a profile of servers.json (address and token).
            added = cli(["server", "add", "work", address, "--token", TOKEN], environ=environ, cwd=workspace)
            assert added.returncode == 0, added.stderr

            async def attached() -> list:
                async with Client.connect("work", workspace=workspace, environ=environ) as other:
                    view = await other.attach(session.id)
                    async with view.events() as events:
                        return [event async for event in _until_end(events)]

            seen = asyncio.run(attached())
            assert [s.id for s in client.list_sessions()][:1] == [session.id]
    assert function_responses(fake.requests[1])[0]["response"]["output"] == "SERVE"
    assert [(e.prompt, e.client) for e in seen if isinstance(e, TurnBegan)] == [("shout it", "python")]
    assert seen[-1].text == "loud"


async def _until_end(events):
    async for event in events:
        yield event
        if isinstance(event, TurnEnded):
            return


async def test_a_wrong_server_address_is_a_connect_failure(tmp_path):
    from gemini_split.sdk import ConnectFailed

    async with Client.connect("ws://127.0.0.1:9", workspace=tmp_path, environ=clean_environ()) as client:
        with trio.fail_after(15), pytest.raises(ConnectFailed):
            await client.new_session()
