"""Issue 30, rewind, against ``serve``: client tools and ``--tools server``,
across a server restart, SQLite and Redis; a second attached client (``attach
--watch``) sees the rewind as one line; another user cannot rewind the session.

Real ``serve`` processes, the fake Gemini server (what the model is sent next
is read from its recorded request bodies), the CLI as a user runs it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from gemini_split.testing import redis_server as rs
from gemini_split.testing.fake_gemini import FakeGemini

from tests.e2e.test_rewind import PROMPTS, SCRIPT
from tests.e2e.test_serve_e2e import API_KEY, _env, daemon
from tests.inprocess import cli
from tests.server.replicas.replicas import replica
from tests.server.resume.test_resume_e2e import ALICE, BOB, _free_port, serve
from tests.server.server_tools.helpers import unix_listener
from tests.tools.sandbox.other_user import other_user, run_as

pytestmark = pytest.mark.timeout(180)


def _client_env(tmp_path, **extra: str) -> dict[str, str]:
    return _env(HOME=str(tmp_path), GEMINI_SPLIT_HOME=str(tmp_path / "home"), **extra)


def run(tmp_path, *args: str) -> subprocess.CompletedProcess:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return cli(list(args), environ=_client_env(tmp_path), cwd=work)


def _session_of(done: subprocess.CompletedProcess) -> str:
    return json.loads(done.stdout)["session_id"]


def _three_turns(tmp_path, *server: str) -> str:
    session = None
    for n, prompt in enumerate(PROMPTS):
        resume = ("--resume", session) if session else ()
        done = run(tmp_path, *server, *resume, "--yolo", "-p", prompt, "-o", "json")
        assert done.returncode == 0, done.stderr
        session = _session_of(done)
    return session


def _watch(tmp_path, server: list[str], session: str) -> subprocess.Popen:
    """``attach SESSION --watch`` in its own process, once it has attached."""
    watcher = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", *server, "attach", session, "--watch", "--limit", "0",
         "--label", "phone"],
        cwd=tmp_path, env=_client_env(tmp_path), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True)
    return watcher


def _until(watcher: subprocess.Popen, needle: str, timeout: float = 60) -> str:
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = watcher.stdout.readline()
        assert line, "".join(seen)
        seen.append(line)
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} not seen: {''.join(seen)}")


def _files(directory) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(directory.iterdir()) if p.is_file()}


def test_through_serve_and_a_restart_with_client_tools_a_watcher_sees_the_rewind_and_the_model_lacks_turns_2_3(
        tmp_path):
    port = _free_port()
    server = ["--server", f"ws://127.0.0.1:{port}"]
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        with serve(tmp_path, fake, tmp_path / "state", port):
            session = _three_turns(tmp_path, *server)
        with serve(tmp_path, fake, tmp_path / "state", port, name="restarted"):
            watcher = _watch(tmp_path, server, session)
            try:
                _until(watcher, "phone")  # attached: clients_changed or the banner
                rewound = run(tmp_path, *server, "--resume", session, "--rewind-to", "2", "--revert-files")
                line = _until(watcher, "⟲")
            finally:
                watcher.kill()
                watcher.wait()
            after = run(tmp_path, *server, "--resume", session, "-p", "what now?")
        bodies = [r["body"] for r in fake.requests]
    assert rewound.returncode == 0, rewound.stderr
    assert "rewound to before: turn two: change a, make b (1 prompt left)" in line
    assert _files(tmp_path / "work") == {"a.txt": "A1\n"}
    assert after.returncode == 0 and after.stdout == "the answer after the rewind\n", after.stderr
    sent = json.dumps(bodies[-1]["contents"])
    assert PROMPTS[0] in sent and PROMPTS[1] not in sent and PROMPTS[2] not in sent


def test_with_tools_on_the_server_the_server_puts_its_workspace_back_across_a_restart(tmp_path):
    root = tmp_path / "workspaces"
    server_tools = ("--server-tools", "--sandbox", "none", "--workspace-root", str(root),
                    "--max-approval-mode", "yolo", "--state-dir", str(tmp_path / "state"))
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake, unix_listener() as listen:
        with daemon(tmp_path, fake, *server_tools, *listen) as (_, address):
            session = _three_turns(tmp_path, "--server", address, "--tools", "server")
            workspace = root / session
            assert _files(workspace) == {"a.txt": "A2\n", "b.txt": "B\n", "c.txt": "C\n"}
            (workspace / "b.txt").write_text("changed on the server by hand\n")
        with daemon(tmp_path, fake, *server_tools, *listen) as (_, address):
            rewound = run(tmp_path, "--server", address, "--tools", "server", "--resume", session,
                          "--rewind-to", "2", "--revert-files")
            files_after = _files(workspace)
            after = run(tmp_path, "--server", address, "--tools", "server", "--resume", session, "-p", "now?")
            deleted = run(tmp_path, "--server", address, "--delete-session", session)
        bodies = [r["body"] for r in fake.requests]
    assert rewound.returncode == 0, rewound.stderr
    assert "a.txt: restored" in rewound.stderr and "c.txt: deleted" in rewound.stderr
    assert "b.txt: skipped — changed since the agent's edit" in rewound.stderr
    assert files_after == {"a.txt": "A1\n", "b.txt": "changed on the server by hand\n"}
    assert after.returncode == 0, after.stderr
    sent = json.dumps(bodies[-1]["contents"])
    assert PROMPTS[0] in sent and PROMPTS[1] not in sent and PROMPTS[2] not in sent
    assert deleted.returncode == 0, deleted.stderr
    assert not (root / ".rewind" / session).exists() and not workspace.exists()  # gone with the session


#: Another local account's raw WebSocket client (a plain ``python3``: the
#: project's venv is not theirs): bob's token, his own session, then a rewind
#: naming alice's session, and a hello that tries to attach to it.
_OTHER = r"""
import base64, json, os, socket, sys

def connect(port, token):
    s = socket.create_connection(("127.0.0.1", port))
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               f"Authorization: Bearer {token}\r\n"
               f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += s.recv(1)
    assert b" 101 " in head.split(b"\r\n")[0], head
    return s

def send(s, obj):
    data = json.dumps(obj).encode()
    mask = os.urandom(4)
    n = len(data)
    header = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big"))
    s.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

def recv(s):
    def exactly(n):
        out = b""
        while len(out) < n:
            chunk = s.recv(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out
    first, second = exactly(2)
    n = second & 0x7F
    if n == 126:
        n = int.from_bytes(exactly(2), "big")
    elif n == 127:
        n = int.from_bytes(exactly(8), "big")
    return json.loads(exactly(n))

port, token, victim, seq = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
s = connect(port, token)
send(s, {"type": "hello", "id": "h", "timestamp": 1, "protocol_version": "1.4", "client": "x"})
first = recv(s)
assert first["type"] == "connected", first
send(s, {"type": "rewind", "id": "r", "timestamp": 2, "session_id": victim, "before_seq": seq})
while True:
    reply = recv(s)
    if reply.get("in_reply_to") == "r":
        break
print(json.dumps(reply))
t = connect(port, token)
send(t, {"type": "hello", "id": "h2", "timestamp": 3, "protocol_version": "1.4", "client": "x",
         "session_id": victim})
print(json.dumps(recv(t)))
"""


def test_another_user_cannot_rewind_the_session_unknown_session_as_for_any_session_not_theirs(tmp_path):
    other = other_user()
    auth = tmp_path / "tokens.json"
    auth.write_text(json.dumps({"tokens": {ALICE: {"userId": "alice"}, BOB: {"userId": "bob"}}}))
    port = _free_port()
    server = ["--server", f"ws://127.0.0.1:{port}", "--token", ALICE]
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake, \
            serve(tmp_path, fake, tmp_path / "state", port, "--auth-config", str(auth)):
        session = _three_turns(tmp_path, *server)
        attempt = run_as(other, ["python3", "-c", _OTHER, str(port), BOB, session, "1"])
        listed = run(tmp_path, *server, "--resume", session, "--rewind-to", "3")
    assert attempt.returncode == 0, attempt.stderr
    rewind_reply, hello_reply = (json.loads(line) for line in attempt.stdout.splitlines())
    assert rewind_reply["type"] == "error" and rewind_reply["code"] == "unknown_session"
    assert hello_reply["type"] == "error" and hello_reply["code"] == "unknown_session"
    assert listed.returncode == 0, listed.stderr  # alice's session still had its three prompts


@pytest.mark.skipif(not rs.available(), reason=rs.MISSING)
def test_on_redis_a_rewind_survives_the_replica_that_made_it(tmp_path, redis_server):
    url = redis_server.url_with_prefix()
    with FakeGemini(script=SCRIPT, api_key=API_KEY) as fake:
        port_a = _free_port()
        with replica(tmp_path, fake, url, port_a, name="a"):
            session = _three_turns(tmp_path, "--server", f"ws://127.0.0.1:{port_a}")
            rewound = run(tmp_path, "--server", f"ws://127.0.0.1:{port_a}", "--resume", session,
                          "--rewind-to", "2", "--revert-files")
        port_b = _free_port()
        with replica(tmp_path, fake, url, port_b, name="b"):
            again = run(tmp_path, "--server", f"ws://127.0.0.1:{port_b}", "--resume", session, "--rewind-to", "2")
            after = run(tmp_path, "--server", f"ws://127.0.0.1:{port_b}", "--resume", session, "-p", "now?")
        bodies = [r["body"] for r in fake.requests]
    assert rewound.returncode == 0, rewound.stderr
    assert _files(tmp_path / "work") == {"a.txt": "A1\n"}
    # On the other replica the session has one prompt left: there is no second one to rewind to.
    assert again.returncode == 42 and "has 1 prompt (1–1)" in again.stderr
    assert after.returncode == 0, after.stderr
    sent = json.dumps(bodies[-1]["contents"])
    assert PROMPTS[0] in sent and PROMPTS[1] not in sent and PROMPTS[2] not in sent
