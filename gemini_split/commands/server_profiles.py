"""``gemini-split server list|add|remove|test``: named servers for scripts.

The same operations as the REPL's ``/server`` commands, on the same file
(``servers.json`` in ``$GEMINI_SPLIT_HOME`` or ``~/.gemini``; see
:mod:`gemini_split.client.profiles`). ``list --names`` prints one name a
line: the shell completions call it to complete ``--server``.

Light on imports: trio and the client are imported only by ``test``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError, ProfileError
from gemini_split.exit_status import ExitStatus

if TYPE_CHECKING:
    from gemini_split.client.profiles import ServerProfile
    from gemini_split.client.connect import ClientSettings

ADDRESS_HELP = "ws://HOST:PORT, wss://HOST:PORT or 'stdio:COMMAND …'"


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
    actions = p.add_subparsers(dest="server_command", metavar="ACTION", required=True)
    ls = actions.add_parser("list", help="show the profiles")
    ls.add_argument("--names", action="store_true", help="only the names, one a line (for scripts and completion)")
    add = actions.add_parser("add", help="add a profile (or replace the one of that name)")
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
    rm = actions.add_parser("remove", help="delete a profile")
    rm.add_argument("profile_name", metavar="NAME").completer = "profile"  # type: ignore[attr-defined]
    test = actions.add_parser("test", help="connect, and report version, latency and whether auth works")
    test.add_argument("target", metavar="NAME|URL", help="a profile name or an address").completer = "profile"  # type: ignore[attr-defined]


def run_server_command(args: argparse.Namespace, env: Environment) -> ExitStatus:
    from gemini_split.client.profiles import profile_store

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
    except ProfileError as exc:
        env.warn(f"gemini-split: {exc}")
        return ExitStatus.ERROR
    raise AssertionError(args.server_command)


def make_profile(name: str, address: str, *, token: str | None = None, token_env: str | None = None,
                 ca: str | None = None, insecure: bool = False, cwd: Path) -> ServerProfile:
    """A profile from what the user typed; a relative CA path is made
    absolute (the file is read later, from anywhere)."""
    if ca:
        path = Path(ca).expanduser()
        path = path if path.is_absolute() else cwd / path
        if not path.is_file():
            raise ProfileError(f"--ca {ca}: no such file")
        ca = str(path)
    from gemini_split.client.profiles import ServerProfile

    return ServerProfile.from_address(name, address, token=token, token_env=token_env, ca=ca, insecure=insecure)


def _list(store: Any, env: Environment, *, names_only: bool) -> ExitStatus:
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


def profile_table(profiles: list[ServerProfile], current: str | None = None) -> list[str]:
    """One aligned line per profile (tokens never shown); ``current`` gets a ``*``."""
    width = max(len(p.name) for p in profiles)
    addr_width = max(len(p.address) for p in profiles)
    lines = []
    for p in profiles:
        mark = "*" if p.name == current else " "
        extras = [f"auth: {p.describe_auth()}"]
        if p.ca:
            extras.append(f"ca: {p.ca}")
        if not p.reject_unauthorized:
            extras.append("TLS NOT verified")
        lines.append(f"{mark} {p.name:<{width}}  {p.address:<{addr_width}}  {'  '.join(extras)}")
    return lines


# --- probing a server ------------------------------------------------------------


@dataclass
class ProbeResult:
    address: str
    server: str
    protocol_version: str
    session_id: str
    model: str
    latency_ms: float
    token_used: bool

    def lines(self) -> list[tuple[str, str]]:
        return [
            ("server", self.address),
            ("version", f"{self.server or 'unknown'} · protocol {self.protocol_version}"),
            ("session", f"{self.session_id} · model {self.model or 'unknown'}"),
            ("latency", f"{self.latency_ms:.1f} ms (get_state round trip)"),
            ("auth", "ok: the token was accepted" if self.token_used else "ok: no token needed"),
        ]


async def measure_latency(client: Any) -> float:
    """Milliseconds for one ``get_state`` round trip."""
    start = time.perf_counter()
    await client.get_state()
    return (time.perf_counter() - start) * 1000


async def probe(settings: ClientSettings) -> ProbeResult:
    """Connect, handshake, time a ``get_state``, disconnect. Raises what
    :func:`~gemini_split.client.connect.open_client` raises."""
    from gemini_split.client.connect import open_client

    async with open_client(settings) as client:
        connected = client.connected
        assert connected is not None
        latency = await measure_latency(client)
    return ProbeResult(
        address=settings.server or "embedded", server=connected.server,
        protocol_version=connected.protocol_version, session_id=connected.session_id,
        model=connected.model, latency_ms=latency, token_used=bool(settings.connect.token),
    )


def settings_for(target: str, env: Environment, base: ClientSettings | None = None) -> ClientSettings:
    """Client settings that reach ``target``: a profile name or an address
    (whose token comes from ``$GEMINI_SERVER_TOKEN``)."""
    import dataclasses

    from gemini_split.client.connect import ClientSettings
    from gemini_split.transport import ConnectOptions

    if ":" in target:
        address = target
        connect = ConnectOptions(token=env.environ.get("GEMINI_SERVER_TOKEN") or None)
    else:
        from gemini_split.client.profiles import profile_store

        profile = profile_store(env.config_dir).get(target)
        if profile is None:
            raise ProfileError(f"no profile named {target!r} (see: gemini-split server list)")
        address = profile.address
        connect = ConnectOptions(token=profile.resolve_token(env.environ), ca_file=profile.ca,
                                 insecure=not profile.reject_unauthorized)
    if base is None:
        return ClientSettings(workspace=env.cwd, server=address, connect=connect)
    return dataclasses.replace(base, server=address, connect=connect, embedded=None)


def describe_connect_error(exc: BaseException) -> tuple[str, str | None, ExitStatus]:
    """(message, error code, exit status) for a failure to reach a server."""
    from gemini_split.client.protocol_client import HandshakeFailed, RequestFailed
    from gemini_split.exit_status import exit_status_for
    from gemini_split.transport import AuthenticationFailed

    status = exit_status_for(exc)
    if isinstance(exc, AuthenticationFailed):
        return f"authentication failed: {exc}", "unauthorized", status
    if isinstance(exc, HandshakeFailed | RequestFailed):
        return str(exc), exc.code, status
    message = str(exc)
    if not message.lower().startswith("cannot connect"):
        message = f"cannot connect: {message}"
    return message, "connect_failed", status


def _test(target: str, env: Environment) -> ExitStatus:
    import trio

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
