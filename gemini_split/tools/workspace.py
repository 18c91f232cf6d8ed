"""The workspace: the one directory tree local tools may touch.

Every path a tool receives goes through :meth:`Workspace.resolve`, which
returns a real (symlink-free) absolute path inside the workspace or raises
:class:`ToolFailed` with code ``outside_workspace`` / ``invalid_path``.

Tools then reach that real path component by component from the root's
directory fd with ``O_NOFOLLOW`` (:meth:`Workspace.open_directory`,
:meth:`Workspace.open_regular`), so a directory swapped for a symlink after
resolving fails the call instead of redirecting it; writes create their
temporary file and rename it within the final directory's fd
(:meth:`Workspace.write_atomic`), which replaces a symlink at the name rather
than writing through it.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from gemini_split.files import replace_atomically

from .base import ToolFailed


class Workspace:
    """A confinement root, plus any ``include`` directories
    (``--include-directories``) the tools may also use. Each is resolved
    once, at construction. Relative paths are relative to ``root``; a path
    in an included directory is shown relative to ``root`` too
    (``../lib/x.py``), which resolves back to it.

    ``place`` names the workspace for a person who is not in it (a
    server's workspace: ``the server workspace /srv/…``); empty for the
    user's own directory, whose paths a person reads relative to it
    (:meth:`shown`)."""

    def __init__(self, root: str | os.PathLike[str], include: tuple[str | os.PathLike[str], ...] = (), *,
                 place: str = ""):
        self.root = Path(os.path.realpath(root))
        self.place = place
        if not self.root.is_dir():
            raise NotADirectoryError(f"workspace {root} is not a directory")
        self.roots: tuple[Path, ...] = (self.root,)
        for extra in include:
            real = Path(os.path.realpath(extra))
            if not real.is_dir():
                raise NotADirectoryError(f"included directory {extra} is not a directory")
            if real not in self.roots:
                self.roots += (real,)

    def add_root(self, directory: str | os.PathLike[str]) -> None:
        """Let the tools use ``directory`` too from now on (plan mode's plans
        directory, once it exists: :mod:`gemini_split.tools.plans`)."""
        real = Path(os.path.realpath(directory))
        if not real.is_dir():
            raise NotADirectoryError(f"{directory} is not a directory")
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

    def relative(self, real_path: Path) -> str:
        """How to show a resolved path to the model: relative to the root."""
        rel = os.path.relpath(real_path, self.root)
        return "." if rel == "." else rel

    def shown(self, real_path: Path) -> str:
        """How to show a resolved path to the person approving a call: as
        :meth:`relative` shows it in their own workspace; in another's
        (``place``), with where that is (``sub in the server workspace …``)."""
        rel = self.relative(real_path)
        if not self.place:
            return rel
        return self.place if rel == "." else f"{rel} in {self.place}"

    # --- file access on resolved paths ------------------------------------
    #
    # Resolving a path and then opening it by name is a race: between the
    # two, any directory on the way can be swapped for a symlink out of the
    # workspace. So nothing below opens a resolved path by name. It opens the
    # root, then each component relative to the directory before it with
    # O_NOFOLLOW (and O_DIRECTORY for directories): a symlink met on the way —
    # which resolve() would have removed, so it was swapped in since — fails
    # the call instead of being followed. Files are created, renamed and
    # listed relative to the directory fd reached that way.

    def open_directory(self, real_path: Path, shown: str) -> int:
        """A file descriptor (``O_DIRECTORY``, close-on-exec) of a resolved
        directory inside the workspace, reached component by component
        without following any symlink. The caller closes it.

        Raises :class:`ToolFailed` (``not_found``, ``not_a_directory``,
        ``invalid_path`` for a symlink swapped in, ``permission_denied``)."""
        return self._walk_to(*self._components(real_path, shown), shown, create=False)

    def _components(self, real_path: Path, shown: str) -> tuple[Path, list[str]]:
        """The root (or included directory) holding a resolved path, and the
        names leading from it to the path."""
        real_path = Path(os.path.normpath(real_path))
        root = self.root_of(real_path)
        if root is None:
            raise ToolFailed("outside_workspace", f"'{shown}' is outside the workspace {self.root}")
        rel = os.path.relpath(real_path, root)
        return root, ([] if rel == "." else rel.split(os.sep))

    def _walk_to(self, root: Path, parts: list[str], shown: str, *, create: bool) -> int:
        fd = os.open(root, _DIR_FLAGS)
        try:
            for part in parts:
                if create:
                    try:
                        os.mkdir(part, 0o777, dir_fd=fd)
                    except FileExistsError:
                        pass
                    except OSError as exc:
                        raise self._open_failed(shown, exc, directory=True) from None
                try:
                    nxt = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
                except NotADirectoryError:
                    try:
                        is_link = stat.S_ISLNK(os.stat(part, dir_fd=fd, follow_symlinks=False).st_mode)
                    except OSError:
                        is_link = True
                    if is_link:
                        raise self._open_failed(shown, OSError(errno.ELOOP, "symlink")) from None
                    raise ToolFailed("not_a_directory",
                                     f"a parent of '{shown}' exists and is not a directory") from None
                except OSError as exc:
                    raise self._open_failed(shown, exc, directory=True) from None
                os.close(fd)
                fd = nxt
            return fd
        except BaseException:
            os.close(fd)
            raise

    def _open_failed(self, shown: str, exc: OSError, *, directory: bool = False) -> ToolFailed:
        if isinstance(exc, FileNotFoundError):
            return ToolFailed("not_found", f"'{shown}' does not exist", "list the directory to see what is there")
        if isinstance(exc, PermissionError):
            return ToolFailed("permission_denied", f"'{shown}' cannot be opened: permission denied")
        if exc.errno in (errno.ELOOP, errno.EMLINK) or (directory and exc.errno == errno.ENOTDIR):
            # O_NOFOLLOW met a symlink (or a file where a directory was):
            # the path changed since it was resolved.
            return ToolFailed(
                "invalid_path",
                f"'{shown}' changed while in use (a symlink or file appeared on the way); refused",
                "try again; paths must stay inside the workspace",
            )
        if isinstance(exc, IsADirectoryError):
            return ToolFailed("is_a_directory", f"'{shown}' is a directory", "use list_directory to see its entries")
        return self._unresolvable(shown, exc)

    def open_regular(self, real_path: Path, shown: str) -> BinaryIO:
        """Open a resolved path for reading, refusing anything but a regular
        file: not a symlink, on the way or at the end, swapped in since
        :meth:`resolve` (``O_NOFOLLOW`` on every component), not a FIFO that
        would block, not a device.

        Raises :class:`ToolFailed` (``not_found``, ``is_a_directory``,
        ``not_a_regular_file``, ``invalid_path``, ``permission_denied``)."""
        root, parts = self._components(real_path, shown)
        if not parts:
            raise ToolFailed("is_a_directory", f"'{shown}' is a directory", "use list_directory to see its entries")
        dir_fd = self._walk_to(root, parts[:-1], shown, create=False)
        try:
            return self.open_regular_at(dir_fd, parts[-1], shown)
        finally:
            os.close(dir_fd)

    def open_regular_at(self, dir_fd: int, name: str, shown: str) -> BinaryIO:
        """:meth:`open_regular` for ``name`` in an already opened directory."""
        try:
            fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.EMLINK):
                raise ToolFailed("invalid_path", f"'{shown}' is a symlink (it changed since it was resolved); refused",
                                 "try again; paths must stay inside the workspace") from None
            raise self._open_failed(shown, exc) from None
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

        Missing parent directories are created, each relative to the one
        before and none through a symlink; the data goes to a temporary file
        created in the final directory's fd (``O_EXCL | O_NOFOLLOW``), is
        flushed to disk, gets the old file's permission bits (a new file gets
        the usual ``0o666`` minus the umask), and is renamed over the name
        within that same directory fd — so neither the temporary file nor the
        result can land outside the workspace, whatever is swapped meanwhile.
        Raises :class:`ToolFailed`."""
        root, parts = self._components(real_path, shown)
        if not parts:
            raise ToolFailed("is_a_directory", f"'{shown}' is a directory", "give the path of a file")
        name = parts[-1]
        dir_fd = self._walk_to(root, parts[:-1], shown, create=True)
        try:
            try:
                st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            except FileNotFoundError:
                st = None
            except OSError as exc:
                raise self._unresolvable(shown, exc) from None
            if st is not None and stat.S_ISDIR(st.st_mode):
                raise ToolFailed("is_a_directory", f"'{shown}' is a directory", "give the path of a file")
            if st is not None and not stat.S_ISREG(st.st_mode):
                raise ToolFailed("not_a_regular_file", f"'{shown}' exists and is not a regular file")
            mode = stat.S_IMODE(st.st_mode) if st is not None else None
            try:
                replace_atomically(Path(name), data, mode=mode, dir_fd=dir_fd)
            except PermissionError:
                raise ToolFailed("permission_denied", f"'{shown}' cannot be written: permission denied") from None
            except OSError as exc:
                raise ToolFailed("write_failed", f"'{shown}' could not be written: {exc.strerror}") from None
        finally:
            os.close(dir_fd)


_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | _CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | _CLOEXEC
