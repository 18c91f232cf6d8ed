"""Helpers the file tools share: text detection, reading, and a confined,
``.gitignore``-aware walk of the workspace.

Everything here is blocking; tools call it through ``trio.to_thread``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import msgspec

from gemini_split.gitignore import MAX_IGNORE_FILE_CHARS, IgnoreRules
from gemini_split.tools.base import ToolFailed

if TYPE_CHECKING:
    from ..workspace import Workspace

BINARY_SNIFF_BYTES = 8192
MAX_EDIT_BYTES = 16 * 1024 * 1024
"""Files larger than this are not loaded whole for an edit or a diff."""


def looks_binary(head: bytes) -> bool:
    """Git's rule: a NUL byte in the first few kilobytes means binary."""
    return b"\x00" in head[:BINARY_SNIFF_BYTES]


def read_text_for_edit(workspace: Workspace, real: Path, shown: str) -> str | None:
    """The whole text of a file about to be edited, or None if it does not
    exist. Decoded as UTF-8 with ``surrogateescape`` so bytes that are not
    UTF-8 survive the round trip unchanged. Raises :class:`ToolFailed` for
    binary, oversized or unreadable files."""
    try:
        f = workspace.open_regular(real, shown)
    except ToolFailed as failed:
        if failed.code in ("not_found", "not_a_directory"):
            return None  # nothing there: a new file (write_atomic says why a parent cannot hold it)
        raise
    with f:
        data = f.read(MAX_EDIT_BYTES + 1)
    if len(data) > MAX_EDIT_BYTES:
        raise ToolFailed(
            "file_too_large",
            f"'{shown}' is larger than {MAX_EDIT_BYTES // (1024 * 1024)} MiB and cannot be edited here",
            "edit it with a shell command (sed, a script) instead",
        )
    if looks_binary(data):
        raise ToolFailed("binary_file", f"'{shown}' is a binary file and cannot be edited as text")
    return data.decode("utf-8", errors="surrogateescape")


def encode_text(text: str) -> bytes:
    return text.encode("utf-8", errors="surrogateescape")


# --- .gitignore-aware walking -------------------------------------------------
#
# Walks never open a path by name: each directory is reached from the
# workspace root's fd component by component with O_NOFOLLOW
# (Workspace.open_directory), entries are listed from that fd, and files are
# opened relative to it. A directory swapped for a symlink mid-walk is
# skipped (counted in WalkStats.errors), never followed.

ALWAYS_SKIPPED_DIRS = frozenset({".git"})


#: gemini-cli's project ignore file: read at the root of the workspace (or
#: of an included directory) only, on top of the .gitignore rules.
GEMINI_IGNORE_FILE = ".geminiignore"


def load_ignore_rules(workspace: Workspace, directory: Path, *, git: bool = True, gemini: bool = True) -> IgnoreRules:
    """The ignore rules in force in ``directory``: with ``git``,
    ``.git/info/exclude`` and every ``.gitignore`` from the workspace root
    (or the included directory holding ``directory``) down to ``directory``
    (inclusive); with ``gemini``, that root's ``.geminiignore``. Patterns are
    relative to that root."""
    rules = IgnoreRules()
    root = workspace.root_of(directory) or workspace.root
    if git:
        rules.add_lines(_read_small(workspace, root / ".git" / "info" / "exclude"))
        rel = os.path.relpath(directory, root)
        parts = [] if rel == "." else rel.split(os.sep)
        for i in range(len(parts) + 1):
            _add_gitignore(rules, workspace, root.joinpath(*parts[:i]))
    if gemini:
        _add_gitignore(rules, workspace, root, name=GEMINI_IGNORE_FILE)
    return rules


def _read_small(workspace: Workspace, real: Path, dir_fd: int | None = None) -> str:
    """The start of a small text file read without following a symlink
    swapped in on the way; ``""`` if it cannot be read. A ``.gitignore`` that
    is itself a symlink is followed only to a target inside the workspace."""
    shown = workspace.relative(real)
    try:
        if dir_fd is not None:
            f = workspace.open_regular_at(dir_fd, real.name, shown)
        else:
            f = workspace.open_regular(real, shown)
    except ToolFailed as failed:
        if failed.code != "invalid_path":
            return ""
        try:  # a symlink: resolve it, and read it only if it stays inside
            f = workspace.open_regular(workspace.resolve(shown), shown)
        except ToolFailed:
            return ""
    with f:
        try:
            return f.read(MAX_IGNORE_FILE_CHARS).decode("utf-8", errors="replace")
        except OSError:
            return ""


def _add_gitignore(rules: IgnoreRules, workspace: Workspace, directory: Path, dir_fd: int | None = None,
                   name: str = ".gitignore") -> None:
    text = _read_small(workspace, directory / name, dir_fd)
    if text:
        base = os.path.relpath(directory, workspace.root_of(directory) or workspace.root)
        rules.add_lines(text, "" if base == "." else base.replace(os.sep, "/"))


class WalkStats(msgspec.Struct):
    """What a walk left out, for the notes tools add to their results."""

    ignored: int = 0
    outside_links: int = 0
    truncated: bool = False
    timed_out: bool = False
    errors: list[str] = msgspec.field(default_factory=list)


class WalkedFile(msgspec.Struct, frozen=True):
    """One regular file met by :func:`walk_files`.

    ``dir_fd`` is the open directory holding ``name`` and is valid only
    until the walk moves on: open or stat the file before asking for the
    next one. ``link_target`` is set for a symlink whose target is inside
    the workspace (the file to use instead)."""

    rel: str  # shown to the model: relative to the workspace root, '/'-separated
    name: str
    dir_fd: int
    link_target: Path | None = None

    def open(self, workspace: Workspace) -> BinaryIO:
        """The file, opened without following any symlink swapped in."""
        if self.link_target is not None:
            return workspace.open_regular(self.link_target, self.rel)
        return workspace.open_regular_at(self.dir_fd, self.name, self.rel)

    def mtime(self) -> float:
        try:
            return os.stat(self.name, dir_fd=self.dir_fd, follow_symlinks=False).st_mtime
        except OSError:
            return 0.0


def walk_files(
    workspace: Workspace,
    start: Path,
    *,
    respect_git_ignore: bool = True,
    respect_gemini_ignore: bool = True,
    max_files: int = 100_000,
    time_budget: float = 30.0,
    stats: WalkStats | None = None,
) -> Iterator[WalkedFile]:
    """Every regular file under ``start`` (a resolved directory), depth
    first in name order.

    Confinement: symlinked directories are not entered; a symlinked file is
    yielded only if its target is inside the workspace (as that target);
    every directory is opened relative to its parent's fd without following
    symlinks. ``.git`` is always skipped; with ``respect_git_ignore``, so is
    whatever ``.gitignore`` files and ``.git/info/exclude`` ignore, and with
    ``respect_gemini_ignore`` what the root's ``.geminiignore`` ignores.
    Stops after ``max_files`` files or ``time_budget`` seconds, noting it in
    ``stats``.
    """
    stats = stats if stats is not None else WalkStats()
    deadline = time.monotonic() + time_budget
    filtering = respect_git_ignore or respect_gemini_ignore
    root_rules = (load_ignore_rules(workspace, start, git=respect_git_ignore, gemini=respect_gemini_ignore)
                  if filtering else IgnoreRules())
    # Ignore rules are relative to the root (or included directory) walked.
    rules_root = workspace.root_of(start) or workspace.root
    start_rel = os.path.relpath(start, workspace.root)
    stack: list[tuple[str, IgnoreRules]] = [("" if start_rel == "." else start_rel.replace(os.sep, "/"), root_rules)]
    count = 0
    first = True
    while stack:
        rel_dir, rules = stack.pop()
        directory = Path(os.path.normpath(workspace.root / rel_dir)) if rel_dir else workspace.root
        try:
            fd = workspace.open_directory(directory, rel_dir or ".")
        except ToolFailed as failed:
            stats.errors.append(f"{rel_dir or '.'}: {failed}")
            continue
        try:
            if respect_git_ignore and not first:
                before = len(rules)
                extra = rules.copy()
                _add_gitignore(extra, workspace, directory, fd)
                if len(extra) != before:
                    rules = extra
            first = False
            try:
                with os.scandir(fd) as it:
                    entries = sorted(((e.name, _kind(e)) for e in it), key=lambda e: e[0])
            except OSError as exc:
                stats.errors.append(f"{rel_dir or '.'}: {exc.strerror}")
                continue
            subdirs: list[tuple[str, IgnoreRules]] = []
            prefix = rel_dir + "/" if rel_dir else ""
            for name, kind in entries:
                if time.monotonic() > deadline:
                    stats.timed_out = True
                    return
                rel = prefix + name
                match = rel if rules_root == workspace.root else \
                    os.path.relpath(workspace.root / rel, rules_root).replace(os.sep, "/")
                if kind == "dir":
                    if name in ALWAYS_SKIPPED_DIRS:
                        continue
                    if filtering and rules.is_ignored(match, True):
                        stats.ignored += 1
                        continue
                    subdirs.append((rel, rules))
                    continue
                target = None
                if kind == "link":
                    try:
                        target = workspace.resolve(rel)
                    except ToolFailed:
                        stats.outside_links += 1
                        continue
                    if not os.path.isfile(target):
                        continue  # a link to a directory is not entered; to a device, skipped
                elif kind != "file":
                    continue  # FIFOs, sockets, devices
                if filtering and rules.is_ignored(match, False):
                    stats.ignored += 1
                    continue
                count += 1
                if count > max_files:
                    stats.truncated = True
                    return
                yield WalkedFile(rel, name, fd, target)
            stack.extend(reversed(subdirs))
        finally:
            os.close(fd)


def _kind(entry: os.DirEntry[str]) -> str:
    try:
        if entry.is_symlink():
            return "link"
        if entry.is_dir(follow_symlinks=False):
            return "dir"
        if entry.is_file(follow_symlinks=False):
            return "file"
    except OSError:
        pass
    return "other"
