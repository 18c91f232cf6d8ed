"""Issue 29 §4 in the REPL: ``/hooks``, a SessionStart hook's message, and
PreCompress before ``/compress`` — the real REPL under a pty."""

from __future__ import annotations

import json

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)


def test_hooks_are_listed_greet_the_session_and_see_a_manual_compress(start_repl, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    marker = tmp_path / "precompress.json"
    (home / "settings.json").write_text(json.dumps({"hooks": {
        "SessionStart": [{"matcher": "startup", "hooks": [
            {"type": "command", "name": "greeter",
             "command": """echo '{"systemMessage": "hooks say hello"}'"""}]}],
        "PreCompress": [{"hooks": [{"type": "command", "command": f"cat > {marker}"}]}],
    }}))
    repl = start_repl([])
    assert "hooks say hello" in repl.text
    ask(repl, "/hooks")
    repl.expect(r"greeter\s+matcher 'startup'\s+timeout 60 s")
    repl.expect(PROMPT)
    ask(repl, "/compress")
    repl.expect(r"nothing to compress yet")
    repl.expect(PROMPT)
    event = json.loads(marker.read_text())
    assert event["hook_event_name"] == "PreCompress" and event["trigger"] == "manual"
