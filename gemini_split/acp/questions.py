"""The model's ``ask_user`` questions in an ACP editor.

An editor that offers form elicitation (``clientCapabilities.elicitation.
form``, ACP's unstable ``elicitation/create``) gets one form: a field per
question (a titled single or multiple choice, a yes/no, a text) and, for
choices, an optional "Other" text field, as gemini-cli's dialog has. Any
other editor gets ``session/request_permission`` for each choice or yes/no
question, its options the choices (ACP's closest UI); a free-text question
it cannot show, so the model is told to ask it in its answer instead.

What the editor is sent is the model's text cut to bounds (the editor
renders it; a megabyte or thousands of options never reach it: the tool
allows at most four). What comes back is used only as the answer to the
questions sent: a choice that is not one of the options offered is
dropped.
"""

from __future__ import annotations

from typing import Any

from gemini_split.tools.builtin.ask_user import multi_answer
from gemini_split.tools.base import ToolFailed
from gemini_split.protocol import AskUserQuestion

#: Characters of a question, header, label or description sent to the editor.
QUESTION_CHARS = 2000
SHORT_CHARS = 200


def can_elicit(capabilities: Any) -> bool:
    """Whether the editor's ``clientCapabilities`` offer form elicitation."""
    elicitation = capabilities.get("elicitation") if isinstance(capabilities, dict) else None
    return isinstance(elicitation, dict) and isinstance(elicitation.get("form"), dict)


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _labels(question: AskUserQuestion) -> list[str]:
    return ["Yes", "No"] if question.type == "yesno" else [o.label for o in question.options]


def form_schema(questions: tuple[AskUserQuestion, ...]) -> dict[str, Any]:
    """The form of ``elicitation/create``: ``q<i>`` per question, and
    ``q<i>_other`` (optional typed answer) for choices and yes/no."""
    properties: dict[str, Any] = {}
    for i, q in enumerate(questions):
        title = cut(q.header, SHORT_CHARS) or f"Question {i + 1}"
        description = cut(q.question, QUESTION_CHARS)
        if q.type == "text":
            field: dict[str, Any] = {"type": "string", "title": title, "description": description}
            if q.placeholder:
                field["description"] += f" (e.g. {cut(q.placeholder, SHORT_CHARS)})"
            properties[f"q{i}"] = field
            continue
        descriptions = ([""] * 2) if q.type == "yesno" else [o.description for o in q.options]
        options = [{"const": label, "title": cut(label, SHORT_CHARS),
                    **({"description": cut(d, SHORT_CHARS)} if d else {})}
                   for label, d in zip(_labels(q), descriptions)]
        if q.multi_select:
            properties[f"q{i}"] = {"type": "array", "title": title, "description": description,
                                   "items": {"anyOf": options}}
        else:
            properties[f"q{i}"] = {"type": "string", "title": title, "description": description, "oneOf": options}
        properties[f"q{i}_other"] = {"type": "string", "title": f"{title}: other (type an answer)"}
    return {"type": "object", "properties": properties}


def form_answers(questions: tuple[AskUserQuestion, ...], content: Any) -> dict[str, str]:
    """The answers in gemini-cli's form from an accepted form's ``content``:
    only the options offered, several joined by ", ", a typed "other"."""
    content = content if isinstance(content, dict) else {}
    answers: dict[str, str] = {}
    for i, q in enumerate(questions):
        value = content.get(f"q{i}")
        if q.type == "text":
            if isinstance(value, str) and value.strip():
                answers[str(i)] = value
            continue
        labels = _labels(q)
        picked = value if isinstance(value, list) else [value]
        chosen = [label for label in labels if label in picked]
        if not q.multi_select:
            chosen = chosen[:1]
        other = content.get(f"q{i}_other")
        answer = multi_answer(chosen, other if isinstance(other, str) else "")
        if answer:
            answers[str(i)] = answer
    return answers


def permission_options(question: AskUserQuestion) -> list[dict[str, str]]:
    """A choice or yes/no question as ``session/request_permission`` options
    (each choice ``allow_once``, then a ``reject_once`` that dismisses)."""
    options = [{"optionId": f"answer-{j}", "name": cut(label, SHORT_CHARS), "kind": "allow_once"}
               for j, label in enumerate(_labels(question))]
    return [*options, {"optionId": "dismiss", "name": "Dismiss", "kind": "reject_once"}]


def permission_answer(question: AskUserQuestion, option_id: Any) -> str | None:
    """The label an option id stands for (None: dismissed or not offered)."""
    labels = _labels(question)
    if isinstance(option_id, str) and option_id.startswith("answer-") and option_id[7:].isdigit():
        index = int(option_id[7:])
        if index < len(labels):
            return labels[index]
    return None


def cannot_type() -> ToolFailed:
    """A free-text question for an editor without form elicitation."""
    return ToolFailed("unsupported", "this editor cannot take a typed answer (it offers no ACP form elicitation), "
                                     "so the questions were not asked",
                      "ask the question in your reply and let the user answer in their next message")
