"""Helpers the file tools share: text detection, reading, and a confined,
``.gitignore``-aware walk of the workspace.

Everything here is blocking; tools call it through ``trio.to_thread``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..gitignore import IgnoreRules
from .base import ToolFailed

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
    if not os.path.lexists(real):
        return None
    with workspace.open_regular(real, shown) as f:
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
        rules.add_file(root / ".git" / "info" / "exclude")
        rel = os.path.relpath(directory, root)
        parts = [] if rel == "." else rel.split(os.sep)
        current = root
        for i in range(len(parts) + 1):
            if i:
                current = current / parts[i - 1]
            _add_gitignore(rules, workspace, current)
    if gemini:
        _add_gitignore(rules, workspace, root, GEMINI_IGNORE_FILE)
    return rules


def _add_gitignore(rules: IgnoreRules, workspace: Workspace, directory: Path, name: str = ".gitignore") -> None:
    path = directory / name
    # An ignore file that is a symlink out of the workspace is not read.
    if os.path.islink(path) and not workspace.contains_link_target(path):
        return
    base = os.path.relpath(directory, workspace.root_of(directory) or workspace.root)
    rules.add_file(path, "" if base == "." else base.replace(os.sep, "/"))


@dataclass
class WalkStats:
    """What a walk left out, for the notes tools add to their results."""

    ignored: int = 0
    outside_links: int = 0
    truncated: bool = False
    timed_out: bool = False
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class WalkedFile:
    real: Path  # what to open (a symlink's target, inside the workspace)
    rel: str  # shown to the model: relative to the workspace root, '/'-separated


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
    yielded only if its target is inside the workspace (as that target).
    ``.git`` is always skipped; with ``respect_git_ignore``, so is whatever
    ``.gitignore`` files and ``.git/info/exclude`` ignore, and with
    ``respect_gemini_ignore`` what the root's ``.geminiignore`` ignores. Stops after
    ``max_files`` files or ``time_budget`` seconds, noting it in ``stats``.
    """
    stats = stats if stats is not None else WalkStats()
    deadline = time.monotonic() + time_budget
    filtering = respect_git_ignore or respect_gemini_ignore
    root_rules = (load_ignore_rules(workspace, start, git=respect_git_ignore, gemini=respect_gemini_ignore)
                  if filtering else IgnoreRules())
    rules_root = workspace.root_of(start) or workspace.root
    stack: list[tuple[Path, IgnoreRules]] = [(start, root_rules)]
    count = 0
    first = True
    while stack:
        directory, rules = stack.pop()
        if respect_git_ignore and not first and os.path.lexists(directory / ".gitignore"):
            rules = rules.copy()
            _add_gitignore(rules, workspace, directory)
        first = False
        try:
            with os.scandir(directory) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            stats.errors.append(f"{workspace.relative(directory)}: {exc.strerror}")
            continue
        subdirs: list[tuple[Path, IgnoreRules]] = []
        for entry in entries:
            if time.monotonic() > deadline:
                stats.timed_out = True
                return
            path = Path(entry.path)
            rel = os.path.relpath(path, workspace.root).replace(os.sep, "/")
            # Ignore rules are relative to the root (or included directory) walked.
            match = rel if rules_root == workspace.root else os.path.relpath(path, rules_root).replace(os.sep, "/")
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir:
                if entry.name in ALWAYS_SKIPPED_DIRS:
                    continue
                if filtering and rules.is_ignored(match, True):
                    stats.ignored += 1
                    continue
                subdirs.append((path, rules))
                continue
            real = path
            if is_link:
                if not workspace.contains_link_target(path):
                    stats.outside_links += 1
                    continue
                real = Path(os.path.realpath(path))
                if not real.is_file():
                    continue  # a link to a directory is not entered; to a device, skipped
            elif not entry.is_file(follow_symlinks=False):
                continue  # FIFOs, sockets, devices
            if filtering and rules.is_ignored(match, False):
                stats.ignored += 1
                continue
            count += 1
            if count > max_files:
                stats.truncated = True
                return
            yield WalkedFile(real, rel)
        stack.extend(reversed(subdirs))
