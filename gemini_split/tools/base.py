"""What a local tool is, and how its failures reach the model.

A tool is a :class:`Tool` subclass registered in a :class:`ToolRegistry`.
Its ``parameters`` is the JSON schema announced to the server (and through it
to the model); :func:`validate_arguments` checks the model's arguments against
it before ``run`` is called. ``run`` returns a JSON-able result (usually a
string the model reads) or raises :class:`ToolFailed`, whose code, message and
hint reach the model as a structured error — never a traceback.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from enum import Enum
from typing import TYPE_CHECKING, Any, ClassVar

import msgspec

from gemini_split.errors import ToolFailed
from gemini_split.protocol import ToolSpec

if TYPE_CHECKING:
    from gemini_split.tools.workspace import Workspace


class ToolKind(Enum):
    """What a tool can do, which decides whether it needs approval."""

    READ = "read"  # looks, changes nothing
    EDIT = "edit"  # changes files in the workspace
    EXECUTE = "execute"  # runs commands
    NETWORK = "network"  # reaches the network


OutputSink = Callable[[str, str], Awaitable[None]]
"""``await sink(text, stream)`` shows partial output (stream: stdout/stderr)."""


async def _discard_output(text: str, stream: str) -> None:
    return None


class ToolContext(msgspec.Struct):
    """What a running tool may use.

    Cancellation is Trio's: a cancelled turn cancels ``run``; a tool that
    starts processes must kill them when cancelled.
    """

    workspace: Workspace
    emit_output: OutputSink = _discard_output
    call_id: str = ""
    extra: dict[str, Any] = msgspec.field(default_factory=dict)


class Tool(ABC):
    """One local tool. Subclasses set the class attributes and ``run``."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]
    kind: ClassVar[ToolKind] = ToolKind.READ
    #: Runs without asking whatever the approval mode (an MCP server with
    #: ``trust: true``); a policy's deny still applies.
    trusted: bool = False
    #: A call delegates to the sub-agent of this tool's name (a remote
    #: agent's): policy rules and hooks see it as gemini-cli's
    #: ``invoke_agent`` (:mod:`gemini_split.agent_invocation`).
    invokes_agent: ClassVar[bool] = False

    def spec(self) -> ToolSpec:
        return ToolSpec(name=self.name, description=self.description, parameters=self.parameters)

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        """What this call will do, exactly, for an approval question."""
        shown = ", ".join(f"{k}={v!r}" for k, v in args.items())
        return f"{self.name}({shown})"

    def validate(self, args: Any) -> dict[str, Any]:
        """The arguments checked against :attr:`parameters` (see
        :func:`validate_arguments`); raises :class:`ToolFailed`."""
        return validate_arguments(self, args)

    @abstractmethod
    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        """Do it. Return a JSON-able result; raise :class:`ToolFailed`."""


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def validate_arguments(tool: Tool, args: Any) -> dict[str, Any]:
    """Check ``args`` against the tool's schema (top-level properties,
    ``required``, types, array item types, ``enum``, ``minimum``). Raises
    :class:`ToolFailed` with code ``invalid_arguments`` saying which
    parameter is wrong and what it should be."""
    schema = tool.parameters
    if not isinstance(args, dict):
        raise ToolFailed("invalid_arguments", f"{tool.name} takes an object of named parameters")
    properties: dict[str, Any] = schema.get("properties", {})
    usage = f"parameters of {tool.name}: " + ", ".join(
        f"{n} ({p.get('type', 'any')}{', required' if n in schema.get('required', []) else ''})"
        for n, p in properties.items()
    )
    for name in schema.get("required", []):
        if args.get(name) is None:
            raise ToolFailed("invalid_arguments", f"missing required parameter '{name}'", usage)
    unknown = sorted(set(args) - set(properties))
    if unknown:
        raise ToolFailed("invalid_arguments", f"unknown parameter(s): {', '.join(unknown)}", usage)
    for name, value in args.items():
        if value is None:
            continue
        _check_value(name, value, properties[name], usage)
    return {k: v for k, v in args.items() if v is not None}


def _check_value(name: str, value: Any, prop: dict[str, Any], usage: str) -> None:
    expected = prop.get("type")
    if expected in _JSON_TYPES:
        ok = isinstance(value, _JSON_TYPES[expected]) and not (
            expected in ("integer", "number") and isinstance(value, bool)
        )
        # Models often send whole numbers as 3.0; accept those as integers.
        if expected == "integer" and isinstance(value, float) and value.is_integer():
            ok = True
        if not ok:
            raise ToolFailed("invalid_arguments", f"parameter '{name}' must be of type {expected}", usage)
    if "enum" in prop and value not in prop["enum"]:
        raise ToolFailed("invalid_arguments", f"parameter '{name}' must be one of {prop['enum']}", usage)
    if "minimum" in prop and isinstance(value, int | float) and value < prop["minimum"]:
        raise ToolFailed("invalid_arguments", f"parameter '{name}' must be at least {prop['minimum']}", usage)
    if expected == "array" and isinstance(prop.get("items"), dict):
        for i, item in enumerate(value):
            _check_value(f"{name}[{i}]", item, prop["items"], usage)
