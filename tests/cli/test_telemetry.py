"""Telemetry for operators (issue 31 §13): a ``-p`` run against the fake
Gemini server, exported to a real OTLP collector (HTTP and gRPC, the
protobuf bodies parsed with opentelemetry-proto) or to gemini-cli's JSON
outfile; what never leaves; a dead collector costs a run no more than the
close budget."""

from __future__ import annotations

import json
import os
import socket
import stat
import time

import pytest

from gemini_split import telemetry
from gemini_split.telemetry import TelemetryConfig
from gemini_split.testing.fake_gemini import FakeGemini
from gemini_split.testing.otlp_collector import OtlpCollector

from tests.inprocess import cli

API_KEY = "AIzaTelemetryTestKey0123456789"
SECRET = "tok-9f8e7d6c5b4a3210"  # in the environment, and typed into a prompt
PROMPT_MARK = "purple-elephant-prompt"
FILE_MARK = "contents-of-notes-zebra"
READ_NOTES = [{"function_calls": [{"name": "read_file", "args": {"file_path": "notes.txt"}}]},
              {"text": "The notes mention a zebra."}]


def run(tmp_path, fake, *args, telemetry=None, stdin=""):
    """``gemini-split ARGS`` in this process, its own home, telemetry as
    ``telemetry`` (GEMINI_TELEMETRY_* variables) says."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GEMINI_", "GOOGLE_", "OTEL_"))}
    env.update(GEMINI_API_KEY=API_KEY, GOOGLE_GEMINI_BASE_URL=fake.url, GEMINI_SPLIT_HOME=str(tmp_path / "home"),
               DEPLOY_TOKEN=SECRET)
    env.update({f"GEMINI_TELEMETRY_{k.upper()}": v for k, v in (telemetry or {}).items()})
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    (work / "notes.txt").write_text(f"{FILE_MARK}\n")
    return cli(list(args), environ=env, cwd=work, stdin=stdin)


def otlp_http(collector, **more):
    return {"enabled": "true", "otlp_endpoint": collector.url, "otlp_protocol": "http", **more}


def test_a_one_shot_run_exports_gemini_cli_events_and_metrics_to_an_otlp_http_collector(tmp_path):
    with OtlpCollector() as collector, FakeGemini(script=READ_NOTES, api_key=API_KEY) as fake:
        result = run(tmp_path, fake, "-p", "summarise notes.txt", "--yolo", telemetry=otlp_http(collector))
        collector.wait_for(lambda c: c.metric_points("gemini_cli.api.request.count"))
    assert result.returncode == 0, result.stderr
    assert "zebra" in result.stdout
    assert {"/v1/logs", "/v1/metrics"} <= set(collector.paths)
    names = collector.event_names()
    assert names.count("gemini_cli.api_request") == 2 and names.count("gemini_cli.api_response") == 2
    assert {"gemini_cli.config", "gemini_cli.user_prompt", "gemini_cli.tool_call"} <= set(names)

    (prompt,) = collector.events("gemini_cli.user_prompt")
    (tool,) = collector.events("gemini_cli.tool_call")
    response = collector.events("gemini_cli.api_response")[0]
    assert prompt["body"] == f"User prompt. Length: {len('summarise notes.txt')}."
    assert prompt["attributes"]["prompt_length"] == len("summarise notes.txt")
    # One session and one request, seen alike by the client's and the model's side.
    sessions = {r["attributes"]["session.id"] for r in collector.logs if r["attributes"].get("session.id")}
    assert len(sessions) == 1 and next(iter(sessions)).startswith("s-")
    assert {r["attributes"]["prompt_id"] for r in collector.logs if "prompt_id" in r["attributes"]} \
        == {prompt["attributes"]["prompt_id"]}
    assert {k: tool["attributes"][k] for k in ("function_name", "success", "decision", "tool_type")} \
        == {"function_name": "read_file", "success": True, "decision": "accept", "tool_type": "native"}
    assert response["attributes"]["model"] == "gemini-2.5-flash"
    assert response["attributes"]["status_code"] == 200 and response["attributes"]["input_token_count"] > 0
    assert {r["scope"] for r in collector.logs} == {"gemini-cli"}
    assert collector.logs[0]["resource"]["service.name"] == "gemini-split"

    (count,) = collector.metric_points("gemini_cli.api.request.count")
    assert count[1] == 2 and count[0]["model"] == "gemini-2.5-flash" and count[0]["status_code"] == 200
    tokens = {attrs["type"]: value for attrs, value in collector.metric_points("gemini_cli.token.usage")}
    assert set(tokens) == {"input", "output", "cache", "thought", "tool"} and tokens["input"] > 0
    (calls,) = collector.metric_points("gemini_cli.tool.call.count")
    assert calls[0]["function_name"] == "read_file" and calls[1] == 1
    assert collector.metric_points("gemini_cli.session.count")[0][1] == 1
    assert collector.metric_points("gemini_cli.api.request.latency")[0][1]["count"] == 2


def test_without_log_prompts_no_prompt_text_file_content_or_secret_leaves_the_process(tmp_path):
    prompt = f"summarise notes.txt {PROMPT_MARK} {SECRET}"
    with OtlpCollector() as collector, FakeGemini(script=READ_NOTES, api_key=API_KEY) as fake:
        result = run(tmp_path, fake, "-p", prompt, "--yolo", telemetry=otlp_http(collector))
        collector.wait_for(lambda c: c.metric_points("gemini_cli.tool.call.count"))
    assert result.returncode == 0, result.stderr
    exported = collector.everything()
    assert b"gemini_cli.user_prompt" in exported and b"gemini_cli.api_response" in exported
    for text in (PROMPT_MARK, FILE_MARK, "zebra", SECRET, API_KEY, "notes.txt"):
        assert text.encode() not in exported, text
    (event,) = collector.events("gemini_cli.user_prompt")
    assert "prompt" not in event["attributes"] and event["attributes"]["prompt_length"] == len(prompt)
    assert "function_args" not in collector.events("gemini_cli.tool_call")[0]["attributes"]


def test_with_log_prompts_prompts_and_answers_are_exported_but_secrets_never(tmp_path):
    prompt = f"summarise notes.txt {PROMPT_MARK} {SECRET}"
    with OtlpCollector() as collector, FakeGemini(script=READ_NOTES, api_key=API_KEY) as fake:
        result = run(tmp_path, fake, "-p", prompt, "--yolo", telemetry=otlp_http(collector, log_prompts="true"))
        collector.wait_for(lambda c: c.metric_points("gemini_cli.tool.call.count"))
    assert result.returncode == 0, result.stderr
    (event,) = collector.events("gemini_cli.user_prompt")
    assert event["attributes"]["prompt"] == f"summarise notes.txt {PROMPT_MARK} [REDACTED]"
    assert json.loads(collector.events("gemini_cli.tool_call")[0]["attributes"]["function_args"]) \
        == {"file_path": "notes.txt"}
    second = collector.events("gemini_cli.api_request")[1]["attributes"]["request_text"]
    assert FILE_MARK in second  # the tool's result went to the model, and so into the record
    assert "zebra" in collector.events("gemini_cli.api_response")[1]["attributes"]["response_text"]
    exported = collector.everything()
    assert SECRET.encode() not in exported and API_KEY.encode() not in exported


def test_otlp_grpc_is_the_default_protocol_as_in_gemini_cli(tmp_path):
    with OtlpCollector(grpc=True) as collector, FakeGemini(script=[{"text": "hi"}], api_key=API_KEY) as fake:
        result = run(tmp_path, fake, "-p", "hello", telemetry={"enabled": "1", "otlp_endpoint": collector.grpc_url})
        collector.wait_for(lambda c: c.metric_points("gemini_cli.api.request.count"))
    assert result.returncode == 0, result.stderr
    assert {"gemini_cli.user_prompt", "gemini_cli.api_request", "gemini_cli.api_response"} \
        <= set(collector.event_names())
    assert collector.paths == []  # nothing came over HTTP


def _json_objects(text: str) -> list[dict]:
    decoder, objects, i = json.JSONDecoder(), [], 0
    while i < len(text):
        while i < len(text) and text[i].isspace():
            i += 1
        if i < len(text):
            value, i = decoder.raw_decode(text, i)
            objects.append(value)
    return objects


def test_target_local_with_an_outfile_appends_gemini_cli_json_records(tmp_path):
    outfile = tmp_path / "telemetry.log"
    with FakeGemini(script=READ_NOTES, api_key=API_KEY) as fake:
        result = run(tmp_path, fake, "-p", "summarise notes.txt", "--yolo",
                     telemetry={"enabled": "true", "target": "local", "outfile": str(outfile)})
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(outfile.stat().st_mode) == 0o600  # with logPrompts it would hold prompts
    text = outfile.read_text()
    assert text.startswith("{\n  \"")  # gemini-cli's JSON.stringify(record, null, 2), one after another
    objects = _json_objects(text)
    logs = [o for o in objects if "attributes" in o]
    collections = [o for o in objects if "scopeMetrics" in o]
    events = {o["attributes"]["event.name"]: o for o in logs}
    assert {"gemini_cli.config", "gemini_cli.user_prompt", "gemini_cli.api_request", "gemini_cli.api_response",
            "gemini_cli.tool_call"} <= set(events)
    record = events["gemini_cli.tool_call"]
    assert set(record) == {"hrTime", "hrTimeObserved", "resource", "instrumentationScope", "attributes", "_body"}
    assert record["_body"].startswith("Tool call: read_file. Decision: accept. Success: true. Duration: ")
    assert record["instrumentationScope"] == {"name": "gemini-cli"}
    assert ["service.name", "gemini-split"] in record["resource"]["_rawAttributes"]
    assert len(record["hrTime"]) == 2 and record["hrTime"][0] > 1_600_000_000
    metrics = {m["descriptor"]["name"]: m for sm in collections[-1]["scopeMetrics"] for m in sm["metrics"]}
    count = metrics["gemini_cli.api.request.count"]
    assert count["descriptor"]["type"] == "COUNTER" and count["dataPointType"] == 3
    assert count["dataPoints"][0]["value"] == 2 and count["dataPoints"][0]["attributes"]["model"] == "gemini-2.5-flash"
    latency = metrics["gemini_cli.tool.call.latency"]
    assert latency["dataPointType"] == 0 and latency["dataPoints"][0]["value"]["count"] == 1
    assert FILE_MARK not in text and "summarise" not in text


def test_telemetry_is_off_by_default_and_the_run_writes_nothing_for_it(tmp_path):
    with OtlpCollector() as collector, FakeGemini(script=[{"text": "hi"}], api_key=API_KEY) as fake:
        result = run(tmp_path, fake, "-p", "hello", telemetry={"otlp_endpoint": collector.url, "otlp_protocol": "http"})
        time.sleep(0.3)
    assert result.returncode == 0 and result.stdout == "hi\n" and result.stderr == ""
    assert collector.raw == [] and not (tmp_path / "home" / "installation_id").exists()


def test_settings_json_turns_it_on_and_a_bad_target_is_a_configuration_error(tmp_path):
    outfile = tmp_path / "from-settings.log"
    (tmp_path / "home").mkdir()
    settings = tmp_path / "home" / "settings.json"
    settings.write_text(json.dumps({"telemetry": {"enabled": True, "outfile": str(outfile)}}))
    with FakeGemini(script=[{"text": "hi"}, {"text": "hi"}], api_key=API_KEY) as fake:
        result = run(tmp_path, fake, "-p", "hello")
        assert result.returncode == 0, result.stderr
        assert "gemini_cli.user_prompt" in outfile.read_text()
        bad = run(tmp_path, fake, "-p", "hello", telemetry={"target": "datadog"})
    assert bad.returncode == 52
    assert "Invalid telemetry target: datadog. Valid values are: local, gcp" in bad.stderr


def _dead_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("protocol,dead", [("http", "refused"), ("http", "silent"), ("grpc", "refused"),
                                            ("grpc", "silent")])
def test_a_dead_collector_costs_a_run_at_most_the_close_budget_and_one_warning(tmp_path, protocol, dead):
    silent = socket.socket()  # accepts connections (the kernel does) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    port = silent.getsockname()[1] if dead == "silent" else _dead_port()
    script = [{"text": "warm"}, {"text": "first"}, {"text": "second"}]
    try:
        with FakeGemini(script=script, api_key=API_KEY) as fake:
            # Everything imported once (the SDK too), so that the runs compared differ only by the collector.
            run(tmp_path, fake, "-p", "hello", telemetry={"enabled": "true", "outfile": str(tmp_path / "warm.log")})
            began = time.monotonic()
            quiet = run(tmp_path, fake, "-p", "hello")
            baseline = time.monotonic() - began
            began = time.monotonic()
            result = run(tmp_path, fake, "-p", "hello", telemetry={
                "enabled": "true", "otlp_endpoint": f"http://127.0.0.1:{port}", "otlp_protocol": protocol})
            took = time.monotonic() - began
    finally:
        silent.close()
    assert quiet.returncode == 0 and result.returncode == 0, result.stderr
    assert result.stdout == "second\n"
    # The close budget (1 s) plus what the baseline does not pay: the SDK and
    # the OTLP exporter's imports (~0.5 s quiet, over 1 s on a loaded CI
    # machine). An exporter left to its own timeout (10 s) stays far above.
    assert took - baseline < 2.5, (took, baseline)
    warnings = [line for line in result.stderr.splitlines() if "telemetry" in line]
    assert len(warnings) == 1, result.stderr
    assert f"127.0.0.1:{port}" in warnings[0] and "dropped" in warnings[0]


@pytest.mark.timeout(60)
def test_a_dead_collector_of_another_run_in_the_process_costs_this_run_nothing(tmp_path):
    """The SDK's log lines name no exporter: those of a run whose collector
    is dead (still retrying after its command returned, in a long-lived
    process) once made a healthy run's close give up at once, its last
    records dropped with a warning."""
    said: dict[str, list[str]] = {"dead": [], "alive": []}
    dead = TelemetryConfig(enabled=True, otlp_endpoint=f"http://127.0.0.1:{_dead_port()}", otlp_protocol="grpc")
    # Slow, so that the close's last export takes longer than the 0.2 s a
    # close hearing trouble waits: well within the close budget (1 s).
    with OtlpCollector(delay=0.35) as collector:
        alive = TelemetryConfig(enabled=True, otlp_endpoint=collector.url, otlp_protocol="http")
        with telemetry.activated(dead, role="client", warn=said["dead"].append) as failing:
            failing.user_prompt("to nowhere", prompt_id="p-dead", session_id="s-dead")
            with telemetry.activated(alive, role="client", warn=said["alive"].append) as working:
                working.user_prompt("hello", prompt_id="p-alive", session_id="s-alive")
                working.tool_call("read_file", {}, duration_ms=3, success=True, decision="accept",
                                  prompt_id="p-alive", session_id="s-alive")
                deadline = time.monotonic() + 30
                while not said["dead"] and time.monotonic() < deadline:  # its retries were all heard
                    time.sleep(0.05)
                assert said["dead"], "the dead collector's run never warned"
            collector.wait_for(lambda c: c.metric_points("gemini_cli.tool.call.count"))
            assert [e["attributes"]["prompt_id"] for e in collector.events("gemini_cli.user_prompt")] == ["p-alive"]
            assert said["alive"] == []
    assert len(said["dead"]) == 1 and "dropped" in said["dead"][0]


def test_an_automatic_compression_is_recorded_with_its_token_counts(tmp_path):
    outfile = tmp_path / "telemetry.log"
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "settings.json").write_text(json.dumps({
        "model": {"compressionThreshold": 0.0001}, "telemetry": {"enabled": True, "outfile": str(outfile)}}))
    script = [{"text": "Paris is the capital of France. " * 60},
              {"text": "<state_snapshot><overall_goal>capitals</overall_goal></state_snapshot>"}, {"text": "Madrid."}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        assert run(tmp_path, fake, "-p", "capital of France?").returncode == 0
        second = run(tmp_path, fake, "-r", "latest", "-p", "and Spain?")
    assert second.returncode == 0 and second.stdout == "Madrid.\n", second.stderr
    (compression,) = [o for o in _json_objects(outfile.read_text())
                      if o.get("attributes", {}).get("event.name") == "gemini_cli.chat_compression"]
    before, after = compression["attributes"]["tokens_before"], compression["attributes"]["tokens_after"]
    assert before > after > 0
    assert compression["_body"] == f"Chat compression (Saved {before - after} tokens)"


#: A BeforeTool hook that points read_file at other.txt instead.
REDIRECT = r'''#!/usr/bin/env python3
import json
print(json.dumps({"decision": "allow", "hookSpecificOutput": {"tool_input": {"file_path": "other.txt"}}}))
'''


def test_a_tool_call_a_before_tool_hook_rewrote_is_recorded_with_the_arguments_that_ran(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    hook = home / "redirect.py"
    hook.write_text(REDIRECT)
    hook.chmod(0o755)
    (home / "settings.json").write_text(json.dumps({"hooks": {"BeforeTool": [
        {"matcher": "read_file", "hooks": [{"type": "command", "command": str(hook)}]}]}}))
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "other.txt").write_text("the other file\n")
    with OtlpCollector() as collector, FakeGemini(script=READ_NOTES, api_key=API_KEY) as fake:
        result = run(tmp_path, fake, "-p", "summarise notes.txt",
                     telemetry=otlp_http(collector, log_prompts="true"))
        # What is asserted is in the logs: waiting for the metrics too would
        # hang on a close that ran out of its budget on a loaded machine.
        collector.wait_for(lambda c: c.events("gemini_cli.tool_call") and len(c.events("gemini_cli.api_request")) == 2)
    assert result.returncode == 0, result.stderr
    assert "the other file" in collector.events("gemini_cli.api_request")[1]["attributes"]["request_text"]
    (tool,) = collector.events("gemini_cli.tool_call")
    assert json.loads(tool["attributes"]["function_args"]) == {"file_path": "other.txt"}
    assert (tool["attributes"]["decision"], tool["attributes"]["success"]) == ("accept", True)
