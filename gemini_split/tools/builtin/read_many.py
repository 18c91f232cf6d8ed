"""``read_many_files``: gemini-cli's tool of that name (the text files its
glob patterns match, concatenated), with the confinement and ignore rules
of the other file tools (:func:`._files.walk_files`: the workspace only,
symlinks out skipped, ``.gitignore`` / ``.geminiignore``) and bounded
output."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from gemini_split.gitignore import compile_glob
from ._files import WalkStats, walk_files
from gemini_split.tools.base import Tool, ToolContext, ToolFailed, ToolKind
from .filesystem import _LineReader
from .search import _relative_pattern, _walk_notes

if TYPE_CHECKING:
    from ..workspace import Workspace

#: Files read at most (the rest are named in a note).
MAX_FILES = 100
#: Characters of content returned at most, all files together.
MAX_TOTAL_CHARS = 512 * 1024
#: What ``useDefaultExcludes`` leaves out (as gemini-cli: dependencies,
#: version control, build output, caches).
DEFAULT_EXCLUDES = ("**/node_modules/**", "**/.git/**", "**/.svn/**", "**/.hg/**", "**/__pycache__/**",
                    "**/.venv/**", "**/venv/**", "**/dist/**", "**/build/**", "**/coverage/**",
                    "**/*.pyc", "**/*.class", "**/*.o", "**/*.so", "**/*.exe", "**/*.dll", "**/*.zip",
                    "**/*.tar", "**/*.gz", "**/.DS_Store", "**/.env")
END = "--- End of content ---"


class ReadManyFilesTool(Tool):
    name = "read_many_files"
    kind = ToolKind.READ
    description = (
        "Reads content from multiple files specified by glob patterns within the workspace. For text files, "
        "it concatenates their content into a single string, with a '--- {filePath} ---' separator before "
        f"each file and '{END}' after the last. Binary files are skipped. Use it when the user's query "
        "implies needing the content of several files at once (an overview of part of a codebase, all the "
        "Markdown files in 'docs', several configuration files). Glob patterns are relative to the workspace "
        f"root, e.g. 'src/**/*.js'. At most {MAX_FILES} files and {MAX_TOTAL_CHARS // 1024} KiB are returned; "
        "a note says what was left out."
    )
    parameters = {
        "type": "object",
        "properties": {
            "include": {
                "type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
                "description": 'An array of glob patterns or paths. Examples: ["src/**/*.ts"], ["README.md", "docs/"]',
            },
            "exclude": {
                "type": "array", "items": {"type": "string", "minLength": 1},
                "description": "Optional. Glob patterns for files/directories to exclude. Added to default "
                               'excludes if useDefaultExcludes is true. Example: "**/*.log", "temp/"',
            },
            "recursive": {
                "type": "boolean",
                "description": "Optional. Whether to search recursively (primarily controlled by `**` in glob "
                               "patterns). Defaults to true.",
            },
            "useDefaultExcludes": {
                "type": "boolean",
                "description": "Optional. Whether to apply a list of default exclusion patterns (e.g., "
                               "node_modules, .git, binary files). Defaults to true.",
            },
            "file_filtering_options": {
                "type": "object",
                "description": "Whether to respect ignore patterns from .gitignore or .geminiignore",
                "properties": {
                    "respect_git_ignore": {"type": "boolean", "description": "Optional: Whether to respect "
                                           ".gitignore patterns when listing files. Defaults to true."},
                    "respect_gemini_ignore": {"type": "boolean", "description": "Optional: Whether to respect "
                                              ".geminiignore patterns when listing files. Defaults to true."},
                },
            },
        },
        "required": ["include"],
    }

    def describe(self, args: dict[str, Any], workspace: Workspace) -> str:
        return "Read files matching " + ", ".join(repr(p) for p in _strings(args, "include")[:5])

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> Any:
        include = _strings(args, "include")
        if not include:
            raise ToolFailed("invalid_arguments", "include must name at least one glob pattern or path")
        exclude = _strings(args, "exclude")
        if args.get("useDefaultExcludes", True) is not False:
            exclude += DEFAULT_EXCLUDES
        recursive = args.get("recursive", True) is not False
        wanted = [_compile(ctx.workspace, p, recursive) for p in include]
        unwanted = [_compile(ctx.workspace, p, True) for p in exclude]
        filtering = args.get("file_filtering_options") if isinstance(args.get("file_filtering_options"), dict) else {}
        respect = (filtering.get("respect_git_ignore", True) is not False,
                   filtering.get("respect_gemini_ignore", True) is not False)
        return await trio.to_thread.run_sync(_read_many, ctx.workspace, wanted, unwanted, respect, include,
                                             abandon_on_cancel=True)


def _strings(args: dict[str, Any], key: str) -> list[str]:
    value = args.get(key) or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolFailed("invalid_arguments", f"{key} must be an array of strings")
    return list(value)


def _compile(workspace: Workspace, pattern: str, recursive: bool) -> Any:
    """A pattern, a path or a directory (``docs/``, ``docs``: everything
    under it) as a regex over workspace-relative paths."""
    relative = _relative_pattern(workspace, workspace.root, pattern).rstrip("/") or "**"
    if not any(c in relative for c in "*?[{") and (workspace.root / relative).is_dir():
        relative += "/**" if recursive else "/*"
    elif not recursive:
        relative = relative.replace("**/", "").replace("/**", "/*")
    try:
        return compile_glob(relative, braces=True, case_sensitive=True)
    except ValueError as exc:
        raise ToolFailed("invalid_pattern", f"the glob pattern {pattern!r} is invalid: {exc}") from None


def _read_many(workspace: Workspace, wanted: list[Any], unwanted: list[Any], respect: tuple[bool, bool],
               shown: list[str]) -> str:
    stats = WalkStats()
    parts: list[str] = []
    skipped: list[str] = []
    left_out: list[str] = []
    total = 0
    for f in walk_files(workspace, workspace.root, respect_git_ignore=respect[0], respect_gemini_ignore=respect[1],
                        stats=stats):
        if not any(r.match(f.rel) for r in wanted) or any(r.match(f.rel) for r in unwanted):
            continue
        if len(parts) >= MAX_FILES or total >= MAX_TOTAL_CHARS:
            left_out.append(f.rel)
            continue
        try:
            with f.open(workspace) as handle:
                text = _LineReader(handle, f.rel).read(1, None)
        except ToolFailed as exc:  # binary, unreadable, swapped for a link: skipped, and said
            skipped.append(f"{f.rel} ({exc})")
            continue
        text = text[:MAX_TOTAL_CHARS - total]
        total += len(text)
        parts.append(f"--- {f.rel} ---\n\n{text}\n\n")
    notes = ""
    if left_out:
        notes += (f"\n({len(left_out)} more matching file{'s' if len(left_out) != 1 else ''} not read: the limit is "
                  f"{MAX_FILES} files and {MAX_TOTAL_CHARS // 1024} KiB; narrow the patterns: "
                  + ", ".join(left_out[:20]) + (", …" if len(left_out) > 20 else "") + ")")
    if skipped:
        notes += "\n(skipped: " + "; ".join(skipped[:20]) + ("; …" if len(skipped) > 20 else "") + ")"
    notes += _walk_notes(stats)
    if not parts:
        return "No files matching " + ", ".join(repr(p) for p in shown) + " were read." + notes
    return "".join(parts) + END + notes
