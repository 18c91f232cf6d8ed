"""The set of tools a client offers."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from gemini_split.protocol import ToolSpec

from .builtin.background import BackgroundProcesses, ListBackgroundProcessesTool, ReadBackgroundOutputTool
from .base import Tool
from .builtin.filesystem import ListDirectoryTool, ReadFileTool, ReplaceTool, WriteFileTool
from .builtin.read_many import ReadManyFilesTool
from .builtin.search import GlobTool, GrepSearchTool
from .builtin.plan_mode import EnterPlanModeTool, ExitPlanModeTool
from .builtin.session_tools import SaveMemoryTool, WriteTodosTool
from .builtin.shell import RunShellCommandTool
from .builtin.web import WebFetchTool

if TYPE_CHECKING:
    from gemini_split.sandbox import Sandbox

    from .builtin.web_guard import AddressGuard


class ToolRegistry:
    """Tools by name, in the order they were registered."""

    def __init__(self, tools: Iterable[Tool] = ()):
        #: Called by :meth:`close` (last added first).
        self.closers: list[Callable[[], None]] = []
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool

    def replace(self, tool: Tool) -> None:
        """Put ``tool`` in place of the tool of the same name (or add it):
        a front end lending its own implementation (an editor's file
        buffers, see :mod:`gemini_split.acp.tools`)."""
        self._tools[tool.name] = tool

    def unregister(self, name: str) -> None:
        """Remove the tool called ``name`` (an MCP server disabled or reloaded)."""
        self._tools.pop(name, None)

    def close(self) -> None:
        """Release what the tools hold beyond a call (background commands)."""
        while self.closers:
            self.closers.pop()()

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


def default_tools(*, shell_env_allow: tuple[str, ...] = (), memory_file: Path | None = None,
                  sandbox: Sandbox | None = None, web_guard: AddressGuard | None = None) -> ToolRegistry:
    """Every built-in local tool, with default limits. To change a limit,
    build the registry with the tool constructed differently, e.g.
    ``RunShellCommandTool(timeout=600)``.

    ``shell_env_allow``: secret-looking environment variables shell commands
    may still see (glob patterns, e.g. ``("GITHUB_TOKEN",)``; see
    :mod:`gemini_split.tools.builtin.subprocess_env`).

    ``memory_file``: where ``save_memory`` appends facts (the user's global
    context file); without it there is no ``save_memory``.

    ``sandbox``: where shell commands (background ones too) run
    (:class:`gemini_split.sandbox.Sandbox`); default: unconfined.

    ``web_guard``: the addresses ``web_fetch`` may connect to
    (:class:`~.web_guard.AddressGuard`, a server's tools); default: any."""
    extra: list[Tool] = [SaveMemoryTool(memory_file)] if memory_file is not None else []
    background = BackgroundProcesses()
    registry = ToolRegistry([
        ReadFileTool(),
        ReadManyFilesTool(),
        ListDirectoryTool(),
        GlobTool(),
        GrepSearchTool(),
        WriteFileTool(),
        ReplaceTool(),
        RunShellCommandTool(env_allow=shell_env_allow, background=background, sandbox=sandbox),
        WebFetchTool(guard=web_guard),
        ListBackgroundProcessesTool(background),
        ReadBackgroundOutputTool(background),
        WriteTodosTool(),
        EnterPlanModeTool(),
        ExitPlanModeTool(),
        *extra,
    ])
    registry.closers.append(background.close)
    return registry
