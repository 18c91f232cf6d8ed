"""``gemini-split server status|connect|test``: what connects to a server
named by a profile or an address (the profile file alone:
:mod:`gemini_split.commands.run_server_profiles`)."""

from __future__ import annotations

import argparse

import trio

from gemini_split.app import resolve_server_address, settings_for
from gemini_split.client.connect import describe_connect_error
from gemini_split.client.probe import probe
from gemini_split.commands.run_repl import run_repl
from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError, ProfileError
from gemini_split.exit_status import ExitStatus
from gemini_split.transport import TransportError


def run_server_remote(args: argparse.Namespace, env: Environment) -> ExitStatus:
    try:
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


def _test(target: str, env: Environment) -> ExitStatus:
    settings = settings_for(target, env)
    try:
        result = trio.run(probe, settings)
    except (TransportError, ConfigurationError) as exc:
        message, _code, status = describe_connect_error(exc)
        env.warn(f"gemini-split: {settings.endpoint.server}: {message}")
        return status
    for key, value in result.lines():
        print(f"{key:<8} {value}", file=env.stdout)
    return ExitStatus.SUCCESS


def _status(args: argparse.Namespace, env: Environment) -> ExitStatus:
    """``server status [TARGET]``: like ``test``, for the server this client
    would use when no target is given (``--server`` or ``$GEMINI_SERVER_*``);
    says so when that is the embedded agent loop."""
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
    settings_for(args.target, env)  # an unknown profile is reported before anything starts
    args.server = args.target
    return run_repl(args, env)
