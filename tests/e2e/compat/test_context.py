"""Context files found as gemini-cli finds them (gemini_split.context), and
the session-context listing."""

from __future__ import annotations

import datetime
import os

import pytest

from gemini_split.userfiles.context import (
    folder_structure,
    load_project_context,
    session_context_text,
    subdirectory_context_files,
)

pytestmark = pytest.mark.timeout(20)


@pytest.fixture
def tree(tmp_path):
    """home/.gemini/GEMINI.md, repo/.git, repo/GEMINI.md, repo/a/GEMINI.md,
    repo/a/b (the cwd) with AGENTS.md, repo/a/b/c/GEMINI.md (below cwd)."""
    config = tmp_path / "home" / ".gemini"
    config.mkdir(parents=True)
    (config / "GEMINI.md").write_text("global rules")
    repo = tmp_path / "outer" / "repo"
    (repo / ".git").mkdir(parents=True)
    (tmp_path / "outer" / "GEMINI.md").write_text("above the git root: never read")
    (repo / "GEMINI.md").write_text("repo rules")
    (repo / "a" / "b" / "c").mkdir(parents=True)
    (repo / "a" / "GEMINI.md").write_text("a rules")
    (repo / "a" / "b" / "AGENTS.md").write_text("agents in b")
    (repo / "a" / "b" / "c" / "GEMINI.md").write_text("c rules")
    return config, repo


def test_global_then_git_root_down_to_cwd_in_order(tree):
    config, repo = tree
    ctx = load_project_context([repo / "a" / "b"], config_dir=config, file_names=["GEMINI.md"])
    assert [(f.scope, f.content) for f in ctx.files] == [
        ("global", "global rules"), ("project", "repo rules"), ("project", "a rules")]


def test_file_name_list_finds_each_name_in_each_directory(tree):
    config, repo = tree
    ctx = load_project_context([repo / "a" / "b"], config_dir=config, file_names=["AGENTS.md", "GEMINI.md"])
    assert [f.content for f in ctx.files] == ["global rules", "repo rules", "a rules", "agents in b"]


def test_untrusted_folder_reads_only_the_global_file(tree):
    config, repo = tree
    ctx = load_project_context([repo / "a"], config_dir=config, file_names=["GEMINI.md"], trusted=False)
    assert [f.scope for f in ctx.files] == ["global"]


def test_without_a_git_root_only_the_workspace_directory_is_read(tree, tmp_path):
    config, _ = tree
    plain = tmp_path / "plain" / "dir"
    plain.mkdir(parents=True)
    (tmp_path / "plain" / "GEMINI.md").write_text("parent")
    (plain / "GEMINI.md").write_text("here")
    ctx = load_project_context([plain], config_dir=config, file_names=["GEMINI.md"])
    assert [f.content for f in ctx.files] == ["global rules", "here"]


def test_a_file_reached_twice_is_read_once(tree):
    config, repo = tree
    os.symlink(repo / "GEMINI.md", repo / "a" / "b" / "GEMINI.md")
    ctx = load_project_context([repo / "a" / "b", repo / "a"], config_dir=config, file_names=["GEMINI.md"])
    assert [f.content for f in ctx.files] == ["global rules", "repo rules", "a rules"]


def test_unreadable_and_huge_files_never_raise(tree):
    config, repo = tree
    (repo / "a" / "GEMINI.md").write_bytes(b"\xff\xfe bad utf8 " + b"x" * (300 * 1024))
    ctx = load_project_context([repo / "a"], config_dir=config, file_names=["GEMINI.md"])
    text = ctx.files[-1].content
    assert "\ufffd" in text and "the rest was not read" in text
    assert "over 256 KiB" in ctx.warnings[0]


def test_subdirectory_files_on_the_way_to_a_touched_path(tree):
    config, repo = tree
    loaded = {repo / "GEMINI.md", repo / "a" / "GEMINI.md"}
    found = subdirectory_context_files(repo / "a" / "b" / "c" / "x.py", [repo / "a"],
                                       file_names=["GEMINI.md"], already_loaded=loaded)
    assert [f.content for f in found] == ["c rules"]
    assert subdirectory_context_files(repo / "elsewhere.py", [repo / "a"], file_names=["GEMINI.md"],
                                      already_loaded=loaded) == []


def test_folder_structure_in_gemini_clis_shape(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "node_modules" / "x").mkdir(parents=True)
    (tmp_path / "build").mkdir()
    (tmp_path / ".gitignore").write_text("build/\n*.log\n")
    (tmp_path / "debug.log").write_text("")
    (tmp_path / "README.md").write_text("")
    text = folder_structure(tmp_path)
    sep = os.sep
    assert text.splitlines()[2:] == [
        f"{tmp_path}{sep}",
        "├───.gitignore",
        "├───README.md",
        f"├───build{sep}...",
        f"├───node_modules{sep}...",
        f"└───src{sep}",
        "    └───main.py",
    ]
    assert text.startswith("Showing up to 200 items (files + folders). Folders or files indicated with ...")


def test_folder_structure_stops_at_the_item_limit(tmp_path):
    for i in range(30):
        (tmp_path / f"f{i:02d}.txt").write_text("")
    lines = folder_structure(tmp_path, max_items=10).splitlines()
    assert lines[3:13] == [f"├───f{i:02d}.txt" for i in range(10)]
    assert lines[13] == "└───..."


def test_session_context_has_date_os_dirs_and_listing(tmp_path):
    (tmp_path / "notes.txt").write_text("")
    text = session_context_text([tmp_path], today=datetime.date(2026, 11, 22))
    assert text.startswith("<session_context>") and text.endswith("</session_context>")
    assert "Today's date is Sunday, November 22, 2026." in text
    assert "My operating system is: linux" in text
    assert f"  - {tmp_path}" in text
    assert "└───notes.txt" in text


# --- end to end: what the fake Gemini server received ----------------------

from gemini_split.testing.fake_gemini import FakeGemini  # noqa: E402

from .helpers import API_KEY, Sandbox  # noqa: E402


def _system(request) -> str:
    return "".join(p.get("text", "") for p in request["body"]["systemInstruction"]["parts"])


@pytest.fixture
def box(tmp_path) -> Sandbox:
    box = Sandbox(tmp_path).setup()
    (box.config_dir / "GEMINI.md").write_text("GLOBAL: answer in English")
    (box.project / ".git").mkdir()
    (box.project / "GEMINI.md").write_text("ROOT: use tabs")
    (box.project / "pkg" / "sub").mkdir(parents=True)
    (box.project / "pkg" / "GEMINI.md").write_text("PKG: tests live in pkg/tests")
    (box.project / "pkg" / "sub" / "GEMINI.md").write_text("SUB: generated code, do not edit")
    (box.project / "pkg" / "sub" / "gen.py").write_text("x = 1\n")
    return box


def test_context_files_reach_the_system_instruction_in_order(box):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        result = box.run(["-p", "hi"], fake=fake, cwd=box.project / "pkg", GEMINI_CLI_TRUST_WORKSPACE="true")
        request = fake.requests[0]
    assert result.status == 0, result.stderr
    system = _system(request)
    order = [system.find(x) for x in ("GLOBAL: answer", "ROOT: use tabs", "PKG: tests")]
    assert -1 not in order and order == sorted(order)
    assert "SUB: generated" not in system  # below the cwd: only when a tool goes there
    assert "<global_context>" in system and "<project_context>" in system
    assert "run_shell_command" in system and "read_file" in system  # the tools are described
    first = request["body"]["contents"][0]["parts"]
    assert first[0]["text"].startswith("<session_context>") and first[1]["text"] == "hi"
    assert str(box.project / "pkg") in first[0]["text"] and "└───sub" + os.sep in first[0]["text"]


def test_an_untrusted_folder_sends_only_the_global_context(box):
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        box.run(["-p", "hi"], fake=fake)
        system = _system(fake.requests[0])
    assert "GLOBAL: answer" in system and "ROOT: use tabs" not in system


def test_context_file_name_setting_reads_agents_md(box):
    (box.project / "AGENTS.md").write_text("AGENTS: run make check")
    box.user_settings({"context": {"fileName": ["AGENTS.md", "GEMINI.md"]}})
    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        box.run(["-p", "hi"], fake=fake, GEMINI_CLI_TRUST_WORKSPACE="true")
        system = _system(fake.requests[0])
    assert system.find("AGENTS: run make check") < system.find("ROOT: use tabs")


def test_a_subdirectory_context_file_joins_the_tool_result_once(box):
    calls = {"function_calls": [{"name": "read_file", "args": {"file_path": "pkg/sub/gen.py"}}]}
    again = {"function_calls": [{"name": "list_directory", "args": {"dir_path": "pkg/sub"}}]}
    with FakeGemini(script=[calls, again, {"text": "ok"}], api_key=API_KEY) as fake:
        result = box.run(["-p", "look"], fake=fake, GEMINI_CLI_TRUST_WORKSPACE="true")
        outputs = [p["functionResponse"]["response"]["output"] for c in fake.requests[-1]["body"]["contents"]
                   for p in c["parts"] if "functionResponse" in p]
    assert result.status == 0, result.stderr
    assert outputs[0].startswith("x = 1\n") and "Newly Discovered Project Context" in outputs[0]
    assert "SUB: generated code" in outputs[0]
    assert "SUB: generated" not in outputs[1]


def test_plan_mode_asks_the_model_for_a_plan(box):
    with FakeGemini(script=[{"text": "plan"}], api_key=API_KEY) as fake:
        box.run(["-p", "add a flag", "--approval-mode", "plan"], fake=fake)
        system = _system(fake.requests[0])
    assert "plan mode" in system.lower() and "implementation plan" in system


@pytest.mark.timeout(60)  # a real embedded -p starts (google-genai): slow on a loaded machine
def test_debug_shows_the_context_files_and_the_system_instruction(box):
    """In a subprocess: --debug configures the process's logging."""
    import subprocess
    import sys

    with FakeGemini(script=[{"text": "ok"}], api_key=API_KEY) as fake:
        env = {**os.environ, **box.environ(fake, GEMINI_CLI_TRUST_WORKSPACE="true")}
        env.pop("GEMINI_MODEL", None)
        result = subprocess.run([sys.executable, "-m", "gemini_split", "-p", "hi", "-d"], cwd=box.project,
                                env=env, capture_output=True, text=True, timeout=50)
    assert result.returncode == 0, result.stderr
    assert "context files: " in result.stderr and str(box.project / "GEMINI.md") in result.stderr
    assert "system instruction (" in result.stderr and "ROOT: use tabs" in result.stderr
