"""Issue 17 §1 through a real editor: the ACP Python SDK in its own process
spawns ``gemini-split --acp`` against the fake Gemini server."""

from __future__ import annotations

import json

import pytest

from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, agent_env, kinds, message_text, run_editor

pytestmark = pytest.mark.timeout(60)


def test_a_prompt_streams_message_chunks_in_order_and_ends_with_end_turn(tmp_path):
    text = "one two three four five six"
    with FakeGemini(script=[{"text": text, "chunks": 3, "chunk_delay": 1.0}], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"),
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "count"}]},
                          tmp_path)
    init, new, prompt = seen["results"]
    assert init["protocolVersion"] == 1
    assert init["agentCapabilities"]["loadSession"] is True
    assert init["agentCapabilities"]["promptCapabilities"]["embeddedContext"] is True
    assert new["sessionId"] and new["modes"]["currentModeId"] == "default"
    assert prompt == {"stopReason": "end_turn"}
    assert message_text(seen) == text
    assert kinds(seen).count("agent_message_chunk") >= 2  # streamed, not one block


def _ask(tool: str, **args) -> dict:
    return {"function_calls": [{"name": tool, "args": args}]}


def _function_responses(fake) -> list[dict]:
    return [p["functionResponse"] for r in fake.requests
            for p in r["body"]["contents"][-1].get("parts", []) if "functionResponse" in p]


FS = {"fs": {"readTextFile": True, "writeTextFile": True}}


def test_read_file_is_answered_by_the_editors_buffer_not_the_disk(tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_text("on disk\n")
    with FakeGemini(script=[_ask("read_file", file_path="notes.txt"), {"text": "read it"}], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"), "capabilities": FS,
                           "buffers": {str(notes): "unsaved buffer text\n"},
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "read notes"}]},
                          tmp_path)
    assert seen["results"][2] == {"stopReason": "end_turn"}
    (read,) = [c for c in seen["calls"] if c["method"] == "fs/read_text_file"]
    assert read["path"] == str(notes)
    (response,) = _function_responses(fake)
    assert response["response"] == {"output": "unsaved buffer text\n"}
    start = next(u for u in seen["updates"] if u["sessionUpdate"] == "tool_call")
    assert start["kind"] == "read" and start["title"] == "notes.txt"
    assert start["locations"] == [{"path": str(notes)}]
    done = next(u for u in seen["updates"] if u["sessionUpdate"] == "tool_call_update")
    assert done["toolCallId"] == start["toolCallId"] and done["status"] == "completed"
    assert not any(c["method"] == "session/request_permission" for c in seen["calls"])  # reads never ask


def test_a_read_outside_the_workspace_never_reaches_the_editor(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    (tmp_path / "secret.txt").write_text("CANARY")
    with FakeGemini(script=[_ask("read_file", file_path="../secret.txt"), {"text": "no"}], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(ws), "env": agent_env(fake, tmp_path / "home"), "capabilities": FS,
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "read"}]}, tmp_path)
    assert seen["calls"] == []
    (response,) = _function_responses(fake)
    assert response["response"]["error"]["code"] == "outside_workspace"
    assert [u["status"] for u in seen["updates"] if u["sessionUpdate"] == "tool_call_update"] == ["failed"]


def test_a_write_asks_permission_with_a_diff_and_runs_only_after_allow(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("x = 1\n")
    script = [_ask("replace", file_path="app.py", instruction="two", old_string="x = 1", new_string="x = 2"),
              {"text": "edited"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"), "capabilities": FS,
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "edit"}]}, tmp_path)
    methods = [c["method"] for c in seen["calls"]]
    assert methods.index("session/request_permission") < methods.index("fs/write_text_file")
    ask = next(c for c in seen["calls"] if c["method"] == "session/request_permission")
    assert [o["kind"] for o in ask["options"]] == ["allow_once", "allow_always", "reject_once"]
    assert ask["toolCall"]["kind"] == "edit"
    assert ask["toolCall"]["content"][0] == {"type": "diff", "path": str(app), "oldText": "x = 1\n", "newText": "x = 2\n"}
    assert app.read_text() == "x = 2\n"
    done = [u for u in seen["updates"] if u["sessionUpdate"] == "tool_call_update"]
    assert done[-1]["status"] == "completed"
    assert done[-1]["content"][0]["type"] == "diff" and done[-1]["content"][0]["newText"] == "x = 2\n"


def test_a_rejected_write_changes_nothing_and_the_model_is_told(tmp_path):
    app = tmp_path / "app.py"
    app.write_text("x = 1\n")
    script = [_ask("write_file", file_path="app.py", content="gone\n"), {"text": "ok"}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"), "capabilities": FS,
                           "permission": "cancel",
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "write"}]}, tmp_path)
    assert app.read_text() == "x = 1\n"
    assert not any(c["method"] == "fs/write_text_file" for c in seen["calls"])
    (response,) = _function_responses(fake)
    assert response["response"]["error"]["code"] == "refused"
    assert [u["status"] for u in seen["updates"] if u["sessionUpdate"] == "tool_call_update"] == ["failed"]


def test_without_editor_fs_the_local_workspace_is_used_and_yolo_mode_skips_the_question(tmp_path):
    script = [_ask("write_file", file_path="new.txt", content="hello\n"), {"text": "ok"}]
    home = tmp_path / "home"
    home.mkdir()
    (home / "trustedFolders.json").write_text(json.dumps({str(tmp_path): "TRUST_FOLDER"}))  # yolo needs trust
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, home),
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "set_mode", "mode": "yolo"},
                                     {"do": "prompt", "text": "write"}]}, tmp_path)
    assert seen["results"][2] == {}
    assert (tmp_path / "new.txt").read_text() == "hello\n"
    assert seen["calls"] == []
    assert {"sessionUpdate": "current_mode_update", "currentModeId": "yolo", "sessionId": seen["results"][1]["sessionId"]} \
        in seen["updates"]


def test_set_mode_yolo_is_refused_where_settings_disable_it_naming_setting_and_file(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"security": {"disableYoloMode": True}}))
    (home / "trustedFolders.json").write_text(json.dumps({str(tmp_path): "TRUST_FOLDER"}))  # autoEdit needs trust
    with FakeGemini(script=[], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, home),
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "set_mode", "mode": "yolo"},
                                     {"do": "set_mode", "mode": "autoEdit"}]}, tmp_path)
    offered = [m["id"] for m in seen["results"][1]["modes"]["availableModes"]]
    assert offered == ["default", "autoEdit", "plan"]
    refused = seen["results"][2]["error"]
    assert refused["code"] == -32602  # invalid params, as for a mode that does not exist
    assert f"security.disableYoloMode in the user settings {home / 'settings.json'}" in refused["message"]
    assert seen["results"][3] == {}
    modes = [u["currentModeId"] for u in seen["updates"] if u["sessionUpdate"] == "current_mode_update"]
    assert modes == ["autoEdit"]


def test_in_an_untrusted_folder_only_default_and_plan_are_offered_and_set_mode_to_another_is_refused(tmp_path):
    """As gemini-cli's setApprovalMode: no yolo and no autoEdit in an
    untrusted folder (plan mode is read-only: it is)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"security": {"folderTrust": {"enabled": True}}}))
    project = tmp_path / "project"
    project.mkdir()
    with FakeGemini(script=[], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(project), "env": agent_env(fake, home),
                           "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "set_mode", "mode": "yolo"},
                                     {"do": "set_mode", "mode": "autoEdit"}]},
                          tmp_path)
    assert [m["id"] for m in seen["results"][1]["modes"]["availableModes"]] == ["default", "plan"]
    for refused in (seen["results"][2]["error"], seen["results"][3]["error"]):
        assert refused["code"] == -32602
        assert refused["message"] == "Cannot enable privileged approval modes in an untrusted folder."
    assert not [u for u in seen["updates"] if u["sessionUpdate"] == "current_mode_update"]


def test_cancel_mid_stream_ends_the_prompt_with_cancelled(tmp_path):
    script = [{"text": "word " * 40, "chunks": 40, "chunk_delay": 0.3}]
    with FakeGemini(script=script, api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"),
                           "steps": [{"do": "initialize"}, {"do": "new"},
                                     {"do": "prompt", "text": "talk", "cancel_after": "agent_message_chunk"}]}, tmp_path)
    assert seen["results"][2] == {"stopReason": "cancelled"}
    assert 0 < len(message_text(seen)) < len("word " * 40)


def test_session_load_replays_the_history_as_updates(tmp_path):
    home = tmp_path / "home"
    with FakeGemini(script=[{"text": "the answer is 42"}], api_key=API_KEY) as fake:
        first = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, home),
                            "steps": [{"do": "initialize"}, {"do": "new"}, {"do": "prompt", "text": "what is it?"}]},
                           tmp_path)
        session = first["results"][1]["sessionId"]
        second = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, home),
                             "steps": [{"do": "initialize"}, {"do": "load", "session": session}]}, tmp_path)
    assert second["results"][1]["modes"]["currentModeId"] == "default"
    replay = [(u["sessionUpdate"], u["content"]["text"]) for u in second["updates"]]
    assert replay == [("user_message_chunk", "what is it?"), ("agent_message_chunk", "the answer is 42")]
    assert {u["sessionId"] for u in second["updates"]} == {session}


def test_an_unknown_session_id_is_an_error_and_the_agent_goes_on(tmp_path):
    with FakeGemini(script=[{"text": "fine"}], api_key=API_KEY) as fake:
        seen = run_editor({"cwd": str(tmp_path), "env": agent_env(fake, tmp_path / "home"),
                           "steps": [{"do": "initialize"}, {"do": "load", "session": "s-nope"},
                                     {"do": "use", "session": "s-other"}, {"do": "prompt", "text": "hi"},
                                     {"do": "new"}, {"do": "prompt", "text": "hi"}]}, tmp_path)
    assert seen["results"][1]["error"]["code"] == -32002
    assert seen["results"][3]["error"]["code"] == -32002
    assert seen["results"][5] == {"stopReason": "end_turn"}
