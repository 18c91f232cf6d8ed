"""The set of tools a client offers."""

from __future__ import annotations

from collections.abc import Iterable

from gemini_split.protocol import ToolSpec

from .base import Tool


class ToolRegistry:
    """Tools by name, in the order they were registered."""

    def __init__(self, tools: Iterable[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[ToolSpec]:
        return [tool.spec() for tool in self._tools.values()]

    def __iter__(self):
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)


def default_tools(*, shell_env_allow: tuple[str, ...] = ()) -> ToolRegistry:
    """Every built-in local tool, with default limits. To change a limit,
    build the registry with the tool constructed differently, e.g.
    ``RunShellCommandTool(timeout=600)``.

    ``shell_env_allow``: secret-looking environment variables shell commands
    may still see (glob patterns, e.g. ``("GITHUB_TOKEN",)``; see
    :mod:`gemini_split.client.tools.environment`)."""
    from .filesystem import ListDirectoryTool, ReadFileTool, ReplaceTool, WriteFileTool
    from .search import GlobTool, GrepSearchTool
    from .shell import RunShellCommandTool
    from .web import WebFetchTool

    return ToolRegistry([
        ReadFileTool(),
        ListDirectoryTool(),
        GlobTool(),
        GrepSearchTool(),
        WriteFileTool(),
        ReplaceTool(),
        RunShellCommandTool(env_allow=shell_env_allow),
        WebFetchTool(),
    ])
