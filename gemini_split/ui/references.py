"""``@path`` references in a prompt, read locally and attached as gemini-cli does.

``explain @src/app.py and @docs/`` is sent as the text the user typed,
followed by the files' content::

    explain @src/app.py and @docs/
    --- Content from referenced files ---
    Content from @src/app.py:
    …
    Content from @docs/intro.md:
    …
    --- End of content ---

A reference starts with ``@`` at the start of the prompt or after a blank
(so ``user@example.com`` is not one) and runs to the next blank, comma,
semicolon, bracket or final period; ``\\ `` escapes a space. Files are read
with the client's own ``read_file`` tool, so the workspace confinement,
binary detection and size limits are the tools' (a path outside the
workspace is refused). An image or a PDF named directly is sent as inline
data (an :class:`~gemini_split.protocol.Attachment`), as gemini-cli does,
up to :data:`MAX_INLINE_BYTES` per prompt. A directory attaches its text files, walked with
.gitignore respected, up to :data:`MAX_FILES`. A git-ignored path, a
missing one, a binary file and anything refused are left out and reported;
the prompt still goes.

``@server:uri`` (or a bare URI a server lists) names an MCP server's
resource, as in gemini-cli: it is read with ``resources/read`` and its text
added as ``Content from @uri:`` (a binary one as a one-line placeholder).
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from gemini_split.tools.builtin._files import load_ignore_rules, looks_binary, walk_files
from gemini_split.tools.base import Tool, ToolContext, ToolFailed
from gemini_split.tools.workspace import Workspace
from gemini_split.protocol import Attachment

from .safe_text import visible

if TYPE_CHECKING:
    from gemini_split.tools.executor import ToolExecutor
    from gemini_split.tools.mcp.sources import McpServers

REFERENCE = re.compile(r"(?:(?<=\s)|^)@((?:\\.|[^\s,;!?()\[\]{}.\\]|\.(?!$|\s))+)")

CONTENT_START = "--- Content from referenced files ---"
CONTENT_END = "--- End of content ---"
#: Files one directory reference attaches at most.
MAX_FILES = 50
#: Characters of file content one prompt attaches at most.
MAX_CHARS = 400_000
#: Bytes of inline data (images, PDFs) one prompt attaches at most: with
#: base64 and the text, well under the protocol's 16 MiB message limit.
MAX_INLINE_BYTES = 8 * 1024 * 1024
#: What is sent as inline data when named directly, by extension.
INLINE_TYPES = {
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
    ".webp": "image/webp", ".heic": "image/heic", ".heif": "image/heif", ".pdf": "application/pdf",
}


@dataclass
class Expanded:
    """A prompt with its references read."""

    prompt: str
    #: Workspace-relative paths attached.
    attached: list[str] = field(default_factory=list)
    #: ``(path, why)`` for each reference left out.
    skipped: list[tuple[str, str]] = field(default_factory=list)
    #: Images and PDFs, sent as inline data with the prompt.
    attachments: list[Attachment] = field(default_factory=list)


def find_references(text: str) -> list[str]:
    """The paths ``text`` refers to with ``@``, in order, unescaped."""
    return [re.sub(r"\\(.)", r"\1", m.group(1)) for m in REFERENCE.finditer(text)]


async def expand_references(text: str, workspace: Workspace, read_file: Tool,
                            paths: list[str] | None = None, mcp: McpServers | None = None) -> Expanded:
    """``text`` with the content of its ``@`` references appended (see the
    module docstring). Unchanged when it has none that can be read.
    ``paths``: read these instead of the references found in ``text`` (a
    custom command's ``@{…}``). ``mcp``: the servers whose resources
    ``@server:uri`` may name."""
    paths = find_references(text) if paths is None else paths
    result = Expanded(text)
    if not paths:
        return result
    pieces: list[str] = []
    budget = MAX_CHARS
    inline_budget = MAX_INLINE_BYTES

    async def attach(shown: str) -> None:
        nonlocal budget
        if budget <= 0:
            result.skipped.append((shown, f"over the {MAX_CHARS:,}-character limit for one prompt"))
            return
        try:
            content = await read_file.run({"file_path": shown}, ToolContext(workspace=workspace))
        except ToolFailed as failed:
            result.skipped.append((shown, str(failed)))
            return
        content = str(content)[:budget]
        budget -= len(content)
        pieces.append(f"\nContent from @{shown}:\n{content.rstrip()}\n")
        result.attached.append(shown)

    for shown in dict.fromkeys(paths):
        if mcp is not None and ":" in shown:
            await mcp.wait_started()
            found = mcp.resource(shown)
            if found is not None:
                await _attach_resource(found, shown, pieces, result)
                continue
        try:
            real = workspace.resolve(shown, must_exist=True)
        except ToolFailed as failed:
            result.skipped.append((shown, str(failed)))
            continue
        rel = workspace.relative(real)
        if _ignored(workspace, real):
            result.skipped.append((shown, "ignored by .gitignore"))
            continue
        mime = INLINE_TYPES.get(real.suffix.lower())
        if mime and real.is_file():
            try:
                data = await trio.to_thread.run_sync(_read_inline, workspace, real, rel, inline_budget)
            except ToolFailed as failed:
                result.skipped.append((rel, str(failed)))
                continue
            inline_budget -= len(data)
            result.attachments.append(Attachment(mime_type=mime, data=base64.b64encode(data).decode()))
            pieces.append(f"\nContent from @{rel}: ({mime}, {len(data):,} bytes, attached as inline data)\n")
            result.attached.append(rel)
        elif real.is_dir():
            files = await trio.to_thread.run_sync(_walk, workspace, real)
            if not files:
                result.skipped.append((shown, "no files in it (or all of them git-ignored)"))
            for name in files[:MAX_FILES]:
                await attach(name)
            if len(files) > MAX_FILES:
                result.skipped.append((f"{rel}/…", f"{len(files) - MAX_FILES} more files: only {MAX_FILES} "
                                                   "are attached per directory"))
        else:
            await attach(rel)
    if pieces:
        result.prompt = "\n".join([text, CONTENT_START, *pieces, CONTENT_END])
    return result


async def _attach_resource(found: tuple, shown: str, pieces: list[str], result: Expanded) -> None:
    from gemini_split.tools.mcp.resources import contents_as_text

    server, resource = found
    try:
        contents = await server.read_resource(resource.uri)
    except ToolFailed as failed:
        result.skipped.append((shown, f"Error reading resource {resource.uri}: {failed}"))
        return
    pieces.append(f"\nContent from @{resource.uri}:\n{contents_as_text(contents)[:MAX_CHARS].rstrip()}\n")
    result.attached.append(shown)


async def attach_references(prompt: str, executor: ToolExecutor,
                            report: Callable[[str, bool], None],
                            mcp: McpServers | None = None) -> tuple[str, tuple[Attachment, ...]]:
    """:func:`expand_references` with the client's workspace and
    ``read_file`` tool: the prompt to send and its inline attachments. Each
    path attached or left out is reported as ``report(line, is_warning)``
    (control characters made visible)."""
    if "@" not in prompt:
        return prompt, ()
    read_file = executor.registry.get("read_file")
    if read_file is None:
        return prompt, ()
    expanded = await expand_references(prompt, executor.workspace, read_file, mcp=mcp)
    for path in expanded.attached:
        report(f"+ attached @{visible(path, newlines=False)}", False)
    for path, why in expanded.skipped:
        report(f"@{visible(path, newlines=False)} not attached: {visible(why)}", True)
    return expanded.prompt, tuple(expanded.attachments)


def _read_inline(workspace: Workspace, real: Path, shown: str, budget: int) -> bytes:
    size = real.stat().st_size
    if size > budget:
        raise ToolFailed("too_large", f"{size:,} bytes is over the {MAX_INLINE_BYTES:,}-byte limit for "
                                      "inline data in one prompt")
    with workspace.open_regular(real, shown) as f:
        data = f.read(budget + 1)
    if len(data) > budget:
        raise ToolFailed("too_large", f"over the {MAX_INLINE_BYTES:,}-byte limit for inline data in one prompt")
    return data


def _ignored(workspace: Workspace, real: Path) -> bool:
    if real == workspace.root:
        return False
    rel = workspace.relative(real)
    parts = rel.split("/")
    if ".git" in parts:
        return True
    rules = load_ignore_rules(workspace, real.parent)
    return any(rules.is_ignored("/".join(parts[:i]), True) for i in range(1, len(parts))) \
        or rules.is_ignored(rel, real.is_dir())


def _walk(workspace: Workspace, directory: Path) -> list[str]:
    names = []
    for walked in walk_files(workspace, directory, max_files=MAX_FILES * 4, time_budget=5.0):
        try:
            with walked.open(workspace) as f:  # confined: no symlink swapped in is followed
                if looks_binary(f.read(4096)):
                    continue
        except (OSError, ToolFailed):
            continue
        names.append(walked.rel)
    return names


def complete_reference(word: str, workspace_root: Path, limit: int = 50,
                       include: tuple[Path, ...] = ()) -> list[str]:
    """Completions for ``word`` (what follows ``@``): entries of its
    directory inside the workspace — the root, or an ``include`` directory
    (``--include-directories``, ``/directory add``) written absolute or
    relative to the root — not .git or git-ignored, directories with a
    trailing ``/``."""
    directory, _, prefix = word.rpartition("/")
    if word.startswith("/") and not directory:
        directory = "/"
    base = (workspace_root / directory).resolve() if directory else workspace_root
    try:
        workspace = Workspace(workspace_root, include)
        if not workspace.contains(base):
            return []
        rules = load_ignore_rules(workspace, base)
        entries = sorted(os.scandir(base), key=lambda e: e.name)
    except (OSError, ToolFailed):
        return []
    out = []
    for entry in entries:
        if not entry.name.startswith(prefix) or entry.name == ".git":
            continue
        if entry.name.startswith(".") and not prefix.startswith("."):
            continue
        is_dir = entry.is_dir()
        rel = f"{directory.rstrip('/')}/{entry.name}" if directory else entry.name
        if rules.is_ignored(os.path.relpath(entry.path, workspace.root).replace(os.sep, "/"), is_dir):
            continue
        out.append(rel.replace(" ", "\\ ") + ("/" if is_dir else ""))
        if len(out) >= limit:
            break
    return out
