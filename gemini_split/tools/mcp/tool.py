"""One tool of an MCP server, offered to the model like a built-in tool.

An :class:`McpTool` goes through the same executor as every local tool:
arguments validated (here against the server's own JSON schema, with
``jsonschema``), then the approval policy (an MCP tool asks before it runs,
as in gemini-cli, unless its server is ``trust: true``, the tool is allowed
by ``--allowed-tools``/``tools.allowed``, or the mode is ``yolo``), then the
call, cut off at the server's ``timeout``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind

from .naming import model_schema, qualified_tool_name

if TYPE_CHECKING:
    from gemini_split.tools.workspace import Workspace

    from .sources import McpServer


class McpTool(Tool):
    """``remote_name`` of ``server``, called by the model as :attr:`name`."""

    kind = ToolKind.EXECUTE

    def __init__(self, server: McpServer, remote_name: str, description: str, input_schema: Any, *,
                 destructive: bool = False):
        self.server = server
        self.remote_name = remote_name
        self.name = qualified_tool_name(server.name, remote_name)  # type: ignore[misc]
        self.description = description or f"{remote_name} (from the MCP server '{server.name}')"  # type: ignore[misc]
        self.parameters = model_schema(input_schema)  # type: ignore[misc]
        self.input_schema = input_schema if isinstance(input_schema, dict) else {"type": "object"}
        #: ``trust: true`` on the server: calls run without asking.
        self.trusted = server.trusted
        #: The server declares it destructive: checkpointed before it runs.
        self.destructive = destructive

    def validate(self, args: Any) -> dict[str, Any]:
        """Check ``args`` against the server's schema (the full JSON Schema,
        not the model's cleaned copy)."""
        if not isinstance(args, dict):
            raise ToolFailed("invalid_arguments", f"{self.name} takes an object of named parameters")
        import jsonschema  # only when an MCP tool is called

        validator_cls = jsonschema.validators.validator_for(self.input_schema, default=jsonschema.Draft202012Validator)
        error = jsonschema.exceptions.best_match(validator_cls(self.input_schema).iter_errors(args))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
            raise ToolFailed("invalid_arguments", f"{where}: {error.message[:500]}",
                             f"the parameters of {self.name} are described by its schema")
        return args

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        import json  # lazy_imports.EDGES: only when a call is shown, not when the tool is declared

        shown = json.dumps(args, ensure_ascii=False, sort_keys=True)
        return f"{self.remote_name} on MCP server '{self.server.name}' with {shown}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return await self.server.call(self.remote_name, args)
