"""``gemini-split skills list|install PATH|uninstall NAME``: gemini-cli's
``gemini skills`` for Agent Skills (issue 29 §2), on the client's files.

``install`` takes a local directory (a skill, or a checkout holding skills
one level down); it shows what each skill contains and asks, unless
``--consent``; without a terminal to ask on and without ``--consent`` it
refuses (exit 2) and installs nothing. Skills go where gemini-cli keeps
them (``~/.gemini/skills/<name>``, or ``.gemini/skills/<name>`` with
``--scope workspace``), so either tool sees them.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gemini_split.userfiles.extensions import load_extensions
from gemini_split.userfiles.skills import (
    SkillError,
    consent_text,
    discover,
    find_installable,
    install,
    install_dir,
    skill_roots,
    uninstall,
)
from gemini_split.commands.run_sessions import printable
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.userfiles.settings import load_settings


def run_skills_command(args: argparse.Namespace, env: Environment) -> ExitStatus:

    try:
        if args.skills_command == "install":
            return _install(args, env)
        if args.skills_command == "uninstall":
            return _uninstall(args, env)
        return _list(env)
    except SkillError as exc:
        env.warn(f"gemini-split: {exc}")
        return ExitStatus.ERROR


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

    source = Path(args.path).expanduser()
    source = Path(os.path.normpath(source if source.is_absolute() else env.cwd / source))
    if args.subpath:
        sub = Path(args.subpath)
        if sub.is_absolute() or ".." in sub.parts:
            env.warn(f"gemini-split: --path {args.subpath}: must be a sub-directory of {args.path}")
            return ExitStatus.USAGE
        source = source / sub
    found = find_installable(source)
    for line in found.warnings:
        env.warn(f"gemini-split: skills: {line}")
    if not found.skills:
        env.warn(f"gemini-split: no valid skills found in {source}. Ensure a SKILL.md file exists "
                 "with valid frontmatter.")
        return ExitStatus.ERROR
    target = install_dir(args.scope, env.config_dir, env.cwd)
    text = consent_text(found, source, target)
    if not args.consent:
        if not env.stdin_isatty:
            env.warn(text)
            env.warn("gemini-split: not installed: nobody can answer here (no terminal); "
                     "read the above and run again with --consent to install.")
            return ExitStatus.USAGE
        env.warn(text)
        env.stderr.write("Do you want to continue? [Y/n]: ")
        env.stderr.flush()
        answer = env.stdin.readline().strip().lower()
        if answer not in ("", "y", "yes"):
            env.warn("Skill installation cancelled.")
            return ExitStatus.ERROR
    for path in install(found, target):
        env.warn(f'Successfully installed skill "{path.name}" ({args.scope}) to {path}.')
    return ExitStatus.SUCCESS


def _uninstall(args: argparse.Namespace, env: Environment) -> ExitStatus:

    target = install_dir(args.scope, env.config_dir, env.cwd)
    removed = uninstall(args.name, target)
    if removed is None:
        env.warn(f'gemini-split: skill "{args.name}" is not installed in {target} ({args.scope} scope).')
        return ExitStatus.ERROR
    env.warn(f'Successfully uninstalled skill "{args.name}" ({removed}).')
    return ExitStatus.SUCCESS
