"""Issue 31 §6 in the REPL: the model's ``ask_user`` questions are menus
under a pty, and what the user picked or typed is the tool's result
(gemini-cli's ``{"answers":{…}}``). The scripted model echoes the tool
result once its script runs out (``Tool results: …``)."""

from __future__ import annotations

import pytest

from .pty_driver import CTRL_C, DOWN, ENTER, ESC
from .test_repl import PROMPT, ask, start_repl, workdir  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(90)

DB = {"question": "Which database would you like to use?", "header": "Database", "type": "choice",
      "options": [{"label": "PostgreSQL", "description": "Powerful, open source."},
                  {"label": "SQLite", "description": "A C library."}]}


def call(*questions: dict) -> dict:
    return {"function_calls": [{"name": "ask_user", "args": {"questions": list(questions)}}]}


def test_a_choice_is_a_menu_and_the_pick_is_the_answer_the_model_reads(start_repl):  # noqa: F811
    repl = start_repl([call(DB)])
    ask(repl, "set up the app")
    repl.expect(r"\? Database")
    repl.expect(r"Which database would you like to use\?")
    repl.expect(r"❯ 1\. PostgreSQL — Powerful, open source\.")
    repl.expect(r"2\. SQLite — A C library\.")
    repl.expect(r"3\. Other: type an answer")
    repl.send(DOWN)
    repl.expect(r"❯ 2\. SQLite")
    repl.send(ENTER)
    repl.expect(r"✓ answered\s+Database → SQLite")
    repl.expect(r'│ \{"answers":\{"0":"SQLite"\}\}')  # the result, as the model reads it
    repl.expect(r"Tool results: ")
    repl.expect(PROMPT)


def test_several_questions_other_text_and_yes_no_are_answered_in_turn(start_repl):  # noqa: F811
    repl = start_repl([call(
        DB,
        {"question": "Name of the project?", "header": "Name", "type": "text", "placeholder": "my-app"},
        {"question": "Deploy now?", "header": "Deploy", "type": "yesno"},
        {"question": "Which extras?", "header": "Extras", "type": "choice", "multiSelect": True,
         "options": [{"label": "Auth", "description": ""}, {"label": "Cache", "description": ""},
                     {"label": "Queue", "description": ""}]},
    )])
    ask(repl, "set up the app")
    repl.expect(r"\? Database \(1/4\)")
    repl.expect(r"3\. Other: type an answer")
    repl.send("3")
    repl.expect(r"Your answer: ")
    ask(repl, "MariaDB")
    repl.expect(r"\? Name \(2/4\)")
    repl.expect(r"e\.g\. my-app")
    repl.expect(r"Your answer: ")
    ask(repl, "shop")
    repl.expect(r"\? Deploy \(3/4\)")
    repl.expect(r"2\. No")
    repl.send("2")
    repl.expect(r"\? Extras \(4/4\)")
    repl.expect(r"4\. ☐ All of the above")
    repl.send("1")
    repl.send("3")
    repl.expect(r"3\. ☑ Queue")
    repl.send(ENTER)
    repl.expect(r"✓ answered")
    repl.expect(r'│ \{"answers":\{"0":"MariaDB","1":"shop","2":"No","3":"Auth, Queue"\}\}')
    repl.expect(PROMPT)


def test_escape_dismisses_and_the_model_is_told_in_gemini_clis_words(start_repl):  # noqa: F811
    repl = start_repl([call(DB)])
    ask(repl, "set up the app")
    repl.expect(r"❯ 1\. PostgreSQL")
    repl.send(ESC)
    repl.expect(r"✗ dismissed")
    repl.expect(r'│ User dismissed ask_user dialog without answering\.')
    repl.expect(PROMPT)


def test_ctrl_c_at_a_question_dismisses_it_and_cancels_the_turn(start_repl):  # noqa: F811
    repl = start_repl([call(DB), {"text": "should not be reached " * 50, "chunks": 50, "chunk_delay": 0.1}])
    ask(repl, "set up the app")
    repl.expect(r"❯ 1\. PostgreSQL")
    repl.send(CTRL_C)
    repl.expect(r"cancelling the turn")
    repl.expect(r"Cancelled\.", timeout=5)
    repl.expect(PROMPT)
    assert "should not be reached" not in repl.text


def test_keys_typed_ahead_never_answer_a_question_and_come_back_to_the_prompt(start_repl):  # noqa: F811
    """The approval defect's twin (issue 14 §1): what was typed while the
    answer streamed — number keys and Enter included — neither answers the
    question nor leaks into it; the line ended by Enter is sent after the
    turn, the rest waits in the prompt."""
    repl = start_repl([
        {"text": "thinking about it " * 20, "chunks": 20, "chunk_delay": 0.05, **call(DB)},
        {"text": "thanks"},
    ])
    ask(repl, "set up the app")
    repl.expect(r"thinking about it")
    repl.type("2 sqlite", delay=0.01)
    repl.send(ENTER)
    repl.type("x")
    repl.expect(r"❯ 1\. PostgreSQL")
    repl.drain(0.5)
    assert "✓ answered" not in repl.text
    repl.send(ENTER)  # the user's own pick: the first option, where the menu starts
    repl.expect(r"Database → PostgreSQL")
    repl.expect(r"thanks")
    repl.expect(r"sending what you typed during the answer: 2 sqlite")
    repl.expect(r"Echo: 2 sqlite")
    repl.expect(PROMPT + "x")


def test_hostile_questions_are_shown_inert_and_bounded(start_repl):  # noqa: F811
    huge = "why " * 250_000  # a megabyte
    repl = start_repl([
        call({"question": "Pick \x1b[2J\x1b[31mred\x1b]0;pwned\x07 one?", "header": "Evil\x1b[1A",
              "type": "choice", "options": [{"label": "A\x1b[2K", "description": "\u202eevil"},
                                            {"label": "B", "description": ""}]}),
        {"text": "one"},
        call({"question": huge, "header": "Big", "type": "yesno"}),
        {"text": "two"},
        call({"question": "Many?", "header": "Many", "type": "choice",
              "options": [{"label": f"o{i}", "description": ""} for i in range(10_000)]}),
        {"text": "three"},
    ], rows=40)
    ask(repl, "go")
    repl.expect(r"\? Evil␛\[1A")
    repl.expect(r"Pick ␛\[2J␛\[31mred␛\]0;pwned␇ one\?")
    repl.expect(r"1\. A␛\[2K — \\u202eevil")
    repl.send(ENTER)
    repl.expect(r'│ \{"answers":\{"0":"A\\u001b\[2K"\}\}')
    repl.expect(PROMPT)
    ask(repl, "again")
    repl.expect(r"more characters")
    repl.expect(r"1\. Yes")
    repl.send(ENTER)
    repl.expect(r'│ \{"answers":\{"0":"Yes"\}\}')
    repl.expect(PROMPT)
    assert repl.text.count("why") < 2000
    ask(repl, "more")
    repl.expect(r"'options' array must have at most 4 items")
    repl.expect(PROMPT)
    assert "o9999" not in repl.text


def test_ticked_choices_and_a_typed_other_answer_go_together(start_repl):  # noqa: F811
    repl = start_repl([call({"question": "Which extras?", "header": "Extras", "type": "choice", "multiSelect": True,
                             "options": [{"label": "Auth", "description": ""}, {"label": "Cache", "description": ""}]})])
    ask(repl, "set up the app")
    repl.expect(r"4\. Other: type an answer")
    repl.send("2")
    repl.expect(r"2\. ☑ Cache")
    repl.send("4")  # Other, after a tick: the ticked one stays chosen
    repl.expect(r"Your answer: ")
    ask(repl, "Queue")
    repl.expect(r'│ \{"answers":\{"0":"Cache, Queue"\}\}')
    repl.expect(PROMPT)
