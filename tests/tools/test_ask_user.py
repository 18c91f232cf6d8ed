"""Issue 31 §6: ``ask_user`` checks the model's questions as gemini-cli
0.61 does (its ``validateToolParamValues`` wording), bounds them, and
answers in gemini-cli's form. The declaration is gemini-cli's, word for
word (``ASK_USER_DEFINITION.base`` in its bundle)."""

from __future__ import annotations

import pytest

from gemini_split.tools.builtin.ask_user import (
    DISMISSED,
    AskUserTool,
    answers_result,
    parse_questions,
)
from gemini_split.tools.base import ToolContext, ToolFailed
from gemini_split.tools.workspace import Workspace


def choice(*labels: str, **extra) -> dict:
    return {"question": "Which?", "header": "H", "type": "choice",
            "options": [{"label": label, "description": ""} for label in labels], **extra}


@pytest.mark.parametrize("questions, message", [
    ([], "At least one question is required."),
    ([choice("only")], "Question 1: type='choice' requires 'options' array with 2-4 items."),
    ([choice("a", "b"), choice(*"abcde")], "Question 2: 'options' array must have at most 4 items."),
    ([{"question": "Q?", "header": "H", "type": "text", "options": [{"label": f"o{i}", "description": ""}
                                                                     for i in range(10_000)]}],
     "Question 1: 'options' array must have at most 4 items."),
    ([choice("a", "b")] * 5, "params/questions must NOT have more than 4 items"),
    ([{"question": "Q?", "header": "H", "options": [{"label": " ", "description": ""}, {"label": "b", "description": ""}]}],
     "Question 1, option 1: 'label' is required and must be a non-empty string."),
    ([{"question": "Q?", "header": "H", "options": [{"label": "a"}, {"label": "b", "description": ""}]}],
     "Question 1, option 1: 'description' is required and must be a string."),
    ([{"question": "Q?", "type": "text"}], "params/questions/0 must have required property 'header'"),
])
def test_bad_questions_are_refused_in_gemini_clis_words(questions, message):
    with pytest.raises(ToolFailed) as refused:
        AskUserTool().validate({"questions": questions})
    assert str(refused.value) == message and refused.value.code == "invalid_arguments"


def test_questions_are_normalised_as_gemini_cli_does():
    (q,) = parse_questions([{"question": "Line one\\nline two?", "header": "Pick\\r\\nme", "type": "choice",
                             "multiSelect": True, "placeholder": "e.g.\\nx",
                             "options": [{"label": "A\\nB", "description": "  padded  "},
                                         {"label": "C", "description": ""}]}])
    assert (q.question, q.header, q.placeholder) == ("Line one\nline two?", "Pick\nme", "e.g.\nx")
    assert [(o.label, o.description) for o in q.options] == [("A\nB", "padded"), ("C", "")]
    assert q.multi_select
    (yes_no,) = parse_questions([{"question": "Go?", "header": "Go", "type": "yesno", "multiSelect": True,
                                  "options": [{"label": "x", "description": ""}]}])
    assert yes_no.options == () and not yes_no.multi_select


def test_answers_are_gemini_clis_json_and_only_for_the_questions_asked():
    assert answers_result({"0": "SQLite", "1": "é \"q\"", "5": "never asked"}, 2) == \
        '{"answers":{"0":"SQLite","1":"é \\"q\\""}}'


async def test_the_tool_asks_whoever_the_executor_lends_it_and_reports_a_dismissal(tmp_path):
    asked = []

    class User:
        async def ask_user(self, call_id, questions):
            asked.append((call_id, questions))
            return None

    ctx = ToolContext(workspace=Workspace(tmp_path), call_id="c1", extra={"user": User()})
    assert await AskUserTool().run({"questions": [choice("a", "b")]}, ctx) == DISMISSED
    assert asked[0][0] == "c1" and asked[0][1][0].options[1].label == "b"
    with pytest.raises(ToolFailed) as nobody:
        await AskUserTool().run({"questions": [choice("a", "b")]}, ToolContext(workspace=Workspace(tmp_path)))
    assert nobody.value.code == "no_user_present"


def test_the_declaration_is_gemini_clis():
    tool = AskUserTool()
    assert tool.description == ("Ask the user one or more questions to gather preferences, clarify requirements, "
                                "or make decisions.")
    items = tool.parameters["properties"]["questions"]
    assert (items["minItems"], items["maxItems"]) == (1, 4)
    assert items["items"]["required"] == ["question", "header", "type"]
    assert set(items["items"]["properties"]) == {"question", "header", "type", "options", "multiSelect", "placeholder"}
    assert items["items"]["properties"]["type"]["enum"] == ["choice", "text", "yesno"]
