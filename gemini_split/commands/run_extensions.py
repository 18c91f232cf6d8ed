"""``gemini-split extensions …``: gemini-cli's extension commands, on its files.

``install PATH|GIT-URL``, ``link PATH``, ``list``, ``update NAME|--all``,
``uninstall NAME…``, ``enable|disable NAME [--scope user|workspace]``; the
files are gemini-cli's (:mod:`gemini_split.userfiles.extensions`), so either
program manages what the other installed. Changes apply to sessions started
afterwards.
"""

from __future__ import annotations

import argparse
import getpass
from pathlib import Path
from typing import Any

from gemini_split.userfiles import extensions as ext_mod
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.ui.extension_list import list_lines
from gemini_split.ui.safe_text import visible


def run_extensions_command(args: argparse.Namespace, env: Environment) -> ExitStatus:
    home = Path(env.environ.get("HOME") or Path.home())
    common = {"workspace": env.cwd, "home": home}
    try:
        action = args.extensions_command
        if action == "list":
            return _list(env, home)
        if action in ("install", "link"):
            source = args.source if action == "install" else args.path
            installed = ext_mod.install(
                env.config_dir, source, confirm=_confirm(env, args.consent),
                ask_setting=None if getattr(args, "skip_settings", False) else _ask_setting(env),
                ref=getattr(args, "ref", None), link=action == "link", **common)
            print(f'Extension "{installed.name}" {"linked" if action == "link" else "installed"} '
                  f"successfully and enabled.", file=env.stdout)
            _say_missing(env, installed)
            return ExitStatus.SUCCESS
        if action == "uninstall":
            failed = False
            for name in args.names:
                try:
                    removed = ext_mod.uninstall(env.config_dir, name, **common)
                except ext_mod.ExtensionError as exc:
                    env.warn(f"gemini-split: {visible(str(exc))}")
                    failed = True
                    continue
                print(f'Extension "{removed.name}" successfully uninstalled.', file=env.stdout)
            return ExitStatus.ERROR if failed else ExitStatus.SUCCESS
        if action == "update":
            if not args.all and not args.name:
                env.warn("gemini-split: extensions update: name an extension, or --all")
                return ExitStatus.USAGE
            names = list(ext_mod.load_extensions(env.config_dir, env.cwd, home=home).extensions) if args.all \
                else [args.name]
            for name in names:
                new, old_version = ext_mod.update(env.config_dir, name, confirm=_confirm(env, True),
                                                  ask_setting=_ask_setting(env), **common)
                if new.install_type == "link":
                    print(f'Extension "{new.name}" is linked; it is always up to date.', file=env.stdout)
                elif new.version == old_version:
                    print(f'Extension "{new.name}" reinstalled from its source; version {new.version}.',
                          file=env.stdout)
                else:
                    print(f'Extension "{new.name}" successfully updated: {old_version} → {new.version}.',
                          file=env.stdout)
            if not names:
                print("No extensions installed.", file=env.stdout)
            return ExitStatus.SUCCESS
        enabled = action == "enable"
        where = home if args.scope == "user" else env.cwd
        changed = ext_mod.set_enabled(env.config_dir, args.name, enabled, where=where, **common)
        print(f'Extension "{changed.name}" successfully {"enabled" if enabled else "disabled"} for scope '
              f'"{args.scope}".', file=env.stdout)
        return ExitStatus.SUCCESS
    except ext_mod.ExtensionError as exc:
        env.warn(f"gemini-split: {visible(str(exc))}")
        return ExitStatus.ERROR


def run_list_extensions(env: Environment) -> ExitStatus:
    """``-l/--list-extensions``: gemini-cli's list, every installed
    extension by name (enabled here or not), on stdout; problems on stderr."""
    home = Path(env.environ.get("HOME") or Path.home())
    found = ext_mod.load_extensions(env.config_dir, env.cwd, home=home)
    for problem in found.problems:
        env.warn(f"gemini-split: {visible(problem)}")
    print("Installed extensions:", file=env.stdout)
    for name in found.extensions:
        print(f"- {name}", file=env.stdout)
    return ExitStatus.SUCCESS


def _list(env: Environment, home: Path) -> ExitStatus:
    for line in list_lines(env.config_dir, env.cwd, home, warn=env.warn):
        print(line, file=env.stdout)
    return ExitStatus.SUCCESS


def _confirm(env: Environment, consent: bool) -> Any:
    def confirm(description: str) -> bool:
        print(visible(description), file=env.stderr)
        if consent:
            return True
        if not env.stdin.isatty():
            from gemini_split.userfiles.extensions import ExtensionError

            raise ExtensionError("not installed: confirm at a terminal, or pass --consent after reading the above")
        env.stderr.write("Do you want to continue? [y/N]: ")
        env.stderr.flush()
        answer = env.stdin.readline().strip().lower()
        return answer in ("y", "yes")
    return confirm


def _ask_setting(env: Environment) -> Any:
    def ask(setting: Any) -> str | None:
        if not env.stdin.isatty():
            return None  # reported as missing afterwards
        prompt = f"{setting.name}\n{setting.description}\n{setting.env_var}: "
        if setting.sensitive:
            return getpass.getpass(prompt, stream=env.stderr) or None
        env.stderr.write(prompt)
        env.stderr.flush()
        return env.stdin.readline().rstrip("\n") or None
    return ask


def _say_missing(env: Environment, ext: Any) -> None:
    from gemini_split.userfiles.extensions import missing_settings

    missing = missing_settings(ext)
    if missing:
        env.warn(f'gemini-split: extension "{ext.name}" has settings not set: {", ".join(missing)} '
                 f"(install it at a terminal to be asked, or write them to {ext.install_dir / '.env'})")
