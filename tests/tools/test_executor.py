"""The executor's own guarantees: failures are structured, cancellation is
reported, whatever shape it arrives in."""

from __future__ import annotations

from typing import Any

import trio

from gemini_split.tools.approval import ApprovalMode
from gemini_split.tools.base import Tool, ToolContext, ToolKind
from gemini_split.tools.registry import ToolRegistry, default_tools
from gemini_split.protocol import ToolError

from .conftest import Env


class Buggy(Tool):
    name = "buggy"
    description = "raises a plain Python error"
    parameters = {"type": "object", "properties": {}}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        raise KeyError("oops")


class Nursery(Tool):
    name = "nursery"
    description = "waits in a nursery of two tasks"
    kind = ToolKind.READ
    parameters = {"type": "object", "properties": {}}

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        async with trio.open_nursery() as n:
            n.start_soon(trio.sleep_forever)
            await trio.sleep_forever()


async def test_unknown_tool_and_bugs_are_structured(env: Env):
    out = await env.run("no_such_tool", {})
    assert out.failure.code == "unknown_tool" and "read_file" in out.failure.hint
    ex = env.executor(registry=ToolRegistry([Buggy()]))
    out = await env.run("buggy", {}, executor=ex)
    assert out.failure.code == "internal_error" and "KeyError" in out.failure.message
    out = await env.run("read_file", ["not", "an", "object"])
    assert out.failure.code == "invalid_arguments"


async def test_cancellation_inside_a_tool_nursery_is_reported(env: Env):
    events: list[Any] = []

    async def emit(event):
        events.append(event)

    ex = env.executor(registry=ToolRegistry([Nursery()]))
    with trio.move_on_after(0.1):
        await ex.execute("c", "nursery", {}, emit)
    assert isinstance(events[-1], ToolError) and events[-1].error.code == "cancelled"


def test_default_tools_are_complete():
    names = default_tools().names()
    assert names == ["read_file", "read_many_files", "list_directory", "glob", "grep_search", "write_file", "replace",
                     "run_shell_command", "web_fetch", "list_background_processes", "read_background_output",
                     "write_todos", "enter_plan_mode", "exit_plan_mode"]
    kinds = {t.name: t.kind for t in default_tools()}
    assert kinds["write_file"] is ToolKind.EDIT and kinds["run_shell_command"] is ToolKind.EXECUTE
    assert kinds["web_fetch"] is ToolKind.NETWORK and kinds["grep_search"] is ToolKind.READ


async def test_read_only_tools_run_in_default_mode_without_asker(env: Env):
    (env.root / "a.txt").write_text("hello\n")
    for tool, args in [("read_file", {"file_path": "a.txt"}), ("list_directory", {"dir_path": "."}),
                       ("glob", {"pattern": "*.txt"}), ("grep_search", {"pattern": "hello"})]:
        out = await env.run(tool, args, mode=ApprovalMode.DEFAULT)
        assert out.failure is None, (tool, out.failure)


async def test_events_of_calls_run_here_are_marked_local_and_encode_as_the_wire_types(env: Env):
    """A reader of the client's events can tell a call this client ran from
    one a server reported: the executor's events are the local types, while
    their fields and encoded form stay the wire types' (so every front end
    renders them alike)."""
    from gemini_split.tools.local_events import is_local
    from gemini_split.protocol import ToolCompleted, ToolDelta, ToolStarted, codec
    from gemini_split.stamping import stamp

    ran = await env.run("run_shell_command", {"command": "echo local-output"})
    failed = await env.run("buggy", {}, registry=ToolRegistry([Buggy()]))
    events = ran.events + failed.events
    kinds = [type(e).__mro__[1] for e in events]
    assert ToolStarted in kinds and ToolDelta in kinds and ToolCompleted in kinds and ToolError in kinds
    for event in map(stamp, events):
        assert is_local(event), event
        wire_type = type(event).__mro__[1]
        wire = wire_type(**{f: getattr(event, f) for f in event.__struct_fields__})
        assert not is_local(wire)
        assert codec.encode(event) == codec.encode(wire)
