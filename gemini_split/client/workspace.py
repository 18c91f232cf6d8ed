"""The workspace: the one directory tree local tools may touch.

Every path a tool receives goes through :meth:`Workspace.resolve`, which
returns a real (symlink-free) absolute path inside the workspace or raises
:class:`ToolFailed` with code ``outside_workspace`` / ``invalid_path``.
"""

from __future__ import annotations

import os
from pathlib import Path

from .tools.base import ToolFailed


class Workspace:
    """A confinement root. ``root`` is resolved once, at construction."""

    def __init__(self, root: str | os.PathLike[str]):
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise NotADirectoryError(f"workspace {root} is not a directory")

    def resolve(self, path: str, *, must_exist: bool = False) -> Path:
        """``path`` (relative to the root, or absolute) as a real path inside
        the workspace.

        Refused: NUL bytes, ``~`` expansion, and anything whose real path —
        after every symlink, including one in the middle of the path or a
        dangling one — is not the root or below it.
        """
        if not isinstance(path, str) or path == "":
            raise ToolFailed("invalid_path", "the path is empty", "give a path relative to the workspace root")
        if "\x00" in path:
            raise ToolFailed("invalid_path", "the path contains a NUL byte")
        if path.startswith("~"):
            raise ToolFailed(
                "outside_workspace",
                f"'{path}': home-directory paths are not allowed",
                f"use a path inside the workspace {self.root}",
            )
        candidate = Path(path) if os.path.isabs(path) else self.root / path
        try:
            # realpath follows every symlink, dangling ones included (strict=False
            # still resolves the links that exist), and normalises '..'.
            real = Path(os.path.realpath(candidate))
        except (OSError, ValueError) as exc:
            raise ToolFailed("invalid_path", f"'{path}' cannot be resolved: {exc}") from None
        if not self.contains(real):
            raise ToolFailed(
                "outside_workspace",
                f"'{path}' is outside the workspace {self.root}",
                "only paths inside the workspace can be used",
            )
        if must_exist and not os.path.lexists(real):
            raise ToolFailed("not_found", f"'{path}' does not exist", "list the directory to see what is there")
        return real

    def contains(self, real_path: Path) -> bool:
        """Whether an already-resolved path is the root or inside it.

        Compares whole path components, so ``/work/ws-other`` is not inside
        ``/work/ws``."""
        return real_path == self.root or self.root in real_path.parents

    def relative(self, real_path: Path) -> str:
        """How to show a resolved path to the model: relative to the root."""
        rel = os.path.relpath(real_path, self.root)
        return "." if rel == "." else rel
