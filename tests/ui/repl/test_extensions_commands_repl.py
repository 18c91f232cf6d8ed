"""Issue 43 §5: ``/extensions`` sub-commands in the real REPL under a pty —
install (asked with a menu), link, enable/disable, config, uninstall,
update, explore, reload, in gemini-cli's words; a new extension's commands
are offered at once."""

from __future__ import annotations

import json

import pytest

from .pty_driver import ENTER
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(90)


def _source(tmp_path, name="tool-ext"):
    src = tmp_path / "src" / name
    (src / "commands").mkdir(parents=True)
    (src / "gemini-extension.json").write_text(json.dumps({
        "name": name, "version": "1.0.0", "settings": [
            {"name": "Region", "description": "Where it runs.", "envVar": "TOOL_REGION"},
            {"name": "Token", "description": "Secret token.", "envVar": "TOOL_TOKEN", "sensitive": True}]}))
    (src / "commands" / "deploy.toml").write_text('description = "Deploy it"\nprompt = "deploy now"\n')
    return src


def test_install_asks_then_its_command_is_offered_and_uninstall_removes_it(start_repl, tmp_path):
    src = _source(tmp_path)
    repl = start_repl([])
    ask(repl, "/extensions")
    repl.expect(r"No extensions installed\.")
    ask(repl, f"/extensions install {src}")
    repl.expect(r'Installing extension from "\S+"\.\.\.')
    repl.expect(r'Installing extension "tool-ext" from ')
    repl.expect(r"This extension adds commands: /deploy")
    repl.expect(r"Do you want to continue\?")
    repl.send("1")
    repl.expect(r'Extension "tool-ext" installed successfully\.')
    repl.expect(r"Its settings are not set: Region, Token \(/extensions config tool-ext\)")
    repl.expect(PROMPT)
    installed = tmp_path / "home" / "extensions" / "tool-ext"
    assert (installed / "gemini-extension.json").is_file()
    ask(repl, "/help")
    repl.expect(r"/deploy \[ARGS\]\s+Deploy it \(extension command\)")
    repl.expect(PROMPT)

    ask(repl, "/extensions config tool-ext Region")
    repl.expect(r"Region \(Where it runs\.\): ")
    ask(repl, "eu-west")
    repl.expect(r'Setting "Region" updated \(\S+\.env\)\.')
    repl.expect(PROMPT)
    ask(repl, "/extensions config tool-ext Token")
    repl.expect(r"Token \(Secret token\.\): ")
    ask(repl, "hunter2")
    repl.expect(r'Setting "Token" updated')
    repl.expect(PROMPT)
    assert (installed / ".env").read_text() == "TOOL_REGION=eu-west\nTOOL_TOKEN=hunter2\n"
    assert "hunter2" not in repl.text  # typed hidden, never shown
    ask(repl, "/extensions list")
    repl.expect(r"Region \(TOOL_REGION\): eu-west")
    repl.expect(r"Token \(TOOL_TOKEN\): \*\*\*")
    repl.expect(PROMPT)

    ask(repl, "/extensions disable tool-ext --scope workspace")
    repl.expect(r'Extension "tool-ext" disabled for the scope "Workspace"')
    ask(repl, "/extensions enable tool-ext --scope=workspace")
    repl.expect(r'Extension "tool-ext" enabled for the scope "Workspace"')
    ask(repl, "/extensions enable tool-ext --scope session")
    repl.expect(r'Unsupported scope session, should be one of "user" or "workspace"')
    ask(repl, "/extensions explore")
    repl.expect(r"View available extensions at https://geminicli\.com/extensions/")
    ask(repl, "/extensions reload")
    repl.expect(r"1 extension reloaded successfully")
    ask(repl, "/extensions update tool-ext")
    repl.expect(r'Extension "tool-ext" successfully updated: 1\.0\.0 → 1\.0\.0\.')
    repl.expect(PROMPT)
    assert (installed / ".env").read_text() == "TOOL_REGION=eu-west\nTOOL_TOKEN=hunter2\n"  # kept by the update

    ask(repl, "/extensions uninstall tool-ext")
    repl.expect(r'Uninstalling extension "tool-ext"\.\.\.')
    repl.expect(r'Extension "tool-ext" uninstalled successfully\.')
    repl.expect(PROMPT)
    assert not installed.exists()
    ask(repl, "/deploy")
    repl.expect(r"unknown command /deploy")
    ask(repl, "/extensions uninstall nope")
    repl.expect(r'Failed to uninstall extension "nope": extension \'nope\' is not installed')
    repl.expect(PROMPT)


def test_install_answered_no_installs_nothing_and_link_points_at_the_source(start_repl, tmp_path):
    src = _source(tmp_path, "linked-ext")
    repl = start_repl([])
    ask(repl, f"/extensions install {src}")
    repl.expect(r"Do you want to continue\?")
    repl.send(ENTER)  # the default: No
    repl.expect(r'Failed to install extension from\s+"[^"]+":\s+installation\s+of\s+"linked-ext"\s+cancelled')
    repl.expect(PROMPT)
    assert not (tmp_path / "home" / "extensions" / "linked-ext").exists()
    ask(repl, "/extensions link nowhere")
    repl.expect(r"Invalid source: nowhere")
    ask(repl, f"/extensions link {src}")
    repl.expect(r"Do you want to continue\?")
    repl.send("1")
    repl.expect(r'Extension "linked-ext" linked successfully\.')
    repl.expect(PROMPT)
    metadata = json.loads((tmp_path / "home" / "extensions" / "linked-ext" /
                           ".gemini-extension-install.json").read_text())
    assert metadata == {"source": str(src), "type": "link"}
