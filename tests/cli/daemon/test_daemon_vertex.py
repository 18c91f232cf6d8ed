"""The local daemon on Vertex AI: each caller sends where its credentials
are (never a token or a key file's content); the daemon, the same user,
reads them and shares one access token between that caller's sessions."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.testing.fake_google_auth import FakeGoogleAuth

from .conftest import run


@pytest.mark.timeout(90)
def test_sessions_run_on_the_callers_vertex_credentials(home, tmp_path):
    with FakeGoogleAuth() as auth, FakeGemini(access_token=auth.valid) as fake:
        key = auth.service_account_file(tmp_path / "sa.json")
        environ = {k: v for k, v in os.environ.items()
                   if not k.startswith(("GEMINI_", "GOOGLE_")) and k not in ("XDG_RUNTIME_DIR", "CI")}
        environ.update(fake.vertex_env(), GOOGLE_APPLICATION_CREDENTIALS=str(key), GEMINI_SPLIT_HOME=home,
                       GEMINI_SERVER_MODE="local")
        first = run(["-p", "one"], environ, tmp_path)
        second = run(["-p", "two"], environ, tmp_path)
        broken = run(["-p", "three"], dict(environ, GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "nope.json")),
                     tmp_path)
        requests = fake.requests
        tokens = auth.issued()
    assert first.returncode == 0 and first.stdout == "Echo: one\n", first.stderr
    assert second.returncode == 0 and second.stdout == "Echo: two\n", second.stderr
    assert [r["auth"] for r in requests] == ["ok", "ok"]
    assert requests[0]["path"].startswith("/v1beta1/projects/fake-project/locations/us-central1/")
    assert auth.token_requests == 1  # one token for both sessions
    assert broken.returncode == 41, broken.stderr
    assert f"the credentials file {tmp_path / 'nope.json'}" in broken.stderr and "does not exist" in broken.stderr
    log = Path(home, "daemon", "daemon.log").read_text()
    assert not any(t in log for t in tokens) and "PRIVATE KEY" not in log
