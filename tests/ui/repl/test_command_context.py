"""The REPL is the CommandContext its commands are run with: every member
the context names is there on a REPL (the commands never see the REPL's
class, so nothing else checks that the two agree)."""

from __future__ import annotations

from io import StringIO

from gemini_split.app import resolve_client_settings
from gemini_split.cli import build_parser
from gemini_split.commands.options_from_args import client_options
from gemini_split.environment import Environment
from gemini_split.ui.repl.command_context import CommandContext
from gemini_split.ui.repl.loop import Repl


def test_the_repl_has_every_member_of_the_command_context(tmp_path):
    env = Environment(stdin=StringIO(""), stdout=StringIO(), stderr=StringIO(), cwd=tmp_path,
                      environ={"GEMINI_SPLIT_HOME": str(tmp_path / "home"), "NO_COLOR": "1"})
    options = client_options(build_parser().parse_args(["--model", "scripted:script.json"]))
    repl = Repl(options, env, resolve_client_settings(options, env))
    members = set(CommandContext.__annotations__) | {name for name in vars(CommandContext)
                                                     if not name.startswith("_")}
    assert len(members) > 20  # the annotations and methods were read
    assert sorted(m for m in members if not hasattr(repl, m)) == []
