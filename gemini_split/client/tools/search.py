"""Search tools: ``glob`` (find files by name) and ``grep_search`` (find
text in files), with gemini-cli's names and parameters.

Both walk the workspace with :func:`walk_files`: confined (symlinks out are
skipped, symlinked directories not entered), ``.git`` skipped, ``.gitignore``
respected, binary files skipped by ``grep_search``. The walk runs in a worker
thread and stops at a file count or time budget, saying so in the result.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import trio

from ..gitignore import glob_to_regex
from ._files import WalkStats, looks_binary, walk_files
from .base import Tool, ToolContext, ToolFailed, ToolKind

if TYPE_CHECKING:
    from ..workspace import Workspace

MAX_GLOB_RESULTS = 500
RECENT_SECONDS = 24 * 3600
MAX_GREP_FILE_BYTES = 4 * 1024 * 1024
MAX_GREP_LINE_CHARS = 500
DEFAULT_TOTAL_MAX_MATCHES = 100


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
        flags = 0 if args.get("case_sensitive") else re.IGNORECASE
        try:
            regex = re.compile(f"(?s:{glob_to_regex(pattern, braces=True)})\\Z", flags)
        except re.error as exc:
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


def _glob(workspace: Workspace, start: Path, regex: re.Pattern[str], shown: str, respect: tuple[bool, bool]) -> str:
    stats = WalkStats()
    base = os.path.relpath(start, workspace.root).replace(os.sep, "/")
    prefix = "" if base == "." else base + "/"
    found: list[tuple[str, float]] = []
    for f in walk_files(workspace, start, respect_git_ignore=respect[0], respect_gemini_ignore=respect[1],
                        stats=stats):
        sub = f.rel[len(prefix):]
        if regex.match(sub):
            try:
                mtime = f.real.stat().st_mtime
            except OSError:
                mtime = 0.0
            found.append((f.rel, mtime))
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
        "Searches file contents for a regular expression (Python syntax, "
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

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        return f"Search for /{args['pattern']}/ in {args.get('dir_path') or '.'}"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        start = _search_root(ctx.workspace, args.get("dir_path"))
        flags = 0 if args.get("case_sensitive") else re.IGNORECASE
        regex = _compile(args["pattern"], flags, "pattern")
        exclude = _compile(args["exclude_pattern"], flags, "exclude_pattern") if args.get("exclude_pattern") else None
        include = None
        if args.get("include_pattern"):
            inc = _relative_pattern(ctx.workspace, start, args["include_pattern"])
            include = (re.compile(f"(?s:{glob_to_regex(inc, braces=True)})\\Z", re.IGNORECASE), "/" in inc)
        search = _Search(
            regex=regex, exclude=exclude, include=include,
            names_only=bool(args.get("names_only")),
            per_file=args.get("max_matches_per_file"),
            total=int(args.get("total_max_matches") or DEFAULT_TOTAL_MAX_MATCHES),
        )
        return await trio.to_thread.run_sync(search.run, ctx.workspace, start, args, abandon_on_cancel=True)


def _compile(pattern: str, flags: int, what: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern, flags)
    except re.error as exc:
        raise ToolFailed(
            "invalid_pattern", f"{what} {pattern!r} is not a valid regular expression: {exc}",
            "use Python regular expression syntax; escape literal characters such as ( [ { . * with a backslash",
        ) from None


class _Search:
    def __init__(self, *, regex, exclude, include, names_only, per_file, total):
        self.regex: re.Pattern[str] = regex
        self.exclude: re.Pattern[str] | None = exclude
        self.include: tuple[re.Pattern[str], bool] | None = include
        self.names_only: bool = names_only
        self.per_file: int | None = int(per_file) if per_file else None
        self.total: int = total

    def _included(self, sub: str) -> bool:
        if self.include is None:
            return True
        regex, by_path = self.include
        return bool(regex.match(sub if by_path else sub.rsplit("/", 1)[-1]))

    def run(self, workspace: Workspace, start: Path, args: dict[str, Any]) -> str:
        stats = WalkStats()
        base = os.path.relpath(start, workspace.root).replace(os.sep, "/")
        prefix = "" if base == "." else base + "/"
        results: list[tuple[str, list[tuple[int, str]]]] = []
        count = 0
        skipped_large = 0
        capped_files = 0
        hit_total = False
        for f in walk_files(workspace, start, stats=stats):
            if not self._included(f.rel[len(prefix):]):
                continue
            matches, capped, large = self._search_file(f.real, self.total - count)
            skipped_large += large
            if not matches:
                continue
            capped_files += capped
            results.append((f.rel, matches))
            count += len(matches)
            if count >= self.total:
                hit_total = True
                break
        return self._format(args, base, results, count, hit_total, capped_files, skipped_large, stats)

    def _search_file(self, path: Path, budget: int) -> tuple[list[tuple[int, str]], bool, int]:
        """``(matches, capped by max_matches_per_file, 1 if too large)``."""
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        except OSError:
            return [], False, 0
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if st.st_size > MAX_GREP_FILE_BYTES:
                return [], False, 1
            data = fh.read(MAX_GREP_FILE_BYTES + 1)
        if looks_binary(data):
            return [], False, 0
        limit = min(budget, self.per_file) if self.per_file else budget
        limit = 1 if self.names_only else limit
        matches: list[tuple[int, str]] = []
        text = data.decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if self.regex.search(line) and not (self.exclude and self.exclude.search(line)):
                if len(matches) >= limit:
                    return matches, not self.names_only and bool(self.per_file), 0
                if len(line) > MAX_GREP_LINE_CHARS:
                    line = line[:MAX_GREP_LINE_CHARS] + "…"
                matches.append((number, line))
        return matches, False, 0

    def _format(self, args, base, results, count, hit_total, capped_files, skipped_large, stats) -> str:
        where = f'"{args.get("dir_path") or "."}"'
        filt = f' (filter: "{args["include_pattern"]}")' if args.get("include_pattern") else ""
        notes = ""
        if hit_total:
            notes += f"\n(stopped at total_max_matches={self.total}; there may be more matches)"
        if capped_files:
            notes += f"\n({capped_files} file(s) had more matches than max_matches_per_file={self.per_file})"
        if skipped_large:
            notes += f"\n({skipped_large} file(s) over {MAX_GREP_FILE_BYTES // (1024 * 1024)} MiB not searched)"
        notes += _walk_notes(stats)
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
