"""``gemini-split extensions …``: gemini-cli's extension commands, on its files.

``install PATH|GIT-URL``, ``link PATH``, ``list``, ``update NAME|--all``,
``uninstall NAME…``, ``enable|disable NAME [--scope user|workspace]``,
``new PATH [TEMPLATE]``, ``validate PATH``, ``config [NAME [SETTING]]
[--scope user|workspace]``; the files are gemini-cli's
(:mod:`gemini_split.userfiles.extensions`), so either program manages what
the other installed, and the words are gemini-cli's. Changes apply to
sessions started afterwards.
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
        if action in _MORE:
            return _MORE[action](args, env, home)
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


def _new(args: argparse.Namespace, env: Environment, home: Path) -> ExitStatus:
    """gemini-cli's ``extensions new PATH [TEMPLATE]``."""
    path = Path(args.path).expanduser()
    ext_mod.create(path if path.is_absolute() else env.cwd / path, args.template)
    made = f' from template "{args.template}"' if args.template else ""
    print(f"Successfully created new extension{made} at {args.path}.", file=env.stdout)
    print(f'You can install this using "gemini-split extensions link {args.path}" to test it out.', file=env.stdout)
    return ExitStatus.SUCCESS


def _validate(args: argparse.Namespace, env: Environment, home: Path) -> ExitStatus:
    """gemini-cli's ``extensions validate PATH``: warnings and errors on
    stderr, exit 1 when there is an error."""
    path = Path(args.path).expanduser()
    warnings, errors = ext_mod.validate(path if path.is_absolute() else env.cwd / path, env.cwd)
    if warnings:
        env.warn("Validation warnings:")
        for line in warnings:
            env.warn(f"  - {visible(line)}")
    if errors:
        env.warn("Validation failed with the following errors:")
        for line in errors:
            env.warn(f"  - {visible(line)}")
        env.warn("Extension validation failed.")
        return ExitStatus.ERROR
    print(f"Extension {args.path} has been successfully validated.", file=env.stdout)
    return ExitStatus.SUCCESS


def _config(args: argparse.Namespace, env: Environment, home: Path) -> ExitStatus:
    """gemini-cli's ``extensions config [NAME [SETTING]] [--scope]``: each
    setting asked (a sensitive one without echo); a value already set is
    overwritten only when confirmed. Without a terminal each answer is a
    line of stdin (end of input: left as it is)."""
    if args.name and ("/" in args.name or "\\" in args.name or ".." in args.name):
        env.warn('gemini-split: Invalid extension name. Names cannot contain path separators or "..".')
        return ExitStatus.USAGE
    found = ext_mod.load_extensions(env.config_dir, env.cwd, home=home)
    if args.name is None:
        if not found.extensions:
            print("No extensions installed.", file=env.stdout)
        for ext in found.extensions.values():
            if ext.settings:
                print(f'\nConfiguring settings for "{ext.name}"...', file=env.stdout)
                _configure(ext, args.scope, env)
        return ExitStatus.SUCCESS
    ext = found.extensions.get(args.name)
    if ext is None:
        env.warn(f'gemini-split: Extension "{visible(args.name)}" is not installed.')
        return ExitStatus.ERROR
    if args.setting is None:
        if not ext.settings:
            print(f'Extension "{ext.name}" has no settings to configure.', file=env.stdout)
            return ExitStatus.SUCCESS
        print(f'Configuring settings for "{ext.name}"...', file=env.stdout)
        _configure(ext, args.scope, env)
        return ExitStatus.SUCCESS
    if not ext.settings:
        print("This extension does not have any settings.", file=env.stdout)
        return ExitStatus.SUCCESS
    setting = ext_mod.find_setting(ext, args.setting)
    if setting is None:
        env.warn(f"gemini-split: Setting {visible(args.setting)} not found.")
        return ExitStatus.ERROR
    if _ask_and_set(ext, setting, args.scope, env):
        print(f'Setting "{args.setting}" updated.', file=env.stdout)
    return ExitStatus.SUCCESS


def _configure(ext: Any, scope: str, env: Environment) -> None:
    """Every setting of ``ext``, as gemini-cli's ``configureExtensionSettings``."""
    current = ext_mod.scoped_values(ext, scope, env.cwd)
    workspace = ext_mod.scoped_values(ext, "workspace", env.cwd) if scope == "user" else {}
    for setting in ext.settings:
        if setting.env_var in workspace:
            print(f'Note: Setting "{setting.name}" is already configured in the workspace scope.', file=env.stdout)
        if setting.env_var in current and not _confirm_line(
                env, f'Setting "{setting.name}" ({setting.env_var}) is already set. Overwrite? [y/N]: '):
            continue
        _ask_and_set(ext, setting, scope, env)


def _ask_and_set(ext: Any, setting: Any, scope: str, env: Environment) -> bool:
    """Ask ``setting``'s value and keep it; False when nothing was given."""
    prompt = f"{setting.name}\n{setting.description}\n{setting.env_var}: "
    if env.stdin.isatty():
        if setting.sensitive:
            value: str | None = getpass.getpass(prompt, stream=env.stderr)
        else:
            env.stderr.write(prompt)
            env.stderr.flush()
            value = env.stdin.readline()
    else:
        value = env.stdin.readline() or None  # end of input: nothing given
    if value is None:
        return False
    path = ext_mod.set_value(ext, setting, value.rstrip("\n"), scope=scope, workspace=env.cwd)
    if scope == "workspace":
        env.warn(f"gemini-split: kept in {path} (read for this extension in a trusted folder)")
    return True


def _confirm_line(env: Environment, question: str) -> bool:
    env.stderr.write(question)
    env.stderr.flush()
    return env.stdin.readline().strip().lower() in ("y", "yes")


_MORE = {"new": _new, "validate": _validate, "config": _config}
