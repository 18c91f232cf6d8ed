"""The settings lists that switch things off by name, and the commands'
words about changing them: ``skills.disabled`` and ``hooksConfig.disabled``.

gemini-cli merges such a list across the settings files (a union), so a
name is off when *any* file lists it. Its commands change the lists the
same way everywhere (``featureToggleUtils`` / ``hookSettings`` in its
bundle), and so do these:

* :func:`enable` takes the name out of every writable file that lists it
  (the workspace's and the user's): enabling it in one file while another
  still lists it would change nothing;
* :func:`disable` adds it to one file (the scope asked for), and says when
  the other file lists it already;
* :func:`set_listed` is the one edit below both (and ``/hooks
  disable-all``, ``skills.set_disabled``): a file edited in place by
  :mod:`gemini_split.userfiles.settings_edit`, its comments kept.

A :class:`ListChange` says what happened; :func:`feedback` words it as
gemini-cli does (``Hook "x" disabled by adding it to the disabled list in
workspace (/p/.gemini/settings.json) settings.``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import msgspec

from gemini_split.errors import SettingsError

#: A writable settings file: ``("workspace" | "user", its path)``.
Scope = tuple[str, Path]


class ListChange(msgspec.Struct, frozen=True):
    """What :func:`enable` or :func:`disable` did to ``name``."""

    name: str
    action: Literal["enable", "disable"]
    #: ``no-op``: already so (nothing written); ``error``: see ``error``.
    status: Literal["success", "no-op", "error"]
    #: The files changed.
    modified: tuple[Scope, ...] = ()
    #: The files already as asked (for ``disable``: the other scope's file
    #: that lists the name too).
    already: tuple[Scope, ...] = ()
    error: str = ""


def listed(path: Path, key: str) -> list[str]:
    """The names in the list ``key`` (dotted) of the settings file ``path``
    ([] when the file, the key or a list is missing). Raises
    :class:`SettingsError` for a file that cannot be parsed."""
    from gemini_split.userfiles.settings_edit import SettingsFile  # lazy_imports.EDGES

    value = SettingsFile.read(path).get(key, [])
    return [n for n in value if isinstance(n, str)] if isinstance(value, list) else []


def set_listed(path: Path, key: str, names: Sequence[str]) -> bool:
    """Make the list ``key`` of ``path`` hold ``names`` (in that order),
    the rest of the file kept. Returns whether the file changed. Raises
    :class:`SettingsError` (a file that cannot be parsed: left as it was)
    or ``OSError``."""
    from gemini_split.userfiles.settings_edit import SettingsFile  # lazy_imports.EDGES

    settings = SettingsFile.read(path)
    settings.set(key, list(names))
    return settings.save()


def toggle(path: Path, key: str, name: str, *, disabled: bool) -> bool:
    """Add ``name`` to (``disabled``) or take it out of the list ``key`` of
    ``path``; False when it already was so (nothing written). Raises as
    :func:`set_listed`."""
    names = listed(path, key)
    if disabled == (name in names):
        return False
    return set_listed(path, key, [*names, name] if disabled else [n for n in names if n != name])


def enable(scopes: Sequence[Scope], key: str, name: str) -> ListChange:
    """Take ``name`` out of the list ``key`` in each of ``scopes`` that lists it."""
    scopes = _distinct(scopes)
    try:
        listing = [s for s in scopes if name in listed(s[1], key)]
        for _, path in listing:
            toggle(path, key, name, disabled=False)
    except (SettingsError, OSError) as exc:
        return ListChange(name, "enable", "error", error=f"not changed: {_reason(exc)}")
    others = tuple(s for s in scopes if s not in listing)
    if not listing:
        return ListChange(name, "enable", "no-op", already=others)
    return ListChange(name, "enable", "success", modified=tuple(listing), already=others)


def disable(scopes: Sequence[Scope], scope: str, key: str, name: str) -> ListChange:
    """Add ``name`` to the list ``key`` of the file of ``scope`` (one of
    ``scopes``' labels)."""
    scopes = _distinct(scopes)
    target = next((s for s in scopes if s[0] == scope), None)
    if target is None:
        return ListChange(name, "disable", "error", error=f"Invalid settings scope: {scope}")
    try:
        if not toggle(target[1], key, name, disabled=True):
            return ListChange(name, "disable", "no-op", already=(target,))
        others = tuple(s for s in scopes if s != target and name in listed(s[1], key))
    except (SettingsError, OSError) as exc:
        return ListChange(name, "disable", "error", error=f"not changed: {_reason(exc)}")
    return ListChange(name, "disable", "success", modified=(target,), already=others)


def feedback(noun: str, change: ListChange) -> str:
    """gemini-cli's words for ``change`` (its ``renderHookActionFeedback``;
    ``noun`` is ``Hook`` or ``Skill``)."""
    if change.status == "error":
        return change.error or f"An error occurred while attempting to {change.action} {noun.lower()} " \
                               f'"{change.name}".'
    done = "enabled" if change.action == "enable" else "disabled"
    if change.status == "no-op":
        return f'{noun} "{change.name}" is already {done}.'
    where = "by removing it from the disabled list in" if change.action == "enable" else \
        "by adding it to the disabled list in"
    scopes = [f"{label} ({path})" for label, path in (*change.modified, *change.already)]
    if len(scopes) == 2:
        if change.action == "enable":
            return f'{noun} "{change.name}" {done} {where} {scopes[0]} and {scopes[1]} settings.'
        return f'{noun} "{change.name}" is now disabled in both {scopes[0]} and {scopes[1]} settings.'
    return f'{noun} "{change.name}" {done} {where} {scopes[0]} settings.'


def _distinct(scopes: Sequence[Scope]) -> list[Scope]:
    """``scopes`` without a second name for one file (the workspace's
    settings are the user's when the workspace is the home directory)."""
    seen: set[str] = set()
    out: list[Scope] = []
    for label, path in scopes:
        real = os.path.realpath(path)
        if real not in seen:
            seen.add(real)
            out.append((label, path))
    return out


def _reason(exc: Exception) -> str:
    return (exc.strerror or str(exc)) if isinstance(exc, OSError) else str(exc)


def writable_scopes(loaded: object) -> list[Scope]:
    """The files these commands write, of a ``settings.LoadedSettings``:
    the workspace's ``.gemini/settings.json``, then the user's."""
    paths = {f.scope: f.path for f in getattr(loaded, "files", ())}
    return [(label, paths[scope]) for label, scope in (("workspace", "project"), ("user", "user")) if scope in paths]
