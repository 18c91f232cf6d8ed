"""Telemetry of ``serve`` (issue 31 §13): the operator's flags turn it on for
the model calls the server makes; a client records its own side under its
own settings, and the two join on the session and request ids; ``/metrics``
is as it was."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import httpx
import pytest

from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.testing.otlp_collector import OtlpCollector

from tests.e2e.test_serve_e2e import client, daemon

PROMPT_MARK = "tangerine-prompt-marker"


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_serve_exports_its_model_calls_and_the_client_its_prompt_joined_by_session_and_request(tmp_path):
    outfile = tmp_path / "client-telemetry.log"
    script = [{"text": "served answer"}]
    with OtlpCollector() as collector, FakeGemini(script=script, api_key="daemon-key") as fake, \
            daemon(tmp_path, fake, "--telemetry", "--telemetry-otlp-protocol", "http",
                   "--telemetry-otlp-endpoint", collector.url) as (proc, address):
        result = client(["--server", address, "-p", f"hello {PROMPT_MARK}"], cwd=tmp_path, env_extra={
            "GEMINI_TELEMETRY_ENABLED": "true", "GEMINI_TELEMETRY_OUTFILE": str(outfile),
            "GEMINI_SPLIT_HOME": str(tmp_path / "client-home")})
        assert result.returncode == 0, result.stderr
        assert result.stdout == "served answer\n"
        collector.wait_for(lambda c: c.events("gemini_cli.api_response"))
        http = address.replace("ws://", "http://")
        metrics = httpx.get(f"{http}/metrics", timeout=10)
    # /metrics: the Prometheus text it always was.
    assert metrics.status_code == 200 and "# TYPE gemini_split_sessions_live gauge" in metrics.text

    names = set(collector.event_names())
    assert {"gemini_cli.config", "gemini_cli.api_request", "gemini_cli.api_response"} <= names
    assert "gemini_cli.user_prompt" not in names  # the client's side, not the server's to report
    (response,) = collector.events("gemini_cli.api_response")
    (config,) = collector.events("gemini_cli.config")
    assert config["attributes"]["server"] == "server" and config["attributes"]["log_user_prompts_enabled"] is False
    assert PROMPT_MARK.encode() not in collector.everything()  # logPrompts is off unless the operator says
    assert "request_text" not in collector.events("gemini_cli.api_request")[0]["attributes"]

    # The client's own records (its settings: an outfile) name the same session and request.
    client_records = _json_objects(outfile.read_text())
    (prompt,) = [r for r in client_records if r.get("attributes", {}).get("event.name") == "gemini_cli.user_prompt"]
    assert prompt["attributes"]["session.id"] == response["attributes"]["session.id"]
    assert prompt["attributes"]["prompt_id"] == response["attributes"]["prompt_id"]
    assert not any(r.get("attributes", {}).get("event.name") == "gemini_cli.api_request" for r in client_records)

    # A server's metrics carry no session.id: one series per session would grow without end.
    collector.wait_for(lambda c: c.metric_points("gemini_cli.api.request.count"))
    (count,) = collector.metric_points("gemini_cli.api.request.count")
    assert count[1] == 1 and "session.id" not in count[0]


def _json_objects(text: str) -> list[dict]:
    """gemini-cli's outfile: indented JSON objects one after another."""
    decoder, out, i = json.JSONDecoder(), [], 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text):
            value, i = decoder.raw_decode(text, i)
            out.append(value)
    return out


@pytest.mark.timeout(60)
def test_serve_with_telemetry_on_an_unknown_protocol_is_refused_before_it_listens(tmp_path):
    with FakeGemini(script=[], api_key="daemon-key") as fake:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_"))}
        env.update(GEMINI_API_KEY="daemon-key", GOOGLE_GEMINI_BASE_URL=fake.url,
                   GEMINI_TELEMETRY_ENABLED="true", GEMINI_TELEMETRY_OTLP_PROTOCOL="udp")
        result = subprocess.run([sys.executable, "-m", "gemini_split", "serve", "--listen", "127.0.0.1:0",
                                 "--state-dir", ":memory:"], cwd=tmp_path, env=env, capture_output=True,
                                text=True, timeout=30)
    assert result.returncode == 52
    assert "Invalid telemetry OTLP protocol: udp. Valid values are: grpc, http" in result.stderr
