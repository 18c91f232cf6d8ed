"""Project context, found where the user's files are (the client side):
``GEMINI.md`` files and the session-context text of the first turn.

Context files (``context.fileName``, default ``GEMINI.md``; a list such as
``["AGENTS.md", "GEMINI.md"]`` looks for each name in each directory), found
as gemini-cli finds them:

1. *global*: ``~/.gemini/<name>`` (gemini-split's config directory, so
   ``$GEMINI_SPLIT_HOME/<name>`` when that is set);
2. *project* (trusted folders only, like project settings): for each
   workspace directory, every directory from the project root (the nearest
   ancestor holding one of ``context.memoryBoundaryMarkers``, default
   ``.git``; without one, the workspace directory itself) down to the
   workspace directory, root first;
3. *subdirectory*: files below the workspace directory are not read up
   front; :func:`subdirectory_context_files` finds the ones on the way to a
   path a tool touches (gemini-cli's "just in time" context).

A file is read once even when reachable twice (same device and inode), at
most :data:`MAX_CONTEXT_FILE_BYTES` of it, as UTF-8 (bad bytes replaced);
unreadable files are skipped with a warning. Nothing here raises for a
missing or unreadable file.

The session context (:func:`session_context_text`) is gemini-cli's first
user turn: today's date, the OS, the workspace directories and a listing of
each (at most 200 entries, ``.gitignore``/``.geminiignore`` respected).
"""

from __future__ import annotations

import datetime
import os
import platform
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import msgspec
import trio

from gemini_split.files import read_bounded
from gemini_split.protocol import ContextFile as WireContextFile
from gemini_split.protocol import SessionContext

from gemini_split.gitignore import IgnoreRules

#: Bytes read from one context file; the rest is dropped with a note.
MAX_CONTEXT_FILE_BYTES = 256 * 1024
#: Entries shown in the directory listing of the session context (gemini-cli's).
LISTING_MAX_ITEMS = 200
#: Folders listed but never entered (gemini-cli's defaults).
LISTING_SKIPPED_FOLDERS = frozenset({"node_modules", ".git", "dist", "__pycache__"})

Scope = Literal["global", "project", "subdirectory"]


class ContextFile(msgspec.Struct, frozen=True):
    path: Path
    scope: Scope
    content: str
    #: Its ``@`` imports (``memory_import.ImportNode``), in the order read:
    #: the tree ``/memory show`` draws.
    imports: tuple[Any, ...] = ()


class ProjectContext(msgspec.Struct):
    """The context files for a session, in the order they apply (global,
    then project root first)."""

    files: list[ContextFile] = msgspec.field(default_factory=list)
    warnings: list[str] = msgspec.field(default_factory=list)

    def paths(self) -> list[Path]:
        return [f.path for f in self.files]


def load_project_context(
    workspace_dirs: Iterable[Path],
    *,
    config_dir: Path,
    file_names: list[str],
    trusted: bool = True,
    boundary_markers: Iterable[str] = (".git",),
    extension_files: Iterable[Path] = (),
) -> ProjectContext:
    """The global and project context files for ``workspace_dirs`` (the
    workspace first, then ``--include-directories``); ``extension_files``
    (the active extensions' context files) come after the global ones, as
    in gemini-cli."""
    extension_files = [Path(path) for path in extension_files]
    found: list[tuple[Path, Scope]] = [(config_dir / name, "global") for name in file_names]
    found.extend((path, "global") for path in extension_files)
    # Imports may reach the config directory, an extension's own folder and
    # each project (from its root).
    imports_from: list[Path] = [config_dir, *(path.parent for path in extension_files)]
    if trusted:
        markers = [m for m in boundary_markers if m and not os.path.isabs(m) and ".." not in m]
        for directory in workspace_dirs:
            directory = Path(os.path.abspath(directory))
            root = _project_root(directory, markers) or directory
            imports_from.append(root)
            for folder in _from_root_down(root, directory, stop_at=config_dir):
                found.extend((folder / name, "project") for name in file_names)
    context = ProjectContext()
    seen: set[tuple[int, int]] = set()
    for path, scope in found:
        item = _read_context_file(path, scope, seen, context.warnings, tuple(imports_from))
        if item is not None:
            context.files.append(item)
    return context


def subdirectory_context_files(
    touched: Path,
    workspace_dirs: Iterable[Path],
    *,
    file_names: list[str],
    already_loaded: set[Path],
    trusted: bool = True,
) -> list[ContextFile]:
    """Context files between the workspace directory holding ``touched`` and
    ``touched`` itself (its directory, for a file) not loaded yet; the
    caller adds their paths to ``already_loaded``."""
    if not trusted:
        return []
    touched = Path(os.path.abspath(touched))
    roots = [Path(os.path.abspath(d)) for d in workspace_dirs]
    holders = [r for r in roots if touched == r or r in touched.parents]
    if not holders:
        return []
    root = max(holders, key=lambda r: len(str(r)))
    start = touched if touched.is_dir() else touched.parent
    out: list[ContextFile] = []
    seen: set[tuple[int, int]] = set()
    for loaded in already_loaded:
        try:
            st = loaded.stat()
            seen.add((st.st_dev, st.st_ino))
        except OSError:
            pass
    for folder in _from_root_down(root, start, stop_at=None):
        if folder == root:
            continue  # the workspace directory's own files were loaded up front
        for name in file_names:
            item = _read_context_file(folder / name, "subdirectory", seen, [])
            if item is not None and item.path not in already_loaded:
                out.append(item)
    return out


def _project_root(start: Path, markers: list[str]) -> Path | None:
    if not markers:
        return None
    for folder in (start, *start.parents):
        if any(os.path.lexists(folder / marker) for marker in markers):
            return folder
    return None


def _from_root_down(root: Path, directory: Path, *, stop_at: Path | None) -> list[Path]:
    """``root`` … ``directory``, root first (``directory`` when it is not
    below ``root``). A folder equal to ``stop_at`` (the global config
    directory) ends the walk upwards, as in gemini-cli."""
    chain: list[Path] = []
    folder = directory
    while True:
        if stop_at is not None and os.path.abspath(folder) == os.path.abspath(stop_at):
            break
        chain.append(folder)
        if folder == root or folder.parent == folder:
            break
        folder = folder.parent
    chain.reverse()
    return chain


def _read_context_file(path: Path, scope: Scope, seen: set[tuple[int, int]],
                       warnings: list[str], imports_from: tuple[Path, ...] = ()) -> ContextFile | None:
    """The context file at ``path``, its ``@`` imports expanded from within
    ``imports_from`` (:mod:`gemini_split.userfiles.memory_import`; none when
    empty)."""
    try:
        st = path.stat()
    except OSError:
        return None
    if not path.is_file():
        return None
    key = (st.st_dev, st.st_ino)
    if key in seen:
        return None
    seen.add(key)
    try:
        data = read_bounded(path, MAX_CONTEXT_FILE_BYTES)
    except OSError as exc:
        warnings.append(f"gemini-split: cannot read context file {path}: {exc.strerror or exc}")
        return None
    text = data[:MAX_CONTEXT_FILE_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_CONTEXT_FILE_BYTES:
        text += f"\n[… {path.name} is longer than {MAX_CONTEXT_FILE_BYTES // 1024} KiB; the rest was not read]"
        warnings.append(f"gemini-split: context file {path} is over {MAX_CONTEXT_FILE_BYTES // 1024} KiB; "
                        "only the start is used")
    imports: list[Any] = []
    if imports_from and "@" in text:
        from .memory_import import expand_imports  # lazy_imports.EDGES

        text = expand_imports(text, path, allowed=imports_from, warnings=warnings, max_bytes=MAX_CONTEXT_FILE_BYTES,
                              tree=imports)
    return ContextFile(Path(os.path.abspath(path)), scope, text, tuple(imports))


# --------------------------------------------------------------------------
# The session context: the first user turn.


def session_context_text(
    workspace_dirs: list[Path],
    *,
    today: datetime.date | None = None,
    include_listing: bool = True,
    ignore_files: tuple[str, ...] = (".gitignore", ".geminiignore"),
) -> str:
    """gemini-cli's ``<session_context>`` block: date, OS, workspace
    directories, and a short listing of each."""
    today = today or datetime.date.today()
    date = f"{today:%A}, {today:%B} {today.day}, {today:%Y}"
    lines = [
        "<session_context>",
        "This is gemini-split, a Gemini coding agent. We are setting up the context for our chat.",
        f"Today's date is {date}.",
        f"My operating system is: {_os_name()}",
        _WORKSPACE_HEADING,
        *(f"  - {d}" for d in workspace_dirs),
    ]
    if include_listing:
        lines += ["- **Directory Structure:**", ""]
        lines += [folder_structure(d, ignore_files=ignore_files) for d in workspace_dirs]
    lines.append("</session_context>")
    return "\n".join(lines)


_WORKSPACE_HEADING = "- **Workspace Directories:**"


def started_in(history: list[dict]) -> str | None:
    """The directory a session was started in: the first workspace
    directory its first turn's ``<session_context>`` (written by
    :func:`session_context_text`) names; None when it has none (a session
    opened by another kind of client, or whose history begins otherwise)."""
    first = history[0] if history and isinstance(history[0], dict) else {}
    for part in first.get("parts") or []:
        text = part.get("text") if isinstance(part, dict) else None
        if not isinstance(text, str) or not text.startswith("<session_context>"):
            continue
        lines = text.splitlines()
        if _WORKSPACE_HEADING in lines:
            after = lines[lines.index(_WORKSPACE_HEADING) + 1:]
            if after and after[0].startswith("  - "):
                return after[0][4:]
    return None


def runs_elsewhere(history: list[dict], workspace: Path) -> str | None:
    """Where the session was started, when that is not ``workspace`` (its
    tools, which run where the client is, would now run in ``workspace``)."""
    started = started_in(history)
    if started is None or os.path.realpath(started) == os.path.realpath(workspace):
        return None
    return started


def _os_name() -> str:
    system = platform.system().lower() or os.name
    return {"windows": "win32"}.get(system, system)


class _Folder(msgspec.Struct):
    path: Path
    name: str
    files: list[str] = msgspec.field(default_factory=list)
    folders: list["_Folder"] = msgspec.field(default_factory=list)
    more_files: bool = False
    more_folders: bool = False
    skipped: bool = False


def folder_structure(directory: Path, *, max_items: int = LISTING_MAX_ITEMS,
                     ignore_files: tuple[str, ...] = (".gitignore", ".geminiignore")) -> str:
    """A tree of ``directory`` in gemini-cli's shape: breadth first, at most
    ``max_items`` files and folders, ignored and skipped folders shown with
    ``...``, entries sorted by name. Symlinked directories are not entered."""
    directory = Path(os.path.abspath(directory))
    rules = IgnoreRules()
    for name in ignore_files:
        if (directory / name).is_file():
            try:
                rules.add_file(directory / name)
            except OSError:
                pass
    root = _Folder(directory, directory.name)
    queue = [root]
    count = 0
    while queue and count < max_items:
        node = queue.pop(0)
        if node.skipped:
            continue
        try:
            entries = sorted(os.scandir(node.path), key=lambda e: (e.name.lower(), e.name))
        except OSError:
            continue
        files = [e for e in entries if not e.is_dir(follow_symlinks=False)]
        dirs = [e for e in entries if e.is_dir(follow_symlinks=False)]
        for entry in files:
            rel = os.path.relpath(entry.path, directory).replace(os.sep, "/")
            if rules.is_ignored(rel, False):
                continue
            if count >= max_items:
                node.more_files = True
                break
            node.files.append(entry.name)
            count += 1
        for entry in dirs:
            rel = os.path.relpath(entry.path, directory).replace(os.sep, "/")
            if count >= max_items:
                node.more_folders = True
                break
            child = _Folder(Path(entry.path), entry.name)
            child.skipped = entry.name in LISTING_SKIPPED_FOLDERS or rules.is_ignored(rel, True)
            node.folders.append(child)
            count += 1
            queue.append(child)
    for node in queue:  # never opened: the limit was reached
        if not node.skipped:
            node.more_files = True
    lines: list[str] = []
    _format(root, "", True, True, lines)
    truncated = _truncated(root)
    summary = f"Showing up to {max_items} items (files + folders)."
    if truncated:
        summary += (f" Folders or files indicated with ... contain more items not shown, were ignored, "
                    f"or the display limit ({max_items} items) was reached.")
    return f"{summary}\n\n{directory}{os.sep}\n" + "\n".join(lines)


def _truncated(node: _Folder) -> bool:
    return node.more_files or node.more_folders or node.skipped or any(_truncated(f) for f in node.folders)


def _format(node: _Folder, indent: str, last: bool, is_root: bool, out: list[str]) -> None:
    if not is_root:
        out.append(f"{indent}{'└───' if last else '├───'}{node.name}{os.sep}{'...' if node.skipped else ''}")
    child_indent = "" if is_root else indent + ("    " if last else "│   ")
    if node.skipped:
        return
    for i, name in enumerate(node.files):
        is_last = i == len(node.files) - 1 and not node.folders and not node.more_folders and not node.more_files
        out.append(f"{child_indent}{'└───' if is_last else '├───'}{name}")
    if node.more_files:
        out.append(f"{child_indent}{'└───' if not node.folders and not node.more_folders else '├───'}...")
    for i, folder in enumerate(node.folders):
        _format(folder, child_indent, i == len(node.folders) - 1 and not node.more_folders, False, out)
    if node.more_folders:
        out.append(f"{child_indent}└───...")


# --------------------------------------------------------------------------
# Subdirectory context, found as tools reach into the tree.

#: Tools whose use of a path brings that subtree's context files into the
#: conversation (gemini-cli's "high-intent" tools), and the argument naming it.
CONTEXT_REVEALING_TOOLS = {
    "read_file": "file_path", "list_directory": "dir_path", "write_file": "file_path", "replace": "file_path",
}
JIT_PREFIX = "\n\n--- Newly Discovered Project Context ---\n"
JIT_SUFFIX = "\n--- End Project Context ---"


class SubdirectoryContext:
    """Appends context files from subdirectories to the result of a tool
    that touched them, once per file per session (gemini-cli's "just in
    time" context). Use :meth:`after_run` as the tool executor's hook."""

    def __init__(self, workspace_dirs: Iterable[Path], *, file_names: list[str], loaded: Iterable[Path],
                 trusted: bool = True):
        self.workspace_dirs = [Path(os.path.abspath(d)) for d in workspace_dirs]
        self.file_names = list(file_names)
        self.loaded: set[Path] = {Path(p) for p in loaded}
        self.trusted = trusted

    async def after_run(self, tool_name: str, args: dict, result: object) -> object:
        key = CONTEXT_REVEALING_TOOLS.get(tool_name)
        path = args.get(key) if key else None
        if not self.trusted or not isinstance(result, str) or not isinstance(path, str) or not self.workspace_dirs:
            return result
        touched = Path(path) if os.path.isabs(path) else self.workspace_dirs[0] / path
        found = await trio.to_thread.run_sync(
            lambda: subdirectory_context_files(touched, self.workspace_dirs, file_names=self.file_names,
                                               already_loaded=self.loaded, trusted=self.trusted))
        if not found:
            return result
        self.loaded.update(f.path for f in found)
        blocks = "\n\n".join(
            f"--- Context from: {f.path} ---\n{f.content.strip()}\n--- End of Context from: {f.path} ---"
            for f in found if f.content.strip()
        )
        return result + JIT_PREFIX + blocks + JIT_SUFFIX if blocks else result


# --------------------------------------------------------------------------
# What the session is told.


def session_context_message(project: ProjectContext, *, workspace_dirs: list[Path], file_names: list[str],
                            approval_mode: str, interactive: bool, environment: str | None,
                            compression_threshold: float | None = None):
    """The protocol's ``SessionContext`` for these facts."""
    return SessionContext(
        files=tuple(WireContextFile(path=str(f.path), scope=f.scope, content=f.content) for f in project.files),
        file_names=tuple(file_names),
        environment=environment,
        approval_mode=approval_mode,
        workspace_dirs=tuple(str(d) for d in workspace_dirs),
        interactive=interactive,
        compression_threshold=compression_threshold,
    )
