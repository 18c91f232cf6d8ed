"""gemini-cli's ``ask_user``: the model asks the user one to four questions
(multiple choice, free text, yes/no) and gets their answers as the result.

The tool's name, parameter schema, checks and result wording are
gemini-cli's (``packages/core/src/tools/ask-user.ts`` in 0.61), so a model
prompted for gemini-cli calls it the same way and reads the same answers:
``{"answers":{"0":"Option A","1":"typed text"}}`` (a multiple choice's
labels joined by ", "), or ``User dismissed ask_user dialog without
answering.``

Who answers is the front end's: the tool asks the :class:`UserAsker` the
executor lends it (``ToolContext.extra["user"]``): the REPL draws a menu,
an ACP editor a form or a permission question, a server running the tool
(``--tools server``) asks the attached clients. With nobody to ask (a
one-shot run) the tool is not offered, as in gemini-cli, and a call anyway
is answered with gemini-cli's non-interactive refusal so the model goes on.

It is a user-interaction tool: read-only (it runs in every approval mode,
plan mode included), never confined or sandboxed, and its answer is only
ever what the user chose or typed for the question shown.
"""

from __future__ import annotations

from typing import Any, Protocol

import msgspec

from gemini_split.protocol import ASK_USER_OPTIONS_MAX, ASK_USER_QUESTIONS_MAX, AskUserOption, AskUserQuestion

from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind

NAME = "ask_user"
#: gemini-cli's display name (its non-interactive refusal names it).
DISPLAY_NAME = "Ask User"
#: What the model reads when the user dismissed the questions (gemini-cli's words).
DISMISSED = "User dismissed ask_user dialog without answering."
#: gemini-cli's refusal of a call that needs a person in non-interactive mode.
NO_USER = (f'Tool execution for "{DISPLAY_NAME}" requires user confirmation, which is not supported in '
           "non-interactive mode.")
NO_USER_HINT = ("no user is present to answer: decide from what you know, say which assumption you made, "
                "and finish the task")


def no_user_failure() -> ToolFailed:
    """The failure a call gets when nobody can answer (a one-shot run)."""
    return ToolFailed("no_user_present", NO_USER, NO_USER_HINT)


class UserAsker(Protocol):
    """Whoever can answer questions: returns the answers by question index
    (``"0"``…), or None when the user dismissed them. Cancelled (the turn
    ended), it asks no more and returns nothing."""

    async def ask_user(self, call_id: str, questions: tuple[AskUserQuestion, ...]) -> dict[str, str] | None: ...


class AskUserTool(Tool):
    name = NAME
    kind = ToolKind.READ  # changes nothing; the question is the confirmation
    description = ("Ask the user one or more questions to gather preferences, clarify requirements, or make "
                   "decisions.")
    parameters = {
        "type": "object",
        "required": ["questions"],
        "properties": {
            "questions": {
                "type": "array",
                "minItems": 1,
                "maxItems": 4,
                "items": {
                    "type": "object",
                    "required": ["question", "header", "type"],
                    "properties": {
                        "question": {
                            "type": "string",
                            "description": "The complete question to ask the user. Should be clear, specific, "
                                           "and end with a question mark.",
                        },
                        "header": {
                            "type": "string",
                            "description": 'Very short label displayed as a chip/tag. Use abbreviations: "Auth" '
                                           'not "Authentication", "Config" not "Configuration". Examples: '
                                           '"Auth method", "Library", "Approach", "Database".',
                        },
                        "type": {
                            "type": "string",
                            "enum": ["choice", "text", "yesno"],
                            "default": "choice",
                            "description": "Question type: 'choice' (default) for multiple-choice with options, "
                                           "'text' for free-form input, 'yesno' for Yes/No confirmation with "
                                           "optional 'Other' feedback.",
                        },
                        "options": {
                            "type": "array",
                            "description": "The selectable choices for 'choice' type questions. Provide 2-4 "
                                           "options. An 'Other' option is automatically added for 'choice' and "
                                           "'yesno' types. Not needed for 'text' or 'yesno'.",
                            "items": {
                                "type": "object",
                                "required": ["label", "description"],
                                "properties": {
                                    "label": {
                                        "type": "string",
                                        "description": 'The display text for this option (1-5 words). '
                                                       'Example: "OAuth 2.0"',
                                    },
                                    "description": {
                                        "type": "string",
                                        "description": 'Brief explanation of this option. Example: '
                                                       '"Industry standard, supports SSO"',
                                    },
                                },
                            },
                        },
                        "multiSelect": {
                            "type": "boolean",
                            "description": "Only applies when type='choice'. Set to true to allow selecting "
                                           "multiple options.",
                        },
                        "placeholder": {
                            "type": "string",
                            "description": "Hint text shown in the input field. For type='text', shown in the "
                                           "main input. For type='choice' and 'yesno', shown in the 'Other' "
                                           "custom input.",
                        },
                    },
                },
            },
        },
    }

    def describe(self, args: dict[str, Any], workspace: Any) -> str:
        questions = args.get("questions") if isinstance(args.get("questions"), list) else []
        return "Asking user: " + ", ".join(str(q.get("question", "")) for q in questions if isinstance(q, dict))

    def validate(self, args: Any) -> dict[str, Any]:
        """The schema's checks, then gemini-cli's (its wording), and one of
        ours: at most four options whatever the type, so no question can
        put thousands of lines before the user."""
        args = super().validate(args)
        parse_questions(args["questions"])
        return args

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        questions = parse_questions(args["questions"])
        user: UserAsker | None = ctx.extra.get("user")
        if user is None:
            raise no_user_failure()
        answers = await user.ask_user(ctx.call_id, questions)
        if answers is None:
            return DISMISSED
        return answers_result(answers, len(questions))


def answers_result(answers: dict[str, str], count: int) -> str:
    """The model's result: gemini-cli's ``JSON.stringify({answers})`` (no
    spaces, non-ASCII as is), keeping only the indices of questions asked."""
    kept = {str(i): answers[str(i)] for i in range(count) if isinstance(answers.get(str(i)), str)}
    return msgspec.json.encode({"answers": kept}).decode()


def parse_questions(raw: Any) -> tuple[AskUserQuestion, ...]:
    """The model's ``questions`` as :class:`AskUserQuestion` records,
    checked and normalised as gemini-cli does (a literal ``\\n`` becomes a
    newline, descriptions trimmed, ``yesno`` and ``text`` questions carry no
    options). Raises :class:`ToolFailed` (``invalid_arguments``) with
    gemini-cli's words."""
    if not isinstance(raw, list) or not raw:
        raise ToolFailed("invalid_arguments", "At least one question is required.")
    if len(raw) > ASK_USER_QUESTIONS_MAX:
        raise ToolFailed("invalid_arguments", f"params/questions must NOT have more than {ASK_USER_QUESTIONS_MAX} items")
    questions = []
    for i, q in enumerate(raw):
        if not isinstance(q, dict):
            raise ToolFailed("invalid_arguments", f"params/questions/{i} must be object")
        for key in ("question", "header"):
            if not isinstance(q.get(key), str):
                raise ToolFailed("invalid_arguments", f"params/questions/{i} must have required property '{key}'"
                                 if key not in q else f"params/questions/{i}/{key} must be string")
        kind = q.get("type", "choice")
        if kind not in ("choice", "text", "yesno"):
            raise ToolFailed("invalid_arguments",
                             f"params/questions/{i}/type must be equal to one of the allowed values")
        options = q.get("options")
        if options is not None and not isinstance(options, list):
            raise ToolFailed("invalid_arguments", f"params/questions/{i}/options must be array")
        if kind == "choice" and (not options or len(options) < 2):
            raise ToolFailed("invalid_arguments",
                             f"Question {i + 1}: type='choice' requires 'options' array with 2-4 items.")
        if options and len(options) > ASK_USER_OPTIONS_MAX:
            raise ToolFailed("invalid_arguments",
                             f"Question {i + 1}: 'options' array must have at most {ASK_USER_OPTIONS_MAX} items.")
        parsed: list[AskUserOption] = []
        for j, opt in enumerate(options or ()):
            label = opt.get("label") if isinstance(opt, dict) else None
            if not isinstance(label, str) or not label.strip():
                raise ToolFailed("invalid_arguments", f"Question {i + 1}, option {j + 1}: 'label' is required and "
                                                      "must be a non-empty string.")
            description = opt.get("description")
            if not isinstance(description, str):
                raise ToolFailed("invalid_arguments", f"Question {i + 1}, option {j + 1}: 'description' is "
                                                      "required and must be a string.")
            parsed.append(AskUserOption(label=_unescape(label), description=_unescape(description.strip())))
        multi = q.get("multiSelect")
        placeholder = q.get("placeholder")
        questions.append(AskUserQuestion(
            question=_unescape(q["question"]), header=_unescape(q["header"]), type=kind,
            options=tuple(parsed) if kind == "choice" else (),
            multi_select=multi is True and kind == "choice",
            placeholder=_unescape(placeholder) if isinstance(placeholder, str) else "",
        ))
    return tuple(questions)


def _unescape(text: str) -> str:
    """gemini-cli's normalisation: a model's literal ``\\r\\n`` / ``\\n`` is a line break."""
    return text.replace("\\r\\n", "\n").replace("\\n", "\n")


def multi_answer(labels: list[str], other: str = "") -> str:
    """A multiple choice's answer as gemini-cli writes it: the chosen
    labels in option order, then the typed answer, joined by ", "."""
    return ", ".join([*labels, *([other.strip()] if other.strip() else [])])
