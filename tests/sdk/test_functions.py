"""A Python function's declaration, as the model is sent it: made from its
signature, type hints and docstring, or refused with the reason."""

from __future__ import annotations

import enum
from typing import Literal, Optional

import pytest

from gemini_split.sdk import FunctionTool, tool


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_types_defaults_and_choices_make_the_schema():
    def paint(path: str, colour: Colour, coats: int = 2, ratio: float | None = None, glossy: bool = False,
              layers: list[str] | None = None, finish: Literal["matte", "satin"] = "matte",
              extra: Optional[dict] = None) -> None:
        """Paint a file."""

    declared = FunctionTool(paint)
    assert (declared.name, declared.description, declared.kind.value) == ("paint", "Paint a file.", "read")
    assert declared.parameters == {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "colour": {"type": "string", "enum": ["red", "blue"]},
            "coats": {"type": "integer"},
            "ratio": {"type": "number"},
            "glossy": {"type": "boolean"},
            "layers": {"type": "array", "items": {"type": "string"}},
            "finish": {"type": "string", "enum": ["matte", "satin"]},
            "extra": {"type": "object"},
        },
        "required": ["path", "colour"],
    }


def test_google_and_sphinx_docstrings_describe_the_function_and_each_parameter():
    def google(city: str, days: int) -> str:
        """The forecast for a city,
        day by day.

        Args:
            city: The city's name.
            days (int): How many days,
                from today.

        Returns:
            The forecast.
        """
        return ""

    def sphinx(city: str) -> str:
        """Look a city up.

        :param city: The city's name.
        :returns: its entry.
        """
        return ""

    g = FunctionTool(google)
    assert g.description == "The forecast for a city,\nday by day."
    assert g.parameters["properties"]["city"]["description"] == "The city's name."
    assert g.parameters["properties"]["days"]["description"] == "How many days, from today."
    s = FunctionTool(sphinx)
    assert s.description == "Look a city up."
    assert s.parameters["properties"]["city"]["description"] == "The city's name."


def test_the_decorator_takes_a_name_a_description_and_a_kind_and_the_function_still_works():
    @tool(name="rm-rf", description="Remove a tree.", kind="execute")
    def remove(path: str) -> str:
        return f"removed {path}"

    assert (remove.name, remove.description, remove.kind.value) == ("rm-rf", "Remove a tree.", "execute")
    assert remove("x") == "removed x"
    assert tool(remove.fn).name == "remove"


@pytest.mark.parametrize(("fn", "message"), [
    (lambda: None, "cannot be a tool's name"),
])
def test_a_function_without_a_name_is_refused(fn, message):
    with pytest.raises(ValueError, match=message):
        FunctionTool(fn)


def _untyped(x):  # noqa: ANN001
    """No hint."""


def _star(*items: str) -> None:
    """Positional."""


def _union(x: int | str) -> None:
    """Either."""


def _bare_list(x: list) -> None:
    """Of what?"""


def _custom(x: Colour | complex) -> None:
    """Complex."""


def _mixed(x: Literal["a", 1]) -> None:
    """Mixed."""


@pytest.mark.parametrize(("fn", "message"), [
    (_untyped, "parameter 'x' has no type annotation"),
    (_star, "parameter 'items' is variadic positional"),
    (_union, "a union of int, str cannot be declared"),
    (_bare_list, "say what the list holds"),
    (_custom, "a union of Colour, complex"),
    (_mixed, "the choices must be all strings or all integers"),
])
def test_a_declaration_the_model_would_misread_is_refused_naming_the_parameter(fn, message):
    with pytest.raises(TypeError, match=message):
        FunctionTool(fn)


def test_a_bad_kind_is_refused():
    with pytest.raises(ValueError, match="use one of read, edit, execute, network"):
        FunctionTool(_bare_list, kind="dangerous")
