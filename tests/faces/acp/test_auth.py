"""Issue 34 §3: editors start agents with a trimmed environment. Without an
API key ``gemini-split --acp`` still answers ``initialize`` (advertising
gemini-cli's ``gemini-api-key`` method), ``session/new`` fails with ACP's
auth-required error saying what is missing, and ``authenticate`` with the
key in ``_meta`` lets the editor go on — through the real ACP SDK, whose
``spawn_agent_process`` starts the agent with exactly the environment the
plan gives."""

from __future__ import annotations

import os
import sys

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, message_text, run_editor

pytestmark = pytest.mark.timeout(60)


def trimmed_env(fake, home) -> dict[str, str]:
    """What an editor gives the agent: a PATH and HOME, no key."""
    return {"PATH": os.environ["PATH"], "HOME": str(home), "GEMINI_SPLIT_HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": fake.url}


def test_without_a_key_initialize_is_answered_and_session_new_says_what_is_missing(tmp_path):
    with FakeGemini(script=[], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": trimmed_env(fake, tmp_path / "home"),
                           "agent": [sys.executable, "-m", "gemini_split", "--acp"],
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "authenticate"}]}, tmp_path)
    init, new, auth = seen["results"]
    assert init["protocolVersion"] == 1
    assert init["authMethods"] == [{"id": "gemini-api-key", "name": "Gemini API key",
                                    "description": "Use an API key with Gemini Developer API",
                                    "_meta": {"api-key": {"provider": "google"}}}]
    assert new["error"]["code"] == -32000  # gemini-cli's (ACP's) auth_required
    assert "GEMINI_API_KEY" in new["error"]["message"] and "gemini-api-key" in new["error"]["message"]
    assert auth["error"]["code"] == -32000  # no key in _meta and none in the environment


def test_authenticating_with_a_key_from_the_editor_opens_sessions_that_use_it(tmp_path):
    with FakeGemini(script=[{"text": "hello from the key"}], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": trimmed_env(fake, tmp_path / "home"),
                           "agent": [sys.executable, "-m", "gemini_split", "--acp"],
                           "steps": [{"do": "initialize"}, {"do": "authenticate", "method": "oauth-personal"},
                                     {"do": "authenticate", "key": API_KEY}, {"do": "new"},
                                     {"do": "prompt", "text": "hi"}]}, tmp_path)
    _init, wrong, auth, new, prompt = seen["results"]
    assert wrong["error"]["code"] == -32602 and "gemini-api-key" in wrong["error"]["message"]
    assert "error" not in (auth or {}) and new["sessionId"]
    assert prompt == {"stopReason": "end_turn"} and message_text(seen) == "hello from the key"
    assert fake.requests  # the fake answers only requests that carry API_KEY
    log = (tmp_path / "home" / "gemini-acp.log").read_text()
    assert API_KEY not in log


def test_with_a_key_in_the_environment_nothing_needs_authenticating(tmp_path):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        env = trimmed_env(fake, tmp_path / "home") | {"GEMINI_API_KEY": API_KEY}
        seen = run_editor({"cwd": str(tmp_path), "env": env,
                           "agent": [sys.executable, "-m", "gemini_split", "--acp"],
                           "steps": [{"do": "initialize"}, {"do": "authenticate"}, {"do": "new"},
                                     {"do": "prompt", "text": "hi"}]}, tmp_path)
    assert seen["results"][1] in ({}, None)
    assert seen["results"][3] == {"stopReason": "end_turn"}


async def test_the_bridge_offers_no_authentication_the_key_is_the_servers(tmp_path):
    from gemini_split.server.model.scripted import ScriptedModel

    from .test_agent_inprocess import bridge_agent

    async with bridge_agent(tmp_path, ScriptedModel([])) as (_agent, connect):
        client = await connect()
        init = await client.call("initialize", {"protocolVersion": 1})
        auth = await client.call("authenticate", {"methodId": "gemini-api-key", "_meta": {"api-key": "k-123"}})
    assert init["result"]["authMethods"] == []
    assert auth["error"]["code"] == -32602 and "server's key" in auth["error"]["message"]
    assert "k-123" not in auth["error"]["message"] and "loopback" not in auth["error"]["message"]
