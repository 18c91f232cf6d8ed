"""Entry points of one group, found without importing :mod:`importlib.metadata`.

``importlib.metadata`` costs a one-shot run about as much as a tenth of
``import trio`` (it imports ``email``, ``csv`` and ``zipfile``) before it
has read a single file; a thin client needs one entry point, the transport
of its address. :func:`entry_points` finds them the same way for installed
distributions — every ``*.dist-info`` / ``*.egg-info`` directory on
``sys.path``, in order, the first distribution of each (normalized) name
winning — and reads only their ``entry_points.txt``. Distributions that
only a ``sys.meta_path`` finder knows (none of pip's or setuptools'
installs, editable ones included) are not seen; the registry's listing
falls back on nothing else.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from typing import Any, NamedTuple

_NORMALIZE = re.compile(r"[-_.]+")


class EntryPoint(NamedTuple):
    """``name = value`` in ``group`` of the distribution whose metadata is
    in ``path`` (a ``*.dist-info`` or ``*.egg-info`` directory)."""

    name: str
    value: str
    group: str
    path: str

    def load(self) -> Any:
        """Import the module and return the attribute ``value`` names
        (``module:attr.sub``; extras in brackets are ignored)."""
        module, _, attrs = self.value.partition("[")[0].strip().partition(":")
        target: Any = importlib.import_module(module.strip())
        for attr in filter(None, attrs.strip().split(".")):
            target = getattr(target, attr)
        return target

    @property
    def dist_name(self) -> str:
        """The distribution's name, as its metadata spells it."""
        for file in ("METADATA", "PKG-INFO"):
            try:
                with open(os.path.join(self.path, file), encoding="utf-8", errors="replace") as f:
                    for line in f:
                        if line.startswith("Name:"):
                            return line[5:].strip()
                        if not line.strip():
                            break
            except OSError:
                continue
        return _dist_of(os.path.basename(self.path))


def entry_points(group: str) -> list[EntryPoint]:
    """Every entry point in ``group`` of the distributions on ``sys.path``."""
    found: list[EntryPoint] = []
    seen: set[str] = set()
    # Read as bytes and parsed only when the group is named in it: most
    # distributions' entry points are other groups' (half the time of text
    # reads of ~90 files, on every thin client's start).
    wanted = group.encode()
    for entry in sys.path:
        try:
            names = sorted(os.listdir(entry or "."))
        except OSError:  # a zip file, a missing directory
            continue
        for name in names:
            if not name.endswith((".dist-info", ".egg-info")):
                continue
            key = _NORMALIZE.sub("_", _dist_of(name)).lower()
            if key in seen:
                continue
            seen.add(key)
            path = os.path.join(entry or ".", name)
            try:
                with open(os.path.join(path, "entry_points.txt"), "rb") as f:
                    data = f.read()
            except OSError:
                continue
            if wanted in data:
                found.extend(EntryPoint(n, v, group, path) for n, v in _section(data.decode("utf-8"), group))
    return found


def _dist_of(directory: str) -> str:
    stem = directory.rsplit(".", 1)[0]  # drop .dist-info / .egg-info
    if directory.endswith(".dist-info"):
        return stem.rpartition("-")[0] or stem
    return stem.split("-", 1)[0]


def _section(text: str, group: str) -> list[tuple[str, str]]:
    """The ``name = value`` lines of ``[group]`` in an ``entry_points.txt``."""
    pairs: list[tuple[str, str]] = []
    inside = False
    for line in text.splitlines():
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            inside = line[1:-1].strip() == group
        elif inside and "=" in line:
            name, _, value = line.partition("=")
            pairs.append((name.strip(), value.strip()))
    return pairs
