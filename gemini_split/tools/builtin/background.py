"""Shell commands left running in the background (gemini-cli's
``run_shell_command(is_background=true)``, ``list_background_processes``,
``read_background_output``).

A background command runs in its own session and process group, like every
tool process (:mod:`.processes` registers the group, so it dies with the
client however the client dies); its stdout and stderr go to a log file in a
private temporary directory, which the read tool tails. Nothing reads the
pipes, so a chatty server never blocks on a full pipe; the log is read from
its end, so a huge log (or one without newlines) costs at most
:data:`MAX_TAIL_BYTES` per read. All groups are killed when the client ends
(:meth:`BackgroundProcesses.close`).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import trio

from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind
from .processes import register_group, release_group

#: Background commands one client may have running at once.
MAX_BACKGROUND = 16
#: Bytes read from the end of a log for one answer.
MAX_TAIL_BYTES = 64 * 1024
DEFAULT_LINES = 50
#: Longest wait a model may ask for before output is read.
MAX_DELAY_MS = 30_000


class _Entry(msgspec.Struct):
    pid: int
    command: str
    directory: str
    log: Path
    process: subprocess.Popen[bytes]
    started: float = msgspec.field(default_factory=time.monotonic)

    def status(self) -> str:
        code = self.process.poll()
        if code is None:
            return "running"
        if code < 0:
            return f"killed by signal {-code}"
        return f"exited with code {code}"


class BackgroundProcesses:
    """The client's background commands. :meth:`close` kills them all."""

    def __init__(self, max_processes: int = MAX_BACKGROUND):
        self.max_processes = max_processes
        self._entries: dict[int, _Entry] = {}
        self._dir: Path | None = None

    def start(self, argv: list[str], command: str, cwd: Path, shown_dir: str, env: dict[str, str]) -> _Entry:
        """Start ``argv`` (``command`` run by the shell, perhaps in a
        sandbox); blocking (call it from a worker thread)."""
        running = [e for e in self._entries.values() if e.process.poll() is None]
        if len(running) >= self.max_processes:
            raise ToolFailed("too_many_processes", f"{len(running)} background commands are already running",
                             "read or stop one of them (list_background_processes) before starting another")
        if self._dir is None:
            self._dir = Path(tempfile.mkdtemp(prefix="gemini-split-bg-"))
        log = self._dir / f"{len(self._entries) + 1}.log"
        with open(log, "wb") as out:
            try:
                process = subprocess.Popen(
                    argv, cwd=str(cwd), env=env, stdin=subprocess.DEVNULL,
                    stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                )
            except OSError as exc:
                raise ToolFailed("spawn_failed", f"{argv[0]} could not be started: {exc.strerror}") from None
        register_group(process.pid)
        entry = _Entry(process.pid, command, shown_dir, log, process)
        self._entries[process.pid] = entry
        return entry

    def get(self, pid: int) -> _Entry:
        entry = self._entries.get(pid)
        if entry is None:
            known = ", ".join(str(p) for p in self._entries) or "none"
            raise ToolFailed("not_found", f"no background command with pid {pid} (this session's: {known})",
                             "list_background_processes shows them")
        return entry

    def entries(self) -> list[_Entry]:
        return list(self._entries.values())

    def stop(self, pid: int, grace: float = 2.0) -> str:
        """End background command ``pid`` and everything it started: its
        process group is sent SIGTERM, then SIGKILL after ``grace`` seconds
        (blocking: call it from a worker thread). Its log is kept, so its
        output can still be read. Returns its status afterwards; raises
        :class:`ToolFailed` for a pid that is not one of them."""
        entry = self.get(pid)
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 2.0)):
            if entry.process.poll() is not None:
                break
            try:
                os.killpg(entry.pid, sig)
            except (ProcessLookupError, PermissionError):
                break
            try:
                entry.process.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
        try:  # what it left behind in its group
            os.killpg(entry.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        release_group(entry.pid)
        return entry.status()

    def close(self) -> None:
        """Kill every background group still alive and remove the logs."""
        for entry in self._entries.values():
            if entry.process.poll() is None:
                try:
                    os.killpg(entry.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                try:
                    entry.process.wait(timeout=2)
                except subprocess.TimeoutExpired:
                    pass
            release_group(entry.pid)
        self._entries.clear()
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None


def tail(path: Path, lines: int) -> tuple[str, bool]:
    """The last ``lines`` lines of ``path`` (reading at most
    :data:`MAX_TAIL_BYTES` from its end) and whether earlier output exists."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            start = max(0, size - MAX_TAIL_BYTES)
            f.seek(start)
            data = f.read()
    except OSError:
        return "", False
    text = data.decode("utf-8", "replace")
    kept = text.splitlines()[-lines:] if lines else []
    return "\n".join(kept), start > 0 or len(text.splitlines()) > len(kept)


async def wait_ms(delay_ms: Any) -> None:
    if isinstance(delay_ms, int | float) and delay_ms > 0:
        await trio.sleep(min(float(delay_ms), MAX_DELAY_MS) / 1000)


class ListBackgroundProcessesTool(Tool):
    name = "list_background_processes"
    kind = ToolKind.READ
    description = "Lists the shell commands started in the background this session: pid, status and command."
    parameters = {
        "type": "object",
        "properties": {
            "wait_for_previous": {"type": "boolean", "description": "Run only after the earlier calls of this turn have finished."},
        },
    }

    def __init__(self, processes: BackgroundProcesses):
        self.processes = processes

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        entries = self.processes.entries()
        if not entries:
            return "No background processes."
        return "\n".join(f"pid {e.pid}: {e.status()} — {e.command} (in {e.directory})" for e in entries)


class ReadBackgroundOutputTool(Tool):
    name = "read_background_output"
    kind = ToolKind.READ
    description = (
        "Reads the latest output (stdout and stderr together) of a background shell command, by pid. "
        f"Optionally waits delay_ms first; returns the last `lines` lines (default {DEFAULT_LINES})."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pid": {"type": "integer", "description": "The pid run_shell_command returned."},
            "lines": {"type": "integer", "minimum": 1, "description": f"How many last lines. Default {DEFAULT_LINES}."},
            "delay_ms": {"type": "integer", "description": f"Wait this long first (at most {MAX_DELAY_MS})."},
            "wait_for_previous": {"type": "boolean", "description": "Run only after the earlier calls of this turn have finished."},
        },
        "required": ["pid"],
    }

    def __init__(self, processes: BackgroundProcesses):
        self.processes = processes

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        entry = self.processes.get(int(args["pid"]))
        await wait_ms(args.get("delay_ms"))
        text, more = await trio.to_thread.run_sync(tail, entry.log, int(args.get("lines") or DEFAULT_LINES))
        return {"pid": entry.pid, "status": entry.status(), "output": text,
                **({"note": "earlier output not shown"} if more else {})}
