"""``gemini-split server``'s arguments (the runners:
:mod:`gemini_split.commands.run_server_profiles` for the profile file,
:mod:`gemini_split.commands.run_server_remote` for what connects)."""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # typing is not imported on the Tab path
if TYPE_CHECKING:
    from typing import Any

#: The runners: the profile file alone (light: `server list --names` runs on
#: every Tab), and what connects to a server.
PROFILES = "gemini_split.commands.run_server_profiles:run_server_command"
REMOTE = "gemini_split.commands.run_server_remote:run_server_remote"

ADDRESS_HELP = "ws://HOST:PORT, wss://HOST:PORT, grpc://HOST:PORT, grpcs://… or 'stdio:COMMAND …'"


def add_parser(commands: Any) -> None:
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
    ls.set_defaults(run=PROFILES)
    ls.add_argument("--names", action="store_true", help="only the names, one a line (for scripts and completion)")


def _add_add(commands: Any) -> None:
    add = commands.add_parser("add")
    add.set_defaults(run=PROFILES)
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
    rm.set_defaults(run=PROFILES)
    rm.add_argument("profile_name", metavar="NAME").completer = "profile"  # type: ignore[attr-defined]


def _add_status(commands: Any) -> None:
    status = commands.add_parser("status")
    status.set_defaults(run=REMOTE)
    status.add_argument("target", metavar="NAME|URL", nargs="?",
                        help="a profile name or an address (default: what --server or the environment "
                             "selects)").completer = "profile"  # type: ignore[attr-defined]


def _add_connect(commands: Any) -> None:
    connect = commands.add_parser("connect")
    connect.set_defaults(run=REMOTE)
    connect.add_argument("target", metavar="NAME|URL",
                         help="a profile name or an address").completer = "profile"  # type: ignore[attr-defined]


def _add_test(commands: Any) -> None:
    test = commands.add_parser("test")
    test.set_defaults(run=REMOTE)
    test.add_argument("target", metavar="NAME|URL", help="a profile name or an address").completer = "profile"  # type: ignore[attr-defined]
