"""``gemini-split serve --grpc``: a real daemon process, a third-party
client, SIGTERM; and what serve refuses before it listens."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import grpc
import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.inprocess import cli
from .helpers import ALICE, chat_sync, start, write_auth_config


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(extra)
    return env


@pytest.mark.timeout(60)  # a serve with gRPC starts; 25 s is too tight on a loaded 2-core machine
def test_serve_grpc_serves_chat_streams_beside_websocket_says_how_the_model_is_reached_once_and_stops_on_sigterm(third_party, tmp_path):
    tp = third_party
    with FakeGemini() as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "serve", "--grpc", "127.0.0.1:0", "--listen", "127.0.0.1:0"],
            cwd=tmp_path, env=_env(GEMINI_API_KEY="k", GOOGLE_GEMINI_BASE_URL=fake.url),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            addresses, lines = [], []
            deadline = time.monotonic() + 50
            while len(addresses) < 2 and time.monotonic() < deadline:
                line = proc.stderr.readline()
                if not line:
                    break
                lines.append(line)
                addresses += re.findall(r"serving on (\S+)", line)
            assert any(a.startswith("grpc://") for a in addresses), addresses
            grpc_address = next(a for a in addresses if a.startswith("grpc://"))
            assert any(a.startswith("ws://") for a in addresses)  # beside the WebSocket listener
            outcome = chat_sync(tp, grpc_address, [start(tp, "from another language")])
            assert outcome.code == grpc.StatusCode.OK and outcome.text() == "Echo: from another language"
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=15) == 0
            lines += proc.stderr.read().splitlines()
            # One model, one line about how it is reached, however many listeners.
            assert sum("the model is reached through" in line for line in lines) == 1, lines
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def test_serve_refuses_grpc_on_a_public_address_without_tls_and_tokens(tmp_path):
    env = _env(GEMINI_API_KEY="k")
    result = cli(["serve", "--grpc", "0.0.0.0:0", "--no-websocket"], environ=env, cwd=tmp_path)
    assert result.returncode != 0
    assert "refusing to serve gRPC on 0.0.0.0 without TLS and authentication" in result.stderr


def test_serve_refuses_an_advanced_config_key_it_does_not_know(tmp_path):
    env = _env(GEMINI_API_KEY="k", GOOGLE_GEMINI_BASE_URL="http://127.0.0.1:9")
    result = cli(["serve", "--grpc", "127.0.0.1:0", "--no-websocket", "--grpc-allow-config", "telemetry",
                  "--state-dir", ":memory:"], environ=env, cwd=tmp_path)
    assert result.returncode != 0
    assert "'telemetry' is not an advanced_config key this server knows (known: userMemory)" in result.stderr


def test_no_websocket_needs_grpc(tmp_path):
    result = cli(["serve", "--no-websocket"], environ=_env(GEMINI_API_KEY="k"), cwd=tmp_path)
    assert result.returncode != 0 and "--no-websocket goes with --grpc" in result.stderr


@pytest.mark.timeout(90)
def test_serve_grpc_with_server_tools_offers_the_serving_users_sub_agents_and_streams_them(third_party, tmp_path):
    """Issue 32: the built-ins and ``~/.gemini/agents`` with the user's
    ``agents.overrides`` (here: generalist off); a malformed file is said on
    serve's stderr, the others still offered; the stream sees the
    delegation framed by AgentStarted / AgentFinished."""
    tp = third_party
    home = tmp_path / "home"
    (home / "agents").mkdir(parents=True)
    (home / "agents" / "scout.md").write_text("---\nname: scout\ndescription: Looks.\ntools: [list_directory]\n"
                                              "---\nYou are SCOUT.\n")
    (home / "agents" / "broken.md").write_text("---\nname: broken\ndescription: [unclosed\n---\nx\n")
    (home / "settings.json").write_text('{"agents": {"overrides": {"generalist": {"enabled": false}}}}')
    script = [{"system_contains": "You are gemini-split", "function_calls": [{"name": "scout", "args": {"query": "look"}}]},
              {"system_contains": "SCOUT", "function_calls": [{"name": "complete_task", "args": {"result": "Empty."}}]},
              {"system_contains": "You are gemini-split", "text": "Nothing here."}]
    with FakeGemini(script) as fake:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "serve", "--grpc", "127.0.0.1:0", "--no-websocket",
             "--server-tools", "--sandbox", "none", "--workspace-root", str(tmp_path / "workspaces"),
             "--state-dir", ":memory:", "--auth-config", write_auth_config(tmp_path / "auth.json")],
            cwd=tmp_path, env=_env(GEMINI_API_KEY="k", GOOGLE_GEMINI_BASE_URL=fake.url, HOME=str(tmp_path),
                                   GEMINI_SPLIT_HOME=str(home)),
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            lines, address = [], None
            deadline = time.monotonic() + 60
            while address is None and time.monotonic() < deadline:
                line = proc.stderr.readline()
                if not line:
                    break
                lines.append(line)
                address = next(iter(re.findall(r"serving on (grpc://\S+)", line)), None)
            assert address, lines
            outcome = chat_sync(tp, address, [start(tp, "what is here?")], token=ALICE, timeout=30)
            first = fake.requests[0]["body"]
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    assert outcome.code == grpc.StatusCode.OK, outcome.details
    offered = {d["name"] for t in first.get("tools", []) for d in t.get("functionDeclarations", [])}
    assert {"scout", "codebase_investigator"} <= offered and not {"generalist", "broken"} & offered
    assert any("broken.md" in line and "malformed YAML" in line for line in lines), lines
    kinds = outcome.kinds()
    assert kinds.index("agent_started") < kinds.index("agent_finished")
    (finished,) = [r.agent_finished for r in outcome.responses if r.WhichOneof("response") == "agent_finished"]
    assert (finished.name, finished.outcome, finished.summary) == ("scout", "completed", "Empty.")
    assert outcome.text() == "Nothing here."
