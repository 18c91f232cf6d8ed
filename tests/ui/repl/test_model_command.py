"""``/model NAME`` and gemini-cli's ``/model set NAME [--persist]`` in the
REPL: aliases resolve, ``--persist`` saves ``model.name``, a mistyped alias
changes nothing."""

from __future__ import annotations

import pytest

from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(60)


def test_model_set_resolves_the_alias_and_persist_saves_it_keeping_the_files_comments(start_repl, tmp_path):
    settings = tmp_path / "home" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text('{\n  // gemini-cli allows comments: /model set --persist keeps them\n'
                        '  "output": {"format": "text"}\n}\n')
    repl = start_repl([])
    ask(repl, "/model flsh")
    repl.expect(r"unknown model 'flsh'")
    repl.expect(r"the model is still")
    repl.expect(PROMPT)
    ask(repl, "/model pro")
    repl.expect(r"model: gemini-3\.1-pro-preview \(pro\) \(from the next prompt on\)")
    repl.expect(PROMPT)
    assert '"model"' not in settings.read_text()  # not saved without --persist
    ask(repl, "/model set flash --persist")
    repl.expect(r"model: gemini-3\.8-flash \(flash\) \(from the next prompt on; saved as")
    repl.expect(PROMPT)
    assert settings.read_text() == ('{\n  // gemini-cli allows comments: /model set --persist keeps them\n'
                                    '  "output": {"format": "text"},\n  "model": {\n    "name": "flash"\n  }\n}\n')
    ask(repl, "/model set")
    repl.expect(r"usage: /model \[NAME\] \| /model set NAME \[--persist\]")
    repl.expect(PROMPT)
    ask(repl, "/quit")
    assert repl.wait() == 0


def test_model_manage_is_a_menu_of_the_aliases_not_a_model_named_manage(start_repl):
    repl = start_repl([])
    ask(repl, "/model manage")
    repl.expect(r"Model: pick one")
    repl.expect(r"flash-lite +\(gemini-3\.5-flash-lite\)")
    repl.send("3")  # auto, pro, flash…
    repl.expect(r"model: gemini-3\.8-flash \(flash\) \(from the next prompt on\)")
    repl.expect(PROMPT)
    ask(repl, "/model")
    repl.expect(r"model: gemini-3\.8-flash")
    repl.expect(PROMPT)
    ask(repl, "/quit")
    assert repl.wait() == 0
