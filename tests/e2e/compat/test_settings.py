"""settings.json read as gemini-cli reads it (gemini_split.userfiles.settings), and
honoured by the CLI: checked through what the fake Gemini server received."""

from __future__ import annotations

import json

import pytest

from gemini_split.environment import Environment
from gemini_split.userfiles.settings import SettingsError, load_settings, strip_json_comments
from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, FIXTURES, Sandbox, declared_tools

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def box(tmp_path) -> Sandbox:
    return Sandbox(tmp_path).setup()


def _load(box: Sandbox, **extra: str):
    return load_settings(Environment(environ=box.environ(**extra), cwd=box.project))


# --- the loader -----------------------------------------------------------

def test_gemini_cli_precedence_system_over_project_over_user_over_defaults(box):
    box.write_json(box.system_settings.parent / "system-defaults.json",
                   {"model": {"name": "from-defaults", "maxSessionTurns": 7}, "ui": {"theme": "Dracula"}})
    box.user_settings({"model": {"name": "from-user"}, "context": {"fileName": "AGENTS.md"}})
    box.project_settings({"model": {"name": "from-project"}})
    loaded = _load(box, GEMINI_CLI_TRUST_WORKSPACE="true")
    assert loaded.merged.model.name == "from-project"
    assert loaded.merged.model.max_session_turns == 7  # deep merge keeps sibling keys
    assert loaded.merged.ui.theme == "Dracula"
    assert loaded.merged.context_file_names() == ["AGENTS.md"]
    box.write_json(box.system_settings, {"model": {"name": "from-system"}})
    assert _load(box, GEMINI_CLI_TRUST_WORKSPACE="true").merged.model.name == "from-system"


def test_list_merge_strategies_follow_gemini_cli(box):
    box.user_settings({"tools": {"exclude": ["a", "b"], "allowed": ["x"]},
                       "context": {"includeDirectories": ["/u"]},
                       "mcpServers": {"one": {"command": "one"}, "two": {"command": "two"}}})
    box.project_settings({"tools": {"exclude": ["b", "c"], "allowed": ["y"]},
                          "context": {"includeDirectories": ["/p"]},
                          "mcpServers": {"two": {"url": "http://h/sse"}}})
    merged = _load(box, GEMINI_CLI_TRUST_WORKSPACE="true").merged
    assert merged.tools.exclude == ["a", "b", "c"]  # union
    assert merged.tools.allowed == ["y"]  # replaced
    assert merged.context.include_directories == ["/u", "/p"]  # concatenated
    assert merged.mcp_servers["one"].command == "one"  # merged server by server
    assert merged.mcp_servers["two"].command is None and merged.mcp_servers["two"].url == "http://h/sse"


def test_env_vars_expand_in_strings_as_gemini_cli_does(box):
    box.user_settings({"mcpServers": {"s": {"command": "$TOOLS/bin/srv", "args": ["${PORT}", "${NOPE:-dflt}", "$UNSET"],
                                            "env": {"TOKEN": "${SECRET}"}}}})
    server = _load(box, TOOLS="/opt", PORT="9000", SECRET="s3").merged.mcp_servers["s"]
    assert server.command == "/opt/bin/srv"
    assert server.args == ["9000", "dflt", "$UNSET"]
    assert server.env == {"TOKEN": "s3"}


def test_comments_are_allowed_and_unknown_keys_ignored(box):
    box.user_settings('{\n  // the model\n  "model": {"name": "m // not a comment", /* inline */ "future": 1},\n'
                      '  "somethingNew": {"x": [1, 2]}\n}\n')
    assert _load(box).merged.model.name == "m // not a comment"


def test_comment_stripping_keeps_positions():
    text = '{"a": 1, /* x\ny */ "b": // z\n 2}'
    stripped = strip_json_comments(text)
    assert len(stripped) == len(text) and stripped.count("\n") == 2
    assert json.loads(stripped) == {"a": 1, "b": 2}


@pytest.mark.parametrize("content, expected", [
    ('{"model": {"maxSessionTurns": "ten"}}', "key model.maxSessionTurns: expected `int`, got `str`"),
    ('{"general": {"defaultApprovalMode": "sometimes"}}', "key general.defaultApprovalMode"),
    ('{"context": {"fileName": 3}}', "key context.fileName"),
    ('{"model": {\n  "name": "x",,\n}}', ":2:15: not valid JSON"),
    ('["a list"]', "must hold a JSON object"),
    ("\xff\xfe", "not UTF-8"),
])
def test_a_bad_file_is_reported_with_file_and_key(box, content, expected):
    path = box.config_dir / "settings.json"
    if content == "\xff\xfe":
        path.write_bytes(b"\xff\xfe{")
    else:
        box.user_settings(content)
    with pytest.raises(SettingsError) as info:
        _load(box)
    assert str(path) in str(info.value)
    assert expected in str(info.value)


def test_a_bad_mcp_server_entry_is_left_out_with_a_warning_naming_file_and_key(box):
    """One broken MCP server must not stop gemini-split (issue 16): its entry
    is dropped, the file's other keys and servers still apply."""
    box.user_settings('{"model": {"name": "gemini-2.5-pro"}, '
                      '"mcpServers": {"s": {"args": "not-a-list"}, "ok": {"command": "x"}}}')
    loaded = _load(box)
    assert loaded.merged.model.name == "gemini-2.5-pro"
    assert list(loaded.merged.mcp_servers) == ["ok"]
    (warning,) = loaded.warnings
    assert str(box.config_dir / "settings.json") in warning and "key mcpServers.s.args" in warning


def test_an_untrusted_project_is_ignored_with_a_warning(box):
    box.project_settings({"tools": {"allowed": ["run_shell_command"]}})
    loaded = _load(box)
    assert loaded.trusted is False
    assert loaded.merged.tools.allowed is None
    assert "not trusted" in loaded.warnings[0] and "GEMINI_CLI_TRUST_WORKSPACE" in loaded.warnings[0]


def test_trusted_folders_file_longest_rule_wins(box):
    box.project_settings({"model": {"name": "proj"}})
    (box.project / "sub").mkdir()
    rules = {str(box.project): "TRUST_FOLDER", str(box.project / "sub"): "DO_NOT_TRUST"}
    box.write_json(box.config_dir / "trustedFolders.json", rules)
    assert _load(box).merged.model.name == "proj"
    sub = load_settings(Environment(environ=box.environ(), cwd=box.project / "sub"))
    assert sub.trusted is False
    box.write_json(box.config_dir / "trustedFolders.json", {str(box.project / "x"): "TRUST_PARENT"})
    assert _load(box).trusted is True
    box.user_settings({"security": {"folderTrust": {"enabled": False}}})
    box.write_json(box.config_dir / "trustedFolders.json", {})
    assert _load(box).trusted is True


def test_the_home_directory_is_never_read_as_a_project(box):
    box.write_json(box.home / ".gemini" / "settings.json", {"model": {"name": "user"}})
    loaded = load_settings(Environment(environ=box.environ(GEMINI_CLI_TRUST_WORKSPACE="true"), cwd=box.home))
    assert loaded.merged.model.name == "user"
    assert [f.scope for f in loaded.files if f.exists] == ["user"]


def test_the_documented_example_fixture_loads(box):
    """A settings.json as gemini-cli's documentation shows it, with our section."""
    box.user_settings((FIXTURES / "settings.example.json").read_text())
    merged = _load(box, GITHUB_TOKEN="tok").merged
    assert merged.model.name == "gemini-2.5-pro"
    assert merged.tools.exclude == ["write_file"]
    assert merged.mcp_servers["github"].env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "tok"}
    assert merged.gemini_split.server == "ws://127.0.0.1:8080"


# --- honoured by the CLI --------------------------------------------------

def test_model_name_from_settings_is_overridden_by_env_and_flag(box):
    box.user_settings({"model": {"name": "gemini-from-settings"}})
    with FakeGemini(script=[{"text": "a"}, {"text": "b"}, {"text": "c"}], api_key=API_KEY) as fake:
        assert box.run(["-p", "hi"], fake=fake).status == 0
        assert box.run(["-p", "hi"], fake=fake, GEMINI_MODEL="gemini-from-env").status == 0
        assert box.run(["-p", "hi", "-m", "gemini-from-flag"], fake=fake, GEMINI_MODEL="x").status == 0
        models = [r["model"] for r in fake.requests]
    assert models == ["gemini-from-settings", "gemini-from-env", "gemini-from-flag"]


def test_tools_core_and_exclude_shape_what_the_model_is_offered(box):
    box.user_settings({"tools": {"core": ["read_file", "glob", "run_shell_command"]}})
    box.project_settings({"tools": {"exclude": ["run_shell_command"]}})
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        result = box.run(["-p", "hi"], fake=fake, GEMINI_CLI_TRUST_WORKSPACE="true")
        assert result.status == 0, result.stderr
        offered = declared_tools(fake.requests[0])
    assert sorted(offered) == ["glob", "read_file"]


def test_default_approval_mode_and_allowed_tools_from_settings(box):
    """auto_edit from settings lets write_file run in one-shot; --approval-mode default beats it."""
    box.user_settings({"general": {"defaultApprovalMode": "auto_edit"}})
    call = {"function_calls": [{"name": "write_file", "args": {"file_path": "a.txt", "content": "hi\n"}}]}
    with FakeGemini(script=[call, {"text": "done"}], api_key=API_KEY) as fake:
        assert box.run(["-p", "write"], fake=fake).status == 0
    assert (box.project / "a.txt").read_text() == "hi\n"
    with FakeGemini(script=[dict(call, function_calls=[{"name": "write_file", "args": {
            "file_path": "b.txt", "content": "x"}}]), {"text": "done"}], api_key=API_KEY) as fake:
        box.run(["-p", "write", "--approval-mode", "default"], fake=fake)
    assert not (box.project / "b.txt").exists()


def test_yolo_in_settings_is_ignored_as_in_gemini_cli(box):
    box.user_settings({"general": {"defaultApprovalMode": "yolo"}})
    call = {"function_calls": [{"name": "run_shell_command", "args": {"command": "touch made"}}]}
    with FakeGemini(script=[call, {"text": "done"}], api_key=API_KEY) as fake:
        box.run(["-p", "go"], fake=fake)
    assert not (box.project / "made").exists()


def test_max_session_turns_from_settings_stops_the_loop_with_exit_53(box):
    box.user_settings({"model": {"maxSessionTurns": 1}})
    call = {"function_calls": [{"name": "list_directory", "args": {"dir_path": "."}}]}
    with FakeGemini(script=[call, call, {"text": "never"}], api_key=API_KEY) as fake:
        result = box.run(["-p", "loop"], fake=fake)
    assert result.status == 53, result.stderr


def test_output_format_from_settings_and_flag_override(box):
    box.user_settings({"output": {"format": "json"}})
    with FakeGemini(script=[{"text": "a"}, {"text": "b"}], api_key=API_KEY) as fake:
        assert json.loads(box.run(["-p", "hi"], fake=fake).stdout)["response"] == "a"
        assert box.run(["-p", "hi", "-o", "text"], fake=fake).stdout == "b\n"


def test_a_malformed_settings_file_exits_52_naming_file_and_key(box):
    path = box.user_settings({"tools": {"exclude": "write_file"}})
    result = box.run(["-p", "hi"])
    assert result.status == 52
    assert str(path) in result.stderr and "tools.exclude" in result.stderr
    assert "Traceback" not in result.stderr


def test_an_untrusted_project_file_is_not_applied_by_the_cli(box):
    box.project_settings({"general": {"defaultApprovalMode": "auto_edit"}})
    call = {"function_calls": [{"name": "write_file", "args": {"file_path": "a.txt", "content": "x"}}]}
    with FakeGemini(script=[call, {"text": "done"}], api_key=API_KEY) as fake:
        result = box.run(["-p", "write"], fake=fake)
    assert "not trusted" in result.stderr
    assert not (box.project / "a.txt").exists()
