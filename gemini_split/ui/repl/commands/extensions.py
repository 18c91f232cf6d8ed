"""The REPL's ``/extensions`` sub-commands (gemini-cli's): ``list``,
``install SOURCE``, ``link PATH``, ``uninstall NAME…|--all``, ``update
NAME…|--all``, ``enable|disable NAME|--all [--scope user|workspace]``,
``config [NAME [SETTING]] [--scope user|workspace]``, ``explore``,
``reload`` (``restart``).

They change gemini-cli's files through :mod:`gemini_split.userfiles.extensions`,
as ``gemini-split extensions`` does, asking here (a menu for consent, a
line for a setting, hidden when it is sensitive). What a change brings is
read again for the next prompt — context files, skills and commands; an
extension's MCP servers, hooks and excluded tools are set up when a
session is opened by a new start of gemini-split, and this is said. A
session started with ``-e NAME`` keeps using just those (enabling or
disabling changes the files, for later sessions).
Installing runs ``git clone`` for a URL: in a worker thread, its consent
asked back on the REPL's loop.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import trio
from rich.text import Text

from gemini_split.ui.extension_list import list_lines
from gemini_split.ui.safe_text import visible
from gemini_split.userfiles import extensions as ext_mod

from ..command_context import CommandContext, CommandUsage
from .context_reload import reload_in_worker

#: gemini-cli's extensions gallery.
GALLERY = "https://geminicli.com/extensions/"
NO_EXTENSIONS = "No extensions installed. Run `/extensions explore` to check out the gallery."
LATER = ("Its context files, skills and commands apply from the next prompt; its MCP servers, hooks and "
         "excluded tools when gemini-split starts again.")
ACTIONS = ("list", "install", "link", "uninstall", "update", "enable", "disable", "config", "explore", "reload")
_UNSAFE_SOURCE = re.compile(r"[;&|`'\"]")


async def extensions_command(repl: CommandContext, args: list[str]) -> bool:
    """Run ``/extensions ARGS``; True when the extensions changed (the
    caller reads the custom commands again). Raises :class:`CommandUsage`."""
    action, rest = (args[0], args[1:]) if args else ("list", [])
    action = {"delete": "uninstall", "restart": "reload"}.get(action, action)
    if action == "list" and not rest:
        for line in list_lines(repl.env.config_dir, repl.settings.tools.workspace, _home(repl),
                               warn=lambda text: repl.print_usage(text), only=repl.options.extensions):
            repl.console.print(Text(line), soft_wrap=True)
        return False
    if action == "explore" and not rest:
        repl.console.print(Text(f"View available extensions at {GALLERY}"))
        return False
    handler = _HANDLERS.get(action)
    if handler is None:
        raise CommandUsage("/extensions " + " | ".join(ACTIONS))
    try:
        changed = await handler(repl, rest)
    except ext_mod.ExtensionError as exc:
        raise CommandUsage(visible(str(exc), newlines=False)) from None
    if changed:
        await _read_again(repl)
    return changed


def extension_names(repl: CommandContext) -> list[str]:
    """The installed extensions' names, for Tab."""
    extensions = repl.settings.tools.extensions
    return list(extensions.extensions) if extensions is not None else []


async def _install(repl: CommandContext, rest: list[str]) -> bool:
    if len(rest) != 1:
        raise CommandUsage("Usage: /extensions install <source>")
    source = rest[0]
    if _UNSAFE_SOURCE.search(source) and not ext_mod.is_git_source(source):
        raise CommandUsage(f"Invalid source: {visible(source, newlines=False)}")
    return await _add(repl, source, link=False)


async def _link(repl: CommandContext, rest: list[str]) -> bool:
    if len(rest) != 1:
        raise CommandUsage("Usage: /extensions link <source>")
    source = rest[0]
    if _UNSAFE_SOURCE.search(source):
        raise CommandUsage(f"Source file path contains disallowed characters: {visible(source, newlines=False)}")
    if not (repl.env.cwd / Path(source).expanduser()).exists():
        raise CommandUsage(f"Invalid source: {visible(source, newlines=False)}")
    return await _add(repl, source, link=True)


async def _add(repl: CommandContext, source: str, *, link: bool) -> bool:
    """Install or link ``source`` in a worker thread, consent asked here."""
    shown = visible(source, newlines=False)
    repl.console.print(Text(f'{"Linking" if link else "Installing"} extension from "{shown}"...'), soft_wrap=True)
    confirm = _confirm_from_thread(repl)
    try:
        installed = await trio.to_thread.run_sync(lambda: ext_mod.install(
            repl.env.config_dir, source, workspace=repl.env.cwd, home=_home(repl), confirm=confirm,
            ask_setting=None, link=link))
    except ext_mod.ExtensionError as exc:
        repl.print_usage(f'Failed to {"link" if link else "install"} extension from "{shown}": '
                         f"{visible(str(exc), newlines=False)}")
        return False
    repl.console.print(Text(f'Extension "{installed.name}" {"linked" if link else "installed"} successfully.',
                            style="green"))
    missing = ext_mod.missing_settings(installed)
    if missing:
        repl.print_usage(f"Its settings are not set: {', '.join(missing)} (/extensions config {installed.name})")
    repl.console.print(Text(LATER, style="dim"))
    return True


def _confirm_from_thread(repl: CommandContext) -> Callable[[str], bool]:
    """``install``'s ``confirm``, called in its worker thread: the
    description shown and a menu asked on the REPL's loop."""
    async def ask(description: str) -> bool:
        repl.console.print(Text(visible(description)), soft_wrap=True)
        choice = await repl.asker.read_choice("Do you want to continue?", [("yes", "Yes"), ("no", "No")], 1)
        return choice == "yes"

    return lambda description: trio.from_thread.run(ask, description)


async def _uninstall(repl: CommandContext, rest: list[str]) -> bool:
    names = [n for n in rest if not n.startswith("--")]
    if "--all" in rest:
        names = extension_names(repl) or _installed(repl)
        if not names:
            repl.console.print(Text("No extensions installed.", style="dim"))
            return False
    if not names:
        raise CommandUsage("Usage: /extensions uninstall <extension-names...>|--all")
    changed = False
    for name in names:
        shown = visible(name, newlines=False)
        repl.console.print(Text(f'Uninstalling extension "{shown}"...'))
        try:
            ext_mod.uninstall(repl.env.config_dir, name, workspace=repl.env.cwd, home=_home(repl))
        except (ext_mod.ExtensionError, OSError) as exc:
            repl.print_usage(f'Failed to uninstall extension "{shown}": {visible(str(exc), newlines=False)}')
            continue
        repl.console.print(Text(f'Extension "{shown}" uninstalled successfully.', style="green"))
        changed = True
    return changed


async def _update(repl: CommandContext, rest: list[str]) -> bool:
    if not rest or ("--all" in rest and len(rest) != 1):
        raise CommandUsage("Usage: /extensions update <extension-names>|--all")
    installed = _installed(repl)
    if not installed:
        repl.console.print(Text(NO_EXTENSIONS))
        return False
    names = installed if rest == ["--all"] else rest
    updated = 0
    for name in names:
        if name not in installed:
            repl.print_usage(f"Extension {visible(name, newlines=False)} not found.")
            continue
        try:
            new, old_version = await trio.to_thread.run_sync(lambda n=name: ext_mod.update(
                repl.env.config_dir, n, workspace=repl.env.cwd, home=_home(repl), confirm=lambda _: True,
                ask_setting=None))
        except ext_mod.ExtensionError as exc:
            repl.print_usage(f"Failed to update {visible(name, newlines=False)}: {visible(str(exc), newlines=False)}")
            continue
        if new.install_type != "link":
            updated += 1
            repl.console.print(Text(f'Extension "{new.name}" successfully updated: {old_version} → {new.version}.',
                                    style="green"))
    if not updated:
        repl.console.print(Text("No extensions to update.", style="dim"))
    return bool(updated)


async def _enable(repl: CommandContext, rest: list[str]) -> bool:
    return _set_enabled(repl, rest, enabled=True)


async def _disable(repl: CommandContext, rest: list[str]) -> bool:
    return _set_enabled(repl, rest, enabled=False)


def _set_enabled(repl: CommandContext, rest: list[str], *, enabled: bool) -> bool:
    verb = "enable" if enabled else "disable"
    parsed = _name_and_scope(rest)
    if parsed is None:
        raise CommandUsage(f"Usage: /extensions {verb} <extension> [--scope=<user|workspace>]")
    name, scope = parsed
    if scope not in ("user", "workspace"):
        raise CommandUsage(f'Unsupported scope {visible(scope, newlines=False)}, should be one of "user" or '
                           '"workspace" (a session scope is not offered: a change applies to new sessions)')
    names = _installed(repl) if name == "--all" else [name]
    where = _home(repl) if scope == "user" else repl.env.cwd
    for each in names:
        ext_mod.set_enabled(repl.env.config_dir, each, enabled, where=where, workspace=repl.env.cwd,
                            home=_home(repl))
        repl.console.print(Text(f'Extension "{visible(each, newlines=False)}" {verb}d for the scope '
                                f'"{scope.title()}"', style="green"))
    return bool(names)


def _name_and_scope(rest: list[str]) -> tuple[str, str] | None:
    """``NAME [--scope S | --scope=S]`` as ``(name, scope)`` (user by default)."""
    if len(rest) == 1:
        return rest[0], "user"
    if len(rest) == 2 and rest[1].startswith("--scope="):
        return rest[0], rest[1].split("=", 1)[1].lower()
    if len(rest) == 3 and rest[1] == "--scope":
        return rest[0], rest[2].lower()
    return None


async def _config(repl: CommandContext, rest: list[str]) -> bool:
    usage = "Usage: /extensions config [NAME [SETTING]] [--scope user|workspace]"
    words, scope = _without_scope(rest)
    if scope is None or len(words) > 2:
        raise CommandUsage(usage)
    name, key = (words + [None, None])[:2]
    if name is not None and ("/" in name or "\\" in name or ".." in name):
        raise CommandUsage('Invalid extension name. Names cannot contain path separators or "..".')
    found = ext_mod.load_extensions(repl.env.config_dir, repl.env.cwd, home=_home(repl))
    if name is None:
        if not found.extensions:
            repl.console.print(Text("No extensions installed.", style="dim"))
        changed = False
        for ext in found.extensions.values():
            if ext.settings:
                repl.console.print(Text(f'Configuring settings for "{ext.name}"...'))
                changed |= await _configure(repl, ext, scope, ext.settings, confirm=True)
        return changed
    ext = found.extensions.get(name)
    if ext is None:
        raise CommandUsage(f'Extension "{visible(name, newlines=False)}" is not installed.')
    if not ext.settings:
        repl.console.print(Text(f'Extension "{ext.name}" has no settings to configure.', style="dim"))
        return False
    if key is None:
        repl.console.print(Text(f'Configuring settings for "{ext.name}"...'))
        return await _configure(repl, ext, scope, ext.settings, confirm=True)
    setting = ext_mod.find_setting(ext, key)
    if setting is None:
        raise CommandUsage(f"Setting {visible(key, newlines=False)} not found.")
    return await _configure(repl, ext, scope, [setting], confirm=False)


def _without_scope(words: list[str]) -> tuple[list[str], str | None]:
    """``words`` without ``--scope S`` / ``--scope=S``, and S (``user`` when
    not given; None when it is not ``user`` or ``workspace``)."""
    rest, scope, it = [], "user", iter(words)
    for word in it:
        if word == "--scope" or word.startswith("--scope="):
            scope = word.split("=", 1)[1] if "=" in word else next(it, "")
        else:
            rest.append(word)
    return rest, scope if scope in ("user", "workspace") else None


async def _configure(repl: CommandContext, ext: Any, scope: str, settings: list[Any], *, confirm: bool) -> bool:
    """Ask each of ``settings`` (with ``confirm``, one already set only after
    a yes) and keep the answer; True when one was kept."""
    current = ext_mod.scoped_values(ext, scope, repl.env.cwd)
    changed = False
    for setting in settings:
        if confirm and setting.env_var in current:
            choice = await repl.asker.read_choice(
                f'Setting "{setting.name}" ({setting.env_var}) is already set. Overwrite?',
                [("yes", "Yes"), ("no", "No")], 1)
            if choice != "yes":
                continue
        value = await repl.asker.read_text(f"{setting.name} ({visible(setting.description, newlines=False)}): ",
                                           secret=setting.sensitive)
        if value is None:
            continue
        path = ext_mod.set_value(ext, setting, value, scope=scope, workspace=repl.env.cwd)
        repl.console.print(Text(f'Setting "{setting.name}" updated ({path}).', style="green"), soft_wrap=True)
        changed = True
    return changed


async def _reload(repl: CommandContext, rest: list[str]) -> bool:
    installed = _installed(repl)
    if not installed:
        repl.console.print(Text(NO_EXTENSIONS))
        return False
    unknown = [n for n in rest if n != "--all" and n not in installed]
    if unknown:
        repl.print_usage(f"Extension(s) not found or not active: {', '.join(visible(n, newlines=False) for n in unknown)}")
    count = len(installed) if not rest or rest == ["--all"] else len(set(rest) - set(unknown))
    if not count:
        return False
    plural = "s" if count > 1 else ""
    repl.console.print(Text(f"Reloading {count} extension{plural}..."))
    await _read_again(repl)
    repl.console.print(Text(f"{count} extension{plural} reloaded successfully", style="green"))
    return True


async def _read_again(repl: CommandContext) -> None:
    """The extensions read again into the session's settings, and the
    context (context files, skills) rebuilt for the next prompt."""
    fresh = await trio.to_thread.run_sync(lambda: ext_mod.load_extensions(
        repl.env.config_dir, repl.settings.tools.workspace, home=_home(repl), only=repl.options.extensions,
        workspace_settings=bool(repl.settings.loaded_settings and repl.settings.loaded_settings.trusted)))
    repl.settings.tools = msgspec.structs.replace(repl.settings.tools, extensions=fresh)
    await reload_in_worker(repl, settings_too=False)


def _installed(repl: CommandContext) -> list[str]:
    return list(ext_mod.load_extensions(repl.env.config_dir, repl.env.cwd, home=_home(repl)).extensions)


def _home(repl: CommandContext) -> Path:
    return Path(repl.env.environ.get("HOME") or Path.home())


_HANDLERS = {"install": _install, "link": _link, "uninstall": _uninstall, "update": _update, "enable": _enable,
             "disable": _disable, "config": _config, "reload": _reload}
