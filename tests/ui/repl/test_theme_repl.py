"""Issue 43 §5: ``/theme`` in the real REPL under a pty — gemini-cli's dark
and light themes from a menu or by name, saved as ``ui.theme``; NoColor and
``NO_COLOR`` take the colour away."""

from __future__ import annotations

import json
import re

import pytest

from .pty_driver import DOWN, ENTER
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401 (fixtures)

pytestmark = pytest.mark.timeout(60)

COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-7]|38;[25];[0-9;]+|9[0-7])m")
CODE = {"text": "```python\ndef f():\n    return 'x'\n```\n"}


def test_the_menu_lists_gemini_clis_themes_and_the_choice_is_saved_and_used(start_repl, tmp_path):
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    settings = home / "settings.json"
    settings.write_text('{\n  // mine\n  "ui": {"theme": "Dracula"}\n}\n')
    repl = start_repl([CODE, CODE], NO_COLOR="")
    ask(repl, "/theme")
    repl.expect(r"Select Theme")
    for line in (r"ANSI Dark", r"Dracula Dark  · current", r"Solarized Dark", r"Tokyo Night Dark",
                 r"ANSI Light", r"Default Light", r"Google Code Light", r"Xcode Light", r"NoColor"):
        repl.expect(re.escape(line))
    repl.send(DOWN)  # from Dracula to GitHub
    repl.send(ENTER)
    repl.expect(r"Theme: GitHub \(saved as ui\.theme in \S+settings\.json\)")
    repl.expect(PROMPT)
    assert settings.read_text() == '{\n  // mine\n  "ui": {"theme": "GitHub"}\n}\n'
    ask(repl, "/theme no color")
    repl.expect(r"Theme: NoColor")
    repl.expect(PROMPT)
    mark = len(repl.raw)
    ask(repl, "show code")
    repl.expect(r"return 'x'")
    repl.expect(PROMPT)
    assert not COLOUR.search(repl.raw[mark:])  # the NoColor theme, at once
    ask(repl, "/theme default light")
    repl.expect(r"Theme: Default Light")
    repl.expect(PROMPT)
    mark = len(repl.raw)
    ask(repl, "more code")
    repl.expect(r"return 'x'")
    repl.expect(PROMPT)
    assert COLOUR.search(repl.raw[mark:])  # colour again
    assert json.loads(settings.read_text().replace("// mine", ""))["ui"]["theme"] == "Default Light"
    ask(repl, "/theme Neon")
    repl.expect(r'Theme "Neon" not found\. \(known: ANSI, Atom One')
    repl.expect(PROMPT)


def test_with_no_color_there_is_no_theme_to_choose(start_repl, tmp_path):
    repl = start_repl([])  # NO_COLOR=1
    ask(repl, "/theme")
    repl.expect(r"Theme configuration unavailable due to NO_COLOR env variable\.")
    repl.expect(PROMPT)
    assert not (tmp_path / "home" / "settings.json").exists()
