"""gemini-cli's precedence between the places one kind of file is read
from: the one rule custom commands, skills and sub-agent definitions share.

Lowest first, a later file of the same name replacing an earlier one:

1. each enabled extension's directory (scope ``extension NAME``),
2. the user's (``~/.gemini/…``: gemini-split's config directory),
3. the project's (``<project>/.gemini/…``), only in a trusted folder — the
   caller passes no project directory for an untrusted one.

A project directory that is one already listed (the project *is* the home
directory) adds nothing: its files are the user's, read once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def tiers(user: Iterable[Path], project: Iterable[Path] = (), *, extensions: Iterable[tuple[str, Path]] = (),
          project_scope: str = "project") -> list[tuple[str, Path]]:
    """The ``(scope, directory)`` pairs to read, lowest precedence first:
    ``extensions`` (``(name, directory)``), then ``user``, then each of
    ``project`` not already listed (scope ``project_scope``: skills call it
    ``workspace``, as gemini-cli does)."""
    found: list[tuple[str, Path]] = [(f"extension {name}", Path(directory)) for name, directory in extensions]
    found += [("user", Path(directory)) for directory in user]
    for directory in project:
        if os.path.realpath(directory) not in {os.path.realpath(listed) for _, listed in found}:
            found.append((project_scope, Path(directory)))
    return found
