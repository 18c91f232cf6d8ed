"""Flags + environment → :class:`ClientSettings` for the client commands.

All the precedence rules live here: a flag beats an environment variable,
which beats the default. Errors are :class:`ConfigurationError` whose text
says what to change.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from gemini_split.client.approval import ApprovalMode, ApprovalPolicy, parse_allowed_tools, parse_approval_mode
from gemini_split.client.connect import ClientSettings
from gemini_split.environment import Environment
from gemini_split.errors import BadInput, ConfigurationError
from gemini_split.transport import ConnectOptions

DEFAULT_SERVER_PORT = 8080


def resolve_client_settings(args: argparse.Namespace, env: Environment) -> ClientSettings:
    workspace = Path(args.workspace).expanduser() if args.workspace else env.cwd
    workspace = workspace if workspace.is_absolute() else env.cwd / workspace
    if not workspace.is_dir():
        raise BadInput(f"workspace {workspace} is not a directory")
    server = resolve_server_address(args.server, env)
    connect = _connect_options(args, env)
    if connect.insecure:
        env.warn("WARNING: --insecure: the server's TLS certificate is NOT verified; "
                 "anyone on the network path can read and change this session.")
    settings = ClientSettings(
        workspace=Path(os.path.realpath(workspace)),
        server=server,
        connect=connect,
        approval_mode=resolve_approval_mode(args, env),
        allowed_tools=resolve_allowed_tools(args.allowed_tools),
    )
    if server is None:
        settings.embedded = build_embedded_service(args, env)
    return settings


def resolve_approval_mode(args: argparse.Namespace, env: Environment) -> ApprovalMode:
    if getattr(args, "yolo", False):
        return ApprovalMode.YOLO
    text = args.approval_mode or env.environ.get("GEMINI_APPROVAL_MODE") or "default"
    try:
        return parse_approval_mode(text)
    except ValueError as exc:
        source = "--approval-mode" if args.approval_mode else "GEMINI_APPROVAL_MODE"
        raise ConfigurationError(f"{source}: {exc}") from None


def resolve_allowed_tools(values: list[str]) -> tuple[str, ...]:
    """``--allowed-tools`` entries (repeated and/or comma-separated), checked
    now so a typo is a usage error, not a surprise mid-turn."""
    entries = tuple(entry for value in values for entry in parse_allowed_tools(value))
    try:
        ApprovalPolicy(ApprovalMode.DEFAULT, entries)
    except ValueError as exc:
        raise ConfigurationError(f"--allowed-tools: {exc}") from None
    return entries


def resolve_server_address(value: str | None, env: Environment) -> str | None:
    """The server to connect to, or None for embedded mode.

    ``--server`` takes an address (``ws://…``, ``wss://…``, ``stdio:…``) or a
    profile name. Without it, seed 000's environment variables decide:
    ``GEMINI_SERVER_MODE`` = embedded (default) | local | remote, with
    ``GEMINI_SERVER_HOST``, ``GEMINI_SERVER_PORT`` and ``GEMINI_SERVER_SECURE``."""
    if value:
        if ":" in value:
            return value
        return _profile_address(value, env)
    e = env.environ
    mode = (e.get("GEMINI_SERVER_MODE") or "embedded").strip().lower()
    port = e.get("GEMINI_SERVER_PORT") or str(DEFAULT_SERVER_PORT)
    if not port.isdigit():
        raise ConfigurationError(f"GEMINI_SERVER_PORT={port!r} is not a port number")
    scheme = "wss" if _truthy(e.get("GEMINI_SERVER_SECURE")) else "ws"
    if mode == "embedded":
        return None
    if mode == "local":
        return f"{scheme}://127.0.0.1:{port}"
    if mode == "remote":
        host = e.get("GEMINI_SERVER_HOST")
        if not host:
            raise ConfigurationError("GEMINI_SERVER_MODE=remote needs GEMINI_SERVER_HOST")
        return f"{scheme}://{host}:{port}"
    raise ConfigurationError(f"GEMINI_SERVER_MODE={mode!r}: use embedded, local or remote")


def _profile_address(name: str, env: Environment) -> str:
    """The address of the profile called ``name`` in ``servers.json``."""
    return _find_profile(name, env).address


def _find_profile(name: str, env: Environment):
    from gemini_split.client.profiles import profile_store

    store = profile_store(env.config_dir)
    profile = store.get(name)
    if profile is None:
        known = ", ".join(store.names()) or "none yet; add one with: gemini-split server add NAME URL"
        raise ConfigurationError(
            f"--server {name!r} is neither an address (ws://HOST:PORT, wss://…, 'stdio:COMMAND') "
            f"nor a profile in {store.path} (profiles: {known})"
        )
    return profile


def _connect_options(args: argparse.Namespace, env: Environment) -> ConnectOptions:
    """Token, CA and TLS checking: a flag beats the profile named by
    ``--server``, which beats ``$GEMINI_SERVER_TOKEN``."""
    token, ca, insecure = args.token, args.ca, args.insecure
    if args.server and ":" not in args.server:
        profile = _find_profile(args.server, env)
        token = token or profile.resolve_token(env.environ)
        ca = ca or profile.ca
        insecure = insecure or not profile.reject_unauthorized
    token = token or env.environ.get("GEMINI_SERVER_TOKEN") or None
    return ConnectOptions(token=token, ca_file=ca, insecure=insecure)


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def build_embedded_service(args: argparse.Namespace, env: Environment):
    """The server side for embedded mode (the key is checked first)."""
    from gemini_split.server.config import ServerConfig
    from gemini_split.server.service import AgentService

    from .model_setup import open_model

    model_name, model = open_model(
        args.model, env, missing_key_hint=", or use --server to reach a server that has one."
    )
    config = ServerConfig(model=model_name)
    if args.max_turns:
        config.max_turns = args.max_turns
    return AgentService(model, config)
