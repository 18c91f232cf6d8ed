"""MCP servers' tool declarations, cached so a run need not start the servers.

Starting an MCP server (and importing the SDK to speak to it) takes seconds;
a ``-p`` that never calls one of its tools should not pay that. The tools a
server listed are kept in ``<state dir>/mcp-cache/<key>.json`` (directory
``0700``, files ``0600``), where the key is a hash of everything that can
change what the server lists:

* how it is reached: ``command``, ``args``, ``env``, the resolved ``cwd``,
  or the URL, ``type`` and ``headers``;
* the files it runs: the size and mtime of the resolved command and of each
  argument that names an existing file (``python server.py``).

A changed configuration or an edited/upgraded server script is therefore a
different key: it is started and listed again. An entry older than
:data:`MAX_AGE` is not used either (a server run through ``npx`` or
``uvx`` can change without any file here changing), and every live start
(a tool call, ``/mcp``, ``gemini-split mcp list``) rewrites the entry.

The files hold only tool names, descriptions and schemas, and the names,
descriptions and arguments of its prompts and resources — never the
configuration (``env`` and ``headers`` carry secrets; they only feed the
hash). A file that cannot be read or decoded is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    from gemini_split.userfiles.settings import MCPServerSettings

log = logging.getLogger(__name__)

#: Seconds an entry is trusted without the server being started again.
MAX_AGE = 24 * 3600.0
#: Entries this large are not read (a server listing megabytes of schemas
#: is started instead).
MAX_ENTRY_BYTES = 8 * 1024 * 1024
_FORMAT = 2  # 2: prompts and resources beside the tools


class CachedTool(msgspec.Struct, frozen=True):
    """One tool as the server listed it; ``problem`` says why it cannot be
    used (an invalid input schema), checked once when it was listed."""

    name: str
    description: str = ""
    input_schema: Any = None
    problem: str | None = None
    #: ``annotations.destructiveHint`` was true (see ``sources._destructive``).
    destructive: bool = False


class CachedPrompt(msgspec.Struct, frozen=True):
    """One prompt as the server listed it (``prompts/list``): its name,
    description and arguments (``{"name", "description", "required"}``)."""

    name: str
    description: str = ""
    arguments: list[dict[str, Any]] = msgspec.field(default_factory=list)


class CachedResource(msgspec.Struct, frozen=True):
    """One resource as the server listed it (``resources/list``)."""

    uri: str
    name: str = ""
    description: str = ""
    mime_type: str | None = None


class Listing(msgspec.Struct):
    """What a server offers: its tools, prompts and resources."""

    tools: list[CachedTool] = msgspec.field(default_factory=list)
    prompts: list[CachedPrompt] = msgspec.field(default_factory=list)
    resources: list[CachedResource] = msgspec.field(default_factory=list)


class _Entry(msgspec.Struct):
    format: int
    written: float
    tools: list[CachedTool]
    prompts: list[CachedPrompt] = msgspec.field(default_factory=list)
    resources: list[CachedResource] = msgspec.field(default_factory=list)


def cache_key(config: MCPServerSettings, transport: str, cwd: Path) -> str:
    """The hex key of ``config`` started in ``cwd`` (see the module's docstring)."""
    files: list[Any] = []
    if transport == "stdio" and config.command:
        env_path = (config.env or {}).get("PATH", os.environ.get("PATH", os.defpath))
        command = config.command if os.sep in config.command else _which(config.command, env_path)
        for name in [command, *config.args]:
            if not name:
                continue
            path = Path(os.path.expanduser(name))
            path = path if path.is_absolute() else cwd / path
            try:
                st = path.stat()
            except (OSError, ValueError):
                continue
            if path.is_file():
                files.append([str(path), st.st_mtime_ns, st.st_size])
    identity = {
        "format": _FORMAT, "transport": transport, "command": config.command, "args": list(config.args),
        "env": dict(config.env or {}), "cwd": str(cwd), "url": config.url, "http_url": config.http_url,
        "type": config.type, "headers": dict(config.headers or {}), "files": files,
    }
    return hashlib.sha256(msgspec.json.encode(identity, order="sorted")).hexdigest()


def load(directory: Path, key: str, *, now: float | None = None) -> Listing | None:
    """The listing cached under ``key``, or None (no entry, too old, unreadable)."""
    path = directory / f"{key}.json"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_ENTRY_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_ENTRY_BYTES:
        return None
    try:
        entry = msgspec.json.decode(data, type=_Entry)
    except msgspec.DecodeError as exc:
        log.info("MCP cache entry %s is unreadable (%s); the server will be started", path, exc)
        return None
    now = time.time() if now is None else now
    if entry.format != _FORMAT or not (0 <= now - entry.written <= MAX_AGE):
        return None
    return Listing(entry.tools, entry.prompts, entry.resources)


def store(directory: Path, key: str, listing: Listing) -> None:
    """Write the entry for ``key`` (atomically, ``0600``). Best effort: a
    state directory that cannot be written only costs the next run a start."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        data = msgspec.json.encode(_Entry(_FORMAT, time.time(), listing.tools, listing.prompts,
                                             listing.resources))
        temp = directory / f".{key}.{os.getpid()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temp, directory / f"{key}.json")
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
    except OSError as exc:
        log.info("MCP cache entry for %s not written: %s", key[:12], exc)


def forget(directory: Path, key: str) -> None:
    """Remove the entry for ``key`` (a server that no longer starts)."""
    try:
        (directory / f"{key}.json").unlink(missing_ok=True)
    except OSError as exc:
        log.info("MCP cache entry for %s not removed: %s", key[:12], exc)


def _which(command: str, path: str) -> str | None:
    """``shutil.which`` without importing shutil (this is on every run's path)."""
    for directory in path.split(os.pathsep):
        candidate = os.path.join(directory or ".", command)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None
