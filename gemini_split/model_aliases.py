"""gemini-cli's model aliases, resolved to the model names the API knows
(issue 31 item 3).

``-m flash`` used to request ``models/flash``, which the Gemini API does not
have. The built-in aliases resolve to what gemini-cli 0.61 requests with a
Gemini API key, observed on the fake Gemini server (``/_requests``):

=================== ==========================
alias               model requested
=================== ==========================
``pro``             ``gemini-3.1-pro-preview``
``flash``           ``gemini-3.8-flash``
``flash-lite``      ``gemini-3.5-flash-lite``
``auto``            ``gemini-3.1-pro-preview``
``auto-gemini-3``   ``gemini-3.1-pro-preview``
``auto-gemini-2.5`` ``gemini-2.5-pro``
=================== ==========================

gemini-cli's ``auto`` asks a flash-lite classifier, per prompt, whether to
use pro or flash; here ``auto`` is one model, the one gemini-cli's default
strategy picks when the classifier does not decide (its ``resolveModel``):
no extra model call per prompt.

``modelConfigs.customAliases`` and ``modelConfigs.aliases`` from settings
are aliases too, when they name a model (``modelConfig.model``, directly or
through ``extends``).

A name that is no alias but close to one and without a digit (``-m flsh``)
is refused with the aliases listed: every Gemini model name has a version
number, so it is a mistyped alias, and a request for it would only fail at
the API. So is a settings alias that names no model (``extends`` in a cycle,
or a preset of generation settings only). Other names pass unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gemini_split.errors import BadInput

BUILT_IN_ALIASES: dict[str, str] = {
    "auto": "gemini-3.1-pro-preview",
    "pro": "gemini-3.1-pro-preview",
    "flash": "gemini-3.8-flash",
    "flash-lite": "gemini-3.5-flash-lite",
    "auto-gemini-3": "gemini-3.1-pro-preview",
    "auto-gemini-2.5": "gemini-2.5-pro",
}
#: How many ``extends`` links a settings alias may follow (a cycle stops here).
MAX_EXTENDS = 16


class UnknownModelAlias(BadInput):
    """A model name that can only be a mistyped alias."""


def settings_aliases(model_configs: Mapping[str, Any] | None) -> dict[str, str]:
    """``modelConfigs.aliases`` and ``customAliases`` (which win) → alias →
    model, for the aliases that name a model."""
    if not model_configs:
        return {}
    table: dict[str, Any] = {}
    for key in ("aliases", "customAliases"):
        part = model_configs.get(key)
        if isinstance(part, Mapping):
            table.update(part)
    result: dict[str, str] = {}
    for name in table:
        entry, seen = table.get(name), 0
        while isinstance(entry, Mapping) and seen < MAX_EXTENDS:
            config = entry.get("modelConfig")
            model = config.get("model") if isinstance(config, Mapping) else None
            if isinstance(model, str) and model.strip():
                result[name] = model.strip()
                break
            parent = entry.get("extends")
            entry, seen = (table.get(parent) if isinstance(parent, str) else None), seen + 1
    return result


def resolve_model_name(name: str, model_configs: Mapping[str, Any] | None = None) -> str:
    """The model ``name`` stands for (see the module's docstring); raises
    :class:`UnknownModelAlias` for a name that can only be a mistyped alias."""
    name = name.strip()
    custom = settings_aliases(model_configs)
    presets = _alias_names(model_configs)
    for _ in range(MAX_EXTENDS):  # a settings alias may name another alias
        if name in custom and custom[name] != name:
            name = custom[name]
        else:
            break
    if name in BUILT_IN_ALIASES:
        return BUILT_IN_ALIASES[name]
    known = ", ".join([*BUILT_IN_ALIASES, *sorted(custom)])
    if name in presets and name not in custom:
        raise UnknownModelAlias(f"model alias {name!r} (modelConfigs) names no model: its modelConfig.model is "
                                f"unset or its 'extends' chain loops; aliases naming a model: {known}")
    if any(c.isdigit() or c in "/:" for c in name):
        return name
    import difflib

    if difflib.get_close_matches(name, [*BUILT_IN_ALIASES, *custom], n=1, cutoff=0.6):
        raise UnknownModelAlias(f"unknown model {name!r}: not a model name (those have a version, e.g. "
                                f"gemini-2.5-flash) nor an alias ({known})")
    return name


def _alias_names(model_configs: Mapping[str, Any] | None) -> set[str]:
    if not model_configs:
        return set()
    return {name for key in ("aliases", "customAliases")
            if isinstance(part := model_configs.get(key), Mapping) for name in part}


def persist_model_name(settings_path: Path, name: str) -> None:
    """``/model set NAME --persist``: ``model.name`` = ``name`` in the user's
    ``settings.json`` at ``settings_path``, the rest of the file (comments
    too) kept, by :mod:`gemini_split.userfiles.settings_edit`. Written atomically;
    raises :class:`~gemini_split.errors.SettingsError` when the file cannot be
    read as settings, and ``OSError`` when it cannot be written — the file is
    then as it was."""
    from gemini_split.userfiles.settings_edit import set_setting  # lazy_imports.EDGES

    set_setting(settings_path, "model.name", name)
