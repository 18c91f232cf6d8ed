"""What ``gemini-split extensions list`` and the REPL's ``/extensions list`` show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gemini_split.ui.safe_text import visible


def list_lines(config_dir: Path, workspace: Path, home: Path, warn: Any = None,
               only: tuple[str, ...] | None = None) -> list[str]:
    """What ``extensions list`` (and ``/extensions list``) shows: gemini-cli's
    layout, every value made safe for a terminal, secrets as ``***``;
    ``only``: the session's ``-e`` decides which are in use."""
    from gemini_split.userfiles.extensions import load_extensions, settings_shown

    found = load_extensions(config_dir, workspace, home=home, only=only)
    if warn is not None:
        for problem in found.problems:
            warn(f"gemini-split: {visible(problem)}")
    if not found.extensions:
        return ["No extensions installed."]
    lines: list[str] = []
    for ext in found.extensions.values():
        lines.append(f"{'✓' if ext.active else '✗'} {ext.name} ({visible(ext.version, newlines=False)})")
        if ext.description:
            lines.append(f" {visible(ext.description, newlines=False)}")
        lines.append(f" Path: {visible(str(ext.path), newlines=False)}")
        if ext.install_metadata:
            lines.append(f" Source: {visible(ext.source, newlines=False)} (Type: {visible(ext.install_type)})")
        lines.append(f" Enabled (User): {str(ext.enabled_user).lower()}")
        lines.append(f" Enabled (Workspace): {str(ext.active).lower()}")
        for title, items in (("Context files:", [str(p) for p in ext.context_files]),
                             ("MCP servers:", list(ext.mcp_servers)),
                             ("Excluded tools:", ext.exclude_tools),
                             ("Settings:", list(settings_shown(ext)))):
            if items:
                lines.append(f" {title}")
                lines.extend(f"  {visible(str(item), newlines=False)}" for item in items)
        lines.append("")
    return lines[:-1]
