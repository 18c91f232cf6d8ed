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
workspace is refused). A directory attaches its text files, walked with
.gitignore respected, up to :data:`MAX_FILES`. A git-ignored path, a
missing one, a binary file and anything refused are left out and reported;
the prompt still goes.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from gemini_split.client.tools.base import Tool, ToolContext, ToolFailed
from gemini_split.client.workspace import Workspace

from .safe_text import visible

if TYPE_CHECKING:
    from gemini_split.client.executor import ToolExecutor

REFERENCE = re.compile(r"(?:(?<=\s)|^)@((?:\\.|[^\s,;!?()\[\]{}.\\]|\.(?!$|\s))+)")

CONTENT_START = "--- Content from referenced files ---"
CONTENT_END = "--- End of content ---"
#: Files one directory reference attaches at most.
MAX_FILES = 50
#: Characters of file content one prompt attaches at most.
MAX_CHARS = 400_000


@dataclass
class Expanded:
    """A prompt with its references read."""

    prompt: str
    #: Workspace-relative paths attached.
    attached: list[str] = field(default_factory=list)
    #: ``(path, why)`` for each reference left out.
    skipped: list[tuple[str, str]] = field(default_factory=list)


def find_references(text: str) -> list[str]:
    """The paths ``text`` refers to with ``@``, in order, unescaped."""
    return [re.sub(r"\\(.)", r"\1", m.group(1)) for m in REFERENCE.finditer(text)]


async def expand_references(text: str, workspace: Workspace, read_file: Tool) -> Expanded:
    """``text`` with the content of its ``@`` references appended (see the
    module docstring). Unchanged when it has none that can be read."""
    paths = find_references(text)
    result = Expanded(text)
    if not paths:
        return result
    pieces: list[str] = []
    budget = MAX_CHARS

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
        try:
            real = workspace.resolve(shown, must_exist=True)
        except ToolFailed as failed:
            result.skipped.append((shown, str(failed)))
            continue
        rel = workspace.relative(real)
        if _ignored(workspace, real):
            result.skipped.append((shown, "ignored by .gitignore"))
            continue
        if real.is_dir():
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


async def attach_references(prompt: str, executor: ToolExecutor, report: Callable[[str, bool], None]) -> str:
    """:func:`expand_references` with the client's workspace and
    ``read_file`` tool; each path attached or left out is reported as
    ``report(line, is_warning)`` (control characters made visible)."""
    if "@" not in prompt:
        return prompt
    read_file = executor.registry.get("read_file")
    if read_file is None:
        return prompt
    expanded = await expand_references(prompt, executor.workspace, read_file)
    for path in expanded.attached:
        report(f"+ attached @{visible(path, newlines=False)}", False)
    for path, why in expanded.skipped:
        report(f"@{visible(path, newlines=False)} not attached: {visible(why)}", True)
    return expanded.prompt


def _ignored(workspace: Workspace, real: Path) -> bool:
    from gemini_split.client.tools._files import load_ignore_rules

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
    from gemini_split.client.tools._files import looks_binary, walk_files

    names = []
    for walked in walk_files(workspace, directory, max_files=MAX_FILES * 4, time_budget=5.0):
        try:
            with open(walked.real, "rb") as f:
                if looks_binary(f.read(4096)):
                    continue
        except OSError:
            continue
        names.append(walked.rel)
    return names


def complete_reference(word: str, workspace_root: Path, limit: int = 50) -> list[str]:
    """Completions for ``word`` (what follows ``@``): entries of its
    directory inside the workspace, not .git or git-ignored, directories
    with a trailing ``/``."""
    from gemini_split.client.tools._files import load_ignore_rules

    directory, _, prefix = word.rpartition("/")
    base = (workspace_root / directory).resolve() if directory else workspace_root
    try:
        workspace = Workspace(workspace_root)
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
        rel = f"{directory}/{entry.name}" if directory else entry.name
        if rules.is_ignored(os.path.relpath(entry.path, workspace.root).replace(os.sep, "/"), is_dir):
            continue
        out.append(rel.replace(" ", "\\ ") + ("/" if is_dir else ""))
        if len(out) >= limit:
            break
    return out
