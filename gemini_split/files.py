"""The small files gemini-split reads and writes itself (settings, policies,
profiles, commands): read bounded and without blocking, replaced whole."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def read_bounded(path: str | Path, limit: int) -> bytes:
    """At most ``limit + 1`` bytes of the regular file ``path``, so a caller
    can tell a file over ``limit`` from one at it.

    The file is opened without blocking and checked before it is read: a
    FIFO, a device or a directory named like a configuration file raises
    ``OSError`` with ``strerror`` "not a regular file" instead of hanging
    the start-up or reading forever. Other failures raise as ``open`` does
    (``FileNotFoundError``, ``PermissionError`` …)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
    except BaseException:
        os.close(fd)
        raise
    with open(fd, "rb") as f:
        return f.read(limit + 1)


def read_toml(path: str | Path, limit: int) -> dict:
    """The TOML table of the file ``path`` (at most ``limit`` bytes, read
    as :func:`read_bounded` does). Raises ``ValueError`` with the reason a
    person reads after the path: "cannot read: …", "larger than N KiB",
    "not UTF-8 text", "not valid TOML: …"."""
    import tomllib  # lazy_imports.EDGES: only where there are TOML files

    try:
        data = read_bounded(path, limit)
    except OSError as exc:
        raise ValueError(f"cannot read: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise ValueError(f"larger than {limit // 1024} KiB")
    try:
        return tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not UTF-8 text") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"not valid TOML: {exc}") from None


def replace_atomically(path: Path, data: bytes, *, mode: int | None = None, dir_fd: int | None = None) -> None:
    """Make ``path`` hold exactly ``data``, all or nothing.

    The data goes to a new temporary file beside ``path`` (created with
    ``O_EXCL | O_NOFOLLOW``, so nothing planted there is followed), is
    flushed to disk, gets ``mode`` (default: a new file's mode under the
    umask), and is renamed over ``path``; then the directory is synced so the
    rename survives a crash. On any failure the temporary file is removed,
    ``path`` is untouched, and the ``OSError`` propagates.

    A ``mode`` is applied before any data is written, so a secret never sits
    in a file more readable than asked.

    With ``dir_fd``, ``path`` is a plain name in that open directory, and the
    temporary file, the rename and the sync all happen relative to it: no
    path is looked up again by name."""
    if dir_fd is not None and (path.parent != Path(".") or path.name in ("", ".", "..")):
        raise ValueError("with dir_fd, path must be a plain name")
    parent = path.parent
    tmp = parent / f".{path.name}.{os.urandom(6).hex()}.tmp"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(tmp, flags, 0o600 if mode is not None else 0o666, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise
    if dir_fd is not None:
        try:
            os.fsync(dir_fd)
        except OSError:
            pass
    else:
        _fsync_directory(parent)


def _fsync_directory(path: Path) -> None:
    """Make a rename durable; best effort (not every platform allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
