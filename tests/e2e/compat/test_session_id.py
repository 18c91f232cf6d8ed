"""--session-id as gemini-cli has it: a new session under an id the caller
chose, resumed later by that id; an id already in use is refused; each user
of an authenticated server names sessions in a space of their own."""

from __future__ import annotations

import json

import pytest

from gemini_split.protocol import Connection, ErrorCode, Hello, RemoteProtocolError, encode
from gemini_split.stamping import stamp
from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, Sandbox

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def box(tmp_path) -> Sandbox:
    return Sandbox(tmp_path).setup()


def test_a_named_session_is_resumed_by_its_name(box):
    with FakeGemini(script=[{"text": "noted"}, {"text": "it was 42"}], api_key=API_KEY) as fake:
        first = box.run(["-p", "remember 42", "--session-id", "build-42", "-o", "json"], fake=fake)
        again = box.run(["-p", "what was it?", "--resume", "build-42", "-o", "json"], fake=fake)
        listed = box.run(["--list-sessions"], fake=fake)
        sent = fake.requests[-1]["body"]["contents"]
    assert first.status == 0, first.stderr
    assert json.loads(first.stdout)["session_id"] == "build-42"
    assert again.status == 0, again.stderr
    assert json.loads(again.stdout)["session_id"] == "build-42"
    texts = [p.get("text", "") for c in sent for p in c["parts"]]
    assert "remember 42" in texts and "noted" in texts  # the earlier turn came along
    assert "build-42" in listed.stdout


def test_an_id_in_use_is_refused_as_gemini_cli_does(box):
    with FakeGemini(script=[{"text": "one"}], api_key=API_KEY) as fake:
        assert box.run(["-p", "x", "--session-id", "dup"], fake=fake).status == 0
        again = box.run(["-p", "y", "--session-id", "dup"], fake=fake)
        assert len(fake.requests) == 1  # the refused run never reached the model
    assert again.status == 42  # gemini-cli's FATAL_INPUT_ERROR
    assert "already exists" in again.stderr and "dup" in again.stderr and "--resume" in again.stderr


@pytest.mark.parametrize("bad, says", [
    ("", "cannot be empty"),
    ("   ", "cannot be empty"),
    ("a b", "only letters, digits"),
    ("../etc", "only letters, digits"),
    ("x" * 129, "at most 128"),
    ("caf\u00e9", "only letters, digits"),
    ("\x1b[31mred", "only letters, digits"),
])
def test_a_bad_id_is_a_usage_error(box, bad, says):
    result = box.run(["-p", "x", f"--session-id={bad}"])
    assert result.status == 2
    assert says in result.stderr
    assert "\x1b" not in result.stderr


def test_resume_and_session_id_cannot_be_combined(box):
    result = box.run(["-p", "x", "--resume", "latest", "--session-id", "new-one"])
    assert result.status == 2
    assert "cannot be combined" in result.stderr


@pytest.mark.parametrize("fields, field", [
    ({"new_session_id": "no spaces"}, "new_session_id"),
    ({"new_session_id": ""}, "new_session_id"),
    ({"new_session_id": "ok", "session_id": "s-0123456789abcdef"}, "new_session_id"),
])
def test_the_server_side_of_the_protocol_checks_the_id(fields, field):
    server = Connection("server")
    with pytest.raises(RemoteProtocolError) as caught:
        server.receive(encode(stamp(Hello(client="t", **fields))))
    assert caught.value.code == ErrorCode.INVALID_FIELD
    assert caught.value.field == field


def test_each_user_names_sessions_in_a_space_of_their_own(tmp_path):
    from tests.server.resume.test_resume_e2e import ALICE, BOB, _free_port, client, serve
    from tests.e2e.test_serve_e2e import API_KEY as SERVE_KEY

    auth = tmp_path / "auth.json"
    auth.write_text(json.dumps({"tokens": {ALICE: {"userId": "alice"}, BOB: {"userId": "bob"}}}))
    port = _free_port()
    address = f"ws://127.0.0.1:{port}"

    def run(token, *args):
        return client(["--server", address, "--token", token, *args, "-o", "json"], cwd=tmp_path)

    with FakeGemini(api_key=SERVE_KEY) as fake, \
            serve(tmp_path, fake, tmp_path / "state", port, "--auth-config", str(auth)):
        alice = run(ALICE, "-p", "alice's plan", "--session-id", "build-42")
        bob = run(BOB, "-p", "bob's plan", "--session-id", "build-42")  # the same name: no clash, no hint
        alice_dup = run(ALICE, "-p", "again", "--session-id", "build-42")
        alice_back = run(ALICE, "-p", "and?", "--resume", "build-42")
        bob_back = run(BOB, "-p", "and?", "--resume", "build-42")
        bob_steal = run(BOB, "-p", "hi", "--resume", json.loads(alice.stdout)["session_id"])
    assert alice.returncode == 0 and bob.returncode == 0, (alice.stderr, bob.stderr)
    alice_id, bob_id = json.loads(alice.stdout)["session_id"], json.loads(bob.stdout)["session_id"]
    assert alice_id != bob_id and alice_id.endswith("-build-42") and bob_id.endswith("-build-42")
    assert alice_dup.returncode == 42 and "already exists" in alice_dup.stdout
    assert json.loads(alice_back.stdout)["session_id"] == alice_id
    assert json.loads(bob_back.stdout)["session_id"] == bob_id
    assert bob_steal.returncode == 1 and "unknown_session" in bob_steal.stderr + bob_steal.stdout
