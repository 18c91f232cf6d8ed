"""MCP prompt arguments parsed as gemini-cli's ``McpPromptLoader.parseArgs``
parses them (the cases of its own tests), and its help text."""

from __future__ import annotations

from gemini_split.tools.mcp.cache import CachedPrompt
from gemini_split.tools.mcp.prompts import command_name, parse_prompt_args, prompt_help

TITLE_MOOD = [{"name": "title", "required": True}, {"name": "mood", "required": False}]
TWO = [{"name": "first", "required": True}, {"name": "second", "required": True}]


def test_named_arguments_quoted_or_not_and_escapes():
    assert parse_prompt_args('--title="Gemini CLI" --mood=reverent', TITLE_MOOD) == {
        "title": "Gemini CLI", "mood": "reverent"}
    assert parse_prompt_args(r'--title="say \"hi\""', TITLE_MOOD) == {"title": 'say "hi"'}


def test_one_missing_required_argument_takes_every_positional_word():
    assert parse_prompt_args("Gemini CLI  rocks", TITLE_MOOD) == {"title": "Gemini CLI rocks"}
    assert parse_prompt_args("--mood=calm a poem", TITLE_MOOD) == {"mood": "calm", "title": "a poem"}


def test_several_missing_arguments_take_a_word_each_and_say_which_are_missing():
    assert parse_prompt_args('"a b.py" c.py', TWO) == {"first": "a b.py", "second": "c.py"}
    assert parse_prompt_args("a.py", TWO) == "Missing required argument(s): --second"
    assert parse_prompt_args("", TWO) == "Missing required argument(s): --first, --second"


def test_an_unknown_named_argument_is_dropped_and_no_arguments_is_empty():
    assert parse_prompt_args("--nope=1 x", TITLE_MOOD) == {"title": "x"}
    assert parse_prompt_args("anything", []) == {}


def test_help_and_command_name_are_gemini_clis():
    prompt = CachedPrompt("poem writer", "Write a nice haiku", [
        {"name": "title", "description": "the poem's title", "required": True}])
    assert command_name(prompt) == "/poem-writer"
    assert prompt_help(prompt) == (
        'Arguments for "poem writer":\n\n'
        'You can provide arguments by name (e.g., --argName="value") or by position.\n\n'
        'e.g., poem writer "foo" is equivalent to poem writer --title="foo"\n\n'
        "  --title\n    the poem's title\n    (required: yes)")
    assert prompt_help(CachedPrompt("standup")) == 'Prompt "standup" has no arguments.'
