"""The REPL's ``/theme [NAME]`` (gemini-cli's): a theme chosen from a menu
(or named), applied to what is drawn next and saved as ``ui.theme`` in the
user's settings.json, as gemini-cli's theme dialog saves it by default.

The themes are gemini-cli's (:data:`gemini_split.ui.render.THEMES`, dark and
light, and ``NoColor``): here a theme is the style code is highlighted in,
and NoColor drops colour as ``NO_COLOR`` does. With ``NO_COLOR`` set there
is nothing to choose, and gemini-cli's line says so.
"""

from __future__ import annotations

from rich.text import Text

from gemini_split.errors import ConfigurationError
from gemini_split.ui.render import NO_COLOR_THEME, THEMES, code_theme_for, theme_named
from gemini_split.ui.safe_text import visible
from gemini_split.userfiles.settings_edit import set_setting

from ..command_context import CommandContext

NO_COLOR_LINE = "Theme configuration unavailable due to NO_COLOR env variable."


async def theme_command(repl: CommandContext, args: list[str]) -> None:
    """``/theme``: the menu; ``/theme NAME``: that theme."""
    if repl.env.environ.get("NO_COLOR"):
        repl.console.print(Text(NO_COLOR_LINE))
        return
    if args:
        name = theme_named(" ".join(args))
        if name is None:
            repl.print_usage(f'Theme "{visible(" ".join(args), newlines=False)}" not found. (known: '
                             f"{', '.join([*THEMES, NO_COLOR_THEME])})")
            return
    else:
        name = await _pick(repl)
        if name is None:
            return
    _apply(repl, name)


def theme_names(repl: CommandContext) -> list[str]:
    """Tab's words after ``/theme`` (names of one word)."""
    return [n for n in (*THEMES, NO_COLOR_THEME) if " " not in n]


async def _pick(repl: CommandContext) -> str | None:
    """gemini-cli's "Select Theme" menu, starting on the current theme."""
    current = theme_named(_current(repl) or "") or "Default"
    names = [*THEMES, NO_COLOR_THEME]
    choices = [(n, f"{n}{'' if n.endswith(('Dark', 'Light')) or n == NO_COLOR_THEME else ' ' + kind(n)}"
                   f"{'  · current' if n == current else ''}") for n in names]
    picked = await repl.asker.read_choice("Select Theme", choices, names.index(current))
    return picked if picked in names else None


def kind(name: str) -> str:
    """``Dark`` or ``Light``, as gemini-cli labels a theme's type."""
    return THEMES[name][0].title() if name in THEMES else ""


def _apply(repl: CommandContext, name: str) -> None:
    repl.code_theme = code_theme_for(name)[0]
    repl.console.no_color = name == NO_COLOR_THEME
    path = repl.env.config_dir / "settings.json"
    try:
        set_setting(path, "ui.theme", name)
    except (OSError, ConfigurationError) as exc:
        repl.print_notice(f"Theme {name} for this session; ui.theme not saved: {exc}")
        return
    repl.console.print(Text(f"Theme: {name} (saved as ui.theme in {path})", style="green"), soft_wrap=True)
    loaded = repl.settings.loaded_settings
    wins = loaded.set_by("ui", "theme") if loaded is not None else None
    if wins is not None and wins.scope not in ("user", "system-defaults"):
        repl.print_usage(f"Note: ui.theme is also set in {wins.path} ({wins.scope}), which wins when "
                         "gemini-split starts again.")
    elif loaded is not None:
        loaded.merged.ui.theme = name  # the session's setting now (the next /theme starts on it)


def _current(repl: CommandContext) -> str | None:
    loaded = repl.settings.loaded_settings
    return loaded.merged.ui.theme if loaded is not None else None
