"""Read-only file system tools: ``read_file`` and ``list_directory``.

Names and parameters follow gemini-cli, so prompts and habits carry over.
"""

from __future__ import annotations

import fnmatch
import os
from typing import Any

import trio

from .base import Tool, ToolContext, ToolFailed, ToolKind

MAX_READ_BYTES = 256 * 1024
"""Bytes of one file returned at most; the rest is reachable by line range."""
MAX_LIST_ENTRIES = 1000


class ReadFileTool(Tool):
    name = "read_file"
    kind = ToolKind.READ
    description = (
        "Reads a text file from the workspace and returns its content. "
        "Use start_line and end_line (1-based, inclusive) to read part of a "
        "large file; output over the size cap is truncated with a note saying "
        "how to read the rest."
    )
    parameters = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file, relative to the workspace root (or absolute inside it)."},
            "start_line": {"type": "integer", "minimum": 1, "description": "First line to read (1-based). Optional."},
            "end_line": {"type": "integer", "minimum": 1, "description": "Last line to read (inclusive). Optional."},
        },
        "required": ["file_path"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        path = ctx.workspace.resolve(args["file_path"], must_exist=True)
        if path.is_dir():
            raise ToolFailed("is_a_directory", f"'{args['file_path']}' is a directory", "use list_directory to see its entries")
        start = int(args.get("start_line") or 1)
        end = args.get("end_line")
        end = int(end) if end is not None else None
        if end is not None and end < start:
            raise ToolFailed("invalid_arguments", f"end_line {end} is before start_line {start}")
        return await trio.to_thread.run_sync(_read_lines, path, start, end, args["file_path"])


def _read_lines(path: os.PathLike[str], start: int, end: int | None, shown: str) -> str:
    try:
        with open(path, "rb") as f:
            head = f.read(8192)
            if b"\x00" in head:
                raise ToolFailed("binary_file", f"'{shown}' is a binary file and cannot be read as text")
            f.seek(0)
            out: list[str] = []
            size = 0
            line_no = 0
            for raw in f:
                line_no += 1
                if line_no < start:
                    continue
                if end is not None and line_no > end:
                    break
                line = raw.decode("utf-8", errors="replace")
                if size + len(line) > MAX_READ_BYTES:
                    out.append(
                        f"\n[truncated: output reached {MAX_READ_BYTES} bytes at line {line_no}. "
                        f"Read the rest with start_line={line_no}.]\n"
                    )
                    break
                out.append(line)
                size += len(line)
    except PermissionError:
        raise ToolFailed("permission_denied", f"'{shown}' cannot be read: permission denied") from None
    except IsADirectoryError:
        raise ToolFailed("is_a_directory", f"'{shown}' is a directory") from None
    if start > 1 and line_no < start:
        raise ToolFailed("invalid_arguments", f"'{shown}' has only {line_no} lines; start_line {start} is past the end")
    return "".join(out)


class ListDirectoryTool(Tool):
    name = "list_directory"
    kind = ToolKind.READ
    description = (
        "Lists the entries of a directory in the workspace: subdirectories "
        "first, marked [DIR], then files. Optional glob patterns in ignore "
        "leave matching names out."
    )
    parameters = {
        "type": "object",
        "properties": {
            "dir_path": {"type": "string", "description": "Directory to list, relative to the workspace root ('.' for the root)."},
            "ignore": {"type": "array", "items": {"type": "string"}, "description": "Glob patterns of names to leave out, e.g. ['*.pyc']."},
        },
        "required": ["dir_path"],
    }

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        shown = args["dir_path"]
        path = ctx.workspace.resolve(shown, must_exist=True)
        if not path.is_dir():
            raise ToolFailed("not_a_directory", f"'{shown}' is not a directory", "use read_file to read a file")
        ignore = args.get("ignore") or []
        return await trio.to_thread.run_sync(_list, path, ignore, ctx.workspace.relative(path))


def _list(path: os.PathLike[str], ignore: list[str], shown: str) -> str:
    try:
        entries = list(os.scandir(path))
    except PermissionError:
        raise ToolFailed("permission_denied", f"'{shown}' cannot be listed: permission denied") from None
    entries = [e for e in entries if not any(fnmatch.fnmatch(e.name, p) for p in ignore)]
    entries.sort(key=lambda e: (not e.is_dir(follow_symlinks=False), e.name.lower()))
    lines = [f"[DIR] {e.name}" if e.is_dir(follow_symlinks=False) else e.name for e in entries[:MAX_LIST_ENTRIES]]
    if len(entries) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(entries) - MAX_LIST_ENTRIES} more entries not shown]")
    if not lines:
        return f"Directory {shown} is empty."
    return f"Directory listing for {shown}:\n" + "\n".join(lines)
