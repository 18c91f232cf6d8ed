"""Issue 35 §1, as the attack ran it: the layout docs/deployment.md
recommends, outside /home, /root and /tmp (a directory under /srv standing
for /etc/gemini-split, the state directory and the workspace root), a real
``serve --server-tools`` with two users' tokens, and bob's session in
``yolo`` trying to read alice's token, the API key's environment file, a
credentials file, the list of workspaces and alice's file in hers, the
session database holding her prompt, and the server's environment. None of
it reaches bob's model; his own workspace works."""

from __future__ import annotations

import json
import os
import shutil
import uuid

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_serve_e2e import API_KEY, client, daemon

ALICE_TOKEN = "alice-token-TOKENFILE-CANARY-0a1b2c3d"
BOB_TOKEN = "bob-token-0123456789abcdef0123"
ALICE_PROMPT = "ALICE-PROMPT-CANARY-77e1"
ALICE_FILE = "ALICE-FILE-CANARY-3c9d"
ENV_FILE = "ENVFILE-CANARY-8f20"
CREDENTIALS = "CREDENTIALS-CANARY-4b6e"


@pytest.fixture
def layout():
    """``/srv/gs-…/{etc/gemini-split/{tokens.json,env,sa.json},state,workspaces}``."""
    base = f"/srv/gs-deploy-{uuid.uuid4().hex[:8]}"
    etc = os.path.join(base, "etc", "gemini-split")
    os.makedirs(etc)
    os.makedirs(os.path.join(base, "state"), mode=0o700)
    with open(os.path.join(etc, "tokens.json"), "w") as f:
        json.dump({"tokens": {ALICE_TOKEN: {"userId": "alice", "permissions": ["chat"]},
                              BOB_TOKEN: {"userId": "bob", "permissions": ["chat"]}}}, f)
    with open(os.path.join(etc, "env"), "w") as f:
        f.write(f"GEMINI_API_KEY={API_KEY}\nEXTRA={ENV_FILE}\n")
    with open(os.path.join(etc, "sa.json"), "w") as f:
        f.write(CREDENTIALS)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _calls(*commands):
    return {"function_calls": [{"name": "run_shell_command", "args": {"command": c}} for c in commands]}


@pytest.mark.timeout(120)
def test_a_yolo_session_sees_only_its_own_workspace_of_the_documented_layout(layout, tmp_path):
    etc = f"{layout}/etc/gemini-split"
    attack = [
        f"cat {etc}/tokens.json", f"cat {etc}/env", f"cat {etc}/sa.json",
        f"ls -a {layout}/workspaces", f"cat {layout}/workspaces/*/alice.txt",
        f"cat {layout}/state/sessions.db {layout}/state/sessions.db-wal | grep -a -o '{ALICE_PROMPT[:-1]}[{ALICE_PROMPT[-1]}]'",
        "env", "echo BOB-OWN > own.txt && cat own.txt",
    ]
    script = [_calls(f"echo {ALICE_FILE} > alice.txt"), {"text": "alice done"}, _calls(*attack),
              {"text": "bob done"}]
    sandbox = "auto" if shutil.which("bwrap") else pytest.skip("needs bubblewrap")
    with FakeGemini(script=script, api_key=API_KEY) as fake, daemon(
            tmp_path, fake, "--auth-config", f"{etc}/tokens.json", "--state-dir", f"{layout}/state",
            "--server-tools", "--workspace-root", f"{layout}/workspaces", "--sandbox", sandbox,
            "--max-approval-mode", "yolo",
            env_extra={"GOOGLE_APPLICATION_CREDENTIALS": f"{etc}/sa.json", "EXTRA": ENV_FILE,
                       "GEMINI_AUTH_CONFIG": f"{etc}/tokens.json"}) as (_, address):
        alice = client(["--server", address, "--token", ALICE_TOKEN, "--tools", "server", "--yolo",
                        "-p", ALICE_PROMPT], cwd=tmp_path)
        bob = client(["--server", address, "--token", BOB_TOKEN, "--tools", "server", "--yolo",
                      "-p", "look around"], cwd=tmp_path)
    assert alice.returncode == 0 and bob.returncode == 0, (alice.stderr, bob.stderr)
    (alice_ws,) = [w for w in os.listdir(f"{layout}/workspaces")
                   if os.path.exists(f"{layout}/workspaces/{w}/alice.txt")]
    seen = json.dumps(fake.requests[3]["body"])  # bob's results, as his model got them
    assert "BOB-OWN" in seen  # the attack ran, and his own workspace works
    leaked = [canary for canary in (ALICE_TOKEN, ENV_FILE, CREDENTIALS, ALICE_FILE, ALICE_PROMPT, alice_ws,
                                    "GOOGLE_APPLICATION_CREDENTIALS=", "GEMINI_AUTH_CONFIG=", "EXTRA=")
              if canary in seen]
    assert leaked == []
