"""File system tools: ``read_file``, ``list_directory``, ``write_file`` and
``replace``.

Names and parameters follow gemini-cli, so prompts and habits carry over.
Every path goes through :meth:`Workspace.resolve`; reads open the resolved
path as a regular file only; writes are atomic (:meth:`Workspace.write_atomic`).
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from gemini_split.gitignore import compile_glob
from ._files import encode_text, load_ignore_rules, looks_binary, read_text_for_edit
from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind

if TYPE_CHECKING:
    from ..workspace import Workspace

MAX_READ_BYTES = 256 * 1024
"""Characters of one file returned at most; the rest is reachable by line range."""
MAX_READ_LINES = 2000
"""Lines of one file returned at most when no end_line is given."""
MAX_LINE_CHARS = 2000
"""A longer line is cut (minified code would otherwise fill the cap alone)."""
MAX_LIST_ENTRIES = 1000
_COUNT_LINES_UP_TO = 32 * 1024 * 1024


class ReadFileTool(Tool):
    name = "read_file"
    kind = ToolKind.READ
    description = (
        "Reads a text file from the workspace and returns its content. "
        "Use start_line and end_line (1-based, inclusive) to read part of a "
        f"large file. At most {MAX_READ_LINES} lines or {MAX_READ_BYTES // 1024} KiB are returned "
        f"at once and lines longer than {MAX_LINE_CHARS} characters are cut; a note at the end "
        "says when output was truncated and which start_line reads the rest. Binary files are refused."
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

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        lines = ""
        if args.get("start_line") or args.get("end_line"):
            lines = f" lines {args.get('start_line', 1)}-{args.get('end_line', 'end')}"
        return f"Read {args['file_path']}{lines}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        shown = args["file_path"]
        path = ctx.workspace.resolve_file(shown, must_exist=True)
        start = int(args.get("start_line") or 1)
        end = args.get("end_line")
        end = int(end) if end is not None else None
        if end is not None and end < start:
            raise ToolFailed("invalid_arguments", f"end_line {end} is before start_line {start}")
        # Reading changes nothing: a cancelled call need not wait for it.
        return await trio.to_thread.run_sync(_read_lines, ctx.workspace, path, start, end, shown,
                                             abandon_on_cancel=True)


_CHUNK = 64 * 1024
_SKIP_CHUNK = 1024 * 1024  # read size while skipping the rest of an over-long line


def _read_lines(workspace: Workspace, path: Path, start: int, end: int | None, shown: str) -> str:
    """The lines ``start..end`` of a text file, bounded in memory whatever
    the file holds: it is read in chunks of 64 KiB, and of a line longer
    than :data:`MAX_LINE_CHARS` only the start is kept (the rest is skipped
    chunk by chunk), so a 1 GiB file without a newline costs one chunk plus
    the cap (1 MiB reads while skipping)."""
    with workspace.open_regular(path, shown) as f:
        return _LineReader(f, shown).read(start, end)


class _LineReader:
    def __init__(self, f: Any, shown: str):
        self.f = f
        self.shown = shown

    def _chunk(self, size: int = _CHUNK) -> bytes:
        try:
            return self.f.read(size)
        except OSError as exc:
            raise ToolFailed("read_failed", f"'{self.shown}' could not be read: {exc.strerror}") from None

    def lines(self):
        """``(raw bytes of the line kept, whole line's length in bytes)``
        per line; ``kept`` is at most ``MAX_LINE_CHARS * 4`` bytes (enough for
        MAX_LINE_CHARS characters of UTF-8) and keeps its newline if short."""
        keep = MAX_LINE_CHARS * 4 + 1
        pending = bytearray()
        length = 0
        while True:
            chunk = self._chunk(_CHUNK if len(pending) < keep else _SKIP_CHUNK)
            if not chunk:
                if length:
                    yield bytes(pending), length
                return
            pos = 0
            while pos < len(chunk):
                nl = chunk.find(b"\n", pos)
                stop = len(chunk) if nl < 0 else nl + 1
                room = keep - len(pending)
                if room > 0:
                    pending += chunk[pos:min(stop, pos + room)]
                length += stop - pos
                pos = stop
                if nl >= 0:
                    yield bytes(pending), length
                    pending.clear()
                    length = 0

    def read(self, start: int, end: int | None) -> str:
        head = self.f.read(8192)
        if looks_binary(head):
            raise ToolFailed("binary_file", f"'{self.shown}' is a binary file and cannot be read as text")
        size = os.fstat(self.f.fileno()).st_size
        self.f.seek(0)
        out: list[str] = []
        used = 0
        line_no = 0
        note = ""
        max_lines = MAX_READ_LINES if end is None else None
        lines = self.lines()
        for raw, _length in lines:
            line_no += 1
            if line_no < start:
                continue
            if end is not None and line_no > end:
                line_no -= 1
                break
            line = raw.decode("utf-8", errors="replace")
            if len(line.rstrip("\n")) > MAX_LINE_CHARS or not raw.endswith(b"\n") and _length > len(raw):
                line = line[:MAX_LINE_CHARS] + f"… [line {line_no} cut at {MAX_LINE_CHARS} characters]\n"
            if used + len(line) > MAX_READ_BYTES or (max_lines is not None and line_no - start >= max_lines):
                # Lines after this one, counted (in chunks) for a small enough file.
                total = line_no + sum(1 for _ in lines) if size <= _COUNT_LINES_UP_TO else None
                note = _truncation_note(start, line_no, total)
                break
            out.append(line)
            used += len(line)
        if start > 1 and line_no < start:
            raise ToolFailed(
                "invalid_arguments",
                f"'{self.shown}' has only {line_no} lines; start_line {start} is past the end",
                f"read from a start_line between 1 and {max(line_no, 1)}",
            )
        return "".join(out) + note


def _truncation_note(start: int, stopped_at: int, total: int | None) -> str:
    """``stopped_at`` is the first line not shown."""
    of = f" of {total} total lines" if total is not None else ""
    return (
        f"\n[truncated: showing lines {start}-{stopped_at - 1}{of}. "
        f"Read the rest with start_line={stopped_at} (and end_line to read a range).]\n"
    )


class ListDirectoryTool(Tool):
    name = "list_directory"
    kind = ToolKind.READ
    description = (
        "Lists the entries of a directory in the workspace: subdirectories "
        "first, marked [DIR], then files. Entries ignored by .gitignore are "
        "left out (a note says how many). Optional glob patterns in ignore "
        "leave matching names out too."
    )
    parameters = {
        "type": "object",
        "properties": {
            "dir_path": {"type": "string", "description": "Directory to list, relative to the workspace root ('.' for the root)."},
            "ignore": {"type": "array", "items": {"type": "string"}, "description": "Glob patterns of names to leave out, e.g. ['*.pyc']."},
            "file_filtering_options": {
                "type": "object",
                "description": "Which ignore files to honour.",
                "properties": {
                    "respect_git_ignore": {"type": "boolean", "description": "Leave out entries ignored by .gitignore. Default true."},
                    "respect_gemini_ignore": {"type": "boolean", "description": "Leave out entries ignored by .geminiignore. Default true."},
                },
            },
        },
        "required": ["dir_path"],
    }

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        return f"List {args['dir_path']}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        shown = args["dir_path"]
        path = ctx.workspace.resolve(shown, must_exist=True)
        if not path.is_dir():
            raise ToolFailed("not_a_directory", f"'{shown}' is not a directory", "use read_file to read a file")
        ignore = args.get("ignore") or []
        filtering = args.get("file_filtering_options") or {}
        if not isinstance(filtering, dict):
            raise ToolFailed("invalid_arguments", "file_filtering_options must be an object",
                             'e.g. {"respect_git_ignore": false}')
        git = filtering.get("respect_git_ignore", True) is not False
        gemini = filtering.get("respect_gemini_ignore", True) is not False
        return await trio.to_thread.run_sync(_list, ctx.workspace, path, ignore, git, gemini, abandon_on_cancel=True)


def _list(workspace: Workspace, path: Path, ignore: list[str], git: bool = True, gemini: bool = True) -> str:
    shown = workspace.relative(path)
    patterns = []
    for p in ignore:
        try:
            patterns.append(compile_glob(p))
        except ValueError as exc:
            raise ToolFailed("invalid_pattern", f"the ignore pattern {p!r} is invalid: {exc}") from None
    fd = workspace.open_directory(path, shown)
    try:
        with os.scandir(fd) as it:
            entries = [(e.name, _is_dir(e)) for e in it]
    except PermissionError:
        raise ToolFailed("permission_denied", f"'{shown}' cannot be listed: permission denied") from None
    except OSError as exc:
        raise ToolFailed("list_failed", f"'{shown}' cannot be listed: {exc.strerror}") from None
    finally:
        os.close(fd)
    rules = load_ignore_rules(workspace, path, git=git, gemini=gemini)
    # Rules are relative to the root (or included directory) holding path.
    rel = os.path.relpath(path, workspace.root_of(path) or workspace.root)
    base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
    kept = []
    git_ignored = 0
    for name, is_dir in entries:
        if any(p.match(name) for p in patterns):
            continue
        if rules.is_ignored(base + name, is_dir):
            git_ignored += 1
            continue
        kept.append((name, is_dir))
    kept.sort(key=lambda e: (not e[1], e[0].lower()))
    lines = [f"[DIR] {name}" if is_dir else name for name, is_dir in kept[:MAX_LIST_ENTRIES]]
    if len(kept) > MAX_LIST_ENTRIES:
        lines.append(f"[{len(kept) - MAX_LIST_ENTRIES} more entries not shown]")
    note = (f"\n({git_ignored} entr{'y' if git_ignored == 1 else 'ies'} ignored by .gitignore or .geminiignore "
            "not shown)") if git_ignored else ""
    if not lines:
        return f"Directory {shown} is empty." + note
    return f"Directory listing for {shown}:\n" + "\n".join(lines) + note


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return False


# --- edits ------------------------------------------------------------------


MAX_DIFF_WORK = 1_000_000
"""difflib is quadratic in the lines that differ: beyond this many (old
changed lines × new changed lines), the changed block is shown whole as one
hunk instead of searched for a minimal diff."""


def unified_diff(old: str | None, new: str, shown: str) -> str:
    """A unified diff of a file's text, as ``git diff`` shows it.

    Bounded work: the common first and last lines are set aside in linear
    time; if what is left is too large for difflib (:data:`MAX_DIFF_WORK`),
    it is shown as a single hunk removing all the old changed lines and
    adding all the new ones — a valid diff, not a minimal one."""
    old_lines = (old or "").splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    fromfile = "/dev/null" if old is None else f"a/{shown}"
    head = 0
    limit = min(len(old_lines), len(new_lines))
    while head < limit and old_lines[head] == new_lines[head]:
        head += 1
    tail = 0
    while tail < limit - head and old_lines[-1 - tail] == new_lines[-1 - tail]:
        tail += 1
    changed_old, changed_new = len(old_lines) - head - tail, len(new_lines) - head - tail
    if changed_old * changed_new > MAX_DIFF_WORK:
        diff = _one_hunk(old_lines, new_lines, head, tail, fromfile, f"b/{shown}")
    else:
        import difflib  # only for approval questions

        diff = difflib.unified_diff(old_lines, new_lines, fromfile=fromfile, tofile=f"b/{shown}", lineterm="")
    out = []
    for line in diff:
        if line.endswith("\n"):
            out.append(line[:-1])
        else:
            out.append(line)
            if not line.startswith(("---", "+++", "@@")):
                out.append("\\ No newline at end of file")
    return "\n".join(out)


def _one_hunk(old_lines: list[str], new_lines: list[str], head: int, tail: int, fromfile: str, tofile: str):
    """The changed middle as one hunk with three lines of context."""
    start = max(head - 3, 0)
    old_end, new_end = len(old_lines) - max(tail - 3, 0), len(new_lines) - max(tail - 3, 0)
    yield f"--- {fromfile}"
    yield f"+++ {tofile}"
    yield f"@@ -{start + 1},{old_end - start} +{start + 1},{new_end - start} @@"
    for line in old_lines[start:head]:
        yield " " + line
    for line in old_lines[head:len(old_lines) - tail]:
        yield "-" + line
    for line in new_lines[head:len(new_lines) - tail]:
        yield "+" + line
    for line in old_lines[len(old_lines) - tail:old_end]:
        yield " " + line


def _diff_stat(old: str | None, new: str) -> str:
    """``+added -removed lines``, counted as multisets of lines: linear in
    the size of the texts (a moved line counts as neither)."""
    before, after = Counter((old or "").splitlines()), Counter(new.splitlines())
    added = sum((after - before).values())
    removed = sum((before - after).values())
    return f"+{added} -{removed} lines"


class WriteFileTool(Tool):
    name = "write_file"
    kind = ToolKind.EDIT
    description = (
        "Writes content to a file in the workspace, replacing the file if it "
        "exists and creating it (and missing parent directories) if not. The "
        "write is atomic: the file is either fully replaced or unchanged. "
        "Write the complete file content; for a small change to an existing "
        "file prefer replace."
    )
    parameters = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file, relative to the workspace root (or absolute inside it)."},
            "content": {"type": "string", "description": "The complete content to write."},
        },
        "required": ["file_path", "content"],
    }

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        shown = args["file_path"]
        real = workspace.resolve_file(shown)
        rel = workspace.relative(real)
        old = read_text_for_edit(workspace, real, shown)
        if old == args["content"]:
            return f"Write {rel} (no change: the content is identical)"
        head = f"Create {rel}" if old is None else f"Overwrite {rel}"
        return f"{head}\n{unified_diff(old, args['content'], rel)}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return await trio.to_thread.run_sync(self._write, ctx.workspace, args["file_path"], args["content"])

    @staticmethod
    def _write(workspace: Workspace, shown: str, content: str) -> str:
        real = workspace.resolve_file(shown)
        rel = workspace.relative(real)
        try:
            old = read_text_for_edit(workspace, real, shown)
        except ToolFailed as failed:
            if failed.code != "binary_file":
                raise
            old = ""  # overwriting a binary file with text is allowed
        workspace.write_atomic(real, encode_text(content), shown)
        if old is None:
            n = len(content.splitlines())
            return f"Created {rel} ({n} line{'s' if n != 1 else ''})."
        if old == content:
            return f"Wrote {rel}: the content was already identical."
        return f"Overwrote {rel} ({_diff_stat(old, content)})."


def proposed_edit(workspace: Workspace, tool_name: str, args: dict[str, Any]) -> tuple[Path, str | None, str]:
    """``(real path, text now or None, text after)`` of a ``write_file``
    or ``replace`` call, or :class:`ToolFailed` saying why it cannot be made."""
    if tool_name == "write_file":
        real = workspace.resolve_file(args["file_path"])
        return real, read_text_for_edit(workspace, real, args["file_path"]), args["content"]
    real, _, old, new, _ = ReplaceTool._plan(workspace, args)
    return real, old, new


def edited_args(tool_name: str, args: dict[str, Any], old: str | None, content: str) -> dict[str, Any]:
    """The arguments of the same call that make the file ``content``
    (which the user may have changed from the proposal): ``replace``
    replaces the whole text ``old`` (as gemini-cli does after an IDE's diff)."""
    if tool_name == "write_file":
        return {**args, "content": content}
    return {**args, "old_string": old or "", "new_string": content, "allow_multiple": False}


class ReplaceTool(Tool):
    name = "replace"
    kind = ToolKind.EDIT
    description = (
        "Replaces text in a file. old_string must match the file's text "
        "exactly, including whitespace and indentation, and must occur exactly "
        "once unless allow_multiple is true (then every occurrence is "
        "replaced). Include enough surrounding lines in old_string to make it "
        "unique. An empty old_string creates a new file containing new_string. "
        "Read the file first so old_string is current."
    )
    parameters = {
        "type": "object",
        "properties": {
            "file_path": {"type": "string", "description": "Path of the file, relative to the workspace root (or absolute inside it)."},
            "old_string": {"type": "string", "description": "The exact text to replace (empty to create a new file)."},
            "new_string": {"type": "string", "description": "The text to put in its place."},
            "allow_multiple": {"type": "boolean", "description": "Replace every occurrence instead of requiring exactly one. Default false."},
            "instruction": {"type": "string", "description": "What this change does and why, in a sentence (shown to the user with the approval)."},
        },
        "required": ["file_path", "instruction", "old_string", "new_string"],
    }

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        real, rel, old, new, count = self._plan(workspace, args)
        head = f"Create {rel}" if old is None else f"Edit {rel}"
        if count > 1:
            head += f" ({count} replacements)"
        if args.get("instruction"):
            head += f": {args['instruction']}"
        return f"{head}\n{unified_diff(old, new, rel)}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        return await trio.to_thread.run_sync(self._replace, ctx.workspace, args)

    def _replace(self, workspace: Workspace, args: dict[str, Any]) -> str:
        real, rel, old, new, count = self._plan(workspace, args)
        workspace.write_atomic(real, encode_text(new), args["file_path"])
        if old is None:
            return f"Created {rel}."
        return f"Edited {rel}: {count} replacement{'s' if count != 1 else ''} ({_diff_stat(old, new)})."

    @staticmethod
    def _plan(workspace: Workspace, args: dict[str, Any]) -> tuple[Path, str, str | None, str, int]:
        """``(real path, shown path, old text or None, new text, count)``,
        or :class:`ToolFailed` saying why the edit cannot be made."""
        shown = args["file_path"]
        real = workspace.resolve_file(shown)
        rel = workspace.relative(real)
        text = read_text_for_edit(workspace, real, shown)
        return (real, rel, *ReplaceTool.apply(text, args))

    @staticmethod
    def apply(text: str | None, args: dict[str, Any]) -> tuple[str | None, str, int]:
        """``(old text or None, new text, count)`` of this edit on a file
        holding ``text`` (None: no such file), or :class:`ToolFailed`
        saying why it cannot be made. Pure: whoever read the text (the
        disk, or an editor's buffer) writes the result."""
        shown = args["file_path"]
        old_string: str = args["old_string"]
        new_string: str = args["new_string"]
        if text is None:
            if old_string == "":
                return None, new_string, 1
            raise ToolFailed(
                "not_found", f"'{shown}' does not exist",
                "check the path with glob or list_directory; to create a file, use write_file "
                "or replace with an empty old_string",
            )
        if old_string == "":
            raise ToolFailed(
                "file_exists", f"old_string is empty but '{shown}' already exists",
                "give the exact text to replace, or use write_file to overwrite the whole file",
            )
        if old_string == new_string:
            raise ToolFailed("no_change", "old_string and new_string are identical: nothing would change")
        # A file with Windows line endings, edited by a model that writes '\n'.
        if "\r\n" in text and "\r" not in old_string and text.count("\r\n") == text.count("\n"):
            old_string = old_string.replace("\n", "\r\n")
            new_string = new_string.replace("\n", "\r\n")
        count = text.count(old_string)
        if count == 0:
            raise ToolFailed(
                "no_match", f"old_string was not found in '{shown}'",
                "read the file again and copy the exact text, including whitespace, "
                "indentation and line breaks",
            )
        if count > 1 and not args.get("allow_multiple"):
            raise ToolFailed(
                "multiple_matches", f"old_string occurs {count} times in '{shown}'",
                "include more surrounding lines in old_string so it matches exactly once, "
                f"or set allow_multiple to true to replace all {count}",
            )
        return text, text.replace(old_string, new_string), count
