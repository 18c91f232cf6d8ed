"""``gemini-split server list|add|remove|test``: named servers for scripts.

The same operations as the REPL's ``/server`` commands, on the same file
(``servers.json`` in ``$GEMINI_SPLIT_HOME`` or ``~/.gemini``; see
:mod:`gemini_split.client.profiles`). ``list --names`` prints one name a
line: the shell completions call it to complete ``--server``.

Light on imports: ``list --names`` runs on every Tab (bench/cli_start.py),
so trio, the client and the composition root are imported only by ``test``.
"""

from __future__ import annotations

import argparse

from gemini_split.client.profiles import ProfileStore, make_profile, profile_store, profile_table
from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError, ProfileError
from gemini_split.exit_status import ExitStatus

TYPE_CHECKING = False  # typing is not imported on the Tab path
if TYPE_CHECKING:
    from typing import Any

ADDRESS_HELP = "ws://HOST:PORT, wss://HOST:PORT, grpc://HOST:PORT, grpcs://… or 'stdio:COMMAND …'"


def add_server_parser(commands: Any) -> None:
    p = commands.add_parser(
        "server",
        description="Manage server profiles, the names --server and the REPL's /server connect "
                    "accept. They live in servers.json in $GEMINI_SPLIT_HOME or ~/.gemini "
                    "(mode 0600: it may hold tokens).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  gemini-split server add dev ws://127.0.0.1:8080\n"
               "  gemini-split server add prod wss://gemini.example.com:8443 --token-env PROD_TOKEN\n"
               "  gemini-split server add box 'stdio:ssh box gemini-split serve --stdio'\n"
               "  gemini-split server test prod\n"
               "  gemini-split --server prod\n",
    )
    # Each action's arguments are added only when it is parsed (see
    # gemini_split.cli._Subcommands): `server list --names` runs on every Tab.
    actions = p.add_subparsers(dest="server_command", metavar="ACTION", required=True)
    actions.add_lazy("list", "show the profiles", f"{__name__}:_add_list")
    actions.add_lazy("add", "add a profile (or replace the one of that name)", f"{__name__}:_add_add")
    actions.add_lazy("remove", "delete a profile", f"{__name__}:_add_remove")
    actions.add_lazy("status", "the server this client uses (--server, a profile or $GEMINI_SERVER_*): "
                     "version, session, latency, auth", f"{__name__}:_add_status")
    actions.add_lazy("connect", "open the REPL on this server (as --server NAME|URL does)",
                     f"{__name__}:_add_connect")
    actions.add_lazy("test", "connect, and report version, latency and whether auth works", f"{__name__}:_add_test")


def _add_list(commands: Any) -> None:
    ls = commands.add_parser("list")
    ls.add_argument("--names", action="store_true", help="only the names, one a line (for scripts and completion)")


def _add_add(commands: Any) -> None:
    add = commands.add_parser("add")
    add.add_argument("profile_name", metavar="NAME", help="letters, digits, '.', '_', '-'")
    add.add_argument("address", metavar="URL", help=ADDRESS_HELP)
    auth = add.add_mutually_exclusive_group()
    auth.add_argument("--token", dest="profile_token", metavar="TOKEN",
                      help="token to present (stored in the file)")
    auth.add_argument("--token-env", dest="profile_token_env", metavar="VAR",
                      help="read the token from this environment variable when connecting")
    add.add_argument("--ca", dest="profile_ca", metavar="FILE", help="CA certificate to trust for wss://")
    add.add_argument("--insecure", dest="profile_insecure", action="store_true",
                     help="do not verify the server's TLS certificate (testing only)")


def _add_remove(commands: Any) -> None:
    rm = commands.add_parser("remove")
    rm.add_argument("profile_name", metavar="NAME").completer = "profile"  # type: ignore[attr-defined]


def _add_status(commands: Any) -> None:
    status = commands.add_parser("status")
    status.add_argument("target", metavar="NAME|URL", nargs="?",
                        help="a profile name or an address (default: what --server or the environment "
                             "selects)").completer = "profile"  # type: ignore[attr-defined]


def _add_connect(commands: Any) -> None:
    connect = commands.add_parser("connect")
    connect.add_argument("target", metavar="NAME|URL",
                         help="a profile name or an address").completer = "profile"  # type: ignore[attr-defined]


def _add_test(commands: Any) -> None:
    test = commands.add_parser("test")
    test.add_argument("target", metavar="NAME|URL", help="a profile name or an address").completer = "profile"  # type: ignore[attr-defined]


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
        if args.server_command == "test":
            return _test(args.target, env)
        if args.server_command == "status":
            return _status(args, env)
        if args.server_command == "connect":
            return _connect(args, env)
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


def _test(target: str, env: Environment) -> ExitStatus:
    import trio

    from gemini_split.app import settings_for
    from gemini_split.client.connect import describe_connect_error
    from gemini_split.client.probe import probe
    from gemini_split.transport import TransportError

    settings = settings_for(target, env)
    try:
        result = trio.run(probe, settings)
    except (TransportError, ConfigurationError) as exc:
        message, _code, status = describe_connect_error(exc)
        env.warn(f"gemini-split: {settings.server}: {message}")
        return status
    for key, value in result.lines():
        print(f"{key:<8} {value}", file=env.stdout)
    return ExitStatus.SUCCESS


def _status(args: argparse.Namespace, env: Environment) -> ExitStatus:
    """``server status [TARGET]``: like ``test``, for the server this client
    would use when no target is given (``--server`` or ``$GEMINI_SERVER_*``);
    says so when that is the embedded agent loop."""
    from gemini_split.app import resolve_server_address

    target = args.target or args.server or resolve_server_address(None, env)
    if target is None:
        print("server   embedded: the agent loop runs in this process (no --server, GEMINI_SERVER_MODE "
              "is embedded)", file=env.stdout)
        print("profiles gemini-split server list shows them; gemini-split server connect NAME opens the "
              "REPL on one", file=env.stdout)
        return ExitStatus.SUCCESS
    return _test(target, env)


def _connect(args: argparse.Namespace, env: Environment) -> ExitStatus:
    """``server connect TARGET``: the REPL, connected to TARGET."""
    from gemini_split.app import settings_for

    from .repl import run_repl

    settings_for(args.target, env)  # an unknown profile is reported before anything starts
    args.server = args.target
    return run_repl(args, env)
