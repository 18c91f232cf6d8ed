"""``gemini-split server list|add|remove``: named servers for scripts.

The same operations as the REPL's ``/server`` commands, on the same file
(``servers.json`` in ``$GEMINI_SPLIT_HOME`` or ``~/.gemini``; see
:mod:`gemini_split.client.profiles`). ``list --names`` prints one name a
line: the shell completions call it to complete ``--server``.

Light on imports: ``list --names`` runs on every Tab (bench/cli_start.py),
so what connects to a server (trio, the client, the composition root) is
in :mod:`gemini_split.commands.run_server_remote`.
"""

from __future__ import annotations

import argparse

from gemini_split.client.profiles import ProfileStore, make_profile, profile_store, profile_table
from gemini_split.environment import Environment
from gemini_split.errors import ProfileError
from gemini_split.exit_status import ExitStatus


def run_server_command(args: argparse.Namespace, env: Environment) -> ExitStatus:
    store = profile_store(env.config_dir)
    try:
        if args.server_command == "list":
            return _list(store, env, names_only=args.names)
        if args.server_command == "add":
            profile = make_profile(args.profile_name, args.address, token=args.profile_token,
                                   token_env=args.profile_token_env, ca=args.profile_ca,
                                   insecure=args.profile_insecure, cwd=env.cwd)
            replaced = store.add(profile)
            print(f"{'Replaced' if replaced else 'Added'} profile {profile.name}: {profile.address} "
                  f"(in {store.path})", file=env.stdout)
            return ExitStatus.SUCCESS
        if args.server_command == "remove":
            if not store.remove(args.profile_name):
                env.warn(f"gemini-split: no profile named {args.profile_name!r} in {store.path}")
                return ExitStatus.ERROR
            print(f"Removed profile {args.profile_name}", file=env.stdout)
            return ExitStatus.SUCCESS
    except ProfileError as exc:
        env.warn(f"gemini-split: {exc}")
        return ExitStatus.ERROR
    raise AssertionError(args.server_command)


def _list(store: ProfileStore, env: Environment, *, names_only: bool) -> ExitStatus:
    profiles = store.load()
    if names_only:
        for profile in profiles:
            print(profile.name, file=env.stdout)
        return ExitStatus.SUCCESS
    if not profiles:
        env.warn(f"No profiles in {store.path}. Add one: gemini-split server add NAME URL")
        return ExitStatus.SUCCESS
    for line in profile_table(profiles):
        print(line, file=env.stdout)
    return ExitStatus.SUCCESS
