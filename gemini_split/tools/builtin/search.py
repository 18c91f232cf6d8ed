"""Search tools: ``glob`` (find files by name) and ``grep_search`` (find
text in files), with gemini-cli's names and parameters.

Both walk the workspace with :func:`walk_files`: confined (symlinks out are
skipped, symlinked directories not entered, nothing opened by name),
``.git`` skipped, ``.gitignore`` respected, binary files skipped by
``grep_search``. The walk runs in a worker thread and stops at a file count
or time budget, saying so in the result.

Nothing the model chooses is matched by a backtracking engine: globs compile
to RE2 (:func:`compile_glob`), and ``grep_search`` runs ripgrep (the engine
gemini-cli uses; linear time) as a cancellable subprocess on the files the
walk opened.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from gemini_split.gitignore import compile_glob
from gemini_split.regex import compile_linear
from ._files import BINARY_SNIFF_BYTES, WalkedFile, WalkStats, looks_binary, walk_files
from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind
from .subprocess_env import tool_environment
from .processes import open_tool_process, release_tool_process

if TYPE_CHECKING:
    from ..workspace import Workspace

MAX_GLOB_RESULTS = 500
RECENT_SECONDS = 24 * 3600
MAX_GREP_FILE_BYTES = 4 * 1024 * 1024
MAX_GREP_LINE_CHARS = 500
DEFAULT_TOTAL_MAX_MATCHES = 100
GREP_TIME_BUDGET = 30.0
"""Seconds a grep_search may take; then it stops and says its results are incomplete."""
GREP_BATCH_FILES = 128
"""Files handed to one ripgrep process (as open file descriptors)."""


def _search_root(workspace: Workspace, dir_path: str | None) -> Path:
    path = workspace.resolve(dir_path or ".", must_exist=True)
    if not path.is_dir():
        raise ToolFailed("not_a_directory", f"'{dir_path}' is not a directory", "give a directory, or '.' for the workspace root")
    return path


def _walk_notes(stats: WalkStats, respect_git_ignore: bool = True) -> str:
    notes = []
    if stats.timed_out:
        notes.append("the search stopped at its time limit; results are incomplete — narrow dir_path or the pattern")
    if stats.truncated:
        notes.append("the search stopped at its file limit; results are incomplete — narrow dir_path or the pattern")
    if stats.outside_links:
        notes.append(f"{stats.outside_links} symlink(s) pointing outside the workspace skipped")
    if stats.errors:
        notes.append(f"{len(stats.errors)} director{'y' if len(stats.errors) == 1 else 'ies'} could not be read")
    return "".join(f"\n({n})" for n in notes)


class GlobTool(Tool):
    name = "glob"
    kind = ToolKind.READ
    description = (
        "Finds files whose path matches a glob pattern, such as '**/*.py', "
        "'src/**/*.{ts,tsx}' or 'docs/*.md'. Patterns are relative to dir_path "
        "(default: the workspace root); '*' stays within a directory, '**' "
        "spans directories. Returns workspace-relative paths, files changed in "
        "the last 24 hours first (newest first), then the rest alphabetically. "
        f"At most {MAX_GLOB_RESULTS} paths are returned."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Glob pattern, e.g. '**/*.py' or 'src/**/test_*.py'."},
            "dir_path": {"type": "string", "description": "Directory to search in, relative to the workspace root. Default: the root."},
            "case_sensitive": {"type": "boolean", "description": "Match case exactly. Default false."},
            "respect_git_ignore": {"type": "boolean", "description": "Leave out files ignored by .gitignore. Default true."},
            "respect_gemini_ignore": {"type": "boolean", "description": "Leave out files ignored by .geminiignore. Default true."},
        },
        "required": ["pattern"],
    }

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        return f"Find files matching {args['pattern']!r} in {args.get('dir_path') or '.'}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        start = _search_root(ctx.workspace, args.get("dir_path"))
        pattern = _relative_pattern(ctx.workspace, start, args["pattern"])
        try:
            regex = compile_glob(pattern, braces=True, case_sensitive=bool(args.get("case_sensitive")))
        except ValueError as exc:
            raise ToolFailed("invalid_pattern", f"the glob pattern {args['pattern']!r} is invalid: {exc}") from None
        respect = (args.get("respect_git_ignore", True), args.get("respect_gemini_ignore", True))
        return await trio.to_thread.run_sync(
            _glob, ctx.workspace, start, regex, args["pattern"], respect, abandon_on_cancel=True
        )


def _relative_pattern(workspace: Workspace, start: Path, pattern: str) -> str:
    if "\x00" in pattern or not pattern.strip():
        raise ToolFailed("invalid_pattern", "the pattern is empty or contains a NUL byte")
    if os.path.isabs(pattern):
        # An absolute pattern is accepted when it points into dir_path.
        prefix = str(start).rstrip(os.sep) + os.sep
        if not pattern.startswith(prefix):
            raise ToolFailed(
                "outside_workspace", f"the pattern {pattern!r} is outside the search directory",
                "give a pattern relative to dir_path, such as '**/*.py'",
            )
        pattern = pattern[len(prefix):]
    pattern = pattern.replace(os.sep, "/")
    while pattern.startswith("./"):
        pattern = pattern[2:]
    if ".." in pattern.split("/"):
        raise ToolFailed(
            "outside_workspace", f"the pattern {pattern!r} contains '..'",
            "set dir_path to the directory to search and give a pattern below it",
        )
    return pattern


def _glob(workspace: Workspace, start: Path, regex: Any, shown: str, respect: tuple[bool, bool]) -> str:
    stats = WalkStats()
    base = os.path.relpath(start, workspace.root).replace(os.sep, "/")
    prefix = "" if base == "." else base + "/"
    found: list[tuple[str, float]] = []
    for f in walk_files(workspace, start, respect_git_ignore=respect[0], respect_gemini_ignore=respect[1],
                        stats=stats):
        sub = f.rel[len(prefix):]
        if regex.match(sub):
            found.append((f.rel, f.mtime()))
    where = "." if base == "." else base
    if not found:
        ignored = f" ({stats.ignored} ignored by .gitignore or .geminiignore)" if stats.ignored and any(respect) else ""
        return f'No files found matching pattern "{shown}" within {where}{ignored}.' + _walk_notes(stats)
    now = time.time()
    recent = sorted((p for p in found if now - p[1] < RECENT_SECONDS), key=lambda p: -p[1])
    older = sorted((p for p in found if now - p[1] >= RECENT_SECONDS), key=lambda p: p[0])
    ordered = [p for p, _ in recent + older]
    lines = ordered[:MAX_GLOB_RESULTS]
    more = f"\n({len(ordered) - MAX_GLOB_RESULTS} more not shown; use a narrower pattern)" if len(ordered) > MAX_GLOB_RESULTS else ""
    head = (
        f'Found {len(ordered)} file{"s" if len(ordered) != 1 else ""} matching "{shown}" within {where}, '
        "recently modified first:\n"
    )
    return head + "\n".join(lines) + more + _walk_notes(stats)


class GrepSearchTool(Tool):
    name = "grep_search"
    kind = ToolKind.READ
    description = (
        "Searches file contents for a regular expression (ripgrep's syntax: "
        "like Python's, without backreferences or lookaround; "
        "case-insensitive unless case_sensitive is true) in the workspace, "
        "skipping binary files and files ignored by .gitignore. Returns "
        "matching lines grouped by file with line numbers, or only file names "
        "with names_only. Narrow the search with dir_path and include_pattern "
        "(a glob such as '*.py' or 'src/**/*.{ts,tsx}'), and bound it with "
        f"max_matches_per_file and total_max_matches (default {DEFAULT_TOTAL_MAX_MATCHES})."
    )
    parameters = {
        "type": "object",
        "properties": {
            "pattern": {"type": "string", "description": "Regular expression to search for, e.g. 'def \\w+_handler'."},
            "dir_path": {"type": "string", "description": "Directory to search in, relative to the workspace root. Default: the root."},
            "include_pattern": {"type": "string", "description": "Glob of files to search: '*.py' matches by file name at any depth; a pattern with '/' matches the path below dir_path."},
            "exclude_pattern": {"type": "string", "description": "Regular expression: matching lines that also match this are left out."},
            "names_only": {"type": "boolean", "description": "Return only the paths of files with matches. Default false."},
            "case_sensitive": {"type": "boolean", "description": "Match case exactly. Default false."},
            "max_matches_per_file": {"type": "integer", "minimum": 1, "description": "Stop after this many matching lines in one file."},
            "total_max_matches": {"type": "integer", "minimum": 1, "description": f"Stop after this many matching lines in all. Default {DEFAULT_TOTAL_MAX_MATCHES}."},
        },
        "required": ["pattern"],
    }

    def __init__(self, *, time_budget: float = GREP_TIME_BUDGET):
        self.time_budget = time_budget

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        return f"Search for /{args['pattern']}/ in {args.get('dir_path') or '.'}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        start = _search_root(ctx.workspace, args.get("dir_path"))
        case_sensitive = bool(args.get("case_sensitive"))
        if "\x00" in args["pattern"]:
            raise ToolFailed("invalid_pattern", "the pattern contains a NUL byte")
        exclude = None
        if args.get("exclude_pattern"):
            try:
                exclude = compile_linear(args["exclude_pattern"], case_sensitive=case_sensitive)
            except ValueError as exc:
                raise _invalid_regex("exclude_pattern", args["exclude_pattern"], str(exc)) from None
        include = None
        if args.get("include_pattern"):
            inc = _relative_pattern(ctx.workspace, start, args["include_pattern"])
            try:
                include = (compile_glob(inc, braces=True, case_sensitive=False), "/" in inc)
            except ValueError as exc:
                raise ToolFailed("invalid_pattern", f"include_pattern {args['include_pattern']!r} is invalid: {exc}") from None
        search = _Search(
            workspace=ctx.workspace, start=start, pattern=args["pattern"], case_sensitive=case_sensitive,
            exclude=exclude, include=include, names_only=bool(args.get("names_only")),
            per_file=args.get("max_matches_per_file"),
            total=int(args.get("total_max_matches") or DEFAULT_TOTAL_MAX_MATCHES),
            time_budget=self.time_budget,
        )
        with trio.move_on_after(self.time_budget) as scope:
            await search.run()
        if scope.cancelled_caught:
            search.stats.timed_out = True
        return search.format(args)


def _invalid_regex(what: str, pattern: str, reason: str) -> ToolFailed:
    reason = " ".join(reason.split())[:300]
    return ToolFailed(
        "invalid_pattern", f"{what} {pattern[:200]!r} is not a valid regular expression: {reason}",
        "use ripgrep/RE2 syntax (no backreferences or lookaround); escape literal characters such as "
        "( [ { . * with a backslash",
    )


def find_rg() -> str:
    """The ``rg`` executable: the one the ``ripgrep`` wheel installed beside
    this Python, else one on PATH. Raises :class:`ToolFailed` if none."""
    import sysconfig

    found = shutil.which("rg", path=sysconfig.get_path("scripts")) or shutil.which("rg")
    if found is None:
        raise ToolFailed("unavailable", "grep_search needs ripgrep (rg), which is not installed",
                         "install the 'ripgrep' Python package, or use run_shell_command with grep")
    return found


class _Search:
    """One grep_search: a confined walk that opens the files itself (no path
    is opened by name) and hands them to ripgrep in batches as
    ``/proc/self/fd/N`` — ripgrep reads exactly the files opened, cannot be
    redirected by a symlink swapped in, matches in linear time, and is a
    separate process that a cancelled call kills."""

    def __init__(self, *, workspace, start, pattern, case_sensitive, exclude, include, names_only, per_file, total,
                 time_budget):
        self.time_budget: float = time_budget
        self.workspace: Workspace = workspace
        self.start: Path = start
        self.pattern: str = pattern
        self.case_sensitive: bool = case_sensitive
        self.exclude: Any = exclude
        self.include: tuple[Any, bool] | None = include
        self.names_only: bool = names_only
        self.per_file: int | None = int(per_file) if per_file else None
        self.total: int = total
        self.stats = WalkStats()
        self.results: list[tuple[str, list[tuple[int, str]]]] = []
        self.count = 0
        self.skipped_large = 0
        self.capped_files = 0
        self.hit_total = False

    def _included(self, sub: str) -> bool:
        if self.include is None:
            return True
        regex, by_path = self.include
        return bool(regex.match(sub if by_path else sub.rsplit("/", 1)[-1]))

    async def run(self) -> None:
        rg = find_rg()
        walker = self._batches()
        searched = False
        try:
            while not self.hit_total:
                batch = await trio.to_thread.run_sync(next, walker, None)
                if batch is None:
                    if not searched:
                        await self._search_batch(rg, [])  # no files: still tell a bad pattern
                    return
                searched = True
                try:
                    await self._search_batch(rg, batch)
                finally:
                    for fd, _ in batch:
                        os.close(fd)
        finally:
            await trio.to_thread.run_sync(walker.close)

    def _batches(self):
        """Lists of ``(open fd, rel)`` of text files to search, in walk order."""
        base = os.path.relpath(self.start, self.workspace.root).replace(os.sep, "/")
        prefix = "" if base == "." else base + "/"
        batch: list[tuple[int, str]] = []
        try:
            for f in walk_files(self.workspace, self.start, stats=self.stats, time_budget=self.time_budget):
                if not self._included(f.rel[len(prefix):]):
                    continue
                fd = self._open(f)
                if fd is None:
                    continue
                batch.append((fd, f.rel))
                if len(batch) >= GREP_BATCH_FILES:
                    full, batch = batch, []  # the consumer closes what it was given
                    yield full
            if batch:
                full, batch = batch, []
                yield full
        finally:
            for fd, _ in batch:
                os.close(fd)

    def _open(self, f: WalkedFile) -> int | None:
        """An fd of a text file small enough to search, or None."""
        try:
            fh = f.open(self.workspace)
        except ToolFailed:
            return None
        fd = os.dup(fh.fileno())
        with fh:
            try:
                if os.fstat(fd).st_size > MAX_GREP_FILE_BYTES:
                    self.skipped_large += 1
                    os.close(fd)
                    return None
                if looks_binary(os.pread(fd, BINARY_SNIFF_BYTES, 0)):
                    os.close(fd)
                    return None
            except OSError:
                os.close(fd)
                return None
        return fd

    async def _search_batch(self, rg: str, batch: list[tuple[int, str]]) -> None:
        limit = self.total - self.count
        if self.per_file:
            limit = min(limit, self.per_file + 1)  # one more tells whether the file had more
        if self.names_only:
            limit = 1
        argv = [rg, "--json", "--no-config", "--no-ignore", "--hidden", "--text", "--threads", "1",
                "--max-count", str(limit), "--case-sensitive" if self.case_sensitive else "--ignore-case",
                "--regexp", self.pattern, "--"]
        argv += [f"/proc/self/fd/{fd}" for fd, _ in batch] if batch else [os.devnull]
        by_path = {f"/proc/self/fd/{fd}": rel for fd, rel in batch}
        process = await open_tool_process(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            pass_fds=[fd for fd, _ in batch], env=tool_environment(),
        )
        errors = bytearray()
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(_read_bounded, process.stderr, errors, 4096)
                await self._read_matches(process, by_path)
                if self.hit_total:
                    process.kill()
                await process.wait()
        finally:
            with trio.CancelScope(shield=True):
                if process.returncode is None:
                    process.kill()
                    await process.wait()
                for stream in (process.stdout, process.stderr):
                    await stream.aclose()
                release_tool_process(process)
        if process.returncode == 2 and not self.hit_total:
            raise _invalid_regex("pattern", self.pattern, errors.decode("utf-8", "replace").removeprefix("rg: "))

    async def _read_matches(self, process: trio.Process, by_path: dict[str, str]) -> None:
        current: tuple[str, list[tuple[int, str]]] | None = None
        buf = bytearray()
        while True:
            data = await process.stdout.receive_some(1 << 16)
            if not data:
                return
            buf += data
            while (nl := buf.find(b"\n")) >= 0:
                line = bytes(buf[:nl])
                del buf[: nl + 1]
                current = self._take(line, by_path, current)
                if self.hit_total:
                    return

    def _take(self, raw: bytes, by_path, current):
        import json  # here: loading the tools never needs it (~1.5 ms to import)

        try:
            event = json.loads(raw)
        except ValueError:
            return current
        if event.get("type") != "match":
            return current
        data = event["data"]
        rel = by_path.get(_json_text(data.get("path")))
        if rel is None:
            return current
        text = _json_text(data.get("lines")).rstrip("\r\n")
        if self.exclude is not None and self.exclude.search(text):
            return current
        if current is None or current[0] != rel:
            current = (rel, [])
            self.results.append(current)
        matches = current[1]
        if self.per_file and len(matches) >= self.per_file and not self.names_only:
            self.capped_files += len(matches) == self.per_file
            return current
        if self.names_only and matches:
            return current
        if len(text) > MAX_GREP_LINE_CHARS:
            text = text[:MAX_GREP_LINE_CHARS] + "…"
        matches.append((int(data.get("line_number") or 0), text))
        self.count += 1
        if self.count >= self.total:
            self.hit_total = True
        return current

    def format(self, args: dict[str, Any]) -> str:
        results = [(rel, m) for rel, m in self.results if m]
        count = sum(len(m) for _, m in results)
        where = f'"{args.get("dir_path") or "."}"'
        filt = f' (filter: "{args["include_pattern"]}")' if args.get("include_pattern") else ""
        notes = ""
        if self.hit_total:
            notes += f"\n(stopped at total_max_matches={self.total}; there may be more matches)"
        if self.capped_files:
            notes += f"\n({self.capped_files} file(s) had more matches than max_matches_per_file={self.per_file})"
        if self.skipped_large:
            notes += f"\n({self.skipped_large} file(s) over {MAX_GREP_FILE_BYTES // (1024 * 1024)} MiB not searched)"
        notes += _walk_notes(self.stats)
        if not results:
            return f'No matches found for pattern "{args["pattern"]}" in path {where}{filt}.' + notes
        if self.names_only:
            head = f'Found {len(results)} file{"s" if len(results) != 1 else ""} with matches for pattern "{args["pattern"]}" in path {where}{filt}:\n'
            return head + "\n".join(rel for rel, _ in results) + notes
        head = f'Found {count} match{"es" if count != 1 else ""} for pattern "{args["pattern"]}" in path {where}{filt}:\n---\n'
        blocks = []
        for rel, matches in results:
            blocks.append(f"File: {rel}\n" + "\n".join(f"L{n}: {line}" for n, line in matches))
        return head + "\n---\n".join(blocks) + "\n---" + notes


def _json_text(value: Any) -> str:
    """ripgrep's ``{"text": …}`` or, for bytes that are not UTF-8, ``{"bytes": base64}``."""
    if not isinstance(value, dict):
        return ""
    if "text" in value:
        return str(value["text"])
    try:
        return base64.b64decode(value.get("bytes", "")).decode("utf-8", errors="replace")
    except ValueError:
        return ""


async def _read_bounded(stream: Any, into: bytearray, limit: int) -> None:
    while data := await stream.receive_some(4096):
        if len(into) < limit:
            into += data[: limit - len(into)]
