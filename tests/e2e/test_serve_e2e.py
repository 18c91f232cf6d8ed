"""``gemini-split serve`` as a daemon and ``--server ws://…`` clients, end to
end: real processes, real sockets, TLS with trustme certificates, tokens in
seed 000's format, and the fake Gemini server behind the daemon."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from types import SimpleNamespace

import httpx
import pytest
import trustme

from gemini_split.protocol import PROTOCOL_VERSION
from gemini_split.testing.fake_gemini import FakeGemini

from tests.inprocess import cli

API_KEY = "daemon-key"
TOKEN = "alice-token-0123456789"


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
    env.update(extra)
    return env


@contextmanager
def daemon(tmp_path, fake, *args, env_extra=None, **popen):
    """A running ``gemini-split serve``; yields ``(process, address)``.
    ``popen``: more ``subprocess.Popen`` arguments."""
    server_dir = tmp_path / "server"
    server_dir.mkdir(exist_ok=True)
    env = _env(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url, **(env_extra or {}))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", *args],
        cwd=server_dir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        **popen,
    )
    try:
        deadline = time.monotonic() + 20
        address = None
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            match = re.search(r"serving on (wss?://\S+|unix:\S+)", line)
            if match:
                address = match.group(1)
                break
        assert address, f"daemon did not start: {proc.stderr.read() if proc.poll() is not None else ''}"
        yield proc, address
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()


def client(args, *, cwd, env_extra=None, timeout=60, in_process=True):
    """A client run against the daemon: in this process (tests/inprocess.py),
    or with ``in_process=False`` as a real subprocess. The client has no API
    key at all: the server holds it."""
    if in_process:
        return cli(args, environ=_env(**(env_extra or {})), cwd=cwd)
    return subprocess.run(
        [sys.executable, "-m", "gemini_split", *args], cwd=cwd, env=_env(**(env_extra or {})),
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=timeout,
    )


@pytest.fixture
def client_dir(tmp_path):
    d = tmp_path / "client"
    d.mkdir()
    (d / "notes.txt").write_text("only the client has this file\n")
    return d


@pytest.fixture
def auth_config(tmp_path):
    path = tmp_path / "auth.json"
    path.write_text(json.dumps({"tokens": {TOKEN: {"userId": "alice", "permissions": ["chat"]}}}))
    return path


def test_read_file_is_answered_from_the_clients_directory(tmp_path, client_dir):
    script = [{"function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, daemon(tmp_path, fake) as (_, address):
        assert not (tmp_path / "server" / "notes.txt").exists()
        result = client(["--server", address, "-p", "read notes.txt", "-o", "json"], cwd=client_dir,
                        in_process=False)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert "only the client has this file" in out["response"]
    assert out["stats"]["tools"]["byName"]["read_file"]["success"] == 1


def test_the_right_token_works_and_a_wrong_or_missing_one_is_refused(tmp_path, client_dir, auth_config):
    with FakeGemini(api_key=API_KEY) as fake, daemon(tmp_path, fake, "--auth-config", str(auth_config)) as (_, address):
        ok = client(["--server", address, "--token", TOKEN, "-p", "hi"], cwd=client_dir)
        via_env = client(["--server", address, "-p", "hi"], cwd=client_dir, env_extra={"GEMINI_SERVER_TOKEN": TOKEN})
        wrong = client(["--server", address, "--token", "not-the-token", "-p", "hi"], cwd=client_dir)
        missing = client(["--server", address, "-p", "hi"], cwd=client_dir)
        model_calls = len(fake.requests)
    assert ok.returncode == 0 and ok.stdout == "Echo: hi\n", ok.stderr
    assert via_env.returncode == 0, via_env.stderr
    for refused in (wrong, missing):
        assert refused.returncode == 41
        assert "token" in refused.stderr.lower() and "Traceback" not in refused.stderr
    assert model_calls == 2  # refused clients never reached a session
    assert TOKEN not in ok.stderr


def test_health_answers_without_auth_and_reveals_nothing_else(tmp_path, auth_config):
    with FakeGemini(api_key=API_KEY) as fake, daemon(tmp_path, fake, "--auth-config", str(auth_config)) as (_, address):
        response = httpx.get(address.replace("ws://", "http://") + "/health", timeout=10)
    assert response.status_code == 200
    body = response.json()
    assert body == {"status": "ok", "version": body["version"], "protocol_version": PROTOCOL_VERSION, "sessions": 0}


def test_wss_works_with_the_ca_and_fails_without_it(tmp_path, client_dir):
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    ca.cert_pem.write_to_path(str(ca_file))
    with FakeGemini(api_key=API_KEY) as fake, daemon(
        tmp_path, fake, "--tls-cert", str(cert_file), "--tls-key", str(key_file)
    ) as (_, address):
        assert address.startswith("wss://")
        good = client(["--server", address, "--ca", str(ca_file), "-p", "secure hi"], cwd=client_dir)
        bad = client(["--server", address, "-p", "secure hi"], cwd=client_dir)
        insecure = client(["--server", address, "--insecure", "-p", "hi"], cwd=client_dir)
    assert good.returncode == 0 and good.stdout == "Echo: secure hi\n", good.stderr
    assert bad.returncode == 1
    assert "certificate verify failed" in bad.stderr and "--ca" in bad.stderr
    assert insecure.returncode == 0 and "NOT verified" in insecure.stderr


def test_listening_on_all_interfaces_without_auth_is_refused(tmp_path):
    # In this process: it must refuse before it serves anything.
    result = cli(["serve", "--listen", "0.0.0.0:0"], environ=_env(GEMINI_API_KEY=API_KEY), cwd=tmp_path)
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0 without authentication" in result.stderr


def test_killing_the_daemon_mid_turn_ends_the_client_with_an_error_within_seconds(tmp_path, client_dir):
    script = [{"text": "z" * 400, "chunks": 400, "chunk_delay": 0.05}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, daemon(tmp_path, fake) as (proc, address):
        started = subprocess.Popen(
            # It tries to reconnect for 1 s (not the default 120), then says so.
            [sys.executable, "-m", "gemini_split", "--server", address, "-p", "long", "--reconnect-timeout", "1"],
            cwd=client_dir, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            assert started.stdout.read(1) == "z"
            proc.kill()
            t0 = time.monotonic()
            _, stderr = started.communicate(timeout=15)
            elapsed = time.monotonic() - t0
        finally:
            started.kill()
    assert started.returncode == 1
    assert "connection" in stderr.lower() and "Traceback" not in stderr
    assert "reconnecting" in stderr and "could not reconnect within 1 s" in stderr
    assert elapsed < 5


def test_sigterm_shuts_down_gracefully_and_tells_the_client(tmp_path, client_dir):
    script = [{"text": "w" * 400, "chunks": 400, "chunk_delay": 0.05}]
    with FakeGemini(script=script, api_key=API_KEY) as fake, daemon(tmp_path, fake) as (proc, address):
        started = subprocess.Popen(
            [sys.executable, "-m", "gemini_split", "--server", address, "-p", "long"],
            cwd=client_dir, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        try:
            assert started.stdout.read(1) == "w"
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)
            _, stderr = started.communicate(timeout=15)
        finally:
            started.kill()
    assert proc.returncode == 0
    assert started.returncode == 1
    assert "shutting down" in stderr


def test_server_is_found_from_seed_environment_variables(tmp_path, client_dir):
    with FakeGemini(api_key=API_KEY) as fake, daemon(tmp_path, fake) as (_, address):
        port = address.rsplit(":", 1)[1]
        # (GEMINI_SERVER_MODE=local is the per-user daemon on a Unix socket: tests/cli/daemon.)
        remote = client(["-p", "via env"], cwd=client_dir, env_extra={
            "GEMINI_SERVER_MODE": "remote", "GEMINI_SERVER_HOST": "127.0.0.1", "GEMINI_SERVER_PORT": port})
    assert remote.returncode == 0 and remote.stdout == "Echo: via env\n", remote.stderr


def test_a_server_that_is_down_is_a_clear_error_not_a_hang(tmp_path, client_dir):
    start = time.monotonic()
    result = client(["--server", "ws://127.0.0.1:9", "-p", "hi"], cwd=client_dir)
    assert result.returncode == 1
    assert "cannot connect" in result.stderr
    assert time.monotonic() - start < 10


@pytest.mark.timeout(90)  # five Python processes start; 25 s is too tight on a loaded 2-core machine
def test_a_model_endpoint_given_by_host_name_serves_clients_at_once(tmp_path, client_dir):
    # serve looks the model's endpoint up through its caching resolver
    # (gemini_split/dns_cache.py): "localhost", from /etc/hosts, connected to as Trio does.
    with FakeGemini(api_key=API_KEY) as fake:
        named = SimpleNamespace(url=fake.url.replace("127.0.0.1", "localhost"))
        assert named.url != fake.url
        with daemon(tmp_path, named) as (_, address):
            procs = [
                subprocess.Popen([sys.executable, "-m", "gemini_split", "--server", address, "-p", f"named {i}",
                                  "-o", "json"], cwd=client_dir, env=_env(), stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for i in range(3)
            ]
            outs = [json.loads(p.communicate(timeout=60)[0]) for p in procs]
        assert len(fake.requests) == 3
    assert sorted(o["response"] for o in outs) == [f"Echo: named {i}" for i in range(3)]


@pytest.mark.timeout(90)  # seven Python processes start; 25 s is too tight on a loaded 2-core machine
def test_many_clients_share_one_daemon_and_each_gets_its_own_session(tmp_path, client_dir):
    with FakeGemini(api_key=API_KEY) as fake, daemon(tmp_path, fake) as (_, address):
        # Two real client processes at once, and four more in this process.
        procs = [
            subprocess.Popen([sys.executable, "-m", "gemini_split", "--server", address, "-p", f"client {i}", "-o", "json"],
                             cwd=client_dir, env=_env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
            for i in range(2)
        ]
        outs = [json.loads(client(["--server", address, "-p", f"client {i}", "-o", "json"], cwd=client_dir).stdout)
                for i in range(2, 6)]
        outs += [json.loads(p.communicate(timeout=60)[0]) for p in procs]
    assert sorted(o["response"] for o in outs) == sorted(f"Echo: client {i}" for i in range(6))
    assert len({o["session_id"] for o in outs}) == 6
