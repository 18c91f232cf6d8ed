"""Issue 42 (T4-1, T4-8, T4-9 as one class): a server-side session's
sandbox is built from what it may see — its workspace, the system's
read-only directories, a private /tmp — so nothing the serving process
opens is in sight, wherever the operator put it.

A real ``serve --server-tools`` (bubblewrap) with its files spread the way
operators spread them: the tokens file under ``/etc`` (inside what a
session sees: masked), the state directory, telemetry outfile (with
prompts logged), ``CLOUDSDK_CONFIG`` credentials and the ``.env`` it read
its key from in its working directory under ``/srv``, a policy file, and
the workspace root. Alice prompts; then every path the running server has
open (``/proc/PID/fd``) and every configured path is tried from bob's
``yolo`` shell: none shows anything."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from gemini_split.testing.fake_gemini import FakeGemini

API_KEY = "allow-list-key"
ALICE_TOKEN = "alice-token-ALLOWLIST-0a1b2c3d4e5f"
BOB_TOKEN = "bob-token-ALLOWLIST-0a1b2c3d4e5f0"
ALICE_PROMPT = "ALICE-PROMPT-CANARY-5d1e"
ALICE_FILE = "ALICE-FILE-CANARY-90ab"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap (apt-get install bubblewrap)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="writes the operator's files under /etc and /srv (root)"),
]


@pytest.fixture
def layout():
    """The operator's files: ``/etc/gs-…/tokens.json`` and, under
    ``/srv/gs-…``, the state, workspaces, telemetry, credentials, policy
    and the working directory with its ``.env``."""
    tag = uuid.uuid4().hex[:8]
    etc, srv = Path(f"/etc/gs-allow-{tag}"), Path(f"/srv/gs-allow-{tag}")
    etc.mkdir()
    for d in ("state", "workspaces", "gcloud", "cwd", "policies", "log", "home/.gemini"):
        (srv / d).mkdir(parents=True)
    # The working directory is trusted (gemini-cli's file), so serve reads its .env.
    (srv / "home" / ".gemini" / "trustedFolders.json").write_text(json.dumps({str(srv / "cwd"): "TRUST_FOLDER"}))
    (etc / "tokens.json").write_text(json.dumps({"tokens": {
        ALICE_TOKEN: {"userId": "alice", "permissions": ["chat"]},
        BOB_TOKEN: {"userId": "bob", "permissions": ["chat"]}}}))
    os.chmod(etc / "tokens.json", 0o644)  # world-readable: only the mask keeps it from sight
    (srv / "cwd" / ".env").write_text(f"GEMINI_API_KEY={API_KEY}\n")
    (srv / "gcloud" / "application_default_credentials.json").write_text(
        json.dumps({"type": "service_account", "private_key": "CREDENTIALS-CANARY-7f3a"}))
    (srv / "policies" / "team.toml").write_text('[[rule]]\ntoolName = "web_fetch"\ndecision = "deny"\npriority = 900\n')
    yield etc, srv
    shutil.rmtree(etc, ignore_errors=True)
    shutil.rmtree(srv, ignore_errors=True)


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "CLOUDSDK_"))}
    env.update(extra)
    return env


def _serve(etc: Path, srv: Path, fake: FakeGemini) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", "--server-tools",
         "--auth-config", str(etc / "tokens.json"), "--state-dir", str(srv / "state"),
         "--workspace-root", str(srv / "workspaces"), "--sandbox", "bwrap", "--max-approval-mode", "yolo",
         "--policy", str(srv / "policies" / "team.toml"),
         "--telemetry", "--telemetry-target", "local", "--telemetry-outfile", str(srv / "log" / "telemetry.jsonl"),
         "--telemetry-log-prompts"],
        cwd=srv / "cwd", env=_env(GOOGLE_GEMINI_BASE_URL=fake.url, CLOUDSDK_CONFIG=str(srv / "gcloud"),
                                  HOME=str(srv / "home")),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        match = re.search(r"serving on (ws://\S+)", line)
        if match:
            import threading
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # never a full pipe
            return proc, match.group(1)
    proc.kill()
    raise AssertionError(f"serve did not start: {proc.stderr.read()}")


def _client(address: str, token: str, prompt: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gemini_split", "--server", address, "--token", token,
                           "--tools", "server", "--yolo", "-p", prompt],
                          cwd=cwd, env=_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def _text(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except FileNotFoundError:
        return ""


def _open_paths(pid: int) -> set[str]:
    """Every file, directory and socket path the process has open now."""
    paths = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/") and not target.startswith(("/dev/", "/proc/")):
            paths.add(target.removesuffix(" (deleted)"))
    return paths


#: bob's shell: each path that shows anything (a non-empty file, a directory
#: with entries, a socket) is printed.
PROBE = ('for p in {paths}; do if [ -d "$p" ]; then [ -n "$(ls -A "$p" 2>/dev/null)" ] && echo "SEEN:$p"; '
         'elif [ -s "$p" ] || [ -S "$p" ]; then echo "SEEN:$p"; fi; done; echo PROBED')


@pytest.mark.timeout(150)
def test_nothing_the_serving_process_opens_is_in_sight_of_a_sessions_shell(layout, tmp_path):
    etc, srv = layout
    with FakeGemini(api_key=API_KEY) as fake:
        httpx.post(f"{fake.url}/_script", timeout=10, json=[
            {"function_calls": [{"name": "run_shell_command", "args": {"command": f"echo {ALICE_FILE} > alice.txt"}}]},
            {"text": "alice done"}]).raise_for_status()
        proc, address = _serve(etc, srv, fake)
        try:
            alice = _client(address, ALICE_TOKEN, ALICE_PROMPT, tmp_path)
            assert alice.returncode == 0, alice.stderr
            opened = _open_paths(proc.pid)
            (alice_ws,) = [w for w in (srv / "workspaces").iterdir() if (w / "alice.txt").exists()]
            configured = {str(etc / "tokens.json"), str(etc), str(srv / "state"), str(srv / "home"), str(srv / "log" / "telemetry.jsonl"),
                          str(srv / "gcloud"), str(srv / "gcloud" / "application_default_credentials.json"),
                          str(srv / "cwd" / ".env"), str(srv / "cwd"), str(srv / "policies" / "team.toml"),
                          str(srv / "workspaces"), str(alice_ws), str(alice_ws / "alice.txt")}
            # What the server holds open includes its state: the enumeration is real; and
            # the telemetry file holds alice's prompt: a real canary.
            assert any(p.startswith(str(srv / "state")) for p in opened), opened
            deadline = time.monotonic() + 10
            while ALICE_PROMPT not in _text(srv / "log" / "telemetry.jsonl"):
                assert time.monotonic() < deadline, "the telemetry outfile never logged alice's prompt"
                time.sleep(0.2)
            # The root's own listing shows bob's workspace, which is bound inside it: tried apart.
            tried = sorted((opened - {"/"}) | configured - {str(srv / "workspaces")})
            quoted = " ".join("'" + p.replace("'", "'\\''") + "'" for p in tried)
            httpx.post(f"{fake.url}/_script", timeout=10, json=[
                {"function_calls": [{"name": "run_shell_command", "args": {"command": PROBE.format(paths=quoted)}},
                                    {"name": "run_shell_command", "args": {"command": "echo BOB-OWN > own.txt && cat own.txt"}},
                                    {"name": "run_shell_command", "args": {
                                        "command": f"echo ROOT:$(ls -A {srv}/workspaces) CWD:$(basename $PWD)"}}]},
                {"text": "bob done"}]).raise_for_status()
            bob = _client(address, BOB_TOKEN, "look around", tmp_path)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
    assert bob.returncode == 0, bob.stderr
    # bob's shell output, as his model got it.
    seen = json.dumps([part["functionResponse"] for content in fake.requests[-1]["body"]["contents"]
                       for part in content["parts"] if "functionResponse" in part])
    assert "PROBED" in seen and "BOB-OWN" in seen  # the probe ran, and his own workspace works
    assert re.findall(r"SEEN:/[^\\\"]*", seen) == [], seen
    root = re.search(r"ROOT:(\S*) CWD:([\w-]+)", seen)
    assert root and root.group(1) == root.group(2), seen  # of the workspace root, only his own
    for canary in (ALICE_TOKEN, ALICE_PROMPT, ALICE_FILE, "CREDENTIALS-CANARY", API_KEY):
        assert canary not in seen
