"""The REPL's ``/hooks list|enable|disable|enable-all|disable-all`` (gemini-cli's).

A hook is named by its ``name``, else its command (gemini-cli's
``getHookDisplayName``). ``disable NAME`` adds it to ``hooksConfig.disabled``
in the workspace's settings (the user's when the folder is not trusted: an
untrusted folder's settings are not read, so a name listed there would
still run); ``enable NAME`` takes it out of every file listing it;
``disable-all`` lists every hook, ``enable-all`` empties the lists
(:mod:`gemini_split.userfiles.disabled_lists` edits the files). The change
applies to the running session's hooks at once, as gemini-cli's
``setHookEnabled`` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.text import Text

from gemini_split.errors import SettingsError
from gemini_split.ui.safe_text import visible
from gemini_split.userfiles import disabled_lists
from gemini_split.userfiles.hooks import DISABLED_KEY, HookSet, describe, load_hooks, parse_hooks
from gemini_split.userfiles.settings import load_settings

from ..command_context import CommandContext, CommandUsage

USAGE = "/hooks [list] | enable NAME | disable NAME | enable-all | disable-all"
#: gemini-cli's sub-commands and their other names.
ACTIONS = {"list": "list", "show": "list", "panel": "list", "enable": "enable", "disable": "disable",
           "enable-all": "enable-all", "enableall": "enable-all",
           "disable-all": "disable-all", "disableall": "disable-all"}


async def hooks_command(repl: CommandContext, args: list[str]) -> None:
    """Run ``/hooks ARGS``; raises :class:`CommandUsage` for bad arguments."""
    action = ACTIONS.get(args[0]) if args else "list"
    rest = args[1:]
    if action in ("enable", "disable"):
        if len(rest) != 1:
            raise CommandUsage(f"Usage: /hooks {action} <hook-name>")
    elif action is None or rest:
        raise CommandUsage(USAGE)
    loaded = repl.settings.loaded_settings
    if loaded is None:
        repl.console.print(Text("No settings files were read for this session.", style="dim"))
        return
    hooks = session_hooks(repl)
    if action == "list":
        for line in [*hooks.warnings, *describe(hooks)]:
            repl.console.print(Text(visible(line)))
        return
    if not hooks.enabled:
        repl.print_usage("Hook system is not enabled. (hooksConfig.enabled is false)")
        return
    if action in ("enable", "disable"):
        _one(repl, hooks, rest[0], enable=action == "enable")
    else:
        _all(repl, hooks, enable=action == "enable-all")
    _refresh(repl)


def session_hooks(repl: CommandContext) -> HookSet:
    """The hooks of this session: the running one's when it has them,
    else those of the settings files and the active extensions."""
    runner = _runner(repl)
    if runner is not None:
        return runner.hooks
    hooks = load_hooks(repl.settings.loaded_settings)
    extensions = repl.settings.tools.extensions
    for name, raw, env in (extensions.hooks() if extensions is not None else ()):
        hooks.add(*parse_hooks(raw, f"extension {name}", env=env))
    return hooks


def hook_names(repl: CommandContext, *, enabled: bool) -> Iterable[str]:
    """Tab's words after ``enable`` (the disabled hooks) or ``disable`` (the enabled ones)."""
    if repl.settings.loaded_settings is None:
        return []
    hooks = session_hooks(repl)
    active = set(map(id, hooks.active()))
    return list(dict.fromkeys(h.label for h in hooks.hooks if (id(h) in active) == enabled))


def _one(repl: CommandContext, hooks: HookSet, name: str, *, enable: bool) -> None:
    known = list(dict.fromkeys(h.label for h in hooks.hooks))
    if name not in known:
        raise CommandUsage(f"no hook named {visible(name, newlines=False)!r} (hooks: "
                           f"{', '.join(visible(n, newlines=False) for n in known) or 'none'})")
    loaded = repl.settings.loaded_settings
    scopes = disabled_lists.writable_scopes(loaded)
    if enable:
        change = disabled_lists.enable(scopes, DISABLED_KEY, name)
    else:
        scope = "workspace" if loaded is not None and loaded.trusted else "user"
        change = disabled_lists.disable(scopes, scope, DISABLED_KEY, name)
    said = visible(disabled_lists.feedback("Hook", change), newlines=False)
    if change.status == "error":
        repl.print_usage(said)
    else:
        repl.console.print(Text(said, style="green" if change.status == "success" else "dim"), soft_wrap=True)


def _all(repl: CommandContext, hooks: HookSet, *, enable: bool) -> None:
    if not hooks.hooks:
        repl.console.print(Text("No hooks configured.", style="dim"))
        return
    active = set(map(id, hooks.active()))
    changing = [h for h in hooks.hooks if (id(h) in active) != enable]
    if not changing:
        repl.console.print(Text(f"All hooks are already {'enabled' if enable else 'disabled'}.", style="dim"))
        return
    loaded = repl.settings.loaded_settings
    scopes = disabled_lists.writable_scopes(loaded)
    try:
        if enable:
            for _, path in scopes:
                if disabled_lists.listed(path, DISABLED_KEY):
                    disabled_lists.set_listed(path, DISABLED_KEY, [])
        else:
            scope = "workspace" if loaded is not None and loaded.trusted else "user"
            path = next(p for label, p in scopes if label == scope)
            disabled_lists.set_listed(path, DISABLED_KEY, list(dict.fromkeys(h.label for h in hooks.hooks)))
    except (SettingsError, OSError) as exc:  # said; the file as it was
        verb = "enable" if enable else "disable"
        repl.print_usage(f"Failed to {verb} hooks: {visible(str(exc), newlines=False)}")
        return
    repl.console.print(Text(f"{'Enabled' if enable else 'Disabled'} {len(changing)} hook(s) successfully.",
                            style="green"))


def _refresh(repl: CommandContext) -> None:
    """The settings read again, and the running session's hooks told which
    are now disabled."""
    old = repl.settings.loaded_settings
    fresh = load_settings(repl.env, trust=old.trusted if old is not None else None)
    repl.settings.loaded_settings = fresh
    runner = _runner(repl)
    if runner is not None:
        now = load_hooks(fresh)
        runner.hooks.disabled, runner.hooks.enabled = now.disabled, now.enabled


def _runner(repl: CommandContext) -> Any:
    """The running session's ``HookRunner`` (None: no connection, or no hooks)."""
    client = repl.client
    return getattr(client.executor, "hooks", None) if client is not None else None
