"""-o json / stream-json / text, field for field against what gemini-cli
0.61.0 wrote for the same script on the same fake Gemini server
(fixtures/observed/)."""

from __future__ import annotations

import json

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, FIXTURES, Sandbox

pytestmark = pytest.mark.timeout(60)

OBSERVED = FIXTURES / "observed"
#: The script gemini-cli was run with: text, a read_file call, then text.
TOOL_SCRIPT = [
    {"text": "Let me look. ", "function_calls": [{"name": "read_file", "args": {"file_path": "a.txt"}}]},
    {"text": "It says alpha beta.", "chunks": 2},
]
RETRY_SCRIPT = [{"error": {"status": 503, "message": "overloaded"}}, {"text": "recovered"}]


def keys(value, prefix=""):
    """Every key path of a JSON value (dict keys only; lists by their first item)."""
    out = set()
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(prefix + k)
            out |= keys(v, prefix + k + ".")
    elif isinstance(value, list) and value:
        out |= keys(value[0], prefix)
    return out


def kind(event):
    return event["type"] + ("/" + event["role"] if "role" in event else "")


def collapsed(events):
    out = []
    for event in events:
        if not out or out[-1] != kind(event):
            out.append(kind(event))
    return out


def model_agnostic(paths):
    return {p.replace("gemini-2.5-flash", "<model>") for p in paths}


@pytest.fixture
def box(tmp_path) -> Sandbox:
    box = Sandbox(tmp_path).setup()
    (box.project / "a.txt").write_text("alpha beta\n")
    return box


def run(box, script, *args, **env):
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        return box.run(["-p", "what is in a.txt", "-m", "gemini-2.5-flash", *args], fake=fake, **env)


def test_json_has_gemini_clis_fields_and_response_after_the_last_tool_call(box):
    result = run(box, TOOL_SCRIPT, "-o", "json")
    assert result.status == 0, result.stderr
    ours = json.loads(result.stdout)
    theirs = json.loads((OBSERVED / "json-tool-call.json").read_text())
    assert model_agnostic(keys(ours)) == model_agnostic(keys(theirs))
    assert ours["response"] == theirs["response"] == "It says alpha beta."
    assert "error" not in ours
    stats = ours["stats"]
    model = stats["models"]["gemini-2.5-flash"]
    assert model["api"]["totalRequests"] == 2 and model["api"]["totalErrors"] == 0
    assert model["roles"]["main"]["totalRequests"] == 2
    t = model["tokens"]
    assert t["input"] == t["prompt"] - t["cached"] and t["total"] >= t["prompt"] + t["candidates"]
    assert stats["tools"]["byName"]["read_file"]["count"] == 1
    assert stats["tools"]["totalCalls"] == stats["tools"]["totalSuccess"] == 1
    assert stats["tools"]["totalDecisions"] == theirs["stats"]["tools"]["totalDecisions"]


def test_stream_json_is_compact_and_has_gemini_clis_events(box):
    result = run(box, TOOL_SCRIPT, "-o", "stream-json")
    assert result.status == 0, result.stderr
    lines = result.stdout.splitlines()
    theirs = (OBSERVED / "stream-json-tool-call.jsonl").read_text().splitlines()
    assert all(", " not in line.split('"content"')[0] and '": ' not in line for line in lines)
    ours_events = [json.loads(line) for line in lines]
    their_events = [json.loads(line) for line in theirs]
    # Text deltas may be merged in transit; the sequence of kinds is the same.
    assert collapsed(ours_events) == collapsed(their_events)
    by_kind = {kind(e): e for e in their_events}
    for event in ours_events:
        assert model_agnostic(keys(event)) == model_agnostic(keys(by_kind[kind(event)])), kind(event)
    assert lines[-1].startswith('{"type":"result","timestamp":')


def test_text_puts_a_newline_between_messages_split_by_a_tool_call(box):
    result = run(box, TOOL_SCRIPT)
    assert result.stdout == (OBSERVED / "text-tool-call.txt").read_text() == "Let me look. \nIt says alpha beta.\n"


def test_a_recovered_retry_is_not_an_error_event_and_is_counted(box):
    result = run(box, RETRY_SCRIPT, "-o", "stream-json")
    assert result.status == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    theirs = [json.loads(line) for line in (OBSERVED / "stream-json-retry.jsonl").read_text().splitlines()]
    assert collapsed(events) == collapsed(theirs) == ["init", "message/user", "message/assistant", "result"]
    assert "retry" in result.stderr.lower()
    result = run(box, RETRY_SCRIPT, "-o", "json")
    api = json.loads(result.stdout)["stats"]["models"]["gemini-2.5-flash"]["api"]
    observed = json.loads((OBSERVED / "json-retry.json").read_text())["stats"]["models"]["gemini-2.5-flash"]["api"]
    assert (api["totalRequests"], api["totalErrors"]) == (observed["totalRequests"], observed["totalErrors"]) == (2, 1)
    assert sum(api["errorsByType"].values()) == 1


def test_an_api_error_result_keeps_its_stats_shape(box):
    result = run(box, [{"error": {"status": 400, "message": "bad thing"}}], "-o", "stream-json")
    assert result.status != 0
    last = json.loads(result.stdout.splitlines()[-1])
    theirs = json.loads((OBSERVED / "stream-json-api-error.jsonl").read_text().splitlines()[-1])
    assert last["status"] == theirs["status"] == "error"
    assert model_agnostic(keys(last)) == model_agnostic(keys(theirs))
    assert "bad thing" in last["error"]["message"]


def test_json_error_object_carries_stats_and_the_exit_status(box):
    result = run(box, [{"error": {"status": 400, "message": "bad thing"}}], "-o", "json")
    out = json.loads(result.stdout)
    assert out["error"]["code"] == result.status != 0
    assert "bad thing" in out["error"]["message"]
    assert "stats" in out and "response" not in out


def test_escape_sequences_in_model_text_are_shown_not_obeyed(box):
    script = [{"text": "red \x1b[31mALERT\x1b[0m done"}]
    plain = run(box, script)
    assert "\x1b" not in plain.stdout and "ALERT" in plain.stdout
    raw = run(box, script, "--raw-output")
    assert "\x1b[31m" in raw.stdout and "--raw-output" in raw.stderr
    quiet = run(box, script, "--raw-output", "--accept-raw-output-risk")
    assert "WARNING" not in quiet.stderr


def test_files_lines_added_and_removed_count_the_edits(box):
    (box.project / "b.txt").write_text("one\ntwo\n")
    edits = {"function_calls": [
        {"name": "write_file", "args": {"file_path": "new.txt", "content": "a\nb\nc\n"}},
        {"name": "replace", "args": {"file_path": "b.txt", "instruction": "two becomes 2",
                                     "old_string": "two\n", "new_string": "2\nand more\n"}},
    ]}
    result = run(box, [edits, {"text": "done"}], "-o", "json", "--approval-mode", "auto_edit")
    files = json.loads(result.stdout)["stats"]["files"]
    assert files == {"totalLinesAdded": 5, "totalLinesRemoved": 1}
