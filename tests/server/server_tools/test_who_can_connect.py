"""Issue 35 §2, as the attack ran it: another local account must not get a
shell as the ``serve`` user. ``serve --server-tools`` without tokens is
refused on a TCP port (loopback carries no peer identity); served on
``--listen unix:PATH`` instead, a second uid (made with ``useradd``) that
tries to connect is refused and nothing runs; a token-less loopback
``serve`` says at start that every local account can use it; and a client
asking for ``yolo`` of a server not told otherwise is refused (the default
``--max-approval-mode`` is ``auto_edit``)."""

from __future__ import annotations

import json
import os

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from tests.tools.sandbox.other_user import other_user, run_as
from tests.e2e.test_serve_e2e import API_KEY, client, daemon
from .helpers import unix_listener

#: What the attacker ran, from a raw connection (a plain ``python3`` the
#: second account can run; the project's venv is not theirs).
_ATTACK = r"""
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as exc:
    print("CONNECT-FAILED", exc.strerror); sys.exit(0)
s.sendall(json.dumps({"type": "hello", "id": "h", "protocol_version": "1.1", "client": "x",
                      "tools": "server", "approval_mode": "yolo"}).encode() + b"\n")
print(s.makefile().readline())
"""


def test_server_tools_on_a_loopback_port_without_tokens_are_refused_at_start(tmp_path):
    result = client(["serve", "--server-tools", "--listen", "127.0.0.1:0", "--sandbox", "none",
                     "--workspace-root", str(tmp_path / "w")], cwd=tmp_path, env_extra={"GEMINI_API_KEY": "k"})
    assert result.returncode != 0
    assert "refusing --server-tools on ws://127.0.0.1:0 without authentication" in result.stderr
    assert "--auth-config" in result.stderr and "--listen unix:/PATH" in result.stderr
    assert not (tmp_path / "w").exists()


@pytest.mark.timeout(60)
def test_a_loopback_serve_without_tokens_says_every_local_account_can_use_it(tmp_path):
    with FakeGemini(api_key=API_KEY) as fake, daemon(tmp_path, fake) as (proc, _):
        lines = []
        while len(lines) < 5 and not any("every local account" in line for line in lines):
            lines.append(proc.stderr.readline())  # other start-up lines (the model's auth) may come first
    (line,) = [line for line in lines if "every local account" in line]
    assert "every local account on this machine can use this server" in line
    assert "--listen unix:/PATH" in line


@pytest.mark.timeout(90)
def test_another_local_uid_cannot_use_a_unix_socket_serve_with_server_tools(tmp_path):
    other = other_user()
    root = tmp_path / "workspaces"
    with FakeGemini(script=[{"function_calls": [{"name": "run_shell_command", "args": {"command": "id"}}]}],
                    api_key=API_KEY) as fake, unix_listener() as listen, \
            daemon(tmp_path, fake, "--server-tools", "--sandbox", "none", "--workspace-root", str(root),
                   "--max-approval-mode", "yolo", *listen) as (_, address):
        path = address.partition(":")[2]
        directory = os.path.dirname(path)
        # Even with the directory opened up, the kernel's peer uid refuses them.
        os.chmod(directory, 0o711)
        os.chmod(path, 0o666)
        opened = run_as(other, ["python3", "-c", _ATTACK, path])
        os.chmod(directory, 0o700)
        closed = run_as(other, ["python3", "-c", _ATTACK, path])
        own = client(["--server", address, "--tools", "server", "--yolo", "-p", "hi"], cwd=tmp_path)
    reply = json.loads(opened.stdout)
    assert reply["type"] == "error" and reply["code"] == "unauthorized"
    assert f"uid {other.pw_uid} is refused" in reply["message"]
    assert "CONNECT-FAILED Permission denied" in closed.stdout
    assert own.returncode == 0, own.stderr  # its own user is served
    assert len(fake.requests) == 2  # only the owner's prompt reached the model (its call, then its answer)


@pytest.mark.timeout(60)
def test_yolo_is_refused_unless_the_server_allows_it(tmp_path):
    with FakeGemini(api_key=API_KEY) as fake, unix_listener() as listen, \
            daemon(tmp_path, fake, "--server-tools", "--sandbox", "none",
                   "--workspace-root", str(tmp_path / "w"), *listen) as (_, address):
        result = client(["--server", address, "--tools", "server", "--yolo", "-p", "hi"], cwd=tmp_path)
    assert result.returncode != 0
    assert "approval mode yolo is not allowed on this server (at most auto_edit" in result.stderr
    assert not fake.requests
