"""Issue 43 §5: ``/hooks enable|disable|enable-all|disable-all`` in the real
REPL under a pty — gemini-cli's words, its ``hooksConfig.disabled`` lists,
and the running session's hooks switched at once."""

from __future__ import annotations

import json

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)


def _hooks(tmp_path, marker):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    settings = home / "settings.json"
    settings.write_text("// mine\n" + json.dumps({"hooks": {
        "BeforeAgent": [{"hooks": [{"type": "command", "name": "marker", "command": f"echo ran >> {marker}"}]}],
        "AfterAgent": [{"hooks": [{"type": "command", "command": "true"}]}],
    }}, indent=2))
    return settings


def test_disable_and_enable_a_hook_by_name_switch_it_for_the_running_session(start_repl, tmp_path):
    marker = tmp_path / "ran.txt"
    settings = _hooks(tmp_path, marker)
    repl = start_repl([])
    ask(repl, "/hooks disable marker")
    repl.expect(r'Hook "marker" disabled by adding it to the disabled list in user \(\S+settings\.json\) settings\.')
    repl.expect(PROMPT)
    assert settings.read_text().startswith("// mine\n")  # edited in place
    assert '"disabled": [\n      "marker"\n    ]' in settings.read_text()
    ask(repl, "hello")
    repl.expect("Echo: hello")
    repl.expect(PROMPT)
    assert not marker.exists()  # off at once, in this session

    ask(repl, "/hooks disable marker")
    repl.expect(r'Hook "marker" is already disabled\.')
    ask(repl, "/hooks list")
    repl.expect(r"marker\s+timeout 60 s\s+\[disabled\]")
    repl.expect(PROMPT)
    ask(repl, "/hooks enable marker")
    # gemini-cli names both files (the one changed first) whether or not the other listed it.
    repl.expect(r'Hook "marker" enabled by removing it from the disabled list in user \(\S+\) and '
                r"workspace \(\S+\) settings\.")
    repl.expect(PROMPT)
    ask(repl, "again")
    repl.expect("Echo: again")
    repl.expect(PROMPT)
    assert marker.read_text() == "ran\n"

    ask(repl, "/hooks disable nosuch")
    repl.expect(r"no hook named 'nosuch' \(hooks: marker, true\)")
    ask(repl, "/hooks enable")
    repl.expect(r"Usage: /hooks enable <hook-name>")
    repl.expect(PROMPT)


def test_disable_all_and_enable_all_count_the_hooks_they_switch(start_repl, tmp_path):
    marker = tmp_path / "ran.txt"
    settings = _hooks(tmp_path, marker)
    repl = start_repl([])
    ask(repl, "/hooks disable-all")
    repl.expect(r"Disabled 2 hook\(s\) successfully\.")
    ask(repl, "/hooks disableall")
    repl.expect(r"All hooks are already disabled\.")
    repl.expect(PROMPT)
    assert json.loads(settings.read_text().split("\n", 1)[1])["hooksConfig"]["disabled"] == ["marker", "true"]
    ask(repl, "quiet")
    repl.expect("Echo: quiet")
    repl.expect(PROMPT)
    assert not marker.exists()
    ask(repl, "/hooks enable-all")
    repl.expect(r"Enabled 2 hook\(s\) successfully\.")
    repl.expect(PROMPT)
    assert json.loads(settings.read_text().split("\n", 1)[1])["hooksConfig"]["disabled"] == []
    ask(repl, "loud")
    repl.expect("Echo: loud")
    repl.expect(PROMPT)
    assert marker.exists()


def test_in_a_trusted_folder_disable_writes_the_workspace_settings_and_enable_clears_both(start_repl, tmp_path,
                                                                                          workdir):
    marker = tmp_path / "ran.txt"
    user = _hooks(tmp_path, marker)
    project = workdir / ".gemini" / "settings.json"
    project.parent.mkdir()
    project.write_text(json.dumps({"hooksConfig": {"disabled": []}}))
    repl = start_repl([], GEMINI_CLI_TRUST_WORKSPACE="true")
    ask(repl, "/hooks disable marker")
    repl.expect(r'Hook "marker" disabled by adding it to the disabled list in workspace \(\S+\) settings\.')
    repl.expect(PROMPT)
    assert json.loads(project.read_text())["hooksConfig"]["disabled"] == ["marker"]
    user.write_text(user.read_text().replace('"hooks": {', '"hooksConfig": {"disabled": ["marker"]}, "hooks": {'))
    ask(repl, "/hooks enable marker")
    repl.expect(r'Hook "marker" enabled by removing it from the disabled list in workspace \(\S+\) and '
                r"user \(\S+\) settings\.")
    repl.expect(PROMPT)
    assert json.loads(project.read_text())["hooksConfig"]["disabled"] == []
    assert '"disabled": []' in user.read_text()
