"""The built-in tools as an ACP agent runs them: through the editor.

When the editor says it can (``clientCapabilities.fs.readTextFile`` /
``writeTextFile``, ``terminal``), files are read and written through its
``fs/read_text_file`` / ``fs/write_text_file`` — so the model sees unsaved
buffers and the editor shows the change — and shell commands run in its
``terminal/*``. Otherwise each tool does what the local one does.

Every confinement rule of the local tools still holds: a path is resolved
inside the workspace (:meth:`Workspace.resolve_file`, symlinks followed and
checked) before the editor is asked for it, by its real absolute path; reads
are bounded as ``read_file``'s; a shell command runs in a directory inside
the workspace with the secret-free tool environment (``env -i`` in front, so
the editor's own environment does not leak keys either). Approval is the
executor's, as for every tool: these classes only change where the bytes go.

Each edit records what it changed (:meth:`EditorAccess.record_diff`), so the
``tool_call_update`` that reports it carries ``diff`` content.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

import trio

from gemini_split.tools.builtin._files import encode_text, read_text_for_edit
from gemini_split.tools.base import ToolContext, ToolFailed
from gemini_split.tools.builtin.subprocess_env import tool_environment
from gemini_split.tools.builtin.filesystem import (
    MAX_READ_BYTES,
    MAX_READ_LINES,
    ReadFileTool,
    ReplaceTool,
    WriteFileTool,
    _diff_stat,
)
from gemini_split.tools.registry import ToolRegistry
from gemini_split.tools.builtin.shell import RunShellCommandTool
from gemini_split.tools.workspace import Workspace

from .jsonrpc import RpcError
from .peer import PeerGone


class EditorAccess(Protocol):
    """What the tools need of the ACP session they serve."""

    session_id: str

    def can(self, capability: str) -> bool:
        """Whether the editor driving the current prompt offers
        ``readTextFile``, ``writeTextFile`` or ``terminal``."""

    async def call(self, method: str, params: dict[str, Any]) -> Any:
        """Call the editor; raises :class:`RpcError` or :class:`PeerGone`."""

    def record_diff(self, call_id: str, path: str, old: str | None, new: str) -> None: ...

    #: True: a tool the editor cannot serve runs locally (``--acp``, the
    #: editor's own machine); False: it fails (the bridge: the files are the
    #: client's, never the server's).
    local: bool

    def resolve(self, shown: str, workspace: Workspace, *, must_exist: bool = False) -> Path:
        """The real absolute path of ``shown`` inside the session's
        workspace, or :class:`ToolFailed` (``outside_workspace``…)."""

    def relative(self, real: Path, workspace: Workspace) -> str: ...

    async def update(self, update: dict[str, Any]) -> None:
        """Send a ``session/update`` to the session's clients."""


def _unavailable(editor: EditorAccess, what: str) -> ToolFailed:
    return ToolFailed("no_client_tools", f"the client driving this session offers no {what}",
                      "answer without this tool, or ask the user to connect with a client that offers it")


async def _editor_call(editor: EditorAccess, method: str, params: dict[str, Any], shown: str) -> Any:
    try:
        return await editor.call(method, params)
    except RpcError as exc:
        raise ToolFailed("editor_error", f"the editor refused {method} for '{shown}': {exc.message}") from None
    except PeerGone:
        raise ToolFailed("editor_gone", f"the editor went away during {method} for '{shown}'") from None


class EditorReadFileTool(ReadFileTool):
    def __init__(self, editor: EditorAccess):
        self.editor = editor

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        if not self.editor.can("readTextFile"):
            if not self.editor.local:
                raise _unavailable(self.editor, "file access (fs.readTextFile)")
            return await super().run(args, ctx)
        shown = args["file_path"]
        path = self.editor.resolve(shown, ctx.workspace, must_exist=True)
        start = int(args.get("start_line") or 1)
        end = args.get("end_line")
        if end is not None and int(end) < start:
            raise ToolFailed("invalid_arguments", f"end_line {end} is before start_line {start}")
        limit = int(end) - start + 1 if end is not None else MAX_READ_LINES
        reply = await _editor_call(self.editor, "fs/read_text_file", {
            "sessionId": self.editor.session_id, "path": str(path), "line": start, "limit": limit,
        }, shown)
        content = reply.get("content") if isinstance(reply, dict) else None
        if not isinstance(content, str):
            raise ToolFailed("editor_error", f"the editor's answer for '{shown}' had no text content")
        if len(content) > MAX_READ_BYTES:
            kept = content[:MAX_READ_BYTES].rsplit("\n", 1)[0]
            shown_lines = kept.count("\n") + 1
            content = (kept + f"\n[truncated: showing lines {start}-{start + shown_lines - 1}. "
                       f"Read the rest with start_line={start + shown_lines}.]\n")
        return content


class _EditorEdit:
    """Reading the text an edit starts from, and writing the result."""

    editor: EditorAccess

    async def old_text(self, workspace: Workspace, real: Path, shown: str) -> str | None:
        """The file's text now (the editor's buffer when it can read), or
        None when there is no such file."""
        if self.editor.can("readTextFile") and (real.exists() or not self.editor.local):
            try:
                reply = await self.editor.call("fs/read_text_file", {"sessionId": self.editor.session_id,
                                                                     "path": str(real)})
            except RpcError:
                if self.editor.local:
                    raise ToolFailed("editor_error", f"the editor could not read '{shown}'") from None
                return None  # the client has no such file: a new one
            except PeerGone:
                raise ToolFailed("editor_gone", f"the editor went away while reading '{shown}'") from None
            content = reply.get("content") if isinstance(reply, dict) else None
            if isinstance(content, str):
                return content
        if not self.editor.local:
            raise _unavailable(self.editor, "file access (fs.readTextFile)")
        return await trio.to_thread.run_sync(read_text_for_edit, workspace, real, shown)

    async def write(self, workspace: Workspace, real: Path, shown: str, content: str) -> None:
        if self.editor.can("writeTextFile"):
            await _editor_call(self.editor, "fs/write_text_file",
                               {"sessionId": self.editor.session_id, "path": str(real), "content": content}, shown)
        elif not self.editor.local:
            raise _unavailable(self.editor, "file writing (fs.writeTextFile)")
        else:
            await trio.to_thread.run_sync(workspace.write_atomic, real, encode_text(content), shown)


class EditorWriteFileTool(_EditorEdit, WriteFileTool):
    def __init__(self, editor: EditorAccess):
        self.editor = editor

    async def preview(self, args: dict[str, Any], workspace: Workspace) -> tuple[str, str | None, str]:
        """``(absolute path, old text, new text)`` for a permission request."""
        real = self.editor.resolve(args["file_path"], workspace)
        return str(real), await self._old(workspace, real, args["file_path"]), args["content"]

    async def _old(self, workspace: Workspace, real: Path, shown: str) -> str | None:
        try:
            return await self.old_text(workspace, real, shown)
        except ToolFailed as failed:
            if failed.code != "binary_file":
                raise
            return ""  # overwriting a binary file with text is allowed

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        shown, content = args["file_path"], args["content"]
        real = self.editor.resolve(shown, ctx.workspace)
        rel = self.editor.relative(real, ctx.workspace)
        old = await self._old(ctx.workspace, real, shown)
        await self.write(ctx.workspace, real, shown, content)
        self.editor.record_diff(ctx.call_id, str(real), old, content)
        if old is None:
            n = len(content.splitlines())
            return f"Created {rel} ({n} line{'s' if n != 1 else ''})."
        if old == content:
            return f"Wrote {rel}: the content was already identical."
        return f"Overwrote {rel} ({_diff_stat(old, content)})."


class EditorReplaceTool(_EditorEdit, ReplaceTool):
    def __init__(self, editor: EditorAccess):
        self.editor = editor

    async def preview(self, args: dict[str, Any], workspace: Workspace) -> tuple[str, str | None, str]:
        real = self.editor.resolve(args["file_path"], workspace)
        old, new, _count = ReplaceTool.apply(await self.old_text(workspace, real, args["file_path"]), args)
        return str(real), old, new

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        shown = args["file_path"]
        real = self.editor.resolve(shown, ctx.workspace)
        rel = self.editor.relative(real, ctx.workspace)
        old, new, count = ReplaceTool.apply(await self.old_text(ctx.workspace, real, shown), args)
        await self.write(ctx.workspace, real, shown, new)
        self.editor.record_diff(ctx.call_id, str(real), old, new)
        if old is None:
            return f"Created {rel}."
        return f"Edited {rel}: {count} replacement{'s' if count != 1 else ''} ({_diff_stat(old, new)})."


class EditorShellTool(RunShellCommandTool):
    """``run_shell_command`` in the editor's terminal (background commands
    still run here: the editor has no way to leave one running for us)."""

    def __init__(self, editor: EditorAccess, **kwargs: Any):
        super().__init__(**kwargs)
        self.editor = editor

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        if args.get("is_background") or not self.editor.can("terminal"):
            if not self.editor.local:
                raise _unavailable(self.editor, "terminal (terminal/*) to run commands in")
            return await super().run(args, ctx)
        command: str = args["command"]
        if not command.strip():
            raise ToolFailed("invalid_arguments", "the command is empty")
        if "\x00" in command:
            raise ToolFailed("invalid_arguments", "the command contains a NUL byte")
        cwd = (self._directory(args, ctx.workspace) if self.editor.local
               else self.editor.resolve(args.get("dir_path") or ".", ctx.workspace))
        env = tool_environment(allow=self.env_allow, GEMINI_CLI="1")
        sid = self.editor.session_id
        created = await _editor_call(self.editor, "terminal/create", {
            "sessionId": sid, "command": "env",
            "args": ["-i", *(f"{k}={v}" for k, v in env.items()), self.shell, "-c", command],
            "cwd": str(cwd), "outputByteLimit": self.max_output,
        }, command)
        terminal = created.get("terminalId") if isinstance(created, dict) else None
        if not isinstance(terminal, str):
            raise ToolFailed("editor_error", "the editor's terminal/create answer had no terminalId")
        ref = {"sessionId": sid, "terminalId": terminal}
        try:
            await self.editor.update({"sessionUpdate": "tool_call_update", "toolCallId": ctx.call_id,
                                      "status": "in_progress",
                                      "content": [{"type": "terminal", "terminalId": terminal}]})
            with trio.move_on_after(self.timeout) as waited:
                status = await _editor_call(self.editor, "terminal/wait_for_exit", ref, command)
            if waited.cancelled_caught:
                await _editor_call(self.editor, "terminal/kill", ref, command)
            output = await _editor_call(self.editor, "terminal/output", ref, command)
        except BaseException:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                try:
                    await self.editor.call("terminal/kill", ref)
                except (RpcError, PeerGone):
                    pass
            raise
        finally:
            with trio.CancelScope(shield=True), trio.move_on_after(5):
                try:
                    await self.editor.call("terminal/release", ref)
                except (RpcError, PeerGone):
                    pass
        if waited.cancelled_caught:
            raise ToolFailed("timeout", f"the command did not finish within {self.timeout:g} s and was stopped")
        exit_status = (status or {}) if isinstance(status, dict) else {}
        result: dict[str, Any] = {
            "command": command,
            "directory": self.editor.relative(cwd, ctx.workspace),
            "exit_code": exit_status.get("exitCode"),
        }
        if exit_status.get("signal"):
            result["signal"] = exit_status["signal"]
        text = output.get("output", "") if isinstance(output, dict) else ""
        result["output"] = text
        if isinstance(output, dict) and output.get("truncated"):
            result["note"] = f"the output was cut to its last {self.max_output} bytes"
        return result


def client_path(root: str, shown: Any) -> Path:
    """``shown`` inside the client's workspace ``root``, judged on the
    text alone (the bridge: the files are on the client's machine, which
    follows its own symlinks): no ``..`` or absolute path out of it."""
    if not isinstance(shown, str) or not shown.strip():
        raise ToolFailed("invalid_path", "the path is empty", "give a path relative to the workspace root")
    if "\x00" in shown or shown.startswith("~"):
        raise ToolFailed("invalid_path", f"'{shown[:200]}' is not a usable path")
    path = os.path.normpath(os.path.join(root, shown))
    if path != root and not path.startswith(root.rstrip(os.sep) + os.sep):
        raise ToolFailed("outside_workspace", f"'{shown[:200]}' is outside the workspace {root}",
                         "use a path inside the workspace")
    return Path(path)


def lend_editor_tools(registry: ToolRegistry, editor: EditorAccess) -> None:
    """Put the editor-aware tools in place of the local ones ``registry``
    offers (a tool it leaves out, by settings or plan mode, stays out)."""
    kinds = {"read_file": EditorReadFileTool, "write_file": EditorWriteFileTool, "replace": EditorReplaceTool}
    for name, cls in kinds.items():
        if registry.get(name) is not None:
            registry.replace(cls(editor))
    shell = registry.get("run_shell_command")
    if isinstance(shell, RunShellCommandTool):
        replacement = EditorShellTool(editor, timeout=shell.timeout, max_output=shell.max_output,
                                      kill_grace=shell.kill_grace, shell=shell.shell, env_allow=shell.env_allow,
                                      background=shell.background)
        registry.replace(replacement)
