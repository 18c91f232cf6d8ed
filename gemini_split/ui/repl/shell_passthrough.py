"""``!command`` in the REPL: the user's own command, run here.

It is the user typing at their terminal, not the model asking, so no
approval: the command runs with the user's shell (``$SHELL``, else
``/bin/sh``) and environment, in the workspace root. Output streams to the
terminal with control characters made visible, and is kept (up to
:data:`MAX_OUTPUT` characters) for the model, in the words gemini-cli uses
when it adds a shell command to the conversation.
"""

from __future__ import annotations

import codecs
import os
import subprocess
from pathlib import Path

import trio
from rich.console import Console
from rich.text import Text

from gemini_split.ui.safe_text import visible

#: Characters of output kept for the model.
MAX_OUTPUT = 30_000


async def run_passthrough(command: str, cwd: Path, console: Console) -> tuple[str, int]:
    """Run ``command``; return ``(output, exit status)``. stdout and stderr
    are merged, as a terminal shows them. Cancelling kills the command's
    process group."""
    shell = os.environ.get("SHELL") or "/bin/sh"
    console.print(Text(f"$ {visible(command)}", style="bold"))
    kept: list[str] = []
    size = 0
    decoder = _Utf8()
    process = await trio.lowlevel.open_process([shell, "-c", command], cwd=str(cwd), stdin=subprocess.DEVNULL,
                                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                               start_new_session=True)
    try:
        assert process.stdout is not None
        async for chunk in process.stdout:
            text = decoder.feed(chunk)
            console.file.write(visible(text))
            console.file.flush()
            if size < MAX_OUTPUT:
                kept.append(text)
                size += len(text)
        await process.wait()
    finally:
        if process.returncode is None:
            _kill(process)
            with trio.CancelScope(shield=True):
                await process.wait()
    output = "".join(kept)
    if output and not output.endswith("\n"):
        console.file.write("\n")
    if size > MAX_OUTPUT:
        output = output[:MAX_OUTPUT] + "\n... (truncated)"
    return output.rstrip("\n"), process.returncode


def _kill(process: trio.Process) -> None:
    try:
        os.killpg(process.pid, 9)
    except (ProcessLookupError, PermissionError):
        pass


class _Utf8:
    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def feed(self, data: bytes) -> str:
        return self._decoder.decode(data)


def format_for_model(command: str, output: str, status: int) -> str:
    """What the model is told, as gemini-cli words it."""
    result = output if output else "(no output)"
    if status:
        result += f"\n(exit status {status})"
    return (f"I ran the following shell command:\n```sh\n{command}\n```\n\n"
            f"This produced the following result:\n```\n{result}\n```")
