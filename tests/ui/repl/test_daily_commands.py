"""The command shapes gemini-cli users type from memory (issue 31 item 12),
in the real REPL under a pseudo-terminal: ``/stats model|tools``,
``/memory list`` and ``/memory show``'s import tree, ``/policies list``,
``/settings``, ``/vim``, Ctrl+X (the prompt in an external editor) and
Ctrl+Y (yolo on and off, never answering a question already asked)."""

from __future__ import annotations

import json
import re
import stat
import sys

import pytest

from .pty_driver import ENTER, ESC, PtyProcess
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 - fixtures

pytestmark = pytest.mark.timeout(60)

CTRL_G = "\x07"
CTRL_X = "\x18"
CTRL_Y = "\x19"
SHIFT_TAB = "\x1b[Z"


def _read(name: str) -> dict:
    return {"function_calls": [{"name": "read_file", "args": {"file_path": name}}]}


def test_stats_model_and_tools_show_gemini_clis_tables(start_repl):
    repl = start_repl([_read("notes.txt"), {"text": "read it", "usage": {"promptTokenCount": 120,
                                                                         "candidatesTokenCount": 7,
                                                                         "totalTokenCount": 127}},
                       _read("missing.txt"), {"text": "not there"}])
    ask(repl, "/stats tools")
    repl.expect(r"No tool calls have been made in this session\.")
    repl.expect(PROMPT)
    ask(repl, "/stats model")
    repl.expect(r"No API calls have been made in this session\.")
    repl.expect(PROMPT)
    ask(repl, "read the notes")
    repl.expect(r"read it")
    repl.expect(PROMPT)
    ask(repl, "read another")
    repl.expect(r"not there")
    repl.expect(PROMPT)
    ask(repl, "/stats tools")
    repl.expect(r"Tool Stats For Nerds")
    repl.expect(r"Tool Name\s+Calls\s+Success Rate\s+Avg Duration")
    repl.expect(r"read_file\s+2\s+50\.0%\s+\d+(ms|\.\ds)")
    repl.expect(r"Total Reviewed Suggestions:\s+2")
    repl.expect(r"» Accepted:\s+2")
    repl.expect(PROMPT)
    ask(repl, "/stats model")
    repl.expect(r"Model Stats For Nerds")
    repl.expect(r"Metric\s+scripted:\S+")
    repl.expect(r"Requests\s+4")  # two turns, each a call and the call after the tool
    repl.expect(r"Errors\s+0 \(0\.0%\)")
    repl.expect(r"Total\s+[\d,]+")
    repl.expect(r"↳ Output\s+[\d,]+")
    repl.expect(PROMPT)
    ask(repl, "/stats session")
    repl.expect(r"session\s+\d+ min \d+ s · 2 turns · 2 tool calls")
    repl.expect(PROMPT)
    ask(repl, "/stats bogus")
    repl.expect(r"usage: /stats \[session\|model\|tools\]")


def test_memory_list_names_the_files_and_show_draws_the_import_tree(start_repl, workdir):
    (workdir / "GEMINI.md").write_text("Rules.\n@./docs/style.md\n@./missing.md\n")
    (workdir / "docs").mkdir()
    (workdir / "docs" / "style.md").write_text("Style.\n@./deep.md\n@../GEMINI.md\n")
    (workdir / "docs" / "deep.md").write_text("DEEP-RULE\n")
    repl = start_repl([], GEMINI_CLI_TRUST_WORKSPACE="true")
    ask(repl, "/memory list")
    repl.expect(r"There are 1 GEMINI\.md file\(s\) in use:")
    repl.expect(re.escape(str(workdir / "GEMINI.md")))
    repl.expect(PROMPT)
    ask(repl, "/memory show")
    tree = repl.expect(r"(?s)Memory Files\r?\n(.*?)\r?\n──", timeout=15).group(1)
    assert [line.rstrip() for line in tree.splitlines()] == [
        f" L project: {workdir / 'GEMINI.md'}",
        "    L ./docs/style.md",
        "      L ./deep.md",
        "      L ../GEMINI.md  (already imported)",
        "    L ./missing.md  (No such file or directory)",
    ]
    repl.expect(r"DEEP-RULE")  # then the text the model gets
    repl.expect(PROMPT)


def test_memory_list_with_no_context_files(start_repl):
    repl = start_repl([])
    ask(repl, "/memory list")
    repl.expect(r"No GEMINI\.md files in use\.")


def test_policies_list_groups_the_rules_by_mode_with_their_source(start_repl, tmp_path):
    policies = tmp_path / "home" / "policies"
    policies.mkdir(parents=True)
    (policies / "git.toml").write_text('[[rule]]\ntoolName = "run_shell_command"\ncommandPrefix = "git status"\n'
                                       'decision = "allow"\npriority = 100\n'
                                       '[[rule]]\ntoolName = "write_file"\ndecision = "deny"\npriority = 10\n'
                                       'modes = ["yolo"]\n')
    repl = start_repl([])
    ask(repl, "/policies list")
    repl.expect(r"Active Policies")
    repl.expect(r"Normal Mode Policies")
    repl.expect(r"allow run_shell_command \(commandPrefix 'git status'\) \[Priority: [\d.]+\] "
                r"\[Source: [^\]]*git\.toml[^\]]*\]")
    repl.expect(r"Yolo Mode Policies \(combined with normal mode policies\)")
    repl.expect(r"deny write_file \[Priority: [\d.]+\] \[Source: [^\]]*git\.toml")
    repl.expect(PROMPT)
    ask(repl, "/policies frob")
    repl.expect(r"usage: /policies \[list\]")


def test_settings_lists_effective_values_and_where_each_came_from(start_repl, workdir, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({
        "ui": {"hideTips": True},
        "mcpServers": {"files": {"command": "x", "env": {"TOKEN": "SECRET-VALUE-42"}}},
    }))
    (workdir / ".gemini").mkdir()
    (workdir / ".gemini" / "settings.json").write_text(json.dumps({"ui": {"hideTips": False},
                                                                   "model": {"maxSessionTurns": 7}}))
    repl = start_repl([], GEMINI_CLI_TRUST_WORKSPACE="true")
    ask(repl, "/settings")
    repl.expect(r"\(read\)")  # the files, in the order they apply
    repl.expect(r"model\.maxSessionTurns\s+7\s+project")
    repl.expect(r"ui\.hideTips\s+false\s+project")  # the project's value wins over the user's
    repl.expect(r"ui\.showLineNumbers\s+true\s+default")
    repl.expect(r"mcpServers\s+files\s+user")
    repl.expect(r"Read-only")
    repl.expect(PROMPT)
    assert "SECRET-VALUE-42" not in repl.text


def test_vim_toggles_vi_keys_live(start_repl):
    repl = start_repl([])
    ask(repl, "/vim")
    repl.expect(r"Entered Vim mode\. Run /vim again to exit\.")
    repl.expect(r"\[INSERT\]")
    repl.type("hello wrold")
    repl.send(ESC)
    repl.expect(r"NORMAL")
    repl.type("bcwworld")  # vi: back a word, change it
    repl.send(ESC)
    repl.send(ENTER)  # Esc then Enter sends in vi mode
    repl.expect(r"Echo: hello world")
    repl.expect(PROMPT)
    ask(repl, "/vim")
    repl.expect(r"Exited Vim mode\.")
    repl.expect(PROMPT)
    repl.type("one two")
    repl.send(ESC)
    repl.send(ENTER)  # Emacs keys again: Esc Enter is a newline
    repl.type("three")
    repl.send(ENTER)
    repl.expect(r"Echo: one two\s+three")


def test_vim_saves_general_vim_mode_in_the_users_settings_keeping_comments(start_repl, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text('{\n  // the user\'s own comment\n  "ui": {"showLineNumbers": false}\n}\n')
    repl = start_repl([])
    ask(repl, "/vim")
    repl.expect(r"Entered Vim mode")
    repl.expect(PROMPT)
    saved = (home / "settings.json").read_text()
    assert json.loads(saved.replace("// the user's own comment", ""))["general"]["vimMode"] is True
    assert "the user's own comment" in saved
    ask(repl, "/vim")
    repl.expect(r"Exited Vim mode\.")
    repl.expect(PROMPT)
    assert '"vimMode": false' in (home / "settings.json").read_text()


def test_general_vim_mode_starts_the_repl_in_vi_mode(start_repl, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"general": {"vimMode": True}}))
    repl = start_repl([])
    repl.expect(r"\[INSERT\]")
    repl.type("abc")
    repl.send(ESC)
    repl.type("0x")  # vi: to the line's start, delete a character
    repl.send(ENTER)
    repl.expect(r"Echo: bc")


def _editor(tmp_path, body: str) -> str:
    script = tmp_path / "fake-editor"
    script.write_text(f"#!{sys.executable}\nimport sys\n{body}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.mark.parametrize("key", [CTRL_G, CTRL_X], ids=["ctrl_g", "ctrl_x"])
def test_ctrl_g_or_ctrl_x_edits_the_prompt_in_visual(start_repl, tmp_path, key):
    editor = _editor(tmp_path, "p = sys.argv[1]\ntext = open(p).read()\n"
                               "open(p, 'w').write(text.upper() + ' EDITED\\n')")
    repl = start_repl([], VISUAL=editor)
    repl.type("draft prompt")
    repl.send(key)
    repl.drain(1.0)
    repl.send(ENTER)
    repl.expect(r"Echo: DRAFT PROMPT EDITED")
    repl.expect(PROMPT)


def test_ctrl_x_uses_preferred_editor_and_says_why_it_failed(start_repl, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"general": {"preferredEditor": "micro"}}))
    # preferredEditor wins over $VISUAL; "micro" is not installed here.
    repl = start_repl([], VISUAL=_editor(tmp_path, "sys.exit(0)"), PATH="/nonexistent")
    repl.type("keep me")
    repl.send(CTRL_X)
    repl.expect(r"cannot start micro")
    repl.send(ENTER)
    repl.expect(r"Echo: keep me")


def test_ctrl_y_toggles_yolo_in_a_trusted_folder(start_repl):
    repl = start_repl([], GEMINI_CLI_TRUST_WORKSPACE="true")
    repl.send(CTRL_Y)
    # The toolbar's redraw, on a loaded machine: prompt-toolkit rewrites only
    # the cells that changed, so once "approval default" was on screen the
    # terminal gets "yolo" alone (CI saw exactly that; the mode is checked below).
    repl.expect(r"yolo", timeout=30)
    ask(repl, "/approval-mode")
    repl.expect(r"approval mode: yolo")
    repl.expect(PROMPT)
    repl.send(CTRL_Y)
    ask(repl, "/approval-mode")
    repl.expect(r"approval mode: default")


def test_ctrl_y_is_refused_where_gemini_cli_refuses_it(start_repl, tmp_path):
    repl = start_repl([])  # a folder no trust rule covers
    repl.send(CTRL_Y)
    repl.expect(r"Cannot enable privileged approval modes in an untrusted folder\.")
    ask(repl, "/approval-mode")
    repl.expect(r"approval mode: default")
    repl.expect(PROMPT)
    home = tmp_path / "home"
    (home / "settings.json").write_text(json.dumps({"security": {"disableYoloMode": True}}))
    # The refusal names the setting and the file that set it (a long path: a wide terminal).
    refusal = re.escape("You cannot enter YOLO mode since it is disabled in your settings "
                        f"(security.disableYoloMode in the user settings {home / 'settings.json'}).")
    repl2 = start_repl([], GEMINI_CLI_TRUST_WORKSPACE="true", cols=300)
    repl2.send(CTRL_Y)
    repl2.expect(refusal)
    ask(repl2, "/approval-mode yolo")
    repl2.expect(refusal)
    ask(repl2, "/approval-mode")
    repl2.expect(r"approval mode: default")


def test_in_an_untrusted_folder_shift_tab_passes_over_auto_edit_and_the_command_refuses_it(start_repl):
    """gemini-cli refuses every mode but default and plan in an untrusted
    folder; Shift+Tab goes on to plan, saying why auto_edit was passed over."""
    repl = start_repl([], cols=160)  # a folder no trust rule covers
    repl.send(SHIFT_TAB)
    repl.expect(r"auto_edit skipped: Cannot enable privileged approval modes in an untrusted folder\.")
    ask(repl, "/approval-mode auto_edit")
    repl.expect(r"Cannot enable privileged approval modes in an untrusted folder\.")
    ask(repl, "/approval-mode")
    repl.expect(r"approval mode: plan")
    repl.expect(PROMPT)
    repl.send(SHIFT_TAB)  # plan → default: nothing passed over, no hint
    ask(repl, "/approval-mode")
    repl.expect(r"approval mode: default")


@pytest.mark.parametrize("flag", [["--yolo"], ["--approval-mode", "yolo"]])
def test_the_repl_started_with_yolo_where_settings_disable_it_exits_52_before_the_prompt(tmp_path, workdir, flag):
    """gemini-cli's "Disable YOLO mode, even if enabled by a flag": a
    configuration error (its FatalConfigError), not a REPL in yolo."""
    from .test_repl import _environ

    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"security": {"disableYoloMode": True}}))
    script = tmp_path / "script.json"
    script.write_text("[]")
    repl = PtyProcess([sys.executable, "-m", "gemini_split", "-m", f"scripted:{script}", *flag],
                      env=_environ(tmp_path, NO_COLOR="1", GEMINI_CLI_TRUST_WORKSPACE="true"),
                      cwd=str(workdir), cols=300)
    try:
        repl.expect(re.escape(f"{' '.join(flag)}: YOLO mode is disabled by security.disableYoloMode "
                              f"in the user settings {home / 'settings.json'}"), timeout=20)
        assert repl.wait(timeout=20) == 52
        assert PROMPT not in repl.text
    finally:
        repl.close()


def test_ctrl_y_at_an_approval_question_leaves_it_pending(start_repl, workdir):
    write = {"function_calls": [{"name": "write_file", "args": {"file_path": "x.txt", "content": "x\n"}}]}
    repl = start_repl([write, {"text": "done"}], GEMINI_CLI_TRUST_WORKSPACE="true")
    ask(repl, "write x.txt")
    repl.expect(r"❯ 3\. No")
    repl.send(CTRL_Y)
    repl.drain(1.0)
    assert not (workdir / "x.txt").exists()  # still asked, not approved by the key
    repl.send(ENTER)  # the default: no
    repl.expect(r"✗ refused")
    repl.expect(PROMPT)
    assert not (workdir / "x.txt").exists()
    ask(repl, "/approval-mode")
    repl.expect(r"approval mode: default")


# --- /directory (issue 31 item 5) ---------------------------------------------


def test_directory_add_widens_the_tools_the_context_and_completion_at_once(tmp_path, workdir):
    from gemini_split.testing.fake_gemini import FakeGemini

    from .test_repl import _environ

    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "data.txt").write_text("LIB-DATA-7\n")
    (lib / "GEMINI.md").write_text("LIB-RULE: always use tabs\n")
    (tmp_path / "a-file").write_text("x")
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "settings.json").write_text(json.dumps({"context": {"loadMemoryFromIncludeDirectories": True}}))
    read = {"function_calls": [{"name": "read_file", "args": {"file_path": str(lib / "data.txt")}}]}
    with FakeGemini([read, {"text": "refused, as expected"}, read, {"text": "got it"}], api_key="k") as fake:
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "--approval-mode", "yolo"],
                          env=_environ(tmp_path, NO_COLOR="1", GEMINI_API_KEY="k", GOOGLE_GEMINI_BASE_URL=fake.url,
                                       GEMINI_CLI_TRUST_WORKSPACE="true"),
                          cwd=str(workdir), cols=200)
        try:
            repl.expect(PROMPT, timeout=30)
            ask(repl, "read the data")
            repl.expect(r"refused, as expected", timeout=30)  # outside the workspace: the tool refused
            repl.expect(PROMPT)
            ask(repl, "/dir add ../lib, ../missing ,../a-file")
            repl.expect(r"Successfully added directories:\s+- \.\./lib")
            repl.expect(r"Error adding '\.\./missing': no such directory\s+Error adding '\.\./a-file': not a directory")
            repl.expect(PROMPT)
            ask(repl, "/directory add ../lib")
            repl.expect(r"The following directories are already in the workspace:\s+- \.\./lib")
            repl.expect(PROMPT)
            ask(repl, "/directory show")
            repl.expect(rf"Current workspace directories:\s+- {re.escape(str(workdir))}\s+- {re.escape(str(lib))}")
            repl.expect(PROMPT)
            ask(repl, "/memory list")
            repl.expect(re.escape(str(lib / "GEMINI.md")))
            repl.expect(PROMPT)
            repl.type("@../lib/da")
            repl.send("\t")  # completes to @../lib/data.txt
            repl.expect(r"\.\./lib/data\.txt")
            repl.drain(0.5)
            ask(repl, " and read it now")
            repl.expect(r"got it", timeout=30)
            repl.expect(PROMPT)
        finally:
            repl.close()
        bodies = [r["body"] for r in fake.requests if r["action"].endswith("GenerateContent")]
    first_result = json.dumps(bodies[1]["contents"][-1])
    assert "outside" in first_result and "LIB-DATA-7" not in first_result
    assert "LIB-DATA-7" in json.dumps(bodies[2]["contents"][-1])  # the @ reference, completed, was attached
    system = json.dumps(bodies[-1]["systemInstruction"])
    assert str(lib) in system and "LIB-RULE: always use tabs" in system
    assert "LIB-DATA-7" in json.dumps(bodies[-1]["contents"][-1])


def test_directory_add_refuses_distrusted_folders_and_restrictive_sandboxes(start_repl, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    (home / "trustedFolders.json").write_text(json.dumps({str(other): "DO_NOT_TRUST"}))
    repl = start_repl([])
    ask(repl, f"/directory add {other}")
    repl.expect(r"the folder\s+trust\s+rules\s+do\s+not\s+trust")
    repl.expect(PROMPT)
    ask(repl, "/directory show")
    repl.expect(r"Current workspace directories:\s+- \S+\s*\n")
    repl.expect(PROMPT)
    assert str(other) not in repl.text.split("Current workspace directories:")[-1]
    ask(repl, "/directory")
    repl.expect(r"usage: /directory add PATH\[,PATH…\] \| show")
    sandboxed = start_repl([], "--sandbox=bwrap", SEATBELT_PROFILE="restrictive-open")
    ask(sandboxed, f"/directory add {tmp_path}")
    sandboxed.expect(r"The /directory add command is not supported in restrictive\s+sandbox\s+profiles\.\s+"
                     r"Please\s+use\s+--include-directories\s+when\s+starting\s+the\s+session\s+instead\.")


def test_directory_add_is_refused_when_the_server_runs_the_tools(tmp_path, workdir):
    from gemini_split.testing.fake_gemini import FakeGemini

    from tests.e2e.test_serve_e2e import API_KEY, daemon
    from tests.server.server_tools.helpers import unix_listener

    from .test_repl import _environ

    with FakeGemini(api_key=API_KEY) as fake, unix_listener() as listen, \
            daemon(tmp_path, fake, "--server-tools", "--sandbox", "none",
                   "--workspace-root", str(tmp_path / "workspaces"), *listen) as (_, address):
        repl = PtyProcess([sys.executable, "-m", "gemini_split", "--server", address, "--tools", "server"],
                          env=_environ(tmp_path, NO_COLOR="1"), cwd=str(workdir), cols=200)
        try:
            repl.expect(PROMPT, timeout=30)
            ask(repl, f"/directory add {tmp_path}")
            repl.expect(r"with --tools server the tools run on the server, in its own workspace")
            repl.expect(PROMPT)
            ask(repl, "/directory show")
            repl.expect(r"The tools run on the server \(--tools server\), in the workspace it gives this session")
        finally:
            repl.close()
