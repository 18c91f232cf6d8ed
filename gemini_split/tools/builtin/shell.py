"""``run_shell_command``: a shell command in the workspace, in its own
process group, streamed as it runs, bounded in time and output.

Resource handling: the command runs as ``bash -c COMMAND`` (``/bin/sh`` when
there is no bash) in a new session, so it and everything it starts share
one process group. That whole group is stopped — SIGTERM, then SIGKILL after
a grace period — when the command times out, when the call is cancelled (a
cancelled turn, a client shutting down), and when the shell itself exits
while processes it started in the background are still running — and when
the client itself dies, however it dies (see :mod:`.processes`).

Error handling: a command that runs and fails is not an error of the tool —
its exit code, stdout and stderr are the result. The tool fails
(:class:`ToolFailed`) for a command that cannot start (``spawn_failed``), a
bad ``dir_path`` and a timeout (``timeout``, with the output so far).
"""

from __future__ import annotations

import codecs
import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec
import trio

from .background import BackgroundProcesses, tail, wait_ms
from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind
from .subprocess_env import tool_environment
from gemini_split.sandbox import Sandbox

from .processes import open_tool_process, release_tool_process

if TYPE_CHECKING:
    from ..workspace import Workspace

DEFAULT_TIMEOUT = 120.0
DEFAULT_MAX_OUTPUT = 64 * 1024
"""Characters of each stream kept for the model (half from the start, half
from the end) and shown live."""
HARD_OUTPUT_FACTOR = 256
"""A command writing more than ``max_output * HARD_OUTPUT_FACTOR`` bytes is stopped."""
_READ_SIZE = 64 * 1024
_EXIT_DRAIN = 0.2  # seconds to let the pipes reach EOF after the shell exits


class RunShellCommandTool(Tool):
    """``run_shell_command(command, description, dir_path)``.

    ``timeout`` (seconds), ``max_output`` (characters per stream kept for
    the result) and ``kill_grace`` (seconds between SIGTERM and SIGKILL) are
    the client's settings, not the model's. ``env_allow``: glob patterns of
    secret-looking environment variables the command may still see (see
    :mod:`.environment`; the program's own keys are never passed)."""

    name = "run_shell_command"
    kind = ToolKind.EXECUTE
    description = (
        "Runs a shell command with bash -c in the workspace (or dir_path inside "
        "it) and returns its exit code, stdout and stderr. The command runs "
        "non-interactively (stdin is empty): pass flags that avoid prompts and "
        "pagers. It is stopped after a time limit; very long output is cut in "
        "the middle. Processes it leaves running in the background are stopped "
        "when it ends. Prefer the file tools for reading, searching and "
        "editing files."
    )
    parameters = {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The exact bash command to run, e.g. 'git status --short'."},
            "description": {"type": "string", "description": "A short explanation of what the command does and why, shown to the user."},
            "dir_path": {"type": "string", "description": "Directory to run in, relative to the workspace root. Default: the root."},
            "is_background": {"type": "boolean", "description": "Leave the command running in the background (a server, a watcher) and return its pid and first output; read more with read_background_output. Default false."},
            "delay_ms": {"type": "integer", "description": "With is_background: how long to wait before returning the first output (default 200, at most 30000)."},
        },
        "required": ["command"],
    }

    def __init__(
        self,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        max_output: int = DEFAULT_MAX_OUTPUT,
        kill_grace: float = 2.0,
        shell: str | None = None,
        env_allow: tuple[str, ...] = (),
        background: BackgroundProcesses | None = None,
        sandbox: Sandbox | None = None,
    ):
        #: Where commands run (:mod:`gemini_split.sandbox`); default: as is.
        self.sandbox = sandbox or Sandbox.none()
        #: Where ``is_background`` commands go; None: not offered.
        self.background = background
        self.timeout = timeout
        self.env_allow = tuple(env_allow)
        self.max_output = max_output
        self.kill_grace = kill_grace
        self.shell = shell or shutil.which("bash") or "/bin/sh"

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        where = args.get("dir_path") or "."
        try:
            where = workspace.shown(self._directory(args, workspace))
        except ToolFailed:
            if workspace.place:
                where = f"{where} in {workspace.place}"
        text = f"Run in {where}:\n{args['command']}"
        if args.get("description"):
            text += f"\n({args['description']})"
        return text

    @staticmethod
    def _directory(args: dict[str, Any], workspace: Workspace) -> Path:
        shown = args.get("dir_path") or "."
        path = workspace.resolve(shown, must_exist=True)
        if not path.is_dir():
            raise ToolFailed("not_a_directory", f"dir_path '{shown}' is not a directory")
        return path

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        command: str = args["command"]
        if not command.strip():
            raise ToolFailed("invalid_arguments", "the command is empty")
        if "\x00" in command:
            raise ToolFailed("invalid_arguments", "the command contains a NUL byte")
        cwd = self._directory(args, ctx.workspace)
        env = tool_environment(allow=self.env_allow, GEMINI_CLI="1")
        env["PATH"] = _absolute_path_entries(env.get("PATH", os.defpath))
        sandbox = self.sandbox
        if ctx.extra.get("network") and not sandbox.network:
            sandbox = msgspec.structs.replace(sandbox, network=True)  # a policy's allowNetwork rule
        argv = sandbox.command([self.shell, "-c", command], cwd=cwd, writable=ctx.workspace.roots)
        env = sandbox.environment(env)  # a server-side command keeps only what the server lists
        if args.get("is_background"):
            return await self._run_in_background(argv, command, cwd, env, args, ctx)
        try:
            process = await open_tool_process(
                argv,
                cwd=str(cwd), env=env,
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )
        except OSError as exc:
            raise ToolFailed("spawn_failed", f"the shell {self.shell} could not be started: {exc.strerror}") from None
        run = _Run(self, process, ctx)
        try:
            await run.wait()
        finally:
            with trio.CancelScope(shield=True):
                await run.cleanup()
            release_tool_process(process)
        code = process.returncode
        result: dict[str, Any] = {
            "command": command,
            "directory": ctx.workspace.relative(cwd),
            "exit_code": code if code is not None and code >= 0 else None,
        }
        if code is not None and code < 0:
            result["signal"] = _signal_name(-code)
        result["stdout"] = run.outputs["stdout"].text()
        result["stderr"] = run.outputs["stderr"].text()
        notes = [n for n in (run.outputs["stdout"].note("stdout"), run.outputs["stderr"].note("stderr")) if n]
        if run.stopped_leftovers:
            notes.append("processes the command left running in the background were stopped")
        if run.output_limit_hit:
            notes.append("the command was stopped because its output exceeded the limit")
        if run.timed_out:
            raise ToolFailed(
                "timeout",
                f"the command timed out after {self.timeout:g} s and its process group was killed.\n"
                + _tail_for_error(result),
                "run a quicker command, or limit what it does (a narrower path, fewer tests)",
            )
        if notes:
            result["note"] = "; ".join(notes)
        return result


    async def _run_in_background(self, argv: list[str], command: str, cwd: Path, env: dict[str, str],
                                 args: dict[str, Any], ctx: ToolContext) -> Any:
        if self.background is None:
            raise ToolFailed("unavailable", "this client runs no background commands", "run the command without is_background")
        shown = ctx.workspace.relative(cwd)
        entry = await trio.to_thread.run_sync(self.background.start, argv, command, cwd, shown, env)
        await wait_ms(args.get("delay_ms", 200))
        output, more = await trio.to_thread.run_sync(tail, entry.log, 50)
        result: dict[str, Any] = {"command": command, "directory": shown, "pid": entry.pid,
                                  "status": entry.status(), "output": output}
        if more:
            result["note"] = "earlier output not shown; read_background_output reads more"
        return result


class _Stream:
    """One stream's kept output: a head and a tail of ``cap`` characters in
    all, the middle dropped and counted."""

    def __init__(self, cap: int):
        self.cap = cap
        self.head: list[str] = []
        self.head_len = 0
        self.tail = ""
        self.dropped = 0
        self.shown_live = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, text: str) -> None:
        half = self.cap // 2
        if self.head_len < half:
            take = text[: half - self.head_len]
            self.head.append(take)
            self.head_len += len(take)
            text = text[len(take):]
        if not text:
            return
        self.tail += text
        if len(self.tail) > self.cap - half:
            cut = len(self.tail) - (self.cap - half)
            self.dropped += cut
            self.tail = self.tail[cut:]

    def text(self) -> str:
        head = "".join(self.head)
        if self.dropped:
            return f"{head}\n[... {self.dropped} characters omitted ...]\n{self.tail}"
        return head + self.tail

    def note(self, name: str) -> str | None:
        return f"{name} was truncated ({self.dropped} characters omitted in the middle)" if self.dropped else None


class _Run:
    def __init__(self, tool: RunShellCommandTool, process: trio.Process, ctx: ToolContext):
        self.tool = tool
        self.process = process
        self.ctx = ctx
        self.pgid = process.pid  # the session leader's pid is the group id
        self.outputs = {"stdout": _Stream(tool.max_output), "stderr": _Stream(tool.max_output)}
        self.total_bytes = 0
        self.timed_out = False
        self.output_limit_hit = False
        self.stopped_leftovers = False
        self.pumps_done = trio.Event()

    async def wait(self) -> None:
        try:
            await self._wait()
        except BaseExceptionGroup as group:
            # Our nursery reports an outside cancellation as a group of
            # Cancelled; callers expect the plain Cancelled a tool raises.
            cancelled, rest = group.split(trio.Cancelled)
            if rest is None and cancelled is not None:
                raise _first_leaf(cancelled) from None
            raise

    async def _wait(self) -> None:
        with trio.move_on_after(self.tool.timeout) as deadline:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._pump_both)
                await self.process.wait()
                # The shell is done; its output ends unless something it
                # started in the background still holds the pipes.
                with trio.move_on_after(_EXIT_DRAIN):
                    await self.pumps_done.wait()
                if _group_alive(self.pgid):
                    self.stopped_leftovers = True
                    await self.stop_group()
                with trio.move_on_after(1.0):
                    await self.pumps_done.wait()
                nursery.cancel_scope.cancel()  # a process outside the group may hold a pipe
        if deadline.cancelled_caught:
            self.timed_out = True

    async def _pump_both(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._pump, self.process.stdout, "stdout")
            nursery.start_soon(self._pump, self.process.stderr, "stderr")
        self.pumps_done.set()

    async def _pump(self, stream: trio.abc.ReceiveStream, name: str) -> None:
        out = self.outputs[name]
        while True:
            data = await stream.receive_some(_READ_SIZE)
            text = out.decoder.decode(data, final=not data)
            if text:
                out.add(text)
                await self._show(out, text, name)
            if not data:
                return
            self.total_bytes += len(data)
            if self.total_bytes > self.tool.max_output * HARD_OUTPUT_FACTOR and not self.output_limit_hit:
                self.output_limit_hit = True
                await self.stop_group()

    async def _show(self, out: _Stream, text: str, name: str) -> None:
        cap = self.tool.max_output
        if out.shown_live >= cap:
            return
        if out.shown_live + len(text) > cap:
            text = text[: cap - out.shown_live] + f"\n[further {name} is not shown live]\n"
        out.shown_live += len(text)
        await self.ctx.emit_output(text, name)

    async def stop_group(self) -> None:
        """SIGTERM the group; SIGKILL whatever is left after the grace period."""
        if not _signal_group(self.pgid, signal.SIGTERM):
            return
        with trio.move_on_after(self.tool.kill_grace):
            while _group_alive(self.pgid):
                self.process.poll()  # reap the shell so it stops counting
                await trio.sleep(0.02)
            return
        _signal_group(self.pgid, signal.SIGKILL)

    async def cleanup(self) -> None:
        """After the run, normal or not: nothing of the group survives, the
        shell is reaped, the pipes are closed."""
        if self.process.poll() is None or _group_alive(self.pgid):
            await self.stop_group()
        with trio.move_on_after(self.tool.kill_grace + 1.0):
            await self.process.wait()
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                await stream.aclose()


def _absolute_path_entries(path: str) -> str:
    """PATH without relative or empty entries (which mean the current
    directory): a file the model wrote in the workspace must not stand in
    for an allowed command such as ``git``."""
    return os.pathsep.join(p for p in path.split(os.pathsep) if os.path.isabs(p))


def _first_leaf(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False if nothing is left in it."""
    try:
        os.killpg(pgid, sig)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return False


def _group_alive(pgid: int) -> bool:
    """Whether a live (non-zombie) process is left in the group.

    Zombies are skipped: an orphaned child is reaped by init, which in a
    container may never happen, and a zombie cannot be killed anyway."""
    try:
        names = os.listdir("/proc")
    except OSError:
        names = None
    if names is None or not os.path.exists("/proc/self/stat"):
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the command name (which may contain spaces and ')').
        rest = stat[stat.rfind(b")") + 2 :].split()
        if len(rest) >= 3 and int(rest[2]) == pgid and rest[0] not in (b"Z", b"X"):
            return True
    return False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


def _tail_for_error(result: dict[str, Any], keep: int = 2000) -> str:
    parts = []
    for name in ("stdout", "stderr"):
        text = result.get(name) or ""
        if text:
            shown = text if len(text) <= keep else "…" + text[-keep:]
            parts.append(f"{name} so far:\n{shown}")
    return "\n".join(parts) if parts else "It printed nothing."
