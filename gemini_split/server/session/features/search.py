"""The tools a server runs itself for any session (``google_web_search``):
announced in ``connected.capabilities``, asked for per tool by a client
(``tool_discovery.server_tools``), answered by the server's model."""

from __future__ import annotations

from typing import Any

from gemini_split.protocol import ToolFailure, ToolSpec

from ...model import web_search
from ...model.base import Model
from ..chain import AgentRun, CallTool, Emit, Step
from .tool_hooks import Hooks, answer_here

#: The tools a server runs itself for any session, by name.
SERVER_TOOLS: dict[str, ToolSpec] = {web_search.NAME: web_search.SPEC}


def asked(names: tuple[str, ...]) -> list[ToolSpec]:
    """The specs of the server tools ``names`` asks for, in its order."""
    return [SERVER_TOOLS[name] for name in names if name in SERVER_TOOLS]


def server_tools_step(run: AgentRun, names: tuple[str, ...], *, model: Model, emit: Emit,
                      hooks: Hooks | None) -> Step:
    """The step that answers the server tools ``names`` here (with the
    user's tool hooks around each: :func:`~.tool_hooks.answer_here`) and
    hands every other call on."""
    numbers = iter(range(1, 1 << 62))

    def step(call_on: CallTool) -> CallTool:
        async def call(name: str, args: dict[str, Any]) -> tuple[Any, ToolFailure | None]:
            if name not in names or name not in SERVER_TOOLS:
                return await call_on(name, args)

            async def search(args: dict[str, Any]) -> Any:
                text, failure, usage = await web_search.google_web_search(args, model=model,
                                                                          model_name=run.model_name)
                run.usage = run.usage + usage
                return text, failure

            return await answer_here(run, "server", next(numbers), name, args, search, emit=emit, hooks=hooks)

        return call

    return step
