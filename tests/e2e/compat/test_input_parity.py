"""Issue 45 item 9: what a script sees of the input, as gemini-cli 0.61.0
does it (observed against the fake Gemini server):

* ``echo hi | gemini -i "hello"`` prints "Error: The --prompt-interactive
  flag cannot be used when input is piped from stdin." and exits 42 before
  any model call;
* ``echo "   " | gemini`` and ``gemini -p "   "`` exit 0 (gemini-cli sends
  the whitespace to its router and main models and prints the reply;
  gemini-split sends nothing: README "Differences from gemini-cli");
* empty stdin, or ``-p ""`` with nothing piped, exit 42 ("No input
  provided via stdin").
"""

from __future__ import annotations

import pytest

from gemini_split.cli import build_parser
from gemini_split.model_aliases import BUILT_IN_ALIASES
from gemini_split.testing.fake_gemini import FakeGemini

from .helpers import API_KEY, Sandbox

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def box(tmp_path) -> Sandbox:
    return Sandbox(tmp_path).setup()


def test_prompt_interactive_with_piped_stdin_is_refused_with_exit_42_before_any_model_call(box):
    with FakeGemini(script=[{"text": "never"}], api_key=API_KEY) as fake:
        result = box.run(["-i", "hello"], fake=fake, stdin="piped text\n")
        assert fake.requests == []
    assert result.status == 42
    assert "--prompt-interactive" in result.stderr and "piped from stdin" in result.stderr
    assert result.stdout == ""


def test_prompt_interactive_is_refused_with_piped_stdin_even_without_credentials(box):
    result = box.run(["--prompt-interactive", "hello"], stdin="", GEMINI_API_KEY="")
    assert result.status == 42 and "piped from stdin" in result.stderr


@pytest.mark.parametrize(("args", "stdin"), [([], "   \n"), ([], "\n\t \n"), (["-p", "   "], ""),
                                             (["-p", ""], "  \n"), (["-o", "json"], " \n")],
                         ids=["stdin", "tabs-and-newlines", "p-spaces", "empty-p-and-spaces", "json"])
def test_whitespace_only_input_exits_0_and_sends_nothing(box, args, stdin):
    with FakeGemini(script=[{"text": "an answer to nothing"}], api_key=API_KEY) as fake:
        result = box.run(args, fake=fake, stdin=stdin)
        assert fake.requests == []
    assert result.status == 0, result.stderr
    assert result.stdout == ""
    assert "only whitespace" in result.stderr


@pytest.mark.parametrize(("args", "stdin"), [([], ""), (["-p", ""], "")], ids=["empty-stdin", "empty-p"])
def test_no_input_at_all_is_still_exit_42(box, args, stdin):
    with FakeGemini(script=[], api_key=API_KEY) as fake:
        result = box.run(args, fake=fake, stdin=stdin)
        assert fake.requests == []
    assert result.status == 42, result.stderr


def test_help_says_what_auto_is_here_and_that_i_refuses_piped_stdin():
    text = " ".join(build_parser().format_help().split())
    model_help = text.split("--model MODEL", 1)[1].split(" -o ", 1)[0]
    assert "auto" in model_help and BUILT_IN_ALIASES["auto"] in model_help
    assert "router" in model_help
    interactive_help = text.split("--prompt-interactive PROMPT", 1)[1].split(" -m ", 1)[0]
    assert "piped" in interactive_help and "42" in interactive_help
