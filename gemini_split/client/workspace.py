"""The workspace: the one directory tree local tools may touch.

Every path a tool receives goes through :meth:`Workspace.resolve`, which
returns a real (symlink-free) absolute path inside the workspace or raises
:class:`ToolFailed` with code ``outside_workspace`` / ``invalid_path``.

Tools then open that real path, never the name they were given, so a symlink
in the name cannot redirect them afterwards; opening uses ``O_NOFOLLOW`` and
checks the file type (:meth:`Workspace.open_regular`), and writes replace the
final name atomically (:meth:`Workspace.write_atomic`), which replaces a
symlink rather than writing through it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from gemini_split.files import replace_atomically

from .tools.base import ToolFailed


class Workspace:
    """A confinement root, plus any ``include`` directories
    (``--include-directories``) the tools may also use. Each is resolved
    once, at construction. Relative paths are relative to ``root``; a path
    in an included directory is shown relative to ``root`` too
    (``../lib/x.py``), which resolves back to it."""

    def __init__(self, root: str | os.PathLike[str], include: tuple[str | os.PathLike[str], ...] = ()):
        self.root = Path(os.path.realpath(root))
        if not self.root.is_dir():
            raise NotADirectoryError(f"workspace {root} is not a directory")
        self.roots: tuple[Path, ...] = (self.root,)
        for extra in include:
            real = Path(os.path.realpath(extra))
            if not real.is_dir():
                raise NotADirectoryError(f"included directory {extra} is not a directory")
            if real not in self.roots:
                self.roots += (real,)

    def resolve(self, path: str, *, must_exist: bool = False) -> Path:
        """``path`` (relative to the root, or absolute) as a real path inside
        the workspace.

        Refused: an empty path, NUL bytes, ``~`` expansion, a symlink loop,
        and anything whose real path — after every symlink, including one in
        the middle of the path or a dangling one — is not the root or below
        it. ``must_exist`` also refuses a path that does not exist
        (``not_found``).
        """
        if not isinstance(path, str) or path.strip() == "":
            raise ToolFailed("invalid_path", "the path is empty", "give a path relative to the workspace root")
        if "\x00" in path:
            raise ToolFailed("invalid_path", "the path contains a NUL byte", "give a plain path without control characters")
        if path.startswith("~"):
            raise ToolFailed(
                "outside_workspace",
                f"'{path}': home-directory paths are not allowed",
                f"use a path relative to the workspace root {self.root} (for a file whose "
                "name starts with '~', write './~name')",
            )
        candidate = Path(path) if os.path.isabs(path) else self.root / path
        real = self._realpath(candidate, path)
        if not self.contains(real):
            raise ToolFailed(
                "outside_workspace",
                f"'{path}' is outside the workspace {self.root}",
                "only paths inside the workspace can be used; give a path relative to its root",
            )
        if must_exist and not os.path.lexists(real):
            raise ToolFailed("not_found", f"'{path}' does not exist", "list the directory to see what is there")
        # 'notes.txt/' names a directory, as it does for the kernel: a file
        # there is an error (pathlib would silently drop the slash).
        if path.endswith(("/", "/.", os.sep)) and os.path.lexists(real) and not os.path.isdir(real):
            raise ToolFailed(
                "not_a_directory", f"'{path}' ends with '/' but {self.relative(real)} is not a directory",
                "drop the trailing '/' to name the file",
            )
        return real

    def resolve_file(self, path: str, *, must_exist: bool = False) -> Path:
        """:meth:`resolve` for a path that must name a file: a trailing
        ``/`` (a directory name) is refused even when nothing is there yet
        (``invalid_path``), and an existing directory is refused
        (``is_a_directory``)."""
        real = self.resolve(path, must_exist=must_exist)
        if path.endswith(("/", "/.", os.sep)):
            raise ToolFailed("invalid_path", f"'{path}' ends with '/', which names a directory, not a file",
                             "drop the trailing '/' to name a file")
        if os.path.isdir(real):
            raise ToolFailed("is_a_directory", f"'{path}' is a directory", "use list_directory to see its entries")
        return real

    def _realpath(self, candidate: Path, shown: str) -> Path:
        # strict=True reports a symlink loop (ELOOP) wherever it sits; a path
        # that does not exist yet (a file to create, or a dangling symlink)
        # falls back to the non-strict form, which still follows every link
        # that exists — so a dangling link pointing outside resolves outside.
        try:
            return Path(os.path.realpath(candidate, strict=True))
        except (FileNotFoundError, NotADirectoryError):
            pass
        except OSError as exc:
            raise self._unresolvable(shown, exc) from None
        except ValueError as exc:
            raise ToolFailed("invalid_path", f"'{shown}' cannot be resolved: {exc}") from None
        try:
            real = Path(os.path.realpath(candidate))
        except (OSError, ValueError) as exc:
            raise self._unresolvable(shown, exc) from None
        # Belt and braces: the part of the result that exists must be free of
        # symlinks; if not, realpath gave up on something (a loop behind a
        # missing component, a race) and the path is not trustworthy.
        existing = real
        while not os.path.lexists(existing) and existing != existing.parent:
            existing = existing.parent
        if os.path.islink(existing):
            raise ToolFailed("invalid_path", f"'{shown}' cannot be resolved: it ends in an unresolvable symlink")
        return real

    @staticmethod
    def _unresolvable(shown: str, exc: BaseException) -> ToolFailed:
        if isinstance(exc, OSError) and exc.errno == errno.ELOOP:
            return ToolFailed("invalid_path", f"'{shown}' cannot be resolved: it contains a symlink loop", "use another path")
        if isinstance(exc, PermissionError):
            return ToolFailed("permission_denied", f"'{shown}' cannot be resolved: permission denied")
        return ToolFailed("invalid_path", f"'{shown}' cannot be resolved: {exc.strerror if isinstance(exc, OSError) else exc}")

    def contains(self, real_path: Path) -> bool:
        """Whether an already-resolved path is a root or inside one.

        Compares whole path components, so ``/work/ws-other`` is not inside
        ``/work/ws``."""
        return self.root_of(real_path) is not None

    def root_of(self, real_path: Path) -> Path | None:
        """The (deepest) root holding an already-resolved path, or None."""
        holders = [r for r in self.roots if real_path == r or r in real_path.parents]
        return max(holders, key=lambda r: len(r.parts)) if holders else None

    def contains_link_target(self, path: Path) -> bool:
        """Whether ``path`` (inside the workspace, maybe a symlink) really
        resolves inside it — for walkers that meet symlinks while listing."""
        try:
            return self.contains(Path(os.path.realpath(path, strict=True)))
        except (OSError, ValueError):
            return False

    def relative(self, real_path: Path) -> str:
        """How to show a resolved path to the model: relative to the root."""
        rel = os.path.relpath(real_path, self.root)
        return "." if rel == "." else rel

    # --- file access on resolved paths ------------------------------------

    def open_regular(self, real_path: Path, shown: str) -> BinaryIO:
        """Open a resolved path for reading, refusing anything but a regular
        file: not a symlink swapped in since :meth:`resolve` (``O_NOFOLLOW``),
        not a FIFO that would block, not a device.

        Raises :class:`ToolFailed` (``not_found``, ``is_a_directory``,
        ``not_a_regular_file``, ``permission_denied``)."""
        flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(real_path, flags)
        except FileNotFoundError:
            raise ToolFailed("not_found", f"'{shown}' does not exist", "list the directory to see what is there") from None
        except IsADirectoryError:
            raise ToolFailed("is_a_directory", f"'{shown}' is a directory", "use list_directory to see its entries") from None
        except PermissionError:
            raise ToolFailed("permission_denied", f"'{shown}' cannot be read: permission denied") from None
        except OSError as exc:
            raise self._unresolvable(shown, exc) from None
        try:
            mode = os.fstat(fd).st_mode
            if stat.S_ISDIR(mode):
                raise ToolFailed("is_a_directory", f"'{shown}' is a directory", "use list_directory to see its entries")
            if not stat.S_ISREG(mode):
                raise ToolFailed("not_a_regular_file", f"'{shown}' is not a regular file (a device, FIFO or socket)")
            return os.fdopen(fd, "rb")
        except BaseException:
            os.close(fd)
            raise

    def write_atomic(self, real_path: Path, data: bytes, shown: str) -> None:
        """Replace (or create) the file at a resolved path with ``data`` so
        that a crash leaves either the old file or the new one, never half.

        The data goes to a temporary file in the same directory, is flushed
        to disk, gets the old file's permission bits (a new file gets the
        usual ``0o666`` minus the umask), and is renamed over the name.
        Missing parent directories are created (inside the workspace: the
        path is already resolved). Raises :class:`ToolFailed`."""
        parent = real_path.parent
        if not self.contains(parent):
            raise ToolFailed("outside_workspace", f"'{shown}' is outside the workspace {self.root}")
        try:
            st = os.lstat(real_path)
        except FileNotFoundError:
            st = None
        except NotADirectoryError:
            raise ToolFailed("not_a_directory", f"a parent of '{shown}' exists and is not a directory") from None
        except OSError as exc:
            raise self._unresolvable(shown, exc) from None
        if st is not None and stat.S_ISDIR(st.st_mode):
            raise ToolFailed("is_a_directory", f"'{shown}' is a directory", "give the path of a file")
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise ToolFailed("not_a_regular_file", f"'{shown}' exists and is not a regular file")
        try:
            os.makedirs(parent, exist_ok=True)
        except FileExistsError:
            raise ToolFailed("not_a_directory", f"a parent of '{shown}' exists and is not a directory") from None
        except PermissionError:
            raise ToolFailed("permission_denied", f"cannot create the directory of '{shown}': permission denied") from None
        # makedirs followed whatever it found; make sure it stayed inside.
        if not self.contains(Path(os.path.realpath(parent))):
            raise ToolFailed("outside_workspace", f"'{shown}' is outside the workspace {self.root}")
        mode = stat.S_IMODE(st.st_mode) if st is not None else None
        try:
            replace_atomically(real_path, data, mode=mode)
        except PermissionError:
            raise ToolFailed("permission_denied", f"'{shown}' cannot be written: permission denied") from None
        except OSError as exc:
            raise ToolFailed("write_failed", f"'{shown}' could not be written: {exc.strerror}") from None
