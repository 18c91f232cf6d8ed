"""``gemini-split hooks list``: the hooks of settings.json, as they apply here."""

from __future__ import annotations

import argparse

from gemini_split.userfiles.hooks import describe, load_hooks
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.userfiles.settings import load_settings
from gemini_split.ui.safe_text import visible


def run_hooks_command(args: argparse.Namespace, env: Environment) -> ExitStatus:

    loaded = load_settings(env, trust=True if getattr(args, "skip_trust", False) else None)
    for line in loaded.warnings:
        env.warn(line)
    hooks = load_hooks(loaded)
    for line in hooks.warnings:
        env.warn(line)
    for line in describe(hooks):
        print(visible(line), file=env.stdout)
    return ExitStatus.SUCCESS
