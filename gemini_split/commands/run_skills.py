"""``gemini-split skills list|enable|disable|install|link|uninstall``:
gemini-cli's ``gemini skills`` for Agent Skills (issue 29 §2, issue 43 §5),
on the client's files.

``enable NAME`` takes the skill out of ``skills.disabled`` in every
settings file listing it, ``disable NAME`` adds it to one (the workspace's
by default, as gemini-cli), both through
:mod:`gemini_split.userfiles.disabled_lists`, in gemini-cli's words.

``install`` copies a local directory (a skill, or a checkout holding skills
one level down), ``link`` makes a symbolic link to it; each shows what
each skill contains and asks, unless ``--consent``; without a terminal to
ask on and without ``--consent`` it refuses (exit 2) and changes nothing.
Skills go where gemini-cli keeps them (``~/.gemini/skills/<name>``, or
``.gemini/skills/<name>`` with ``--scope workspace``), so either tool sees
them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gemini_split.userfiles.extensions import load_extensions
from gemini_split.userfiles import disabled_lists
from gemini_split.userfiles.skills import (
    DISABLED_KEY,
    SkillError,
    consent_text,
    discover,
    find_installable,
    install,
    install_dir,
    link,
    skill_roots,
    uninstall,
)
from gemini_split.commands.run_sessions import printable
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.userfiles.settings import load_settings


def run_skills_command(args: argparse.Namespace, env: Environment) -> ExitStatus:

    try:
        if args.skills_command in ("install", "link"):
            return _install(args, env)
        if args.skills_command == "uninstall":
            return _uninstall(args, env)
        if args.skills_command in ("enable", "disable"):
            return _toggle(args, env)
        return _list(env)
    except (SkillError, OSError) as exc:
        env.warn(f"gemini-split: {exc}")
        return ExitStatus.ERROR


def _toggle(args: argparse.Namespace, env: Environment) -> ExitStatus:
    """gemini-cli's ``skills enable NAME`` / ``skills disable NAME [--scope]``."""
    loaded = load_settings(env)
    scopes = disabled_lists.writable_scopes(loaded)
    if args.skills_command == "enable":
        change = disabled_lists.enable(scopes, DISABLED_KEY, args.name)
    else:
        change = disabled_lists.disable(scopes, args.scope, DISABLED_KEY, args.name)
        if args.scope == "workspace" and not loaded.trusted and change.status != "error":
            env.warn("gemini-split: this folder is not trusted, so its .gemini/settings.json is not read: the skill "
                     "stays enabled here; --scope user disables it everywhere.")
    said = disabled_lists.feedback("Skill", change)
    if change.status == "error":
        env.warn(f"gemini-split: {said}")
        return ExitStatus.ERROR
    print(said, file=env.stdout)
    return ExitStatus.SUCCESS


def _list(env: Environment) -> ExitStatus:

    loaded = load_settings(env)
    for line in loaded.warnings:
        env.warn(line)
    home = Path(env.environ.get("HOME") or Path.home())
    extensions = load_extensions(env.config_dir, env.cwd, home=home)
    found = discover(skill_roots(env.config_dir, home, env.cwd, trusted=loaded.trusted,
                                 extensions=extensions.skill_dirs()),
                     disabled=loaded.merged.skills.disabled)
    for line in found.warnings:
        env.warn(f"gemini-split: skills: {line}")
    if not found.skills:
        env.warn("No skills found (put one in ~/.gemini/skills/NAME/SKILL.md, "
                 "or install one with 'gemini-split skills install PATH').")
        return ExitStatus.SUCCESS
    out = env.stdout
    for s in found.skills:
        state = "disabled" if s.disabled else "enabled"
        out.write(f"{printable(s.name)} [{state}] ({s.scope})\n  {printable(s.description)}\n  {s.path}\n")
    out.flush()
    return ExitStatus.SUCCESS


def _install(args: argparse.Namespace, env: Environment) -> ExitStatus:
    """``install`` (a copy) or ``link`` (a symbolic link): consent first."""
    source = Path(args.path).expanduser()
    source = Path(os.path.normpath(source if source.is_absolute() else env.cwd / source))
    if getattr(args, "subpath", None):
        sub = Path(args.subpath)
        if sub.is_absolute() or ".." in sub.parts:
            env.warn(f"gemini-split: --path {args.subpath}: must be a sub-directory of {args.path}")
            return ExitStatus.USAGE
        source = source / sub
    linking = args.skills_command == "link"
    if linking:
        env.warn(f"Searching for skills in {source}...")
    found = find_installable(source)
    for line in found.warnings:
        env.warn(f"gemini-split: skills: {line}")
    if not found.skills:
        env.warn(f"gemini-split: no valid skills found in {source}. Ensure a SKILL.md file exists "
                 "with valid frontmatter.")
        return ExitStatus.ERROR
    target = install_dir(args.scope, env.config_dir, env.cwd)
    text = consent_text(found, source, target, link=linking)
    verb = "linked" if linking else "installed"
    if not args.consent:
        if not env.stdin_isatty:
            env.warn(text)
            env.warn(f"gemini-split: not {verb}: nobody can answer here (no terminal); "
                     f"read the above and run again with --consent to {args.skills_command}.")
            return ExitStatus.USAGE
        env.warn(text)
        env.stderr.write("Do you want to continue? [Y/n]: ")
        env.stderr.flush()
        answer = env.stdin.readline().strip().lower()
        if answer not in ("", "y", "yes"):
            env.warn(f"Skill {'linking' if linking else 'installation'} cancelled.")
            return ExitStatus.ERROR
    for path in (link if linking else install)(found, target):
        env.warn(f'Successfully {verb} skill "{path.name}" ({args.scope}) to {path}.')
    return ExitStatus.SUCCESS


def _uninstall(args: argparse.Namespace, env: Environment) -> ExitStatus:

    target = install_dir(args.scope, env.config_dir, env.cwd)
    removed = uninstall(args.name, target)
    if removed is None:
        env.warn(f'gemini-split: skill "{args.name}" is not installed in {target} ({args.scope} scope).')
        return ExitStatus.ERROR
    env.warn(f'Successfully uninstalled skill "{args.name}" ({removed}).')
    return ExitStatus.SUCCESS
