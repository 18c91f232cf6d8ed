"""``gemini-split attach`` end to end: a real ``serve`` daemon and real
client processes (issue 11 §4 §5)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time

import pytest

from gemini_split.commands.parsers.attach import parse_since
from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, _env, client, daemon

ALICE, BOB = "alice-token-0123456789", "bob-token-0123456789"


@pytest.fixture
def auth_config(tmp_path):
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"tokens": {ALICE: {"userId": "alice", "permissions": ["chat"]},
                                           BOB: {"userId": "bob", "permissions": ["chat"]}}}))
    return path


def test_since_accepts_unix_ms_a_duration_ago_and_iso_8601():
    now = 1_763_726_400.0
    assert parse_since("1763726000000", now=now) == 1_763_726_000_000
    assert parse_since("10m", now=now) == int((now - 600) * 1000)
    assert parse_since("2026-11-22T21:30:00+00:00") == 1_795_383_000_000
    with pytest.raises(Exception):
        parse_since("yesterday-ish")


@pytest.mark.timeout(120)
def test_the_clients_options_may_come_after_attach_and_win_there():
    from gemini_split.cli import build_parser

    parser = build_parser()
    after = parser.parse_args(["attach", "s-1", "--watch", "--server", "ws://h:1", "--token", "t", "-m", "pro",
                               "-y", "--workspace", "/w"])
    assert (after.session, after.watch, after.server, after.token, after.model, after.yolo, after.workspace) == \
        ("s-1", True, "ws://h:1", "t", "pro", True, "/w")
    before = parser.parse_args(["--server", "ws://a:1", "-m", "flash", "attach", "latest"])
    assert (before.server, before.model, before.yolo) == ("ws://a:1", "flash", False)
    both = parser.parse_args(["--server", "ws://a:1", "--token", "t", "attach", "--server", "ws://b:2"])
    assert (both.server, both.token) == ("ws://b:2", "t")


@pytest.mark.timeout(90)  # six processes started one after another: a loaded machine takes more than 25 s
def test_a_watcher_replays_the_last_turn_as_json_lines_and_another_user_gets_unknown_session(
        tmp_path, auth_config):
    work = tmp_path / "client"
    work.mkdir()
    with FakeGemini(api_key=API_KEY) as fake, \
            daemon(tmp_path, fake, "--auth-config", str(auth_config), "--state-dir", str(tmp_path / "state")) \
            as (_, address):
        first = client(["--server", address, "--token", ALICE, "-p", "say hello", "-o", "json"], cwd=work,
                       in_process=False)
        assert first.returncode == 0, first.stderr
        watcher = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "--server", address, "--token", ALICE,
             "attach", "latest", "--watch", "-o", "stream-json", "--limit", "1"],
            cwd=work, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )
        try:
            events = []
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = watcher.stdout.readline()
                assert line, watcher.stderr.read()
                events.append(json.loads(line))
                if events[-1]["type"] == "finished":
                    break
            watcher.send_signal(signal.SIGINT)
            assert watcher.wait(timeout=20) == 130
        finally:
            if watcher.poll() is None:
                watcher.kill()
        stolen = client(["--server", address, "--token", BOB, "attach", "latest", "-o", "stream-json"],
                        cwd=work, in_process=False)
        session_id = first_session(address, work)
        # The client's options after 'attach', where people type them.
        guessed = client(["attach", session_id, "--watch", "--server", address, "--token", BOB], cwd=work,
                         in_process=False)
    assert events[0]["type"] == "request_started" and events[0]["prompt"] == "say hello"
    assert all(e.get("replayed") for e in events)
    assert any(e["type"] == "text_delta" for e in events)
    # Bob: neither "latest" (he has none) nor alice's id (guessed or seen) gets him in.
    assert stolen.returncode != 0 and "no earlier session" in stolen.stderr
    assert guessed.returncode != 0 and f"no session '{session_id}'" in guessed.stderr


def first_session(address: str, work) -> str:
    listed = client(["--server", address, "--token", ALICE, "--list-sessions"], cwd=work, in_process=False)
    return re.findall(r"\[(\S+)\]$", listed.stdout, re.M)[0]


def _watch_first_event(address: str, cwd) -> dict:
    """``attach latest --watch -o stream-json --limit 1`` run in ``cwd``: the
    first event it replays (then Ctrl-C)."""
    watcher = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "--server", address, "attach", "latest", "--watch",
         "-o", "stream-json", "--limit", "1"],
        cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = watcher.stdout.readline()
        assert line, watcher.stderr.read()
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=20) == 130
        return json.loads(line)
    finally:
        if watcher.poll() is None:
            watcher.kill()


@pytest.mark.timeout(120)
def test_attach_latest_picks_the_newest_session_of_this_project_and_says_how_to_reach_another(tmp_path):
    a, b, c = (tmp_path / name for name in ("project-a", "project-b", "project-c"))
    for d in (a, b, c):
        d.mkdir()
    with FakeGemini(api_key=API_KEY) as fake, daemon(tmp_path, fake, "--state-dir", str(tmp_path / "state")) \
            as (_, address):
        for prompt, where in (("alpha one", a), ("beta one", b)):  # project B's is the newest of all
            done = client(["--server", address, "-p", prompt], cwd=where)
            assert done.returncode == 0, done.stderr
        seen = _watch_first_event(address, a)  # before: beta one, another project's
        assert (seen["type"], seen["prompt"]) == ("request_started", "alpha one")
        assert _watch_first_event(address, b)["prompt"] == "beta one"
        none = client(["--server", address, "attach", "latest", "--watch"], cwd=c)
    assert none.returncode == 42, none.stderr
    assert f"no earlier session in this project ({c}) to attach to" in none.stderr
    assert "gemini-split attach SESSION_ID" in none.stderr
