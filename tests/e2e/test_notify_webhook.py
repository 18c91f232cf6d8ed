"""``serve --notify-webhook URL [--notify-detail]`` end to end for "an
approval is waiting" (issue 33 §4): a real ``serve --web`` with server-side
tools, a native client whose prompt makes the fake Gemini call
``write_file`` in the default approval mode, and a real HTTP receiver
speaking what ntfy accepts (a JSON POST to its root)."""

from __future__ import annotations

import json
import time

import pytest
from websockets.sync.client import connect

from gemini_split.protocol import PROTOCOL_VERSION
from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY
from tests.e2e.test_web_serve import ALICE, _Hook, auth_config, http_of, page, web_server  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(90)  # a server and a client start on a loaded 2-core machine

PROMPT = "please write the quarterly secret plan"
PATH = "plans/secret-plan.txt"
CONTENT = "the secret content of the plan"


def _write_turns() -> list[dict]:
    return [{"function_calls": [{"name": "write_file", "args": {"file_path": PATH, "content": CONTENT}}]},
            {"text": "Not written, as you said."}]


def _serve(tmp_path, fake, page, auth_config, *args):
    workspaces = tmp_path / "workspaces"
    workspaces.mkdir(exist_ok=True)
    return web_server(tmp_path, fake, page, "--auth-config", str(auth_config), "--server-tools",
                      "--workspace-root", str(workspaces), *args)


def _send(ws, message: dict) -> None:
    ws.send(json.dumps({"id": f"c-{time.monotonic_ns()}", "timestamp": int(time.time() * 1000), **message}))


def _until(ws, wanted: str) -> dict:
    while True:
        message = json.loads(ws.recv(timeout=20))
        if message["type"] == wanted:
            return message
        assert message["type"] != "error", message


def _approval_turn(address: str, hook: _Hook) -> tuple[str, list, float]:
    """A native client (no Origin, as gemini-split itself) prompts a
    server-tools session; while the approval waits, what the receiver got;
    then it says no and the turn ends. Returns (session id, received, the
    turn's seconds)."""
    with connect(address, additional_headers={"Authorization": f"Bearer {ALICE}"}, open_timeout=10) as ws:
        _send(ws, {"type": "hello", "protocol_version": PROTOCOL_VERSION, "client": "test",
                   "capabilities": ["tool_approvals"], "tools": "server", "approval_mode": "default"})
        session = _until(ws, "connected")["session_id"]
        started = time.monotonic()
        _send(ws, {"type": "generate_content_request", "prompt": PROMPT})
        asked = _until(ws, "tool_awaiting_approval")
        received = list(hook.wait(1))
        _send(ws, {"type": "tool_decision", "call_id": asked["call_id"], "decision": "deny"})
        _until(ws, "finished")
        took = time.monotonic() - started
    return session, received, took


def test_an_approval_waiting_posts_one_message_naming_the_session_with_a_link_and_nothing_of_the_prompt(
        tmp_path, page, auth_config):
    hook = _Hook()
    try:
        with FakeGemini(api_key=API_KEY, script=_write_turns()) as fake, \
                _serve(tmp_path, fake, page, auth_config, "--notify-webhook", f"{hook.url}/my-topic") as (
                    proc, address):
            session, received, _ = _approval_turn(address, hook)
            time.sleep(1.5)  # the turn's end follows within the interval: not posted
            later = list(hook.received)
    finally:
        hook.close()
    assert len(received) == 1 and later == received
    path, content_type, payload = received[0]
    assert path == "/" and content_type == "application/json"
    assert payload == {"topic": "my-topic", "title": "gemini-split: Approval waiting",
                       "message": f"A tool call waits for your approval: session {session}",
                       "click": f"{http_of(address)}/#session={session}"}
    text = json.dumps(payload)
    for secret in ("secret", "write_file", "plans/", CONTENT):
        assert secret not in text


def test_with_notify_detail_the_message_names_the_tool_its_target_and_the_session_title(tmp_path, page, auth_config):
    hook = _Hook()
    try:
        with FakeGemini(api_key=API_KEY, script=_write_turns()) as fake, \
                _serve(tmp_path, fake, page, auth_config, "--notify-webhook", f"{hook.url}/hooks/x?k=1",
                       "--notify-detail") as (_, address):
            session, received, _ = _approval_turn(address, hook)
    finally:
        hook.close()
    assert len(received) == 1
    path, _, payload = received[0]
    assert path == "/hooks/x?k=1" and "topic" not in payload  # not ntfy's one-segment form: posted as is
    assert payload["title"] == "gemini-split: Approval waiting"  # what waits, not the session's title
    message = payload["message"]
    assert "write_file" in message and PATH in message and PROMPT in message and session in message
    assert CONTENT not in message  # what a tool would write is never sent


def test_a_receiver_that_never_answers_does_not_slow_the_turn(tmp_path, page, auth_config):
    hook = _Hook(delay=30)
    try:
        with FakeGemini(api_key=API_KEY, script=_write_turns()) as fake, \
                _serve(tmp_path, fake, page, auth_config, "--notify-webhook", f"{hook.url}/t") as (proc, address):
            _, received, took = _approval_turn(address, hook)
            time.sleep(7)  # the post's bound (notify.TIMEOUT) passes
        log = proc.stderr.read()
    finally:
        hook.close()
    assert len(received) == 1  # it arrived; the answer never came
    assert took < 10, took
    assert log.count("cannot post a notification to 127.0.0.1: ReadTimeout") == 1, log
