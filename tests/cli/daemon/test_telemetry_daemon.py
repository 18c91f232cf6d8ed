"""Telemetry through the local daemon (issue 31 §13): the thin client records
its prompt, the daemon the model calls it makes, both under the user's
settings, joined by session and request."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .conftest import API_KEY, run

pytestmark = pytest.mark.timeout(90)


def _events(path: Path) -> dict[str, list[dict]]:
    decoder, found, text, i = json.JSONDecoder(), {}, path.read_text() if path.exists() else "", 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text):
            value, i = decoder.raw_decode(text, i)
            name = value.get("attributes", {}).get("event.name")
            if name:
                found.setdefault(name, []).append(value["attributes"])
    return found


def test_through_the_daemon_the_client_records_the_prompt_and_the_daemon_the_model_calls(environ, home, tmp_path):
    outfile = tmp_path / "telemetry.log"
    Path(home, "settings.json").write_text(json.dumps({"telemetry": {"enabled": True, "outfile": str(outfile)}}))
    with FakeGemini([{"text": "via the daemon"}], api_key=API_KEY) as fake:
        done = run(["-p", "hello"], {**environ, "GOOGLE_GEMINI_BASE_URL": fake.url}, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == "via the daemon\n"
        deadline = time.monotonic() + 20  # the daemon's batch of log records goes out within a second or so
        while "gemini_cli.api_response" not in _events(outfile) and time.monotonic() < deadline:
            time.sleep(0.1)
    assert Path(home, "daemon", "daemon.sock").exists()  # it went through the daemon
    events = _events(outfile)
    (prompt,) = events["gemini_cli.user_prompt"]
    (request,) = events["gemini_cli.api_request"]
    assert request["session.id"] == prompt["session.id"] and request["prompt_id"] == prompt["prompt_id"]
    client, server = sorted(events["gemini_cli.config"], key=lambda c: c["server"] == "server")
    assert client["server"].startswith("unix:") and server["server"] == "server"  # one config from each side
