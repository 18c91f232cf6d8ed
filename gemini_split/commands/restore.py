"""``gemini-split restore [ID]``: the checkpoints of this workspace, or
going back to one (``/restore`` without the REPL; see
:mod:`gemini_split.client.checkpoints`).

Exit statuses: 0 done (or nothing to do), 1 the files could not be
restored or the conversation not rewound, 2 asked at no terminal without
``--yes``, 42 no such checkpoint, 130 the user said no.
"""

from __future__ import annotations

import argparse

import trio

from gemini_split.app import resolve_client_settings
from gemini_split.client.checkpoints import (
    Checkpoint,
    CheckpointError,
    describe,
    for_settings,
    hand_edited_sentence,
    plan_lines,
)
from gemini_split.commands.options import client_options
from gemini_split.environment import Environment
from gemini_split.exit_status import ExitStatus
from gemini_split.ui.safe_text import visible


def run_restore_command(args: argparse.Namespace, env: Environment) -> ExitStatus:
    settings = resolve_client_settings(client_options(args), env)
    if settings.tools.run_on == "server":
        env.warn("gemini-split: restore: the checkpoints of a --tools server session are on the server; "
                 "restoring them there is not supported yet")
        return ExitStatus.ERROR
    try:
        checkpoints = for_settings(settings.tools)
    except CheckpointError as exc:
        env.warn(f"gemini-split: restore: {exc}")
        return ExitStatus.ERROR
    if args.checkpoint is None:
        for checkpoint in checkpoints.list():
            print(visible(describe(checkpoint), newlines=False), file=env.stdout)
        return ExitStatus.SUCCESS
    root = settings.tools.workspace
    try:
        plan = trio.run(checkpoints.plan, args.checkpoint)
    except CheckpointError as exc:
        env.warn(f"gemini-split: restore: {exc}")
        return ExitStatus.BAD_INPUT if str(exc).startswith("no checkpoint") else ExitStatus.ERROR
    if not plan.changes:
        env.warn(f"gemini-split: the files are as they were at {plan.checkpoint.id}")
    else:
        env.warn(visible("\n".join([f"Restoring {plan.checkpoint.id} changes:", *plan_lines(plan, root)])))
        warning = hand_edited_sentence(plan, root)
        if warning:
            env.warn(visible(warning))
        if not args.yes:
            status = _ask(env)
            if status is not ExitStatus.SUCCESS:
                return status
        try:
            trio.run(checkpoints.restore, plan)
        except CheckpointError as exc:
            env.warn(f"gemini-split: restore: the files were not restored: {exc}")
            return ExitStatus.ERROR
        env.warn(f"gemini-split: restored {len(plan.changes)} file{'s' if len(plan.changes) != 1 else ''}")
    if args.files_only:
        return ExitStatus.SUCCESS
    return _repropose(args, env, plan.checkpoint)


def _ask(env: Environment) -> ExitStatus:
    if not env.stdin_isatty:
        env.warn("gemini-split: restore: not restoring without asking: add --yes (a script), or run it at a terminal")
        return ExitStatus.USAGE
    env.stderr.write("Restore these files? [y/N] ")
    env.stderr.flush()
    answer = env.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        env.warn("Nothing was restored.")
        return ExitStatus.INTERRUPTED
    return ExitStatus.SUCCESS


def _repropose(args: argparse.Namespace, env: Environment, checkpoint: Checkpoint) -> ExitStatus:
    """Rewind the checkpoint's session to its tool call and propose it again."""
    env.warn("gemini-split: the conversation was not rewound: this client cannot rewind a conversation yet "
             "(--files-only restores the files alone)")
    return ExitStatus.ERROR
