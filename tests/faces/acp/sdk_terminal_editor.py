"""``sdk_editor.py``'s editor with a terminal (``terminal/*``), as Zed has:
commands run as real subprocesses of this editor process."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import acp
from acp.schema import (
    CreateTerminalResponse,
    KillTerminalResponse,
    ReleaseTerminalResponse,
    TerminalOutputResponse,
    WaitForTerminalExitResponse,
)

from sdk_editor import Editor, run_steps


class TerminalEditor(Editor):
    def __init__(self, plan: dict[str, Any]):
        super().__init__(plan)
        self.terminals: dict[str, tuple[asyncio.subprocess.Process, bytearray, asyncio.Task]] = {}

    async def create_terminal(self, session_id: str, command: str, args: list[str] | None = None, env=None,
                              cwd: str | None = None, output_byte_limit: int | None = None, **kwargs: Any):
        self.calls.append({"method": "terminal/create", "command": command, "args": args, "cwd": cwd,
                           "outputByteLimit": output_byte_limit})
        process = await asyncio.create_subprocess_exec(command, *(args or []), cwd=cwd, stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.STDOUT)
        output = bytearray()

        async def collect() -> None:
            assert process.stdout is not None
            while chunk := await process.stdout.read(4096):
                output.extend(chunk)

        terminal = f"term-{len(self.terminals) + 1}"
        self.terminals[terminal] = (process, output, asyncio.ensure_future(collect()))
        return CreateTerminalResponse(terminal_id=terminal)

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **kwargs: Any):
        process, _output, reader = self.terminals[terminal_id]
        code = await process.wait()
        await reader
        return WaitForTerminalExitResponse(exit_code=code if code >= 0 else None)

    async def terminal_output(self, session_id: str, terminal_id: str, **kwargs: Any):
        _process, output, _reader = self.terminals[terminal_id]
        return TerminalOutputResponse(output=output.decode(errors="replace"), truncated=False)

    async def release_terminal(self, session_id: str, terminal_id: str, **kwargs: Any):
        self.calls.append({"method": "terminal/release", "terminalId": terminal_id})
        return ReleaseTerminalResponse()

    async def kill_terminal(self, session_id: str, terminal_id: str, **kwargs: Any):
        self.calls.append({"method": "terminal/kill", "terminalId": terminal_id})
        process, _output, _reader = self.terminals[terminal_id]
        if process.returncode is None:
            process.kill()
        return KillTerminalResponse()


async def main(plan_path: str) -> None:
    from acp.stdio import spawn_agent_process

    with open(plan_path) as f:
        plan = json.load(f)
    editor = TerminalEditor(plan)
    command, *args = plan["agent"]
    async with spawn_agent_process(editor, command, *args, env=plan.get("env"), cwd=plan["cwd"]) as (conn, _process):
        results = await run_steps(conn, editor, plan)
    print(json.dumps({"results": results, "updates": editor.updates, "calls": editor.calls}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
