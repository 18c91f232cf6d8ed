"""Vertex AI end to end: ``gemini-split -p`` (embedded) and ``serve`` as real
processes, with a service account, gcloud's user credentials and the
metadata server, all served by local fakes; the errors a person sees
(exit status 41) when credentials are missing or unusable."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

import httpx
import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.testing.fake_google_auth import FakeGoogleAuth

#: Each test starts gemini-split (google-auth and google-genai imported):
#: 1.5 s on a quiet machine, 6-7 s with 8 at once on 2 CPUs, and over the
#: suite's default 25 s once in a run with 10 workers. ``run`` gives up at 60 s.
pytestmark = pytest.mark.timeout(90)

EMAIL = "runner@fake-project.iam.gserviceaccount.com"
VERTEX_PATH = "/v1beta1/projects/fake-project/locations/us-central1/publishers/google/models/"


def environ(tmp_path, **extra) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GEMINI_", "GOOGLE_", "GCE_", "CLOUDSDK_"))}
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # No metadata server unless a test gives one: a closed port, one try.
    env.update(HOME=str(home), GEMINI_SPLIT_HOME=str(home / ".gemini"), GCE_METADATA_IP=f"127.0.0.1:{closed_port()}",
               GCE_METADATA_HOST=f"127.0.0.1:{closed_port()}", GCE_METADATA_DETECT_RETRIES="1")
    env.update(extra)
    return env


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(args, env, cwd, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gemini_split", *args], cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=timeout)


def test_embedded_with_a_service_account_says_which_account_and_never_the_token(tmp_path):
    with FakeGoogleAuth() as auth, FakeGemini(access_token=auth.valid) as fake:
        key = auth.service_account_file(tmp_path / "sa.json")
        env = environ(tmp_path, **fake.vertex_env(), GOOGLE_APPLICATION_CREDENTIALS=str(key))
        result = run(["-p", "hi", "--debug"], env, tmp_path)
        [sent] = fake.requests
        tokens = auth.issued()
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: hi\n"
    assert sent["path"] == VERTEX_PATH + "gemini-2.5-flash:streamGenerateContent" and sent["auth"] == "ok"
    assert (f"Vertex AI, project fake-project, location us-central1, service account {EMAIL} "
            f"(service account key {key})") in result.stderr
    assert tokens and not any(t in result.stderr + result.stdout for t in tokens)
    assert "PRIVATE KEY" not in result.stderr


def test_embedded_with_gclouds_user_credentials(tmp_path):
    with FakeGoogleAuth() as auth, FakeGemini(access_token=auth.valid) as fake:
        env = environ(tmp_path, **fake.vertex_env())
        gcloud = tmp_path / "home" / ".config" / "gcloud"
        gcloud.mkdir(parents=True)
        auth.authorized_user_file(gcloud / "application_default_credentials.json")
        result = run(["-p", "from my laptop", "--debug"], env, tmp_path)
        [sent] = fake.requests
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: from my laptop\n" and sent["auth"] == "ok"
    assert "Vertex AI, project fake-project, location us-central1, user credentials from " in result.stderr


def test_embedded_with_the_metadata_servers_service_account(tmp_path):
    with FakeGoogleAuth(project="metadata-project") as auth, FakeGemini(access_token=auth.valid) as fake:
        env = environ(tmp_path, **fake.vertex_env(), **auth.metadata_env)
        del env["GOOGLE_CLOUD_PROJECT"]  # the metadata server says which project
        result = run(["-p", "on cloud run", "--debug"], env, tmp_path)
        requests = fake.requests
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Echo: on cloud run\n"
    assert requests[0]["project"] == "metadata-project" and requests[0]["auth"] == "ok"
    assert "Vertex AI, project metadata-project, location us-central1, the metadata server's service account" \
        in result.stderr


def test_settings_select_vertex_ai(tmp_path):
    with FakeGoogleAuth() as auth, FakeGemini(access_token=auth.valid) as fake:
        env = environ(tmp_path, **fake.vertex_env(),
                      GOOGLE_APPLICATION_CREDENTIALS=str(auth.service_account_file(tmp_path / "sa.json")))
        del env["GOOGLE_GENAI_USE_VERTEXAI"]
        settings = tmp_path / "home" / ".gemini"
        settings.mkdir()
        (settings / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "vertex-ai"}}}))
        result = run(["-p", "hi"], env, tmp_path)
        assert fake.requests[0]["path"].startswith(VERTEX_PATH)
    assert result.returncode == 0 and result.stdout == "Echo: hi\n", result.stderr


def _exit_41(tmp_path, env) -> str:
    result = run(["-p", "hi"], env, tmp_path)
    assert result.returncode == 41, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    return result.stderr


def test_no_credentials_at_all_lists_the_three_ways(tmp_path):
    message = _exit_41(tmp_path, environ(tmp_path))
    assert "no credentials for Gemini" in message
    assert "GEMINI_API_KEY" in message and "gcloud auth application-default login" in message
    assert "GOOGLE_APPLICATION_CREDENTIALS" in message and "GOOGLE_GENAI_USE_VERTEXAI=true" in message


def test_vertex_ai_without_any_credentials_says_where_it_looked(tmp_path):
    env = environ(tmp_path, GOOGLE_GENAI_USE_VERTEXAI="true", GOOGLE_CLOUD_PROJECT="p")
    message = _exit_41(tmp_path, env)
    assert "no Google Cloud credentials were found" in message
    assert "application_default_credentials.json" in message and "no metadata server" in message


@pytest.mark.parametrize("content, words", [
    (None, "does not exist"),
    ("not json {", "is not JSON"),
    ("[1, 2]", "is not a JSON object"),
    ('{"type": "external_account"}', "has type 'external_account'"),
    ('{"type": "service_account", "client_email": "x@y"}', "(service_account) lacks private_key, token_uri"),
    ('{"type": "service_account", "client_email": "x@y", "private_key": "nope", "token_uri": "http://t"}',
     "(service_account) is unusable"),
    ('{"type": "authorized_user", "client_id": "c"}', "(authorized_user) lacks client_secret, refresh_token"),
])
def test_an_unusable_service_account_file_names_its_path_and_what_is_wrong(tmp_path, content, words):
    path = tmp_path / "key.json"
    if content is not None:
        path.write_text(content)
    env = environ(tmp_path, GOOGLE_GENAI_USE_VERTEXAI="true", GOOGLE_CLOUD_PROJECT="p",
                  GOOGLE_APPLICATION_CREDENTIALS=str(path))
    message = _exit_41(tmp_path, env)
    assert f"the credentials file {path} (from $GOOGLE_APPLICATION_CREDENTIALS)" in message
    assert words in message


def test_a_directory_as_the_credentials_file(tmp_path):
    env = environ(tmp_path, GOOGLE_GENAI_USE_VERTEXAI="true", GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path))
    assert "is a directory" in _exit_41(tmp_path, env)


def test_login_with_google_is_refused_plainly(tmp_path):
    env = environ(tmp_path)
    settings = tmp_path / "home" / ".gemini"
    settings.mkdir()
    (settings / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "oauth-personal"}}}))
    message = _exit_41(tmp_path, env)
    assert "does not sign in with a Google account for you" in message
    assert "GEMINI_API_KEY" in message and "gcloud auth application-default login" in message


def test_login_with_google_in_shared_settings_does_not_hide_an_api_key(tmp_path):
    # gemini-cli writes selectedType to the same settings file; a key in the environment still works.
    with FakeGemini(api_key="k") as fake:
        env = environ(tmp_path, GEMINI_API_KEY="k", GOOGLE_GEMINI_BASE_URL=fake.url)
        settings = tmp_path / "home" / ".gemini"
        settings.mkdir()
        (settings / "settings.json").write_text(json.dumps({"security": {"auth": {"selectedType": "oauth-personal"}}}))
        result = run(["-p", "hi"], env, tmp_path)
    assert result.returncode == 0 and result.stdout == "Echo: hi\n", result.stderr


@contextmanager
def serve(tmp_path, env, *args):
    """A running ``gemini-split serve``; yields ``(process, address, log lines)``."""
    server_dir = tmp_path / "server"
    server_dir.mkdir(exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0", *args],
                            cwd=server_dir, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        address = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and address is None:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            match = re.search(r"serving on (wss?://\S+)", line)
            address = match.group(1) if match else None
        assert address, "".join(lines) + (proc.stderr.read() if proc.poll() is not None else "")
        yield proc, address, lines
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        lines.append(proc.stderr.read())


def _ready(address: str) -> int:
    return httpx.get(address.replace("ws://", "http://") + "/ready", timeout=5).status_code


def _wait_ready(address: str, status: int, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while _ready(address) != status:
        assert time.monotonic() < deadline, f"/ready never answered {status}"
        time.sleep(0.2)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_serve_on_vertex_with_a_service_account_logs_the_account_and_is_ready_only_with_a_token(tmp_path):
    with FakeGoogleAuth(lifetime=3) as auth, FakeGemini(access_token=auth.valid) as fake:
        key = auth.service_account_file(tmp_path / "sa.json")
        env = environ(tmp_path, **fake.vertex_env(), GOOGLE_APPLICATION_CREDENTIALS=str(key))
        with serve(tmp_path, env) as (proc, address, log):
            client_env = environ(tmp_path)
            first = run(["--server", address, "-p", "through serve"], client_env, tmp_path)
            _wait_ready(address, 200)
            auth.mode = "down"  # the token expires and no new one can be had
            _wait_ready(address, 503)
            auth.mode = "ok"
            _wait_ready(address, 200)
            second = run(["--server", address, "-p", "again"], client_env, tmp_path)
        tokens = auth.issued()
        requests = fake.requests
    assert first.returncode == 0 and first.stdout == "Echo: through serve\n", first.stderr
    assert second.returncode == 0 and second.stdout == "Echo: again\n", second.stderr
    assert [r["auth"] for r in requests] == ["ok", "ok"]
    text = "".join(log)
    assert (f"the model is reached through Vertex AI, project fake-project, location us-central1, "
            f"service account {EMAIL}") in text
    assert "no access token can be had for the model" in text
    assert not any(t in text for t in tokens) and "PRIVATE KEY" not in text


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_about_in_the_repl_names_the_vertex_account_and_the_server(tmp_path):
    from tests.ui.repl.pty_driver import ENTER, PtyProcess

    with FakeGoogleAuth() as auth, FakeGemini(access_token=auth.valid) as fake:
        key = auth.service_account_file(tmp_path / "sa.json")
        env = environ(tmp_path, **fake.vertex_env(), GOOGLE_APPLICATION_CREDENTIALS=str(key), NO_COLOR="1",
                      TERM="xterm-256color")
        work = tmp_path / "work"
        work.mkdir()
        repl = PtyProcess([sys.executable, "-m", "gemini_split"], env=env, cwd=str(work), rows=40, cols=200)
        try:
            repl.expect(r"/help for commands", timeout=20)
            repl.expect("› ")
            repl.type("/about")
            repl.send(ENTER)
            repl.expect(r"version\s+gemini-split \S+")
            repl.expect(r"model\s+gemini-2\.5-flash")
            # (the table may wrap the line: any white space between words)
            words = f"Vertex AI, project fake-project, location us-central1, service account {EMAIL}".split()
            repl.expect(r"auth\s+" + r"\s+".join(re.escape(w) for w in words))
            repl.expect(r"server\s+embedded")
            repl.expect("› ")
            repl.type("/server status")
            repl.send(ENTER)
            repl.expect(r"model auth\s+Vertex\s+AI,\s+project\s+fake-project")
            repl.expect("› ")
            tokens = auth.issued()
            assert not any(t in repl.text for t in tokens)
        finally:
            repl.close()
