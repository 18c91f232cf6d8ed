"""``-w/--worktree [NAME]``: the run moves into a new git worktree before
anything else reads the current directory (:mod:`gemini_split.worktrees`).

The worktree is made on this machine, where the tools run: with the
embedded server, through the local daemon and against ``serve`` alike,
since the client's tools edit its files. With ``--tools server`` the tools
run in the server's workspace, which a worktree here cannot change: that
is refused, as are the flags that start no new session of their own.
"""

from __future__ import annotations

import argparse
import os

from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError
from gemini_split.userfiles.settings import load_settings
from gemini_split.worktrees import create

#: gemini-cli's words when ``experimental.worktrees`` is not on.
NOT_ENABLED = "The --worktree flag is only available when experimental.worktrees is enabled in your settings."


def enter_worktree(args: argparse.Namespace, env: Environment) -> Environment:
    """``env`` moved into a new worktree of the repository ``env.cwd`` is
    in (a process that ``env`` owns changes its directory too). Raises
    ConfigurationError for flags it does not go with and when
    ``experimental.worktrees`` is off (nothing is made then), and
    WorktreeFailed when git cannot make it."""
    refusal = _refusal(args)
    if refusal:
        raise ConfigurationError(refusal)
    if not load_settings(env, trust=True if args.skip_trust else None).merged.experimental.worktrees:
        raise ConfigurationError(NOT_ENABLED)
    worktree = create(env.cwd, args.worktree, env.environ)
    env.warn(f"gemini-split: working in the new git worktree {worktree.path} (branch {worktree.branch})")
    if env.owns_process:
        os.chdir(worktree.path)
    moved = Environment(env.stdin, env.stdout, env.stderr, env.environ, worktree.path, owns_process=env.owns_process)
    moved.env_file_names = env.env_file_names
    return moved


def _refusal(args: argparse.Namespace) -> str | None:
    """Why ``--worktree`` cannot go with the other flags given, or None."""
    if args.tools == "server" or args.project:
        return ("--worktree makes the worktree on this machine, for the tools that run here; with --tools "
                "server the tools run in the server's own workspace, which it would not change. Use one "
                "of them (a project on the server: serve --project NAME=PATH and --project NAME)")
    if args.workspace:
        return "--worktree and --workspace cannot be combined: the new worktree is the workspace"
    for flag, given in (("--acp", args.acp), ("--list-sessions", args.list_sessions),
                        ("--delete-session", args.delete_session), ("--rewind-to", args.rewind_to)):
        if given:
            return f"--worktree starts a new session in a new worktree; it does not go with {flag}"
    return None
