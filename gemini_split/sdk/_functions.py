"""Plain Python functions as tools the model can call.

:class:`FunctionTool` reads a function's signature, type hints and
docstring once and turns them into a function declaration (a name, a
description, a JSON schema of the parameters): ``str``, ``int``,
``float``, ``bool``, ``list[X]`` / ``tuple[X, ...]``, ``dict``, a
``Literal`` of strings or integers, an ``Enum`` of strings, each possibly
``| None`` or given a default (then not required). Anything else is a
:class:`TypeError` at once, naming the function and the parameter: a
declaration the model would misread is worse than none.

The description is the docstring's text before its first section; each
parameter's is its line in a Google-style ``Args:`` section or a Sphinx
``:param name:`` line.

A call runs the function with the model's arguments (checked against the
schema first, by the tool executor). What it returns goes to the model:
a string as it is, anything else as JSON (``msgspec.to_builtins``: lists,
dicts, dataclasses, enums, dates…) or, failing that, its ``str``. An
exception it raises reaches the model as a failed call
(:class:`~gemini_split.errors.ToolFailed` as it is; any other as its type
and message), never as a traceback; the session goes on.

Where a function runs: a plain function in a worker thread (so it may
block), an ``async def`` on the caller's event loop (:class:`Invoker`).
"""

from __future__ import annotations

import enum
import functools
import inspect
import re
import types
import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import msgspec
import trio

from gemini_split.errors import ToolFailed
from gemini_split.tools.base import Tool, ToolContext, ToolKind

__all__ = ["FunctionTool", "Invoker", "PythonTool", "tool"]

#: The Gemini API's rule for a function's name.
_NAME = r"[A-Za-z_][A-Za-z0-9_.-]{0,63}"
#: Section headers that end a docstring's description.
_SECTIONS = ("args:", "arguments:", "parameters:", "params:", "returns:", "return:", "raises:", "yields:",
             "examples:", "example:", "notes:", "note:")
_KINDS = {kind.value: kind for kind in ToolKind}


class FunctionTool:
    """A Python function offered to the model as a tool (see the module's
    docstring). Calling it calls the function.

    ``kind`` decides whether a call is asked about, as for the built-in
    tools of that kind: ``"read"`` (the default) runs without a question in
    every approval mode; ``"edit"``, ``"execute"`` or ``"network"`` are
    asked about in ``default`` mode (an :class:`~gemini_split.sdk.Approval`
    in the prompt's events) and refused in ``plan`` mode. Policy files'
    rules apply to its name as to any tool's.

    Raises :class:`TypeError` for a function whose declaration cannot be
    made, and :class:`ValueError` for a bad name or kind."""

    def __init__(self, fn: Callable[..., Any], *, name: str | None = None, description: str | None = None,
                 kind: str = "read"):
        if not callable(fn):
            raise TypeError(f"a tool is a function; got {fn!r}")
        functools.update_wrapper(self, fn, updated=())  # type: ignore[arg-type]
        self.fn = fn
        self.name: str = name or str(getattr(fn, "__name__", ""))
        if not re.fullmatch(_NAME, self.name):
            raise ValueError(f"{self.name!r} cannot be a tool's name: letters, digits, '_', '.' and '-', at most 64, "
                             "not starting with a digit (give one: tool(fn, name=...))")
        if kind not in _KINDS:
            raise ValueError(f"kind {kind!r}: use one of {', '.join(_KINDS)}")
        self.kind = _KINDS[kind]
        summary, described = _read_docstring(inspect.getdoc(fn) or "")
        self.description: str = description if description is not None else summary or self.name
        self.parameters = _parameters(fn, described)
        self.is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"FunctionTool({self.name!r}, kind={self.kind.value!r})"


def tool(fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None,
         kind: str = "read") -> Any:
    """``fn`` as a :class:`FunctionTool`; used bare (``@tool``) or with
    options (``@tool(kind="execute")``) as a decorator, or called. A plain
    function given in ``tools=`` is ``tool(fn)``."""
    if fn is None:
        return lambda f: FunctionTool(f, name=name, description=description, kind=kind)
    return FunctionTool(fn, name=name, description=description, kind=kind)


def as_function_tool(item: Any) -> FunctionTool:
    """A ``tools=`` entry as a :class:`FunctionTool`."""
    return item if isinstance(item, FunctionTool) else FunctionTool(item)


Invoker = Callable[[Callable[..., Awaitable[Any]], dict[str, Any]], Awaitable[Any]]
"""``await invoke(async_fn, args)``: runs an ``async def`` tool on the
event loop its client belongs to, from the Trio loop that runs the
session (see ``_core.py``)."""


async def invoke_in_trio(fn: Callable[..., Awaitable[Any]], args: dict[str, Any]) -> Any:
    """An ``async def`` tool of a client used from Trio: awaited here."""
    return await fn(**args)


class PythonTool(Tool):
    """A :class:`FunctionTool` registered in one session's tool registry,
    with the way its ``async def`` runs there (``invoke``)."""

    def __init__(self, function: FunctionTool, invoke: Invoker):
        self.function = function
        self.invoke = invoke
        self.name = function.name  # type: ignore[misc]
        self.description = function.description  # type: ignore[misc]
        self.parameters = function.parameters  # type: ignore[misc]
        self.kind = function.kind  # type: ignore[misc]

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        fn = self.function.fn
        try:
            if self.function.is_async:
                result = await self.invoke(fn, args)
            else:
                result = await trio.to_thread.run_sync(functools.partial(fn, **args), abandon_on_cancel=True)
        except ToolFailed:
            raise
        except Exception as exc:
            raise ToolFailed("error", f"{self.name} raised {type(exc).__name__}: {exc}"[:4000]) from exc
        return _for_the_model(result)


def _for_the_model(result: Any) -> Any:
    """What of ``result`` the model gets: a string as it is, else its JSON
    form, else its ``str``."""
    if isinstance(result, str):
        return result
    try:
        return msgspec.to_builtins(result)
    except (TypeError, msgspec.EncodeError):
        return str(result)


def _read_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """(the description, each parameter's description) of a docstring."""
    summary: list[str] = []
    described: dict[str, str] = {}
    in_args = False
    last: str | None = None
    for line in doc.splitlines():
        stripped = line.strip()
        sphinx = re.match(r":param\s+(?:[^:]*\s)?(\w+):\s*(.*)", stripped)
        if sphinx:
            last = sphinx.group(1)
            described[last] = sphinx.group(2)
            in_args = False
            summary.append("\0")
            continue
        if stripped.lower() in _SECTIONS or stripped.startswith(":"):
            in_args = stripped.lower() in _SECTIONS[:4]
            last = None
            summary.append("\0")
            continue
        if in_args:
            entry = re.match(r"(\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)", stripped)
            if entry and not line.startswith(" " * 8):
                last = entry.group(1)
                described[last] = entry.group(2)
            elif last is not None and stripped:
                described[last] = f"{described[last]} {stripped}".strip()
            continue
        if last is not None and stripped and line.startswith(" "):
            described[last] = f"{described[last]} {stripped}".strip()  # a :param line's continuation
            continue
        summary.append(line)
    text = "\n".join(summary).split("\0")[0].strip()
    return text, described


def _parameters(fn: Callable[..., Any], described: Mapping[str, str]) -> dict[str, Any]:
    """The JSON schema of ``fn``'s parameters (see the module's docstring)."""
    where = getattr(fn, "__qualname__", repr(fn))
    try:
        signature = inspect.signature(fn)
        hints = typing.get_type_hints(fn)
    except (TypeError, ValueError, NameError) as exc:
        raise TypeError(f"{where}: its signature cannot be read ({exc})") from None
    properties: dict[str, Any] = {}
    required: list[str] = []
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
            raise TypeError(f"{where}: parameter {p.name!r} is {p.kind.description}; a tool's parameters are "
                            "passed by name")
        if p.name not in hints:
            raise TypeError(f"{where}: parameter {p.name!r} has no type annotation (str, int, float, bool, "
                            "list[...], dict, a Literal or an Enum)")
        schema, optional = _schema(hints[p.name], f"{where}: parameter {p.name!r}")
        if described.get(p.name):
            schema["description"] = described[p.name]
        properties[p.name] = schema
        if p.default is p.empty and not optional:
            required.append(p.name)
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    return parameters


_SCALARS: dict[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _schema(hint: Any, where: str) -> tuple[dict[str, Any], bool]:
    """(the JSON schema of ``hint``, whether it may be None)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union or origin is types.UnionType:
        kept = [a for a in args if a is not type(None)]
        if len(kept) != 1:
            raise TypeError(f"{where}: a union of {', '.join(map(_name, kept))} cannot be declared; use one type")
        return _schema(kept[0], where)[0], True
    if hint in _SCALARS:
        return {"type": _SCALARS[hint]}, False
    if origin is typing.Literal:
        return _enum(list(args), where), False
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _enum([m.value for m in hint], where), False
    if origin in (list, tuple, set, frozenset, Sequence) or hint in (list, tuple, set, frozenset):
        items = [a for a in args if a is not Ellipsis]
        if len(items) != 1:
            raise TypeError(f"{where}: say what the list holds, e.g. list[str]")
        return {"type": "array", "items": _schema(items[0], where)[0]}, False
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return {"type": "object"}, False
    raise TypeError(f"{where}: {_name(hint)} cannot be declared to the model; use str, int, float, bool, "
                    "list[...], dict, a Literal or an Enum")


def _enum(values: list[Any], where: str) -> dict[str, Any]:
    if values and all(isinstance(v, str) for v in values):
        return {"type": "string", "enum": values}
    if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return {"type": "integer", "enum": values}
    raise TypeError(f"{where}: the choices must be all strings or all integers")


def _name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or repr(hint)
