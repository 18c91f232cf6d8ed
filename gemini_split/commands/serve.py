"""``gemini-split serve``: the agent loop as a daemon (WebSocket) or on a
pipe (``--stdio``).

Safe by default: binds to loopback; refuses a non-loopback address without
``--auth-config`` unless ``--insecure-no-auth`` says so explicitly. SIGINT
and SIGTERM shut down gracefully: running turns are cancelled, clients get a
close with a reason, and the process exits 0.
"""

from __future__ import annotations

import argparse
import functools
import logging
import signal
from pathlib import Path
from typing import Any

from gemini_split.argtypes import positive_int
from gemini_split.environment import Environment
from gemini_split.errors import ConfigurationError
from gemini_split.exit_status import ExitStatus

log = logging.getLogger("gemini_split.serve")

# Mirrors gemini_split.server.store (not imported here: --help stays fast;
# tests/test_cli_start.py checks the copies agree).
DEFAULT_REPLAY_CAPACITY = 2000
DEFAULT_SESSION_TTL = 7 * 24 * 3600.0
#: Seconds between two sweeps of idle sessions.
EXPIRY_INTERVAL = 3600.0

DEFAULT_PORT = 8080
#: Seconds running sessions get to wind down on shutdown.
SHUTDOWN_GRACE = 5.0


def add_serve_parser(commands: Any) -> None:
    p = commands.add_parser(
        "serve",
        description="Run the agent loop (the part that talks to Gemini) for clients that "
                    "connect over WebSocket, or for one client over stdin/stdout (--stdio). "
                    "Tools still run on the clients.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n"
               "  gemini-split serve                                 ws://127.0.0.1:8080\n"
               "  gemini-split serve --listen 0.0.0.0:8443 --auth-config tokens.json \\\n"
               "      --tls-cert cert.pem --tls-key key.pem          wss:// with tokens\n"
               "  ssh box gemini-split serve --stdio                 one session over ssh\n",
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument("--listen", metavar="HOST:PORT",
                       help="address to listen on (default 127.0.0.1:$GEMINI_SERVER_PORT or 8080), or "
                            "unix:/PATH: a Unix socket only your own user can connect to (its directory "
                            "must be 0700)")
    where.add_argument("--stdio", action="store_true",
                       help="serve one session as JSON lines on stdin/stdout (logs go to stderr)")
    p.add_argument("--auth-config", metavar="FILE",
                   help='tokens file {"tokens": {TOKEN: {"userId": …, "permissions": […]}}} '
                        "(default: $GEMINI_AUTH_CONFIG)")
    p.add_argument("--insecure-no-auth", action="store_true",
                   help="allow a non-loopback address without tokens (anyone who can connect "
                        "can use your API key)")
    p.add_argument("--tls-cert", metavar="FILE", help="certificate chain (PEM): serve wss://")
    p.add_argument("--tls-key", metavar="FILE", help="private key (PEM) for --tls-cert")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="browser Origin allowed to connect (repeatable)")
    p.add_argument("--trusted-proxy", action="append", default=[], metavar="CIDR",
                   help="a reverse proxy (address or CIDR) whose X-Forwarded-For / X-Real-IP name the "
                        "client that wrong tokens are counted against (repeatable; default: none, the "
                        "connecting address counts)")
    p.add_argument("--max-connections-per-user", type=int, default=8, metavar="N",
                   help="open connections one token may have (default 8; 0 = no cap)")
    p.add_argument("--max-message-size", type=int, default=16 * 1024 * 1024, metavar="BYTES",
                   help="largest message accepted (default 16 MiB)")
    p.add_argument("--tool-timeout", type=float, default=900.0, metavar="SECONDS",
                   help="how long a client has to answer a tool request (default 900)")
    p.add_argument("--auth-method", choices=("api-key", "vertex-ai"),
                   help="how this server reaches Gemini, whatever the environment says: api-key "
                        "($GEMINI_API_KEY) or vertex-ai (GOOGLE_CLOUD_PROJECT with Application Default "
                        "Credentials, or express mode's GOOGLE_API_KEY); default: as gemini-cli chooses")
    p.add_argument("--allow-client-credentials", action="store_true",
                   help="let each client bring its own Gemini API key (gemini-split --send-api-key) for "
                        "its sessions, kept in memory only; taken over TLS or from this machine only. "
                        "The server then needs no credentials of its own")
    p.add_argument("-m", "--model", dest="serve_model", metavar="MODEL",
                   help="default model for sessions (default: $GEMINI_MODEL or gemini-2.5-flash)")
    p.add_argument("--allowed-models", metavar="NAMES",
                   help="comma-separated models (or patterns such as gemini-2.5-*) clients may ask "
                        "for (default: any valid model name; the default model always)")
    p.add_argument("--max-turns", dest="serve_max_turns", type=int, metavar="N",
                   help="model calls allowed per prompt (default 100)")
    acp = p.add_argument_group("ACP bridge (docs/acp.md)")
    acp.add_argument("--acp-ws", nargs="?", const="", metavar="HOST:PORT",
                     help="also serve the Agent Client Protocol over WebSocket, on the same sessions "
                          "(default 127.0.0.1:$GEMINI_PORT or 4444; same auth, TLS and limits)")
    acp.add_argument("--acp-ring", type=positive_int, default=2000, metavar="N",
                     help="session/update messages kept per session for late joiners (default 2000)")
    acp.add_argument("--log-file", metavar="FILE",
                     help="with --acp-ws: also log to FILE (default gemini-acp.log in $GEMINI_SPLIT_HOME), "
                          "rotated at 2 MB to FILE.old")
    sessions = p.add_argument_group("sessions")
    sessions.add_argument("--state-dir", metavar="DIR",
                          help="where sessions are kept, so clients can resume them after a cut or a "
                               "restart (default: $GEMINI_SPLIT_HOME/sessions, i.e. ~/.gemini/sessions; "
                               "':memory:' keeps them in this process only)")
    sessions.add_argument("--store", metavar="URL",
                          help="keep sessions in Redis instead, shared by several serve replicas: "
                               "redis://[user:password@]host:port/db or rediss://… for TLS "
                               "(default: $GEMINI_SPLIT_REDIS_URL if set, else --state-dir)")
    sessions.add_argument("--lease-ttl", type=parse_duration, default=None, metavar="DURATION",
                          help="with --store: how long a replica's hold on a session lasts unrenewed, i.e. "
                               "how soon another replica takes over the sessions of one that died "
                               "(default 10s)")
    sessions.add_argument("--replay-capacity", type=positive_int, default=DEFAULT_REPLAY_CAPACITY, metavar="N",
                          help=f"events kept per session for resuming clients (default {DEFAULT_REPLAY_CAPACITY})")
    sessions.add_argument("--session-ttl", type=parse_duration, default=DEFAULT_SESSION_TTL, metavar="DURATION",
                          help="drop sessions idle for longer than this: 90s, 30m, 12h, 7d (default 7d)")
    grpc = p.add_argument_group("gRPC (seed 001's gemini.v1.GeminiService; needs: pip install 'gemini-split[grpc]')")
    grpc.add_argument("--grpc", metavar="HOST:PORT",
                      help="also serve gRPC Chat streams here (grpcs:// with --tls-cert); each stream is a "
                           "session like any other")
    grpc.add_argument("--no-websocket", action="store_true",
                      help="with --grpc: serve gRPC only, no WebSocket listener")
    grpc.add_argument("--grpc-allow-config", metavar="KEYS", default="",
                      help="comma-separated StartRequest.advanced_config keys clients may set "
                           "(known: userMemory; default: none)")
    grpc.add_argument("--grpc-max-streams", type=positive_int, default=64, metavar="N",
                      help="gRPC streams served at once (default 64)")
    sessions.add_argument("--allow-attach-by-id", action=argparse.BooleanOptionalAction, default=None,
                          help="let a user join one of their own sessions that has clients attached by its "
                               "id alone, without its resume token (`gemini-split attach ID`; default: on "
                               "for a loopback address or --stdio, off otherwise)")
    tools = p.add_argument_group(
        "server-side tools",
        "Run the built-in tools here, for clients that ask (gemini-split --tools server), each session "
        "confined to its own workspace, with approvals asked of the attached clients. Off by default.")
    tools.add_argument("--server-tools", action="store_true",
                       help="let clients run tools on this server (hello.tools = server)")
    tools.add_argument("--workspace-root", metavar="DIR",
                       help="where each session's own workspace is created, 0700, and deleted with the "
                            "session (default: workspaces/ under GEMINI_SPLIT_HOME)")
    tools.add_argument("--project", dest="serve_projects", action="append", default=[], metavar="NAME=PATH",
                       help="a directory a client may ask for by name instead of a fresh workspace "
                            "(repeatable); anything else is refused")
    tools.add_argument("--approval-timeout", type=parse_duration, default=600.0, metavar="DURATION",
                       help="how long a tool call waits for an approval before the model is told it "
                            "was not approved (default 10m)")
    tools.add_argument("--max-approval-mode", default="auto_edit", metavar="MODE",
                       help="the most permissive approval mode a client may ask for: plan, "
                            "reject_dangerous, default, auto_edit or yolo (default: auto_edit: "
                            "commands are asked about)")
    # SUPPRESS: the main parser's --policy/--admin-policy (before `serve`) count too.
    tools.add_argument("--policy", action="append", default=argparse.SUPPRESS, metavar="FILE|DIR",
                       help="policy rules (gemini-cli TOML) for server-side tools instead of "
                            "~/.gemini/policies; a deny rule refuses even in yolo")
    tools.add_argument("--admin-policy", action="append", default=argparse.SUPPRESS, metavar="FILE|DIR",
                       help="admin policy rules for server-side tools, above every other rule")
    tools.add_argument("--sandbox", dest="serve_sandbox", choices=("auto", "bwrap", "none"), default="auto",
                       help="run server-side shell commands under bubblewrap: auto (the default) uses it "
                            "and refuses to start when it does not work; none runs them unsandboxed")
    tools.add_argument("--web-fetch-allow", action="append", default=[], metavar="CIDR|HOST",
                       help="let server-side web_fetch reach this network or host name although it is "
                            "loopback, private or link-local (repeatable; default: public addresses only)")
    tools.add_argument("--sandbox-network", dest="serve_sandbox_network", action="store_true",
                       help="let sandboxed server-side commands reach the network (default: no network)")
    # SUPPRESS: a subcommand default must not undo `gemini-split --debug serve`.
    p.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help="log details to stderr")


def run_serve(args: argparse.Namespace, env: Environment) -> ExitStatus:
    """Check everything that can be checked, then serve until told to stop."""
    # Imported here, not above: `gemini-split --help` builds this command's
    # parser and must not pay for trio (bench/cli_start.py measures it).
    import trio

    from gemini_split.server.auth import load_auth_config
    from gemini_split.server.config import ServerConfig
    from gemini_split.server.model.names import parse_allowed_models
    from gemini_split._trio_util import single_exceptions
    from gemini_split.transport import ServeOptions, TransportError, is_loopback_host

    e = env.environ
    # The key first, before anything else (this also builds the model, which
    # imports google-genai).
    model_name, model = _serve_model(args, env)
    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigurationError("--tls-cert and --tls-key go together")

    auth_path = args.auth_config or e.get("GEMINI_AUTH_CONFIG")
    authenticate = load_auth_config(auth_path) if auth_path else None
    if args.grpc and args.stdio:
        raise ConfigurationError("--grpc listens on a port; it does not go with --stdio")
    if args.no_websocket and not args.grpc:
        raise ConfigurationError("--no-websocket goes with --grpc HOST:PORT (otherwise nothing would be served)")
    grpc_address = _grpc_address(args, authenticate) if args.grpc else None
    local = True
    if args.stdio:
        address = "stdio:-"
    elif args.no_websocket:
        address = None
        local = False  # gRPC only: attach by id is for loopback WebSocket / stdio
    elif (args.listen or "").startswith("unix:"):
        if args.tls_cert:
            raise ConfigurationError("--tls-cert: a unix: socket is not served over TLS")
        address = args.listen  # the unix transport checks its path and refuses other uids (SO_PEERCRED)
    else:
        host, port = _parse_listen(args.listen, e.get("GEMINI_SERVER_PORT"))
        if authenticate is None and not is_loopback_host(host) and not args.insecure_no_auth:
            raise ConfigurationError(
                f"refusing to listen on {host} without authentication: anyone who can reach it "
                "could use your API key. Pass --auth-config FILE (or GEMINI_AUTH_CONFIG), or "
                "--insecure-no-auth if you really mean it."
            )
        local = is_loopback_host(host)
        scheme = "wss" if args.tls_cert else "ws"
        address = f"{scheme}://{_bracket(host)}:{port}"

    acp_address = None
    if getattr(args, "acp_ws", None) is not None:
        if args.stdio:
            raise ConfigurationError("--acp-ws needs a listening server, not --stdio")
        acp_host, acp_port = _parse_listen(args.acp_ws or None, e.get("GEMINI_PORT") or "4444")
        if authenticate is None and not is_loopback_host(acp_host) and not args.insecure_no_auth:
            raise ConfigurationError(
                f"refusing to serve ACP on {acp_host} without authentication: pass --auth-config FILE "
                "(or GEMINI_AUTH_CONFIG), or --insecure-no-auth if you really mean it."
            )
        acp_address = f"{'wss' if args.tls_cert else 'ws'}://{_bracket(acp_host)}:{acp_port}"

    notice = _check_who_can_connect(args, authenticate, address, grpc_address, acp_address)
    config = ServerConfig(model=model_name, tool_timeout=args.tool_timeout, max_message_size=args.max_message_size,
                          replay_capacity=args.replay_capacity,
                          allow_attach_by_id=local if args.allow_attach_by_id is None else args.allow_attach_by_id)
    if args.serve_max_turns:
        config.max_turns = args.serve_max_turns
    if args.allowed_models:
        try:
            config.allowed_models = parse_allowed_models(args.allowed_models)
        except ValueError as exc:
            raise ConfigurationError(f"--allowed-models: {exc}") from None
    options = ServeOptions(
        authenticate=authenticate,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        allowed_origins=tuple(args.allow_origin),
        max_message_size=args.max_message_size,
        max_connections_per_user=args.max_connections_per_user,
        trusted_proxies=_trusted_proxies(args.trusted_proxy),
    )
    if not args.debug:
        # A daemon's operator wants sessions opening and closing in the log.
        logging.getLogger("gemini_split").setLevel(logging.INFO)
    from gemini_split.server.service import AgentService

    from gemini_split.server.store import StoreError, open_store

    # A stdio server is one process per connection (often spawned over ssh):
    # several may share the directory, so only a listening server locks it.
    from gemini_split.server.store.redis import store_url

    redis_url = store_url(args.store, e)
    if redis_url is not None and not redis_url.startswith(("redis://", "rediss://")):
        raise ConfigurationError("--store: give a redis:// or rediss:// URL (sessions on disk: --state-dir)")
    if redis_url is not None and args.state_dir:
        raise ConfigurationError("--store and --state-dir: give one (sessions live in Redis or on disk)")
    store = open_store(redis_url or state_dir(args.state_dir, env), replay_capacity=args.replay_capacity,
                       exclusive=not args.stdio)
    from gemini_split.app import server_tools_from
    from gemini_split.commands.options import server_tools_options

    server_tools = server_tools_from(server_tools_options(args), env)
    client_model = None
    if args.allow_client_credentials:
        from gemini_split.server.model.callers import network_caller_model

        client_model = functools.partial(network_caller_model, base_url=e.get("GOOGLE_GEMINI_BASE_URL") or None)
    service = AgentService(model, config, authenticate=authenticate, store=store, server_tools=server_tools,
                           client_model=client_model)
    if redis_url is not None:
        from gemini_split.server.replicas.replica import DEFAULT_LEASE_TTL, Replica

        # One replica of several: a session runs where its lease is held.
        service.manager.replica = Replica(store, lease_ttl=args.lease_ttl or DEFAULT_LEASE_TTL)  # type: ignore[arg-type]
    elif args.lease_ttl is not None:
        raise ConfigurationError("--lease-ttl goes with --store redis://… (replicas)")
    from gemini_split.server.ops import Operations

    ops = Operations(service)
    options.health, options.ready, options.metrics = ops.health, ops.ready, ops.metrics
    stop_log = None
    acp = None
    if acp_address is not None:
        from gemini_split.client.approval_mode import parse_approval_mode
        from gemini_split.commands.acp import log_path, open_log

        try:
            mode = parse_approval_mode(e.get("GEMINI_APPROVAL_MODE") or "default")
        except ValueError as exc:
            raise ConfigurationError(f"GEMINI_APPROVAL_MODE: {exc}") from None
        acp = (acp_address, mode, args.acp_ring)
        stop_log = open_log(log_path(args, env))
    listeners = [(address, options)] if address else []
    if grpc_address:
        import msgspec

        from gemini_split.client.face_client import open_face_client
        from gemini_split.server.model.names import check_model_name

        listeners.append((grpc_address, msgspec.structs.replace(options, extra={
            # The face opens its streams' sessions with the native client.
            "open_client": open_face_client,
            "check_model": functools.partial(check_model_name, allowed=config.allowed_models, default=config.model),
            "allowed_config": _grpc_config_keys(args.grpc_allow_config),
            "max_streams": args.grpc_max_streams,
            "server_tools": bool(args.server_tools),
        })))
    try:
        with single_exceptions():
            trio.run(_serve, service, listeners, env, args.session_ttl, acp, options, ops, notice)
    except TransportError as exc:
        env.warn(f"gemini-split serve: cannot serve {' and '.join(a for a, _ in listeners)}: {exc}")
        return ExitStatus.ERROR
    except StoreError as exc:
        env.warn(f"gemini-split serve: {exc}")
        return ExitStatus.ERROR
    finally:
        if stop_log is not None:
            stop_log()
    return ExitStatus.SUCCESS


def _serve_model(args: argparse.Namespace, env: Environment) -> tuple[str, Any]:
    """The server's own model name and model: with ``--auth-method``, only
    by that method; with ``--allow-client-credentials`` and no credentials
    at all, none (each session runs on its client's key)."""
    from gemini_split.app import open_model
    from gemini_split.errors import MissingApiKey

    environ = dict(env.environ)
    selected = None
    if args.auth_method == "api-key":
        environ.pop("GOOGLE_GENAI_USE_VERTEXAI", None)
    elif args.auth_method == "vertex-ai":
        if args.allow_client_credentials:
            raise ConfigurationError("--allow-client-credentials takes Gemini API keys from clients; it does not "
                                     "go with --auth-method vertex-ai (every session on Vertex AI)")
        selected = "vertex-ai"
    try:
        return open_model(args.serve_model, env, environ=environ, selected_type=selected,
                          missing_key_hint="; the server needs it to talk to Gemini"
                          + (", or --allow-client-credentials to take each client's own key."
                             if not args.allow_client_credentials else "."))
    except MissingApiKey:
        if not args.allow_client_credentials or args.auth_method == "vertex-ai" \
                or environ.get("GOOGLE_GENAI_USE_VERTEXAI"):
            raise
    from gemini_split.server.model.callers import SERVER_HAS_NO_KEY, KeylessModel
    from gemini_split.server.config import DEFAULT_MODEL

    return args.serve_model or environ.get("GEMINI_MODEL") or DEFAULT_MODEL, KeylessModel(SERVER_HAS_NO_KEY)


def state_dir(value: str | None, env: Environment) -> str:
    """``--state-dir``, or ``sessions/`` under ``GEMINI_SPLIT_HOME``."""
    if value:
        return value if value == ":memory:" else str(Path(value).expanduser())
    return str(env.config_dir / "sessions")


def parse_duration(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``12h``, ``7d`` → seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        value = float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 90s, 30m, 12h, 7d)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError("must be more than zero")
    return value


async def _expire_sessions(store: Any, ttl: float, server_tools: Any = None) -> None:
    import time

    import trio

    from gemini_split.server.store import StoreError

    while True:
        try:
            gone = await store.expire(time.time() - ttl)
        except StoreError as exc:  # the store is away for now: next time
            log.warning("could not drop idle sessions: %s", exc)
            gone = []
        if gone:
            log.info("dropped %d session(s) idle for more than %gs", len(gone), ttl)
            for session_id in gone if server_tools is not None else ():
                server_tools.remove_workspace(session_id)
        await trio.sleep(EXPIRY_INTERVAL)


async def _serve(service: Any, listeners: list[tuple[str, Any]], env: Environment, session_ttl: float,
                 acp: tuple[str, Any, int] | None = None, options: Any = None, ops: Any = None,
                 notice: str | None = None) -> None:
    """Run ``service`` behind each ``(address, options)`` listener (and the
    ACP bridge, with ``options``) until a signal (or a stdio server's one
    connection) ends it; ``ops`` (/ready, /metrics) watches the store.
    ``notice``: a warning said once everything listens."""
    import trio

    from gemini_split.collector import settle_for_serving
    from gemini_split.transport import get_transport

    try:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                # Before listening: a bad state directory must stop us, not a client.
                await nursery.start(service.run)
                # Built once, and then out of the collector's way (gemini_split/collector.py).
                service.model.warm_up(service.config.model)
                settle_for_serving()

                for address, listen_options in listeners:
                    transport = get_transport(address)

                    async def serve_then_stop(*, task_status: Any, transport: Any = transport,
                                              address: str = address, listen_options: Any = listen_options) -> None:
                        await transport.serve(address, service.handle_connection, listen_options,
                                              task_status=task_status)
                        # Only a stdio server returns: its one connection has ended.
                        nursery.cancel_scope.cancel()

                    bound = await nursery.start(serve_then_stop)
                    if not address.startswith("stdio:"):
                        log.info("gemini-split serving on %s (model %s, auth %s, store %s)", bound,
                                 service.config.model, "on" if listen_options.authenticate else "off",
                                 describe_store(service.store))
                        if getattr(service.model, "auth_description", ""):
                            log.info("the model is reached through %s", service.model.auth_description)

                async def stop_on_signal() -> None:
                    async for signum in signals:
                        log.info("received %s: shutting down", signal.Signals(signum).name)
                        await service.shutdown(grace=SHUTDOWN_GRACE)
                        nursery.cancel_scope.cancel()
                        return

                if acp is not None:
                    from gemini_split.acp.bridge import serve_acp_ws

                    acp_address, mode, ring = acp
                    acp_bound = await nursery.start(functools.partial(
                        serve_acp_ws, service, acp_address, options, approval_mode=mode, ring_capacity=ring))
                    log.info("ACP bridge on %s", acp_bound)

                if notice:
                    log.warning("%s", notice)
                nursery.start_soon(stop_on_signal)
                nursery.start_soon(_expire_sessions, service.store, session_ttl, service.server_tools)
                if ops is not None:
                    nursery.start_soon(ops.run)
    finally:
        with trio.CancelScope(shield=True):
            await service.aclose()


def _check_who_can_connect(args: argparse.Namespace, authenticate: Any, address: str | None,
                           grpc_address: str | None, acp_address: str | None) -> str | None:
    """Refuse ``--server-tools`` where nothing says who connects; → what
    to say once listening about who can use a server without tokens (None:
    nothing). Without ``--auth-config``
    only ``--stdio`` (ssh has authenticated its caller) and ``--listen
    unix:PATH`` (the kernel tells the peer's uid; other uids are refused)
    know who is there: a TCP port on loopback carries no peer identity, so
    every local account could connect."""
    if authenticate is not None:
        return None
    tcp = [a for a in (address, grpc_address, acp_address) if a and not a.startswith(("stdio:", "unix:"))]
    if not tcp:
        return None
    if args.server_tools:
        raise ConfigurationError(
            f"refusing --server-tools on {tcp[0]} without authentication: every local account (and anyone "
            "who can reach it) could run commands as this server's user. Pass --auth-config FILE (or "
            "GEMINI_AUTH_CONFIG), or serve one user over --listen unix:/PATH (peer uid checked) or --stdio.")
    return ("no --auth-config: every local account on this machine can use this server (its sessions and "
            "your API key); give tokens (--auth-config) or use --listen unix:/PATH on a shared machine")


def _grpc_address(args: argparse.Namespace, authenticate: Any) -> str:
    """``--grpc HOST:PORT`` as a grpc:// or grpcs:// address. A
    non-loopback address needs TLS and tokens unless --insecure-no-auth."""
    from gemini_split.transport import is_loopback_host

    host, port = _parse_listen(args.grpc, None)
    if not is_loopback_host(host) and not (authenticate is not None and args.tls_cert) and not args.insecure_no_auth:
        raise ConfigurationError(
            f"refusing to serve gRPC on {host} without TLS and authentication: pass --tls-cert/--tls-key "
            "and --auth-config FILE, or --insecure-no-auth if you really mean it."
        )
    return f"{'grpcs' if args.tls_cert else 'grpc'}://{_bracket(host)}:{port}"


def _trusted_proxies(entries: list[str]) -> tuple[str, ...]:
    """``--trusted-proxy`` entries, checked now (a typo must stop the start,
    not silently count every client as the proxy)."""
    from gemini_split.throttle import parse_networks

    try:
        parse_networks(entries)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from None
    return tuple(entries)


def _grpc_config_keys(text: str) -> tuple[str, ...]:
    """``--grpc-allow-config`` as a tuple of keys (the gRPC plugin refuses
    to start with a key it does not know)."""
    return tuple(k.strip() for k in text.split(",") if k.strip())


def _parse_listen(listen: str | None, env_port: str | None) -> tuple[str, int]:
    if not listen:
        port_text = env_port or str(DEFAULT_PORT)
        host = "127.0.0.1"
    else:
        host, sep, port_text = listen.rpartition(":")
        if not sep:
            raise ConfigurationError(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
        host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
        if not 0 <= port <= 65535:
            raise ValueError
    except ValueError:
        raise ConfigurationError(f"{port_text!r} is not a port number (0-65535)") from None
    return host, port


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def describe_store(store: Any) -> str:
    """Where ``store`` keeps sessions, for the start-up line: the SQLite
    file, the Redis URL without user, password or query, or memory."""
    path = getattr(store, "path", None)
    if path is not None:
        return f"sqlite {path}"
    name = getattr(store, "name", None)  # RedisStore: already redacted
    if name:
        return str(name)
    return "memory (nothing kept after exit)"
