"""Sub-agent definitions on the client (issue 32): gemini-cli's files,
fields and precedence, agents.overrides, and what a hostile or broken file
does (it is reported with its path and field; the others still load)."""

from __future__ import annotations

import json
import os

import pytest

from gemini_split.userfiles.settings import strip_json_comments

from gemini_split.userfiles.agents import (
    MAX_AGENT_BYTES,
    agent_roots,
    discover,
    load_agent,
    set_enabled,
    wire_agents,
    AgentError,
)
from gemini_split.userfiles.settings import AgentOverride, AgentModelConfig, AgentRunConfig


def write(directory, name, text):
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / name
    path.write_text(text)
    return path


def test_builtins_then_user_then_project_each_later_one_of_a_name_winning(tmp_path):
    user, project = tmp_path / "home", tmp_path / "proj"
    write(user / "agents", "helper.md", "---\nname: helper\ndescription: USER\n---\nbody")
    write(user / "agents", "_draft.md", "---\nname: draft\ndescription: skipped\n---\n")
    write(user / "agents", "notes.txt", "not an agent")
    write(project / ".gemini" / "agents", "helper.md", "---\nname: helper\ndescription: PROJECT\n---\nbody")
    write(project / ".gemini" / "agents", "generalist.md", "---\nname: generalist\ndescription: MINE\n---\nx")
    trusted = discover(agent_roots(user, project, trusted=True))
    untrusted = discover(agent_roots(user, project, trusted=False))
    assert [a.name for a in trusted.agents] == ["codebase_investigator", "generalist", "helper"]
    assert trusted.get("helper").definition.description == "PROJECT"
    assert trusted.get("generalist").scope == "project"
    assert untrusted.get("helper").definition.description == "USER"
    assert untrusted.get("generalist").scope == "builtin" and not trusted.warnings


def test_the_built_in_investigator_is_read_only_and_reports_gemini_clis_structure(tmp_path):
    investigator = discover([]).get("codebase_investigator").definition
    assert set(investigator.tools) == {"list_directory", "read_file", "glob", "grep_search"}
    assert investigator.output_name == "report"
    assert set(investigator.output_schema["required"]) == {"SummaryOfFindings", "ExplorationTrace",
                                                           "RelevantLocations"}
    assert investigator.input_schema["required"] == ["objective"]


@pytest.mark.parametrize(("front", "said"), [
    ("name: x\ndescription: [open", "malformed YAML frontmatter"),
    ("- just\n- a list", "not a mapping"),
    ("description: no name", "field 'name'"),
    ("name: Has Spaces\ndescription: d", "field 'name'"),
    ("name: x", "field 'description'"),
    ("name: x\ndescription: d\nkind: remote", "remote agent x: field 'agent_card_url' (or 'agent_card_json') is "
                                               "required"),
    ("name: x\ndescription: d\ncolor: red", "unknown field 'color'"),
    ("name: x\ndescription: d\ntools: read_file", "field 'tools' must be a list"),
    ("name: x\ndescription: d\ntemperature: 2.5", "field 'temperature'"),
    ("name: x\ndescription: d\nmax_turns: 0", "field 'max_turns'"),
    ("name: x\ndescription: d\nmax_turns: true", "field 'max_turns'"),
    ("name: x\ndescription: d\ntimeout_mins: 1.5", "field 'timeout_mins'"),
    ("name: x\ndescription: d\nmodel: ''", "field 'model'"),
])
def test_a_broken_definition_is_reported_with_its_path_and_field_and_the_others_load(tmp_path, front, said):
    bad = write(tmp_path / "agents", "bad.md", f"---\n{front}\n---\nbody")
    write(tmp_path / "agents", "good.md", "---\nname: good\ndescription: fine\n---\nbody")
    found = discover([("user", tmp_path / "agents")], with_builtins=False)
    assert [a.name for a in found.agents] == ["good"]
    (warning,) = found.warnings
    assert warning.startswith(f"{bad}: ") and said in warning


def test_no_frontmatter_an_oversized_file_non_utf8_and_a_fifo_are_refused_without_hanging(tmp_path):
    root = tmp_path / "agents"
    write(root, "plain.md", "just text")
    write(root, "huge.md", "---\nname: huge\ndescription: d\n---\n" + "x" * MAX_AGENT_BYTES)
    (root / "latin.md").write_bytes(b"---\nname: latin\ndescription: caf\xe9\n---\n")
    os.mkfifo(root / "fifo.md")
    found = discover([("user", root)], with_builtins=False)
    assert found.agents == []
    said = "\n".join(found.warnings)
    assert "plain.md: missing YAML frontmatter" in said and "huge.md: more than" in said
    assert "latin.md: not UTF-8" in said and "fifo.md: cannot read" in said


def test_unknown_tools_are_said_and_the_agent_loads_with_its_own_mcp_servers_kept(tmp_path):
    path = write(tmp_path, "a.md", "---\nname: a\ndescription: d\ntools: [read_file, teleport, 'mcp_*', "
                                   "github__search]\nmcp_servers:\n  s:\n    command: node\n---\nbody")
    agent = load_agent(path)
    assert agent.definition.tools == ("read_file", "teleport", "mcp_*", "github__search")
    assert any("no tool named teleport" in n for n in agent.notes)
    assert agent.mcp_servers["s"].command == "node"
    assert not any("mcp_servers" in n for n in agent.notes)  # well-formed: nothing to say


def test_a_malformed_mcp_servers_entry_is_reported_with_path_and_field_and_the_agent_still_loads(tmp_path):
    path = write(tmp_path, "a.md", "---\nname: a\ndescription: d\nmcpServers:\n  good:\n    command: node\n"
                                   "    args: [server.js]\n  bad:\n    command: 7\n  nothing:\n    trust: true\n"
                                   "  listed: [1]\n---\nbody")
    agent = load_agent(path)
    said = "\n".join(agent.notes)
    assert f"{path}: field 'mcpServers.bad.command': expected str | null, got int" in said
    assert f"{path}: field 'mcpServers.nothing': needs 'command'" in said
    assert f"{path}: field 'mcpServers.listed': expected object, got array" in said
    assert list(agent.mcp_servers) == ["good"] and agent.mcp_servers["good"].args == ["server.js"]
    assert agent.definition.name == "a"
    not_a_mapping = write(tmp_path, "b.md", "---\nname: b\ndescription: d\nmcpServers: [x]\n---\nbody")
    assert any("field 'mcpServers' must be a mapping" in n for n in load_agent(not_a_mapping).notes)


def test_overrides_disable_and_set_model_and_limits_and_only_enabled_ones_travel(tmp_path):
    write(tmp_path / "agents", "a.md", "---\nname: a\ndescription: d\nmodel: gemini-2.5-pro\n---\nbody")
    overrides = {
        "generalist": AgentOverride(enabled=False),
        "a": AgentOverride(model_config=AgentModelConfig(model="inherit"),
                           run_config=AgentRunConfig(max_turns=3, max_time_minutes=0.5)),
    }
    found = discover([("user", tmp_path / "agents")], overrides=overrides)
    a = found.get("a").definition
    assert (a.model, a.max_turns, a.timeout_mins) == (None, 3, 0.5)
    assert [d.name for d in wire_agents(found)] == ["a", "codebase_investigator"]
    assert [d.name for d in wire_agents(found, excluded=["a"])] == ["codebase_investigator"]


def test_set_enabled_keeps_every_other_key_and_refuses_a_file_that_is_not_an_object(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text('{"model": {"name": "x"}, // a comment\n "agents": {"overrides": {"a": {"runConfig": '
                        '{"maxTurns": 4}}}}}')
    assert set_enabled(settings, "a", False) is True
    assert "// a comment" in settings.read_text()  # kept
    assert json.loads(strip_json_comments(settings.read_text())) == {"model": {"name": "x"}, "agents": {"overrides": {
        "a": {"runConfig": {"maxTurns": 4}, "enabled": False}}}}
    assert set_enabled(settings, "a", False) is False
    settings.write_text("[1, 2]")
    with pytest.raises(AgentError, match="must hold a JSON object, not list; left unchanged"):
        set_enabled(settings, "a", True)
    assert settings.read_text() == "[1, 2]"
